#!/usr/bin/env python3
"""Peer benchmark: the GEMMs of one layer through PyTorch, side by side with gemmscope pre-quantized.

For each GEMM of gemmscope's plan (same M, K, N, the same operand memory layouts, the same
per-pass recipe) PyTorch runs:
  BF16        torch.mm on operands laid out exactly as gemmscope holds them (activations and
              gradients token-major, weights [out, in]; transposed views where the plan says so)
  FP8Current  torch._scaled_mm, per-tensor scales, E4M3 activations/weights and E5M2 gradients,
              fast accumulation in Fprop only (TE's defaults; gemmscope's recipe); both operands
              K-contiguous as Hopper's TN-only FP8 needs (gemmscope pre-quantizes the same copies)
  FP8Block    torch._scaled_mm with 1x128 (activations/gradients) x 128x128 (weights) block scales,
              where this PyTorch supports it; otherwise the row says why
Both sides run the same protocol, so that neither is timed in a state the other is not: a GPU
warm-up of --gpu-warmup seconds of 8192^3 BF16 GEMMs (gemmscope's --gpu-warmup), then for each
GEMM in gemmscope's order (GEMM-major, precisions inner) --warmup calls and --iters timed calls
(gemmscope's --num-warmup/--num-iters; PyTorch: back-to-back between two CUDA events, mean per
call). Nothing else runs between cells on either side: the kernel names PyTorch runs are taken
with torch.profiler in a separate pass after all timing, since the profiler's idle gaps let the
power-capped GPU boost into the next cell. --rounds R (default 3) alternates the sides R times
(gemmscope's layer, then PyTorch's) and reports each cell's median, with the spread of its
per-round ratios: GPU state drifts over minutes, and alternating spreads it over both sides.
gemmscope's kernel names come from its JSON (CUPTI), when present.

  python3 bench/peer_gemm.py --gemmscope build/gemmscope [--config 5b] [--precisions BF16,FP8Current,FP8Block]
      [--gemmscope-args "--algo autotune" | "--algo search"] [--json out.json]
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile

import gs_result  # bench/gs_result.py: g["results"] for any schema

CONFIGS = {
    "5b": ["--hidden_size", "4096", "--intermediate_size", "16384", "--num_attention_heads", "32",
           "--num_hidden_layers", "1", "--micro_batch_size", "31", "--sequence_length", "512", "--no-gated-mlp"],
    "qwen2.5-7b": ["--hidden_size", "3584", "--intermediate_size", "18944", "--num_attention_heads", "28",
                   "--num_key_value_heads", "4", "--num_hidden_layers", "1", "--micro_batch_size", "2",
                   "--sequence_length", "4096", "--gated-mlp"],
}


def run_gemmscope(binary, cfg, precisions, extra, warmup, iters, gpu_warmup):
    with tempfile.TemporaryDirectory() as d:
        out = os.path.join(d, "r.json")
        cmd = [binary] + CONFIGS[cfg] + ["--precisions", ",".join(precisions), "--mode", "pre-quantized",
                                         "--num-warmup", str(warmup), "--num-iters", str(iters),
                                         "--gpu-warmup", str(gpu_warmup), "-q", "--json", out] + extra
        subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL)
        with open(out) as f:
            return gs_result.with_results(json.load(f))


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--gemmscope", default="build/gemmscope")
    ap.add_argument("--config", default="5b", help="comma list of: " + ", ".join(CONFIGS))
    ap.add_argument("--precisions", default="BF16,FP8Current,FP8Block")
    ap.add_argument("--iters", type=int, default=100)
    ap.add_argument("--warmup", type=int, default=10)
    ap.add_argument("--gemmscope-args", default="")
    ap.add_argument("--gpu-warmup", type=float, default=5.0, help="seconds of 8192^3 BF16 GEMMs before each side's "
                    "cells (default 5, gemmscope's default)")
    ap.add_argument("--rounds", type=int, default=3, help="alternations of the two sides; medians (default 3)")
    ap.add_argument("--json")
    a = ap.parse_args()
    precs = [p.strip() for p in a.precisions.split(",") if p.strip()]
    for p in precs:
        if p not in ("BF16", "FP8Current", "FP8Block"):
            print(f"peer_gemm: unsupported precision '{p}'", file=sys.stderr)
            return 2
    cfgs = [c.strip() for c in a.config.split(",") if c.strip()]
    for c in cfgs:
        if c not in CONFIGS:
            print(f"peer_gemm: unknown config '{c}' (known: {', '.join(CONFIGS)})", file=sys.stderr)
            return 2
    import torch
    from torch.profiler import ProfilerActivity, profile
    dev = torch.cuda.get_device_name()
    E4M3, E5M2, BF = torch.float8_e4m3fn, torch.float8_e5m2, torch.bfloat16
    torch.manual_seed(0)

    def timed(fn):
        for _ in range(a.warmup):
            fn()
        s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        torch.cuda.synchronize()
        s.record()
        for _ in range(a.iters):
            fn()
        e.record()
        torch.cuda.synchronize()
        return s.elapsed_time(e) / a.iters

    def kernel_of(fn):
        with profile(activities=[ProfilerActivity.CUDA]) as prof:
            fn()
            torch.cuda.synchronize()
        names = [ev.name for ev in prof.events() if ev.device_type.name == "CUDA"]
        return ";".join(n for n in names if "nvjet" in n or "gemm" in n.lower() or "cutlass" in n.lower()) or ";".join(names)

    def q_tensor(t, dtype):
        fmax = torch.finfo(dtype).max
        amax = t.abs().amax().float().clamp(min=1e-12)
        return (t.float() * (fmax / amax)).clamp(-fmax, fmax).to(dtype), (amax / fmax).reshape(())

    def q_block(t, dtype, bm, bk):
        # t [R, K] K-contiguous; scales per (bm x bk) tile: [R/bm, K/bk] (dequantization scales).
        R, K = t.shape
        fmax = torch.finfo(dtype).max
        tiles = t.float().reshape(R // bm, bm, K // bk, bk)
        amax = tiles.abs().amax(dim=(1, 3)).clamp(min=1e-12)
        q = (tiles * (fmax / amax)[:, None, :, None]).clamp(-fmax, fmax).to(dtype).reshape(R, K)
        return q, (amax / fmax)

    def gpu_warmup():
        # The same warm-up gemmscope runs before its cells: --gpu-warmup seconds of 8192^3 BF16.
        if a.gpu_warmup <= 0:
            return
        x = torch.randn(8192, 8192, device="cuda", dtype=BF)
        s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        s.record()
        while True:
            for _ in range(20):
                torch.mm(x, x)
            e.record()
            e.synchronize()
            if s.elapsed_time(e) >= a.gpu_warmup * 1000:
                break
        del x

    gs_runs = {}  # config -> gemmscope's JSON of the latest round (the kernel pass reuses its layouts)

    def one_round(identify=False):
        """A round: gemmscope's layer, then PyTorch's cells timed under the same protocol. With
        identify, no timing: the kernel PyTorch runs for each cell, through torch.profiler."""
        rows = []
        for cfg in cfgs:
            if not identify:
                gs_runs[cfg] = run_gemmscope(a.gemmscope, cfg, precs, a.gemmscope_args.split(), a.warmup, a.iters,
                                             a.gpu_warmup)
            r = gs_runs[cfg]
            (mode_key,) = r["summary"].keys()
            block_fmt = r.get("recipe_options", {}).get("block_fp8_format", "hybrid")
            if not identify:
                gpu_warmup()
            for g in r["gemms"]:
                if g["scope"] != "layer":
                    continue
                m, k, n = g["m"], g["k"], g["n"]
                left = torch.randn(m, k, device="cuda", dtype=BF) if g["a"]["k_major"] else \
                    torch.randn(k, m, device="cuda", dtype=BF).t()
                rl, rr = g["a"]["role"], g["b"]["role"]
                # R as a [k, n] operand: k_major -> stored [n, k] row-major (a transposed view), else [k, n].
                right = torch.randn(n, k, device="cuda", dtype=BF).t() if g["b"]["k_major"] else \
                    torch.randn(k, n, device="cuda", dtype=BF)
                if rr == "weight":
                    right = right * 0.02 if not g["b"]["k_major"] else (right.t() * 0.02).t()
                for p in precs:
                    cell = g["results"][mode_key].get(p, {})
                    gs_ms = cell.get("mean_ms") if cell.get("status") == "ok" else None
                    gs_kernel = ";".join(x.get("name", "") for x in cell.get("kernels", [])) or None
                    torch_ms, torch_kernel, why = None, None, None
                    try:
                        if p == "BF16":
                            fn = lambda: torch.mm(left, right)
                        else:
                            lk = left.contiguous()                 # [m, k], K-contiguous (pre-quantized copy)
                            rk = right.t().contiguous()            # [n, k], K-contiguous
                            # Gradients are E5M2 in per-tensor recipes (hybrid); FP8Block follows the
                            # run's block format (TE's default: E4M3 everywhere).
                            hybrid = p == "FP8Current" or block_fmt == "hybrid"
                            fa = E5M2 if (rl == "grad" and hybrid) else E4M3
                            fb = E5M2 if (rr == "grad" and hybrid) else E4M3
                            if p == "FP8Current":
                                lq, ls = q_tensor(lk, fa)
                                rq, rs = q_tensor(rk, fb)
                                fast = g["pass"] == "fprop"
                                fn = lambda: torch._scaled_mm(lq, rq.t(), scale_a=ls, scale_b=rs, out_dtype=BF,
                                                              use_fast_accum=fast)
                            else:
                                # 1x128 on activations/gradients, 128x128 on weights, as gemmscope's FP8Block
                                # (Wgrad: 1x128 x 1x128). _scaled_mm wants the 1x128 scales outer-dim-major.
                                lq, ls = q_block(lk, fa, 1, 128)
                                rq, rs = q_block(rk, fb, 128 if rr == "weight" else 1, 128)
                                # PyTorch checks scale_a against a [m,k] (1x128: shape (m, k/128), stride (1, m))
                                # and scale_b.t() against b.t() = rq [n,k] (128x128: row-major (n/128, k/128);
                                # 1x128: shape (n, k/128), stride (1, n)).
                                ls = ls.t().contiguous().t()
                                rs = rs.t() if rr == "weight" else rs.t().contiguous()
                                fn = lambda: torch._scaled_mm(lq, rq.t(), scale_a=ls, scale_b=rs, out_dtype=BF)
                            fn()
                        if identify:
                            torch_kernel = kernel_of(fn)
                        else:
                            torch_ms = timed(fn)
                    except Exception as e:  # a recipe this PyTorch does not run
                        why = f"{type(e).__name__}: {str(e).splitlines()[0][:120]}"
                    ratio = torch_ms / gs_ms if (torch_ms and gs_ms) else None
                    rows.append(dict(config=cfg, precision=p, pass_=g["pass"], op=g["op"], shape=f"{m}x{k}x{n}",
                                     torch_ms=torch_ms, gemmscope_ms=gs_ms, speed_vs_torch=ratio,
                                     torch_kernel=torch_kernel, gemmscope_kernel=gs_kernel, torch_na=why))
                del left, right
                torch.cuda.empty_cache()
        return rows

    # Rounds alternate the two sides (gemmscope's run of the layer, then PyTorch's shapes, then again):
    # GPU state (power cap, clocks) drifts over minutes, and alternating spreads it over both sides.
    rounds = [one_round() for _ in range(a.rounds)]
    names = one_round(identify=True)
    median = lambda v: sorted(v)[len(v) // 2] if len(v) % 2 else sum(sorted(v)[len(v) // 2 - 1:len(v) // 2 + 1]) / 2
    rows = []
    for i, x in enumerate(rounds[0]):
        same = [r[i] for r in rounds]
        y = dict(x)
        y["torch_kernel"] = names[i]["torch_kernel"]
        for key in ("torch_ms", "gemmscope_ms"):
            vals = [z[key] for z in same]
            y[key] = median(vals) if all(v is not None for v in vals) else None
        y["speed_vs_torch"] = y["torch_ms"] / y["gemmscope_ms"] if (y["torch_ms"] and y["gemmscope_ms"]) else None
        per_round = [z["speed_vs_torch"] for z in same]
        y["speed_round_min"] = min(per_round) if all(per_round) else None
        y["speed_round_max"] = max(per_round) if all(per_round) else None
        y["rounds"] = len(same)
        rows.append(y)
    def same_kernel(x):
        if not x["torch_kernel"] or not x["gemmscope_kernel"]:
            return "n/a"
        return "yes" if set(x["torch_kernel"].split(";")) <= set(x["gemmscope_kernel"].split(";")) else "no"

    print(f"device: {dev}; torch {torch.__version__}; gemmscope {a.gemmscope} {a.gemmscope_args}")
    print(f"medians of {a.rounds} alternating rounds; each side: {a.gpu_warmup:g} s GPU warm-up, then per cell "
          f"{a.warmup} warm-up + {a.iters} timed calls")
    print("| config | precision | pass | op | shape | PyTorch ms | gemmscope ms | gemmscope speed vs PyTorch | "
          "per-round range | same kernel | PyTorch kernel |")
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    for x in rows:
        f = lambda v, s="{:.3f}": s.format(v) if v is not None else "n/a"
        print(f"| {x['config']} | {x['precision']} | {x['pass_']} | {x['op']} | {x['shape']} | {f(x['torch_ms'])} | "
              f"{f(x['gemmscope_ms'])} | {f(x['speed_vs_torch'], '{:.3f}x')} | "
              f"{f(x['speed_round_min'], '{:.3f}')}-{f(x['speed_round_max'], '{:.3f}')} | {same_kernel(x)} | "
              f"{x['torch_kernel'] or x['torch_na']} |")
    print()
    for cfg in cfgs:
        for p in precs:
            sel = [x for x in rows if x["config"] == cfg and x["precision"] == p]
            if sel and all(x["torch_ms"] and x["gemmscope_ms"] for x in sel):
                t = sum(x["torch_ms"] for x in sel)
                gsum = sum(x["gemmscope_ms"] for x in sel)
                worst = min(x["speed_vs_torch"] for x in sel)
                print(f"{cfg} {p}: per-layer PyTorch {t:.3f} ms, gemmscope {gsum:.3f} ms: gemmscope {t / gsum:.3f}x "
                      f"PyTorch's speed (worst shape {worst:.3f}x)")
            else:
                print(f"{cfg} {p}: not comparable in every shape (see n/a rows)")
    if a.json:
        with open(a.json, "w") as fh:
            json.dump({"device": dev, "torch": torch.__version__, "gemmscope_args": a.gemmscope_args, "rows": rows}, fh, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
