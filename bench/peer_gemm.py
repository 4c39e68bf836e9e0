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
Each is timed like gemmscope: 10 warm-up calls, then 100 back-to-back calls between two CUDA events
(mean per call). The kernel each side runs is listed (PyTorch: torch.profiler; gemmscope: the JSON's
kernel record when present). gemmscope runs first, in the same process tree, on the same GPU.

  python3 bench/peer_gemm.py --gemmscope build/gemmscope [--config 5b] [--precisions BF16,FP8Current,FP8Block]
      [--gemmscope-args "--algo autotune"] [--json out.json]
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile

CONFIGS = {
    "5b": ["--hidden_size", "4096", "--intermediate_size", "16384", "--num_attention_heads", "32",
           "--num_hidden_layers", "1", "--micro_batch_size", "31", "--sequence_length", "512", "--no-gated-mlp"],
    "qwen2.5-7b": ["--hidden_size", "3584", "--intermediate_size", "18944", "--num_attention_heads", "28",
                   "--num_key_value_heads", "4", "--num_hidden_layers", "1", "--micro_batch_size", "2",
                   "--sequence_length", "4096", "--gated-mlp"],
}


def run_gemmscope(binary, cfg, precisions, extra):
    with tempfile.TemporaryDirectory() as d:
        out = os.path.join(d, "r.json")
        cmd = [binary] + CONFIGS[cfg] + ["--precisions", ",".join(precisions), "--mode", "pre-quantized",
                                         "-q", "--json", out] + extra
        subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL)
        with open(out) as f:
            return json.load(f)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--gemmscope", default="build/gemmscope")
    ap.add_argument("--config", default="5b", help="comma list of: " + ", ".join(CONFIGS))
    ap.add_argument("--precisions", default="BF16,FP8Current,FP8Block")
    ap.add_argument("--iters", type=int, default=100)
    ap.add_argument("--warmup", type=int, default=10)
    ap.add_argument("--gemmscope-args", default="")
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

    rows = []
    for cfg in cfgs:
        r = run_gemmscope(a.gemmscope, cfg, precs, a.gemmscope_args.split())
        (mode_key,) = r["summary"].keys()
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
                        fa = E5M2 if rl == "grad" else E4M3
                        fb = E5M2 if rr == "grad" else E4M3
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
                    torch_ms = timed(fn)
                    torch_kernel = kernel_of(fn)
                except Exception as e:  # a recipe this PyTorch does not run
                    why = f"{type(e).__name__}: {str(e).splitlines()[0][:120]}"
                ratio = torch_ms / gs_ms if (torch_ms and gs_ms) else None
                rows.append(dict(config=cfg, precision=p, pass_=g["pass"], op=g["op"], shape=f"{m}x{k}x{n}",
                                 torch_ms=torch_ms, gemmscope_ms=gs_ms, speed_vs_torch=ratio,
                                 torch_kernel=torch_kernel, gemmscope_kernel=gs_kernel, torch_na=why))
            del left, right
            torch.cuda.empty_cache()
    print(f"device: {dev}; torch {torch.__version__}; gemmscope {a.gemmscope} {a.gemmscope_args}")
    print("| config | precision | pass | op | shape | PyTorch ms | gemmscope ms | gemmscope speed vs PyTorch | PyTorch kernel |")
    print("|---|---|---|---|---|---|---|---|---|")
    for x in rows:
        f = lambda v, s="{:.3f}": s.format(v) if v is not None else "n/a"
        print(f"| {x['config']} | {x['precision']} | {x['pass_']} | {x['op']} | {x['shape']} | {f(x['torch_ms'])} | "
              f"{f(x['gemmscope_ms'])} | {f(x['speed_vs_torch'], '{:.3f}x')} | {x['torch_kernel'] or x['torch_na']} |")
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
