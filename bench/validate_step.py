#!/usr/bin/env python3
"""Standing validation: gemmscope's per-layer GEMM time against a real PyTorch training step.

One transformer layer (norm, QKV, causal SDPA attention on cuDNN's fused kernels as Transformer
Engine runs them, attention-out, norm, MLP up, activation, MLP down; no biases) is trained in
PyTorch on the GPU, eager or under torch.compile (--step): continuous steps for --seconds (steady
state: the power cap has settled), then --steps profiled steps with torch.profiler. The GEMM kernels
of one step are summed and set beside gemmscope's per-layer total for the same 12 GEMMs, measured by
the gemmscope binary in the same run with the step context matching the step (--step-context eager
or compile; gemmscope is told nothing about the step), and optionally other variants (--variant).
The step estimate (GEMMs + attention + other) is set beside the whole profiled step too.

  BF16: nn.Linear in BF16                       vs gemmscope BF16, pre-quantized
  FP8:  a small autograd linear on torch._scaled_mm with current (per-tensor) scaling, E4M3
        activations and weights, E5M2 output gradients, fast accumulation in Fprop only
        (Transformer Engine's defaults); each tensor cast once into its rowwise and transposed
        copies (--fp8-quant compile: fused by torch.compile; eager: plain ops)
                                                  vs gemmscope FP8Current, pre-quantized (GEMM kernels)

Layers: "tune" (the step-context model's rates were set on these) and "check" (kept aside, never
used to set anything). One command on a GPU node with PyTorch (not a CI test):

  python3 bench/validate_step.py --gemmscope build/gemmscope --config all --step eager,compile --json out.json

Exit status: 0 when every judged cell is within --bar (default 3%), 1 otherwise, 2 bad usage.
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile
import time

import gs_result  # bench/gs_result.py: g["results"] for any schema

# "tune": layers the step-context model was developed on; "check": layers kept aside to validate it
# (never used to set any of its figures).
CONFIGS = {
    # The seed tutorial's 5B layer: MHA, LayerNorm, plain GELU MLP, 31 x 512 tokens.
    "5b": dict(hidden=4096, ffn=16384, heads=32, kv_heads=32, head_dim=128, gated=False,
               norm="layernorm", batch=31, seq=512, set="tune"),
    # A Qwen2.5-7B-like layer: GQA 28/4, RMSNorm, SwiGLU 18944, 2 x 4096 tokens.
    "qwen2.5-7b": dict(hidden=3584, ffn=18944, heads=28, kv_heads=4, head_dim=128, gated=True,
                       norm="rmsnorm", batch=2, seq=4096, set="tune"),
    # Llama-3-8B-like: GQA 32/8, SwiGLU 14336, 1 x 8192 tokens.
    "llama3-8b": dict(hidden=4096, ffn=14336, heads=32, kv_heads=8, head_dim=128, gated=True,
                      norm="rmsnorm", batch=1, seq=8192, set="tune"),
    # Qwen3-1.7B-like: GQA 16/8, SwiGLU 6144, 4 x 4096 tokens (a small model: attention is a large share).
    "qwen3-1.7b": dict(hidden=2048, ffn=6144, heads=16, kv_heads=8, head_dim=128, gated=True,
                       norm="rmsnorm", batch=4, seq=4096, set="tune"),
    # GPT-NeoX-20B-like: MHA 48, LayerNorm, GELU 24576, 2 x 2048 tokens.
    "neox-20b": dict(hidden=6144, ffn=24576, heads=48, kv_heads=48, head_dim=128, gated=False,
                     norm="layernorm", batch=2, seq=2048, set="tune"),
    # Kept aside: TinyLlama-1.1B-like (GQA 32/4, head 64, SwiGLU 5632, 8 x 2048): the smallest.
    "tinyllama-1.1b": dict(hidden=2048, ffn=5632, heads=32, kv_heads=4, head_dim=64, gated=True,
                           norm="rmsnorm", batch=8, seq=2048, set="check"),
    # Kept aside: Phi-2-like (MHA 32, head 80, LayerNorm, GELU 10240, 4 x 2048).
    "phi2-2.7b": dict(hidden=2560, ffn=10240, heads=32, kv_heads=32, head_dim=80, gated=False,
                      norm="layernorm", batch=4, seq=2048, set="check"),
    # Kept aside: Qwen2.5-14B-like (GQA 40/8, SwiGLU 13824, 2 x 4096).
    "qwen2.5-14b": dict(hidden=5120, ffn=13824, heads=40, kv_heads=8, head_dim=128, gated=True,
                        norm="rmsnorm", batch=2, seq=4096, set="check"),
    # Kept aside: Llama-3-70B-like (GQA 64/8, SwiGLU 28672, 1 x 4096): the largest.
    "llama3-70b": dict(hidden=8192, ffn=28672, heads=64, kv_heads=8, head_dim=128, gated=True,
                       norm="rmsnorm", batch=1, seq=4096, set="check"),
    # Kept aside: a long-sequence MHA layer (GPT-J-like: MHA 16 x 256, GELU 16384, 1 x 16384).
    "gptj-long": dict(hidden=4096, ffn=16384, heads=16, kv_heads=16, head_dim=256, gated=False,
                      norm="layernorm", batch=1, seq=16384, set="check"),
}


def classify(name):
    n = name.lower()
    if any(s in n for s in ("flash", "fmha", "attention", "sdpa")):
        return "attention"
    if any(s in n for s in ("nvjet", "gemm", "xmma", "cutlass", "s16816", "s1688")):
        return "gemm"
    return "other"


def make_linear(torch, fp8):
    """The linear layer class of the steps: nn.Linear in BF16 (fp8 falsy), or the FP8 autograd linear
    with current (per-tensor) scaling, its casts compiled (fp8 == "compile") or eager ops. Make it once
    per model: every layer then shares one compiled cast."""
    nn = torch.nn
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

    return Linear


def build_layer(torch, c, fp8, mlp=None, Linear=None, rope=0):
    """One transformer layer (pre-norm attention and MLP blocks with residuals, no biases).
    mlp: a function Linear -> module replacing the dense MLP (an MoE layer); Linear: make_linear's
    class (made here when None); rope: the sequence length, for a rotary position embedding of q and
    k as Hugging Face models apply it (mul, rotate-half's neg and cat, mul, add; cos and sin made
    once here), 0 for none."""
    nn = torch.nn
    F = torch.nn.functional
    h, hd, nh, nkv = c["hidden"], c["head_dim"], c["heads"], c["kv_heads"]
    if Linear is None:
        Linear = make_linear(torch, fp8)
    Norm = nn.LayerNorm if c["norm"] == "layernorm" else nn.RMSNorm

    def rotate_half(t):
        t1, t2 = t.chunk(2, dim=-1)
        return torch.cat((-t2, t1), dim=-1)

    class Layer(nn.Module):
        def __init__(self):
            super().__init__()
            self.n1, self.n2 = Norm(h), Norm(h)
            self.qkv = Linear(h, (nh + 2 * nkv) * hd)
            self.out = Linear(nh * hd, h)
            if mlp is not None:
                self.mlp = mlp(Linear)
            else:
                self.up = Linear(h, (2 if c["gated"] else 1) * c["ffn"])
                self.down = Linear(c["ffn"], h)
            if rope:
                inv = 1.0 / (10000.0 ** (torch.arange(0, hd, 2, dtype=torch.float32) / hd))
                e = torch.outer(torch.arange(rope, dtype=torch.float32), inv).repeat(1, 2)
                self.register_buffer("cos", e.cos(), persistent=False)
                self.register_buffer("sin", e.sin(), persistent=False)

        def forward(self, x):
            B, S, _ = x.shape
            q, k, v = self.qkv(self.n1(x)).split([nh * hd, nkv * hd, nkv * hd], dim=-1)
            q = q.reshape(B, S, nh, hd).transpose(1, 2)
            k = k.reshape(B, S, nkv, hd).transpose(1, 2)
            v = v.reshape(B, S, nkv, hd).transpose(1, 2)
            if rope:
                q = q * self.cos + rotate_half(q) * self.sin
                k = k * self.cos + rotate_half(k) * self.sin
            if nkv != nh:  # expand kv heads (as Hugging Face models do) so SDPA runs flash attention
                k = k.repeat_interleave(nh // nkv, dim=1)
                v = v.repeat_interleave(nh // nkv, dim=1)
            a = F.scaled_dot_product_attention(q, k, v, is_causal=True)
            x = x + self.out(a.transpose(1, 2).reshape(B, S, nh * hd))
            if mlp is not None:
                return x + self.mlp(self.n2(x))
            u = self.up(self.n2(x))
            if c["gated"]:
                g, u2 = u.chunk(2, dim=-1)
                m = F.silu(g) * u2
            else:
                m = F.gelu(u)
            return x + self.down(m)

    return Layer().to(device="cuda", dtype=torch.bfloat16)


class ClockSampler:
    """Samples the SM clock, the board power, the GPU temperature and the clocks-event reasons
    through NVML (ctypes on the driver's libnvidia-ml.so.1) every ~2 ms in a thread; mean() is the
    clock's mean over the samples (MHz), mean_power_w() the power's (W), mean_temp_c() the
    temperature's (C), and capped_share() / thermal_share() the share of samples whose reasons
    held the power cap (SW power cap, HW power brake) / a thermal slowdown. Absent NVML: None."""

    def __init__(self, index=0):
        import ctypes
        import threading
        self.samples, self.power, self._stop, self._thread = [], [], threading.Event(), None
        self.temps, self.reasons = [], []
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
        self._reasons_fn = None
        if self.nvml:
            for name in ("nvmlDeviceGetCurrentClocksEventReasons", "nvmlDeviceGetCurrentClocksThrottleReasons"):
                if hasattr(self.nvml, name):
                    self._reasons_fn = getattr(self.nvml, name)
                    break

    def _run(self):
        v, mw, r = self.ctypes.c_uint(), self.ctypes.c_uint(), self.ctypes.c_ulonglong()
        while not self._stop.is_set():
            if self.nvml.nvmlDeviceGetClockInfo(self.handle, 1, self.ctypes.byref(v)) == 0:  # NVML_CLOCK_SM
                self.samples.append(v.value)
            if self.nvml.nvmlDeviceGetPowerUsage(self.handle, self.ctypes.byref(mw)) == 0:  # milliwatts
                self.power.append(mw.value / 1000.0)
            if self.nvml.nvmlDeviceGetTemperature(self.handle, 0, self.ctypes.byref(v)) == 0:  # NVML_TEMPERATURE_GPU
                self.temps.append(v.value)
            if self._reasons_fn is not None and self._reasons_fn(self.handle, self.ctypes.byref(r)) == 0:
                self.reasons.append(r.value)
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

    @staticmethod
    def _mean(xs):
        return sum(xs) / len(xs) if xs else None

    def mean(self):
        return self._mean(self.samples)

    def mean_power_w(self):
        return self._mean(self.power)

    def mean_temp_c(self):
        return self._mean(self.temps)

    def _share(self, mask):  # of the samples whose reasons have a bit of `mask`
        return self._mean([1 if x & mask else 0 for x in self.reasons])

    def capped_share(self):  # nvml.h: SW power cap 0x4, HW power brake 0x80
        return self._share(0x84)

    def thermal_share(self):  # nvml.h: HW slowdown 0x8, SW thermal 0x20, HW thermal 0x40
        return self._share(0x68)


def sdpa_backend_context(torch, name):
    """SDPA's kernel choice: cudnn (what Transformer Engine runs on Hopper), flash, or PyTorch's default."""
    import contextlib
    if name == "default":
        return contextlib.nullcontext()
    from torch.nn.attention import SDPBackend, sdpa_kernel
    return sdpa_kernel({"cudnn": SDPBackend.CUDNN_ATTENTION, "flash": SDPBackend.FLASH_ATTENTION}[name])


def torch_step_kernels(torch, c, fp8, seconds, steps, trace_dir, form="eager", sdpa="cudnn"):
    """GPU kernel time per training step in steady state, by class (gemm / attention / other), the
    step's wall span on the GPU (first kernel start to last kernel end, per step) and kernel counts."""
    torch.manual_seed(0)
    # A fresh dynamo state per step: compiled graphs of earlier layers count against the recompile
    # limit, past which torch.compile silently falls back to eager kernels (an FP8 step whose
    # casts then run as a dozen unfused ops: not the step being validated).
    torch._dynamo.reset()
    layer = build_layer(torch, c, fp8)
    if form == "compile":
        for knob in ("recompile_limit", "cache_size_limit"):
            if hasattr(torch._dynamo.config, knob):
                setattr(torch._dynamo.config, knob, 64)
        layer = torch.compile(layer)
    x = torch.randn(c["batch"], c["seq"], c["hidden"], device="cuda", dtype=torch.bfloat16, requires_grad=True)
    dy = torch.randn_like(x)  # random output gradient: constant data draws less power and runs faster
    params = list(layer.parameters())

    def step():
        for p in params:
            p.grad = None
        x.grad = None
        layer(x).backward(dy)

    with sdpa_backend_context(torch, sdpa):
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
    counts = {"gemm": 0, "attention": 0, "other": 0}
    names = {"gemm": {}, "attention": {}, "other": {}}
    t_first, t_last = None, None
    for ev in trace.get("traceEvents", []):
        if ev.get("cat") != "kernel" or "dur" not in ev:
            continue
        cls = classify(ev.get("name", ""))
        sums[cls] += ev["dur"]
        counts[cls] += 1
        names[cls][ev["name"]] = names[cls].get(ev["name"], 0) + ev["dur"]
        t_first = ev["ts"] if t_first is None else min(t_first, ev["ts"])
        t_last = ev["ts"] + ev["dur"] if t_last is None else max(t_last, ev["ts"] + ev["dur"])
    per_step_ms = {k: v / 1000.0 / steps for k, v in sums.items()}
    per_step_ms["wall"] = (t_last - t_first) / 1000.0 / steps if t_first is not None else 0.0
    per_step_ms["idle"] = max(per_step_ms["wall"] - sum(per_step_ms[k] for k in sums), 0.0)
    per_step_ms["sm_mhz"] = clocks.mean()
    per_step_ms["kernels"] = {k: v / steps for k, v in counts.items()}
    top = {k: sorted(((n, d / 1000.0 / steps) for n, d in v.items()), key=lambda t: -t[1])[:6] for k, v in names.items()}
    return per_step_ms, n_warm, top


def gemmscope_per_layer(binary, c, precisions, extra):
    with tempfile.TemporaryDirectory() as d:
        out = os.path.join(d, "r.json")
        cmd = [binary, "--hidden_size", str(c["hidden"]), "--intermediate_size", str(c["ffn"]),
               "--num_attention_heads", str(c["heads"]), "--num_key_value_heads", str(c["kv_heads"]),
               "--head_dim", str(c["head_dim"]), "--num_hidden_layers", "1",
               "--micro_batch_size", str(c["batch"]), "--sequence_length", str(c["seq"]),
               "--gated-mlp" if c["gated"] else "--no-gated-mlp",
               "--precisions", ",".join(precisions), "--mode", "pre-quantized",
               # The PyTorch step writes its weight gradients in BF16 (p.grad = None every step, no
               # FP32 main gradients to accumulate into): gemmscope times the same.
               "--wgrad-output", "bf16", "-q", "--json", out] + extra
        subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL)
        with open(out) as f:
            r = gs_result.with_results(json.load(f))
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


