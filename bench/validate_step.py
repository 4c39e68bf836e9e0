#!/usr/bin/env python3
"""Standing validation: gemmscope's per-layer GEMM time against a real PyTorch training step.

One transformer layer (norm, QKV, causal SDPA attention, attention-out, norm, MLP up, activation,
MLP down; no biases, as gemmscope models no bias epilogue) is trained in PyTorch on the GPU:
continuous steps for --seconds (steady state: the power cap has settled, see notes-anchors), then
--steps profiled steps with torch.profiler. The GEMM kernels of one step (cuBLAS nvjet / gemm /
cutlass kernels; attention kernels excluded) are summed and set beside gemmscope's per-layer total
for the same 12 GEMMs, measured by the gemmscope binary in the same run, twice: by default (GEMMs
back to back, at sustained GEMM power) and with --step-other-ms set to the time the step's other
kernels (norms, activations, residuals, quantization; not attention) took per step, so gemmscope
interleaves that much memory-bound work and its GEMMs run at the step's power and clocks. gemmscope
is told nothing about the step's GEMMs. The bar is judged on the second; the first is beside it.

  BF16: nn.Linear in BF16                       vs gemmscope BF16, pre-quantized
  FP8:  a small autograd linear on torch._scaled_mm with current (per-tensor) scaling, E4M3
        activations and weights, E5M2 output gradients, fast accumulation in Fprop only
        (Transformer Engine's defaults); each tensor cast once into its rowwise and transposed
        copies (--fp8-quant compile: fused by torch.compile, as TE fuses them; eager: plain ops)
                                                  vs gemmscope FP8Current, pre-quantized (GEMM kernels)
        Quantization kernels differ between the two (PyTorch eager ops vs gemmscope's fused
        kernels), so they are reported separately, not compared.

One command on a GPU node with PyTorch (not a CI test):

  python3 bench/validate_step.py --gemmscope build/gemmscope [--config 5b,qwen2.5-7b] [--json out.json]

Exit status: 0 when every cell is within --bar (default 3%) with --step-other-ms, 1 otherwise, 2 bad usage.
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile
import time

CONFIGS = {
    # The seed tutorial's 5B layer: MHA, LayerNorm, plain GELU MLP, 31 x 512 tokens.
    "5b": dict(hidden=4096, ffn=16384, heads=32, kv_heads=32, head_dim=128, gated=False,
               norm="layernorm", batch=31, seq=512),
    # A Qwen2.5-7B-like layer: GQA 28/4, RMSNorm, SwiGLU 18944, 2 x 4096 tokens.
    "qwen2.5-7b": dict(hidden=3584, ffn=18944, heads=28, kv_heads=4, head_dim=128, gated=True,
                       norm="rmsnorm", batch=2, seq=4096),
}


def classify(name):
    n = name.lower()
    if any(s in n for s in ("flash", "fmha", "attention", "sdpa")):
        return "attention"
    if any(s in n for s in ("nvjet", "gemm", "xmma", "cutlass", "s16816", "s1688")):
        return "gemm"
    return "other"


def build_layer(torch, c, fp8):
    nn = torch.nn
    F = torch.nn.functional
    h, hd, nh, nkv = c["hidden"], c["head_dim"], c["heads"], c["kv_heads"]
    E4M3, E5M2 = torch.float8_e4m3fn, torch.float8_e5m2

    def quant_dual(t, dtype):
        # Per-tensor current scaling (amax of this call, scaled to the format's max), writing the
        # rowwise copy and the transposed copy, as Transformer Engine's cast-transpose does.
        fmax = torch.finfo(dtype).max
        amax = t.abs().amax().float().clamp(min=1e-12)
        scale = fmax / amax
        q = (t.float() * scale).clamp(-fmax, fmax).to(dtype)
        return q, q.t().contiguous(), scale.reciprocal()

    if fp8 == "compile":  # fused amax / cast / transpose kernels (Inductor), close to TE's
        # One compiled graph per tensor shape and format: a layer has more than dynamo's default
        # of 8, past which it silently falls back to eager (unfused) quantization.
        for knob in ("recompile_limit", "cache_size_limit"):
            if hasattr(torch._dynamo.config, knob):
                setattr(torch._dynamo.config, knob, 64)
        quant_dual = torch.compile(quant_dual, dynamic=False)

    class FP8LinearFn(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x, w):
            x2 = x.reshape(-1, x.shape[-1])
            xq, xqt, xs = quant_dual(x2, E4M3)
            wq, wqt, ws = quant_dual(w, E4M3)
            # Fprop Y[T,out] = X[T,in] . W[out,in]^T: b = W^T, column-major as cuBLAS's TN needs.
            y = torch._scaled_mm(xq, wq.t(), scale_a=xs, scale_b=ws, out_dtype=torch.bfloat16,
                                 use_fast_accum=True)
            ctx.save_for_backward(xqt, xs, wqt, ws)
            ctx.in_shape = x.shape
            return y.reshape(*x.shape[:-1], w.shape[0])

        @staticmethod
        def backward(ctx, dy):
            xqt, xs, wqt, ws = ctx.saved_tensors
            dy2 = dy.reshape(-1, dy.shape[-1])
            dyq, dyqt, dys = quant_dual(dy2, E5M2)
            # Dgrad dX[T,in] = dY[T,out] . W[out,in]: b = W as column-major = the transposed copy.
            dx = torch._scaled_mm(dyq, wqt.t(), scale_a=dys, scale_b=ws, out_dtype=torch.bfloat16,
                                  use_fast_accum=False)
            # Wgrad dW[out,in] = dY^T[out,T] . X[T,in]: the transposed copies of dY and X.
            dw = torch._scaled_mm(dyqt, xqt.t(), scale_a=dys, scale_b=xs, out_dtype=torch.bfloat16,
                                  use_fast_accum=False)
            return dx.reshape(ctx.in_shape), dw

    class Linear(nn.Module):
        def __init__(self, fin, fout):
            super().__init__()
            self.lin = nn.Linear(fin, fout, bias=False)

        def forward(self, x):
            return FP8LinearFn.apply(x, self.lin.weight) if fp8 else self.lin(x)

    Norm = nn.LayerNorm if c["norm"] == "layernorm" else nn.RMSNorm

    class Layer(nn.Module):
        def __init__(self):
            super().__init__()
            self.n1, self.n2 = Norm(h), Norm(h)
            self.qkv = Linear(h, (nh + 2 * nkv) * hd)
            self.out = Linear(nh * hd, h)
            self.up = Linear(h, (2 if c["gated"] else 1) * c["ffn"])
            self.down = Linear(c["ffn"], h)

        def forward(self, x):
            B, S, _ = x.shape
            q, k, v = self.qkv(self.n1(x)).split([nh * hd, nkv * hd, nkv * hd], dim=-1)
            q = q.reshape(B, S, nh, hd).transpose(1, 2)
            k = k.reshape(B, S, nkv, hd).transpose(1, 2)
            v = v.reshape(B, S, nkv, hd).transpose(1, 2)
            if nkv != nh:  # expand kv heads (as Hugging Face models do) so SDPA runs flash attention
                k = k.repeat_interleave(nh // nkv, dim=1)
                v = v.repeat_interleave(nh // nkv, dim=1)
            a = F.scaled_dot_product_attention(q, k, v, is_causal=True)
            x = x + self.out(a.transpose(1, 2).reshape(B, S, nh * hd))
            u = self.up(self.n2(x))
            if c["gated"]:
                g, u2 = u.chunk(2, dim=-1)
                m = F.silu(g) * u2
            else:
                m = F.gelu(u)
            return x + self.down(m)

    return Layer().to(device="cuda", dtype=torch.bfloat16)


class ClockSampler:
    """Samples the SM clock through NVML (ctypes on the driver's libnvidia-ml.so.1) every ~2 ms in a
    thread; mean() is the mean over the samples. Absent NVML: mean() is None."""

    def __init__(self, index=0):
        import ctypes
        import threading
        self.samples, self._stop, self._thread = [], threading.Event(), None
        try:
            self.nvml = ctypes.CDLL("libnvidia-ml.so.1")
            if self.nvml.nvmlInit_v2() != 0:
                raise OSError("nvmlInit failed")
            self.handle = ctypes.c_void_p()
            if self.nvml.nvmlDeviceGetHandleByIndex_v2(index, ctypes.byref(self.handle)) != 0:
                raise OSError("no NVML handle")
        except OSError:
            self.nvml = None
        self.ctypes, self.threading = ctypes, threading

    def _run(self):
        v = self.ctypes.c_uint()
        while not self._stop.is_set():
            if self.nvml.nvmlDeviceGetClockInfo(self.handle, 1, self.ctypes.byref(v)) == 0:  # NVML_CLOCK_SM
                self.samples.append(v.value)
            time.sleep(0.002)

    def __enter__(self):
        if self.nvml:
            self._thread = self.threading.Thread(target=self._run, daemon=True)
            self._thread.start()
        return self

    def __exit__(self, *exc):
        if self._thread:
            self._stop.set()
            self._thread.join()

    def mean(self):
        return sum(self.samples) / len(self.samples) if self.samples else None


def torch_step_kernels(torch, c, fp8, seconds, steps, trace_dir):
    """GPU kernel time per training step in steady state, by class (gemm / attention / other)."""
    torch.manual_seed(0)
    layer = build_layer(torch, c, fp8)
    x = torch.randn(c["batch"], c["seq"], c["hidden"], device="cuda", dtype=torch.bfloat16, requires_grad=True)
    dy = torch.randn_like(x)  # random output gradient: constant data draws less power and runs faster
    params = list(layer.parameters())

    def step():
        for p in params:
            p.grad = None
        x.grad = None
        layer(x).backward(dy)

    for _ in range(3):
        step()
    torch.cuda.synchronize()
    t0 = time.time()
    n_warm = 0
    while time.time() - t0 < seconds:  # continuous steps: no idle gap before the profiled ones
        step()
        n_warm += 1
        if n_warm % 20 == 0:
            torch.cuda.synchronize()
    from torch.profiler import ProfilerActivity, profile
    with ClockSampler(torch.cuda.current_device()) as clocks, profile(activities=[ProfilerActivity.CUDA]) as prof:
        for _ in range(steps):
            step()
        torch.cuda.synchronize()
    path = os.path.join(trace_dir, f"trace_{fp8 or 'bf16'}_{os.getpid()}_{time.time_ns()}.json")
    prof.export_chrome_trace(path)
    with open(path) as f:
        trace = json.load(f)
    os.unlink(path)
    sums = {"gemm": 0.0, "attention": 0.0, "other": 0.0}
    gemm_names = {}
    for ev in trace.get("traceEvents", []):
        if ev.get("cat") != "kernel" or "dur" not in ev:
            continue
        cls = classify(ev.get("name", ""))
        sums[cls] += ev["dur"]
        if cls == "gemm":
            gemm_names[ev["name"]] = gemm_names.get(ev["name"], 0) + 1
    per_step_ms = {k: v / 1000.0 / steps for k, v in sums.items()}
    per_step_ms["sm_mhz"] = clocks.mean()
    return per_step_ms, n_warm, gemm_names


def gemmscope_per_layer(binary, c, precisions, extra):
    with tempfile.TemporaryDirectory() as d:
        out = os.path.join(d, "r.json")
        cmd = [binary, "--hidden_size", str(c["hidden"]), "--intermediate_size", str(c["ffn"]),
               "--num_attention_heads", str(c["heads"]), "--num_key_value_heads", str(c["kv_heads"]),
               "--head_dim", str(c["head_dim"]), "--num_hidden_layers", "1",
               "--micro_batch_size", str(c["batch"]), "--sequence_length", str(c["seq"]),
               "--gated-mlp" if c["gated"] else "--no-gated-mlp",
               "--precisions", ",".join(precisions), "--mode", "pre-quantized", "-q", "--json", out] + extra
        subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL)
        with open(out) as f:
            r = json.load(f)
    summary = r["summary"]
    (mode_key, s), = summary.items()  # one mode was requested
    totals = {p: s["per_layer"]["total"][p] for p in precisions}
    # Time-weighted mean of the SM clock gemmscope sampled in each cell (one NVML sample per cell).
    clocks = {}
    for p in precisions:
        num = den = 0.0
        for g in r["gemms"]:
            if g.get("scope") != "layer":
                continue
            cell = g["results"][mode_key][p]
            ck = cell.get("clock") or {}
            if cell.get("status") == "ok" and ck.get("sm_mhz"):
                num += cell["mean_ms"] * ck["sm_mhz"]
                den += cell["mean_ms"]
        clocks[p] = num / den if den else None
    return totals, clocks, r


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--gemmscope", default="build/gemmscope", help="the gemmscope binary")
    ap.add_argument("--config", default="5b,qwen2.5-7b", help="comma list of: " + ", ".join(CONFIGS))
    ap.add_argument("--seconds", type=float, default=12.0, help="continuous steps before profiling (>= 10)")
    ap.add_argument("--steps", type=int, default=50, help="profiled steps")
    ap.add_argument("--bar", type=float, default=3.0, help="allowed |gemmscope/PyTorch - 1| in percent")
    ap.add_argument("--no-fp8", action="store_true", help="BF16 only")
    ap.add_argument("--fp8-quant", choices=["compile", "eager"], default="compile",
                    help="FP8 step's quantization: torch.compile'd fused amax/cast/transpose (default, close to "
                         "TE's kernels) or eager PyTorch ops (several times slower, so the GPU idles between GEMMs)")
    ap.add_argument("--json", help="write the table as JSON here")
    ap.add_argument("--gemmscope-args", default="", help="extra gemmscope flags (space separated)")
    a = ap.parse_args()
    names = [n.strip() for n in a.config.split(",") if n.strip()]
    for n in names:
        if n not in CONFIGS:
            print(f"validate_step: unknown config '{n}' (known: {', '.join(CONFIGS)})", file=sys.stderr)
            return 2
    if a.seconds < 10:
        print("validate_step: --seconds must be >= 10 (steady state)", file=sys.stderr)
        return 2
    if not os.access(a.gemmscope, os.X_OK):
        print(f"validate_step: {a.gemmscope} is not an executable gemmscope binary", file=sys.stderr)
        return 2
    import torch
    if not torch.cuda.is_available():
        print("validate_step: no CUDA GPU visible to PyTorch", file=sys.stderr)
        return 2
    dev = torch.cuda.get_device_name()
    fp8_ok = not a.no_fp8 and torch.cuda.get_device_capability() >= (8, 9)
    print(f"device: {dev}; torch {torch.__version__}; steady state: {a.seconds:.0f} s of continuous steps, "
          f"then {a.steps} profiled steps", flush=True)
    rows, ok_all = [], True
    extra = a.gemmscope_args.split()
    with tempfile.TemporaryDirectory() as trace_dir:
        for n in names:
            c = CONFIGS[n]
            precs = ["BF16"] + (["FP8Current"] if fp8_ok else [])
            steps = [("BF16", False)] + ([("FP8Current", a.fp8_quant)] if fp8_ok else [])
            torch_runs = {prec: torch_step_kernels(torch, c, fp8, a.seconds, a.steps, trace_dir) for prec, fp8 in steps}
            # gemmscope's default (GEMMs back to back), then in the step's context: told the non-GEMM,
            # non-attention kernel time PyTorch's step ran per layer (--step-other-ms), nothing about its GEMMs.
            gs, gs_clock, _ = gemmscope_per_layer(a.gemmscope, c, precs, extra)
            for prec, (t, warm, kernels) in torch_runs.items():
                g = gs[prec]
                other = round(t["other"], 3)
                gi, gi_clock, _ = gemmscope_per_layer(a.gemmscope, c, [prec], extra + ["--step-other-ms", str(other)])
                gi, gic = gi[prec], gi_clock.get(prec)
                err = (g / t["gemm"] - 1.0) * 100.0 if t["gemm"] > 0 else float("nan")
                err_in = (gi / t["gemm"] - 1.0) * 100.0 if t["gemm"] > 0 else float("nan")
                ok = abs(err_in) <= a.bar
                ok_all &= ok
                tc, gc = t.get("sm_mhz"), gs_clock.get(prec)
                rows.append({"config": n, "precision": prec, "torch_gemm_ms": t["gemm"],
                             "torch_sm_mhz": tc, "gemmscope_sm_mhz": gc, "gemmscope_step_sm_mhz": gic,
                             "torch_attention_ms": t["attention"], "torch_other_ms": t["other"],
                             "gemmscope_ms": g, "error_pct": err, "step_other_ms": other,
                             "gemmscope_step_ms": gi, "error_step_pct": err_in, "pass": ok, "warm_steps": warm,
                             "torch_gemm_kernels": kernels})
                print(f"  {n:<11} {prec:<10} PyTorch GEMM kernels {t['gemm']:8.3f} ms/step | gemmscope back to back "
                      f"{g:8.3f} ms ({err:+6.2f}%) | with --step-other-ms {other:g}: {gi:8.3f} ms ({err_in:+6.2f}%) "
                      f"{'PASS' if ok else 'FAIL'} (bar ±{a.bar:g}%)", flush=True)
    print()
    print("| config | precision | PyTorch step: GEMM kernels (ms) | its non-GEMM, non-attention kernels (ms) | "
          "gemmscope back to back (ms) | error | gemmscope --step-other-ms (ms) | error | "
          "mean SM clock PyTorch / back to back / step context (MHz) |")
    print("|---|---|---|---|---|---|---|---|---|")
    fmt_opt = lambda v, f: (f.format(v) if v is not None else "n/a")
    for r in rows:
        print(f"| {r['config']} | {r['precision']} | {r['torch_gemm_ms']:.2f} | {r['torch_other_ms']:.2f} | "
              f"{r['gemmscope_ms']:.2f} | {r['error_pct']:+.1f}% | {r['gemmscope_step_ms']:.2f} | "
              f"{r['error_step_pct']:+.1f}% | {fmt_opt(r['torch_sm_mhz'], '{:.0f}')} / "
              f"{fmt_opt(r['gemmscope_sm_mhz'], '{:.0f}')} / {fmt_opt(r['gemmscope_step_sm_mhz'], '{:.0f}')} |")
    print(f"\n{dev}: {sum(r['pass'] for r in rows)} of {len(rows)} cells within ±{a.bar:g}% with --step-other-ms "
          f"(back to back: {sum(abs(r['error_pct']) <= a.bar for r in rows)})")
    if a.json:
        with open(a.json, "w") as f:
            json.dump({"device": dev, "torch": torch.__version__, "bar_pct": a.bar, "rows": rows}, f, indent=1)
    return 0 if ok_all else 1


if __name__ == "__main__":
    sys.exit(main())
