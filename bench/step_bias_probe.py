#!/usr/bin/env python3
"""Why the per-layer step estimate (GEMMs + attention + other) reads low against a real one-layer step.

For each layer of bench/validate_step.py (--config) and step form (--step), in one run on one GPU:

  A. Attention. The PyTorch step's attention kernel time per step (torch.profiler, as validate_step.py)
     beside gemmscope's (its JSON attention records, forward + backward, --step-context FORM),
     and SDPA forward + backward timed alone in three clock states, with the SM clock each ran at:
       boost        after 1 s idle (the state gemmscope's one-off attention timing may catch: cuDNN builds
                    its graph just before it, and the GPU idles meanwhile)
       loaded       right after 5 s of back-to-back BF16 GEMMs (at the power cap)
       interleaved  each pass between two BF16 GEMMs, events around the attention only (a step's state)
     and, for GQA layers, the same in the interleaved state with native GQA (enable_gqa=True) against
     the key/value heads repeated (what the step runs: validate_step.py repeats them, as Hugging Face's
     repeat_kv does).
     Reads: if gemmscope's attention matches "boost" and the step's matches "interleaved", cause 1 (the
     one-off timing's clock state) is confirmed; the GQA pair says whether timing native GQA for a
     repeated-heads step reads low (cause 2; gemmscope now times eager/compile attention with the heads
     repeated).
  B. Other kernels. The step's non-GEMM, non-attention kernels by name (all of them, count and time),
     split into FP8 cast kernels (amax, cast, transpose, scale: names with amax/abs/clamp/reciprocal/_to_copy
     in the FP8 step), kernels shorter than 5 us (launch-bound: their time is not their bytes), and the
     rest, beside gemmscope's modelled other_ms and cast_ms. Reads: the cast kernels' ms against cast_ms
     (cause 3: the casts' rate), the tiny kernels' total (cause 4: per-tensor scale kernels), and the
     named kernels the byte model lacks (cause 5: norm weight-gradient reductions, strided copies).

One command on a GPU node with PyTorch (not a CI test; writes nothing but --json):

  python3 bench/step_bias_probe.py --gemmscope build/gemmscope \\
      --config llama3-8b,qwen2.5-14b,phi2-2.7b,neox-20b --step eager,compile --json probe.json

Exit status: 0 done, 2 bad usage.
"""
import argparse
import json
import os
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import gs_result  # noqa: E402  (bench/gs_result.py: the step context of either layout)
import validate_step as vs  # noqa: E402  (the layers, the step, the profiler's classes)

CAST_HINTS = ("amax", "abs", "clamp", "reciprocal", "_to_copy", "cast", "quantize", "fp8")


def profile_step(torch, c, fp8, seconds, steps, trace_dir, form, sdpa):
    """Every kernel of the steady-state step by name: {name: (count per step, ms per step)}, and the classes."""
    torch.manual_seed(0)
    torch._dynamo.reset()
    layer = vs.build_layer(torch, c, fp8)
    if form == "compile":
        for knob in ("recompile_limit", "cache_size_limit"):
            if hasattr(torch._dynamo.config, knob):
                setattr(torch._dynamo.config, knob, 64)
        layer = torch.compile(layer)
    x = torch.randn(c["batch"], c["seq"], c["hidden"], device="cuda", dtype=torch.bfloat16, requires_grad=True)
    dy = torch.randn_like(x)
    params = list(layer.parameters())

    def step():
        for p in params:
            p.grad = None
        x.grad = None
        layer(x).backward(dy)

    from torch.profiler import ProfilerActivity, profile
    with vs.sdpa_backend_context(torch, sdpa):
        for _ in range(3):
            step()
        torch.cuda.synchronize()
        t0 = time.time()
        while time.time() - t0 < seconds:
            step()
        with vs.ClockSampler(torch.cuda.current_device()) as clocks, profile(activities=[ProfilerActivity.CUDA]) as prof:
            for _ in range(steps):
                step()
            torch.cuda.synchronize()
    path = os.path.join(trace_dir, "probe_%d_%d.json" % (os.getpid(), time.time_ns()))
    prof.export_chrome_trace(path)
    with open(path) as f:
        trace = json.load(f)
    os.unlink(path)
    kernels = {}
    for ev in trace.get("traceEvents", []):
        if ev.get("cat") != "kernel" or "dur" not in ev:
            continue
        n, ms = kernels.get(ev["name"], (0, 0.0))
        kernels[ev["name"]] = (n + 1, ms + ev["dur"] / 1000.0)
    per_step = {k: (n / steps, ms / steps) for k, (n, ms) in kernels.items()}
    return per_step, clocks.mean()