def expand(template, t):
    """A gemmscope variant's flags with {other}, {attention}, {other_attention} and {idle} replaced by the
    PyTorch step's own per-layer figures (used only by the variants that say so: the bar is judged on
    variants told nothing about the step)."""
    vals = {"other": t["other"], "attention": t["attention"], "other_attention": t["other"] + t["attention"],
            "idle": t["idle"]}
    return [w.format(**{k: f"{v:.3f}" for k, v in vals.items()}) for w in template.split()]


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--gemmscope", default="build/gemmscope", help="the gemmscope binary")
    ap.add_argument("--config", default="tune",
                    help="comma list of configs, or 'tune' / 'check' / 'all' (" + ", ".join(CONFIGS) + ")")
    ap.add_argument("--seconds", type=float, default=12.0, help="continuous steps before profiling (>= 5)")
    ap.add_argument("--steps", type=int, default=50, help="profiled steps")
    ap.add_argument("--bar", type=float, default=3.0, help="allowed |gemmscope/PyTorch - 1| in percent")
    ap.add_argument("--no-fp8", action="store_true", help="BF16 only")
    ap.add_argument("--fp8-quant", choices=["compile", "eager"], default="compile",
                    help="FP8 step's quantization: torch.compile'd fused amax/cast/transpose (default, close to "
                         "TE's kernels) or eager PyTorch ops")
    ap.add_argument("--step", default="eager", help="comma list of PyTorch step forms: eager, compile (the layer "
                    "under torch.compile, the closest PyTorch gets to Transformer Engine's fused kernels)")
    ap.add_argument("--sdpa", choices=["cudnn", "flash", "default"], default="cudnn",
                    help="attention kernels of the PyTorch step (cudnn: what Transformer Engine runs on Hopper)")
    ap.add_argument("--variant", action="append", default=[],
                    help="NAME=FLAGS: a gemmscope run to set beside the step; FLAGS may use {other}, {attention}, "
                         "{other_attention}, {idle} (the step's own per-layer ms; such variants are told about the "
                         "step and never judged) and {form} (the step form). Default: back to back "
                         "(--step-context none) and the context matching the step (--step-context {form}).")
    ap.add_argument("--judge", default="context", help="the variant the bar is judged on")
    ap.add_argument("--json", help="write the table as JSON here")
    ap.add_argument("--gemmscope-args", default="", help="extra gemmscope flags for every variant (space separated)")
    a = ap.parse_args()
    sel = [n.strip() for n in a.config.split(",") if n.strip()]
    names = []
    for n in sel:
        if n in ("tune", "check", "all"):
            names += [k for k, v in CONFIGS.items() if n == "all" or v["set"] == n]
        elif n in CONFIGS:
            names.append(n)
        else:
            print(f"validate_step: unknown config '{n}' (known: {', '.join(CONFIGS)})", file=sys.stderr)
            return 2
    forms = [f.strip() for f in a.step.split(",") if f.strip()]
    if any(f not in ("eager", "compile") for f in forms):
        print("validate_step: --step takes eager and/or compile", file=sys.stderr)
        return 2
    variants = []
    for v in a.variant or ["backtoback=--step-context none", "context=--step-context {form}"]:
        if "=" not in v:
            print(f"validate_step: --variant needs NAME=FLAGS, got '{v}'", file=sys.stderr)
            return 2
        variants.append(tuple(v.split("=", 1)))
    if a.seconds < 5:
        print("validate_step: --seconds must be >= 5 (steady state)", file=sys.stderr)
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
          f"then {a.steps} profiled steps; SDPA backend {a.sdpa}", flush=True)
    rows, ok_all = [], True
    extra = a.gemmscope_args.split()
    with tempfile.TemporaryDirectory() as trace_dir:
        for n in names:
            c = CONFIGS[n]
            for form in forms:
                steps = [("BF16", False)] + ([("FP8Current", a.fp8_quant)] if fp8_ok else [])
                for prec, fp8 in steps:
                    try:
                        t, warm, top = torch_step_kernels(torch, c, fp8, a.seconds, a.steps, trace_dir, form, a.sdpa)
                    except Exception as e:  # a step form PyTorch cannot run here: say so, go on
                        print(f"  {n} {form} {prec}: PyTorch step failed: {str(e).splitlines()[0][:200]}", flush=True)
                        continue
                    row = {"config": n, "set": c["set"], "form": form, "precision": prec, "torch": t,
                           "torch_top_kernels": top, "warm_steps": warm, "variants": {}}
                    line = (f"  {n:<14} {form:<7} {prec:<10} PyTorch GEMM {t['gemm']:7.3f} attn {t['attention']:6.3f} "
                            f"other {t['other']:6.3f} idle {t['idle']:6.3f} ms, {t['sm_mhz'] or 0:.0f} MHz |")
                    for vname, vflags in variants:
                        flags = expand(vflags.replace("{form}", form), t)
                        gs, gclk, res = gemmscope_per_layer(a.gemmscope, c, [prec], extra + flags)
                        err = (gs[prec] / t["gemm"] - 1.0) * 100.0 if t["gemm"] > 0 else float("nan")
                        sc = gs_result.step_context(res)
                        est = ((sc.get("step_estimate_per_layer") or {}).get("pre-quantized") or {}).get(prec) or {}
                        torch_step = t["gemm"] + t["attention"] + t["other"]
                        step_err = ((est["step_ms"] / torch_step - 1.0) * 100.0
                                    if est.get("step_ms") and torch_step > 0 else None)
                        row["variants"][vname] = {"flags": flags, "gemm_ms": gs[prec], "error_pct": err,
                                                  "sm_mhz": gclk.get(prec), "step_context": sc,
                                                  "step_estimate": est, "step_error_pct": step_err}
                        line += f" {vname} {gs[prec]:7.3f} ({err:+5.1f}%, {gclk.get(prec) or 0:.0f} MHz)"
                        if est.get("step_ms"):
                            line += (f" step {est['step_ms']:.2f} vs {torch_step:.2f} ({step_err:+.1f}%; attn "
                                     f"{est['attention_ms']:.2f} other {est['other_ms']:.2f})")
                    if a.judge in row["variants"]:
                        row["pass"] = abs(row["variants"][a.judge]["error_pct"]) <= a.bar
                        ok_all &= row["pass"]
                    rows.append(row)
                    print(line, flush=True)
                    if a.json:  # after every row: a run cut short keeps what it measured
                        with open(a.json, "w") as f:
                            json.dump({"device": dev, "torch": torch.__version__, "bar_pct": a.bar, "sdpa": a.sdpa,
                                       "rows": rows}, f, indent=1)
    print()
    vnames = [v for v, _ in variants]
    print("| config | set | step | precision | PyTorch GEMM (ms) | attention | other | idle | MHz | " +
          " | ".join(f"{v} (ms, error, MHz)" for v in vnames) + " |")
    print("|---|---|---|---|---|---|---|---|---|" + "---|" * len(vnames))
    for r in rows:
        t = r["torch"]
        cells = " | ".join(f"{r['variants'][v]['gemm_ms']:.2f}, {r['variants'][v]['error_pct']:+.1f}%, "
                           f"{r['variants'][v]['sm_mhz'] or 0:.0f}" for v in vnames)
        print(f"| {r['config']} | {r['set']} | {r['form']} | {r['precision']} | {t['gemm']:.2f} | {t['attention']:.2f} | "
              f"{t['other']:.2f} | {t['idle']:.2f} | {t['sm_mhz'] or 0:.0f} | {cells} |")
    if a.judge in vnames:
        judged = [r for r in rows if "pass" in r]
        print(f"\n{dev}: {sum(r['pass'] for r in judged)} of {len(judged)} cells within ±{a.bar:g}% with "
              f"'{a.judge}'")
    if a.json:
        with open(a.json, "w") as f:
            json.dump({"device": dev, "torch": torch.__version__, "bar_pct": a.bar, "sdpa": a.sdpa, "rows": rows},
                      f, indent=1)
    return 0 if ok_all else 1


if __name__ == "__main__":
    sys.exit(main())