def split_other(kernels, fp8):
    out = {"cast": [0, 0.0], "tiny": [0, 0.0], "rest": [0, 0.0]}
    named = []
    for name, (n, ms) in kernels.items():
        if vs.classify(name) != "other":
            continue
        low = name.lower()
        if fp8 and any(h in low for h in CAST_HINTS):
            key = "cast"
        elif n > 0 and ms / n < 0.005:
            key = "tiny"
        else:
            key = "rest"
        out[key][0] += n
        out[key][1] += ms
        named.append((name, n, ms, key))
    named.sort(key=lambda t: -t[2])
    return out, named


def sdpa_alone(torch, c, sdpa, state, native_gqa, iters=10):
    """Forward + backward of the layer's causal SDPA alone, ms per pass pair, and the mean SM clock."""
    F = torch.nn.functional
    B, S, nh, nkv, hd = c["batch"], c["seq"], c["heads"], c["kv_heads"], c["head_dim"]
    q = torch.randn(B, nh, S, hd, device="cuda", dtype=torch.bfloat16, requires_grad=True)
    kv_heads = nkv if native_gqa else nh
    k = torch.randn(B, kv_heads, S, hd, device="cuda", dtype=torch.bfloat16, requires_grad=True)
    v = torch.randn(B, kv_heads, S, hd, device="cuda", dtype=torch.bfloat16, requires_grad=True)
    do = torch.randn(B, nh, S, hd, device="cuda", dtype=torch.bfloat16)
    a = torch.randn(8192, 8192, device="cuda", dtype=torch.bfloat16)
    kwargs = {"enable_gqa": True} if native_gqa and nkv != nh else {}

    def fb():
        o = F.scaled_dot_product_attention(q, k, v, is_causal=True, **kwargs)
        o.backward(do)

    with vs.sdpa_backend_context(torch, sdpa):
        fb()
        torch.cuda.synchronize()
        if state == "boost":
            time.sleep(1.0)
        elif state == "loaded":
            t0 = time.time()
            while time.time() - t0 < 5.0:
                for _ in range(10):
                    a @ a
                torch.cuda.synchronize()
        total = 0.0
        with vs.ClockSampler(torch.cuda.current_device()) as clocks:
            for _ in range(iters):
                if state == "interleaved":
                    a @ a
                e0, e1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
                e0.record()
                fb()
                e1.record()
                if state == "interleaved":
                    a @ a
                torch.cuda.synchronize()
                total += e0.elapsed_time(e1)
    return total / iters, clocks.mean()


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--gemmscope", default="build/gemmscope")
    ap.add_argument("--config", default="llama3-8b,qwen2.5-14b,phi2-2.7b,neox-20b",
                    help="comma list of bench/validate_step.py configs (" + ", ".join(vs.CONFIGS) + ")")
    ap.add_argument("--step", default="eager,compile", help="step forms: eager, compile")
    ap.add_argument("--seconds", type=float, default=10.0)
    ap.add_argument("--steps", type=int, default=30)
    ap.add_argument("--sdpa", choices=["cudnn", "flash", "default"], default="cudnn")
    ap.add_argument("--no-fp8", action="store_true")
    ap.add_argument("--top", type=int, default=12, help="other kernels listed per cell")
    ap.add_argument("--json")
    a = ap.parse_args()
    names = [n.strip() for n in a.config.split(",") if n.strip()]
    bad = [n for n in names if n not in vs.CONFIGS]
    forms = [f.strip() for f in a.step.split(",") if f.strip()]
    if bad or any(f not in ("eager", "compile") for f in forms):
        print("step_bias_probe: unknown config or step form: %s" % ", ".join(bad or forms), file=sys.stderr)
        return 2
    if not os.access(a.gemmscope, os.X_OK):
        print("step_bias_probe: %s is not an executable gemmscope binary" % a.gemmscope, file=sys.stderr)
        return 2
    import torch
    if not torch.cuda.is_available():
        print("step_bias_probe: no CUDA GPU visible to PyTorch", file=sys.stderr)
        return 2
    dev = torch.cuda.get_device_name()
    fp8_ok = not a.no_fp8 and torch.cuda.get_device_capability() >= (8, 9)
    print("device: %s; torch %s" % (dev, torch.__version__), flush=True)
    rows = []
    with tempfile.TemporaryDirectory() as trace_dir:
        for n in names:
            c = vs.CONFIGS[n]
            gqa = c["kv_heads"] != c["heads"]
            alone = {}
            for state in ("boost", "loaded", "interleaved"):
                alone[state] = sdpa_alone(torch, c, a.sdpa, state, native_gqa=False)
            if gqa:
                try:
                    alone["interleaved, native GQA"] = sdpa_alone(torch, c, a.sdpa, "interleaved", native_gqa=True)
                except Exception as e:  # a backend without enable_gqa: say so
                    alone["interleaved, native GQA"] = (None, None)
                    print("  %s: native GQA SDPA failed: %s" % (n, str(e).splitlines()[0][:160]), flush=True)
            print("  %s attention alone (fwd+bwd ms, MHz): %s" % (n, "; ".join(
                "%s %.3f @ %.0f" % (k, v[0], v[1] or 0) for k, v in alone.items() if v[0] is not None)), flush=True)
            for form in forms:
                for prec, fp8 in [("BF16", False)] + ([("FP8Current", "compile")] if fp8_ok else []):
                    kernels, mhz = profile_step(torch, c, fp8, a.seconds, a.steps, trace_dir, form, a.sdpa)
                    attn = sum(ms for k, (_, ms) in kernels.items() if vs.classify(k) == "attention")
                    split, named = split_other(kernels, fp8)
                    _, _, res = vs.gemmscope_per_layer(a.gemmscope, c, [prec], ["--step-context", form])
                    sc = gs_result.step_context(res)
                    gs_attn = (sc.get("attention_fwd_ms") or 0) + (sc.get("attention_bwd_ms") or 0)
                    row = {"config": n, "form": form, "precision": prec, "step_mhz": mhz,
                           "torch_attention_ms": attn, "gemmscope_attention_ms": gs_attn,
                           "attention_alone": {k: {"ms": v[0], "mhz": v[1]} for k, v in alone.items()},
                           "torch_other": {k: {"kernels": v[0], "ms": v[1]} for k, v in split.items()},
                           "gemmscope_other_ms": sc.get("other_ms", 0) + sc.get("move_ms", 0),
                           "gemmscope_cast_ms": sc.get("cast_ms", 0) if fp8 else 0,
                           "other_kernels": [{"name": k, "per_step": cnt, "ms": ms, "class": cl}
                                             for k, cnt, ms, cl in named]}
                    rows.append(row)
                    print("  %-14s %-7s %-10s attention: step %.3f, gemmscope %.3f (%+.1f%%) @ step %.0f MHz | other: "
                          "step cast %.3f (%d), tiny %.3f (%d), rest %.3f; gemmscope other %.3f, casts %.3f" % (
                              n, form, prec, attn, gs_attn, (gs_attn / attn - 1) * 100 if attn else float("nan"),
                              mhz or 0, split["cast"][1], split["cast"][0], split["tiny"][1], split["tiny"][0],
                              split["rest"][1], row["gemmscope_other_ms"], row["gemmscope_cast_ms"]), flush=True)
                    for k, cnt, ms, cl in named[:a.top]:
                        print("      %-6s %6.1f x %8.3f ms  %s" % (cl, cnt, ms, k[:100]))
                    if a.json:
                        with open(a.json, "w") as f:
                            json.dump({"device": dev, "torch": torch.__version__, "sdpa": a.sdpa, "rows": rows}, f,
                                      indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
