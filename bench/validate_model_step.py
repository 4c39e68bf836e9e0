#!/usr/bin/env python3
"""Validation: gemmscope's predicted whole training step against whole models trained in PyTorch.

Each model is trained in PyTorch on one GPU as a plain PyTorch user trains it: token embedding, N
transformer layers (bench/validate_step.py's layer: norm, QKV, rotary embedding, causal SDPA on
cuDNN's kernels, attention-out, norm, MLP; MoE models: validate_moe.py's layer shape, a BF16 router,
the rows of a drawn routing gathered per expert, per-expert linears, the weighted combine, shared
experts), final norm, LM head (BF16 in every precision, as Transformer Engine keeps it), the loss
upcast to FP32 as Hugging Face's causal-LM loss does (logits.float() then F.cross_entropy),
gradient clipping (clip_grad_norm_ 1.0, foreach; --no-clip drops it), torch.optim.AdamW(fused=True)
over BF16 parameters (its states BF16 too), zero_grad(set_to_none=True). Untied LM head. Forms:

  eager    every module eager
  compile  each transformer block under torch.compile and the loss function compiled (as torchtitan
           compiles a model: per block, the loss on its own); embedding, final norm, LM head and
           the optimizer eager
Precisions:
  bf16     BF16 linears
  fp8      validate_step.py's FP8 linear (per-tensor current scaling, E4M3/E5M2, casts compiled) in
           every layer; the LM head and the router stay BF16

Per case: continuous steps for --seconds (the power state settles: bench/validate_step.py's notes
on the idle boost), then --timed-steps steps timed by the host with a synchronize at the end (the
real step time), then --steps steps under torch.profiler whose kernels are summed per group (GEMM,
attention, optimizer, loss, embedding, other; the loss, embedding and optimizer by the host-side
ranges and autograd hooks that bracket their launches, the rest by kernel name). Then the gemmscope
binary runs the same model (the flags per form are the table GEMMSCOPE_FORM below, the common ones
GEMMSCOPE_COMMON: BF16 parameters, plain fused AdamW, BF16 Wgrad output as PyTorch writes it), and
its step block is read from its --json output.

Models: "tune" (gemmscope's step model may be set on them) and "check" (never used to set
anything). Several are truncated in layers to keep each step short and the weights, gradients,
states and activations in memory; the table says how many layers ran.

One command on a GPU node with PyTorch (not a CI test), e.g.:

  python3 bench/validate_model_step.py --gemmscope build/gemmscope --models check --json out.json --out out.md

--dry-run prints the cases and gemmscope's command lines without a GPU; --self-test checks the kernel
classification, the phase windows and the table on synthetic data.

Exit status: 0 when every check-set cell is within the bars (step +-5%, FP8 step speedup +-3%),
1 when one misses or could not be compared, 2 bad usage.
"""
import argparse
import gc
import json
import os
import random
import shlex
import subprocess
import sys
import tempfile
import time

# ---- gemmscope's flags (h39core's step settings): one place ----
# Every run: the step as plain PyTorch keeps it.
GEMMSCOPE_COMMON = ["--param-storage", "bf16", "--optimizer", "adamw-fused", "--wgrad-output", "bf16",
                    "--lm-head-precision", "bf16", "--recompute", "none", "--mode", "pre-quantized"]
# Per form: the framework whose kernels run between the GEMMs, the loss as it runs, the host's form.
GEMMSCOPE_FORM = {
    "eager": ["--step-context", "eager", "--loss", "unfused", "--host-form", "eager"],
    "compile": ["--step-context", "compile", "--loss", "fused", "--host-form", "compiled"],
}
GEMMSCOPE_CLIP = {True: ["--grad-clip", "on"], False: ["--grad-clip", "off"]}
GEMMSCOPE_MODE = "pre-quantized"  # the JSON key of the step block's mode (--mode above)
PRECISIONS = {"bf16": "BF16", "fp8": "FP8Current"}  # this script's name -> gemmscope's
FORMS = tuple(GEMMSCOPE_FORM)
GROUPS = ("gemm", "attention", "optimizer", "loss", "embedding", "other")
STEP_BAR_PCT, FP8_BAR_PCT = 5.0, 3.0
TOP_KERNELS = 16  # kernels kept per group in the JSON rows (real.top)

# ---- models: shapes as their config.json has them; layers: the real count, run: the count trained ----
MODELS = {
    # tune
    "qwen2.5-0.5b": dict(set="tune", hidden=896, ffn=4864, heads=14, kv_heads=2, head_dim=64, vocab=151936,
                         layers=24, run=24, gated=True, norm="rmsnorm", batch=4, seq=2048),
    "llama-3.2-1b": dict(set="tune", hidden=2048, ffn=8192, heads=32, kv_heads=8, head_dim=64, vocab=128256,
                         layers=16, run=16, gated=True, norm="rmsnorm", batch=2, seq=4096),
    "llama-3.2-3b": dict(set="tune", hidden=3072, ffn=8192, heads=24, kv_heads=8, head_dim=128, vocab=128256,
                         layers=28, run=14, gated=True, norm="rmsnorm", batch=1, seq=8192),
    "qwen2.5-7b": dict(set="tune", hidden=3584, ffn=18944, heads=28, kv_heads=4, head_dim=128, vocab=152064,
                       layers=28, run=6, gated=True, norm="rmsnorm", batch=2, seq=4096),
    "qwen3-30b-a3b": dict(set="tune", hidden=2048, ffn=6144, heads=32, kv_heads=4, head_dim=128, vocab=151936,
                          layers=48, run=4, gated=True, norm="rmsnorm", batch=1, seq=4096,
                          moe=dict(experts=128, top_k=8, ffn=768, shared=0)),
    # check: never used to set anything
    "qwen3-1.7b": dict(set="check", hidden=2048, ffn=6144, heads=16, kv_heads=8, head_dim=128, vocab=151936,
                       layers=28, run=28, gated=True, norm="rmsnorm", batch=2, seq=4096),
    # Phi-2-like: its shapes (MHA 32 x 80, GELU 10240, LayerNorm, vocab 51200) in the sequential
    # block of the other models, without Phi-2's biases and parallel attention/MLP.
    "phi-2": dict(set="check", hidden=2560, ffn=10240, heads=32, kv_heads=32, head_dim=80, vocab=51200,
                  layers=32, run=16, gated=False, norm="layernorm", batch=4, seq=2048),
    "mistral-7b": dict(set="check", hidden=4096, ffn=14336, heads=32, kv_heads=8, head_dim=128, vocab=32000,
                       layers=32, run=8, gated=True, norm="rmsnorm", batch=2, seq=4096),
    "llama-3-8b": dict(set="check", hidden=4096, ffn=14336, heads=32, kv_heads=8, head_dim=128, vocab=128256,
                       layers=32, run=8, gated=True, norm="rmsnorm", batch=1, seq=8192),
    "mixtral-8x7b": dict(set="check", hidden=4096, ffn=14336, heads=32, kv_heads=8, head_dim=128, vocab=32000,
                         layers=32, run=2, gated=True, norm="rmsnorm", batch=1, seq=4096,
                         moe=dict(experts=8, top_k=2, ffn=14336, shared=0)),
}


# ---- the model's size and gemmscope's command (no GPU needed) ----

def params(m, layers=None):
    """Parameter count of the model as trained here (untied LM head, no biases)."""
    h, hd, L = m["hidden"], m["head_dim"], m["run"] if layers is None else layers
    attn = h * (m["heads"] + 2 * m["kv_heads"]) * hd + m["heads"] * hd * h
    if m.get("moe"):
        e = m["moe"]
        mlp = h * e["experts"] + e["experts"] * 3 * h * e["ffn"] + e["shared"] * 3 * h * e["ffn"]
    else:
        mlp = (3 if m["gated"] else 2) * h * m["ffn"]
    norms = 2 * h * (2 if m["norm"] == "layernorm" else 1)
    return L * (attn + mlp + norms) + 2 * m["vocab"] * h + h


def gemmscope_cmd(binary, m, form, precisions, clip, routing_path, json_path, extra=()):
    cmd = [binary, "--hidden_size", str(m["hidden"]), "--intermediate_size", str(m["ffn"]),
           "--num_attention_heads", str(m["heads"]), "--num_key_value_heads", str(m["kv_heads"]),
           "--head_dim", str(m["head_dim"]), "--num_hidden_layers", str(m["run"]),
           "--vocab_size", str(m["vocab"]), "--micro_batch_size", str(m["batch"]),
           "--sequence_length", str(m["seq"]), "--gated-mlp" if m["gated"] else "--no-gated-mlp",
           "--precisions", ",".join(PRECISIONS[p] for p in precisions)]
    if m.get("moe"):
        e = m["moe"]
        cmd += ["--num-experts", str(e["experts"]), "--top-k", str(e["top_k"]), "--moe-intermediate-size",
                str(e["ffn"]), "--shared-experts", str(e["shared"]), "--routing", "file:" + routing_path]
    return cmd + GEMMSCOPE_COMMON + GEMMSCOPE_FORM[form] + GEMMSCOPE_CLIP[clip] + ["-q", "--json", json_path] + \
        list(extra)


def draw_assignment(tokens, experts, top_k, seed):
    """Each token picks top_k distinct experts uniformly (validate_moe.py's draw): per expert, its
    (token, slot) pairs in token order, slot = token * top_k + choice (the router's top-k value that
    weights the row)."""
    rng = random.Random(seed)
    per = [[] for _ in range(experts)]
    for t in range(tokens):
        for j, e in enumerate(rng.sample(range(experts), top_k)):
            per[e].append((t, t * top_k + j))
    return per


# ---- the step's kernels per group (no GPU needed: reads a chrome trace) ----

def classify_name(name):
    """A kernel's group from its name alone, for kernels outside the bracketed phases."""
    n = name.lower()
    if any(s in n for s in ("flash", "fmha", "attention", "sdpa", "cudnn_generated")):
        return "attention"
    if any(s in n for s in ("nvjet", "gemm", "xmma", "cutlass", "s16816", "s1688", "splitkreduce")):
        return "gemm"
    if any(s in n for s in ("multi_tensor_apply", "fusedadam", "fused_adam", "lpnorm", "foreach")):
        return "optimizer"
    if any(s in n for s in ("softmax", "nll_loss", "cross_entropy", "crossentropy")):
        return "loss"
    if any(s in n for s in ("embedding_backward", "compute_grad_weight", "sum_and_scatter", "partial_segment",
                            "segment_offsets", "embedding")):
        return "embedding"
    return "other"


# Host-side annotations the PyTorch step records (record_function), in launch order per step:
PHASE_RANGES = {"gs::embedding": "embedding", "gs::loss": "loss", "gs::optimizer": "optimizer"}
PHASE_MARKS = [("gs::mark:backward_start", "gs::mark:loss_bwd_end", "loss"),  # the loss's backward
               ("gs::mark:embedding_bwd", "gs::mark:backward_end", "embedding")]  # the embedding's backward


def phase_windows(events):
    """(start, end, group) windows of host time from the step's annotations: the ranges themselves,
    and for each mark pair the span from a start mark to the next end mark."""
    ann = sorted((float(e["ts"]), float(e.get("dur", 0)), e["name"]) for e in events
                 if e.get("cat") in ("user_annotation", "cpu_op") and str(e.get("name", "")).startswith("gs::"))
    out = [(ts, ts + dur, PHASE_RANGES[name]) for ts, dur, name in ann if name in PHASE_RANGES]
    for start, end, group in PHASE_MARKS:
        ends = [ts for ts, _, name in ann if name == end]
        for ts, _, name in ann:
            if name == start:
                later = [x for x in ends if x >= ts]
                if later:
                    out.append((ts, min(later), group))
    return out


def group_times(trace, steps):
    """Per-step GPU time (ms) of each group over a chrome trace of `steps` steps, the step's GPU span,
    and kernel counts. A kernel belongs to the phase window holding its launch (the host-side
    cudaLaunchKernel / cuLaunchKernel with its correlation id); otherwise to its name's group."""
    events = trace.get("traceEvents", [])
    launched = {}
    for e in events:
        if e.get("cat") in ("cuda_runtime", "cuda_driver") and "correlation" in (e.get("args") or {}):
            launched[e["args"]["correlation"]] = float(e["ts"])
    windows = phase_windows(events)
    sums = {g: 0.0 for g in GROUPS}
    counts = {g: 0 for g in GROUPS}
    by_name = {g: {} for g in GROUPS}  # group -> kernel name -> [total us, count]
    first, last = None, None
    for e in events:
        if e.get("cat") not in ("kernel", "gpu_memset", "gpu_memcpy") or "dur" not in e:
            continue
        t = launched.get((e.get("args") or {}).get("correlation"))
        group = None
        if t is not None:
            for a, b, g in windows:
                if a <= t <= b:
                    group = g
                    break
        group = group or classify_name(e.get("name", ""))
        sums[group] += float(e["dur"])
        counts[group] += 1
        k = by_name[group].setdefault(str(e.get("name", ""))[:160], [0.0, 0])
        k[0] += float(e["dur"])
        k[1] += 1
        s, d = float(e["ts"]), float(e["ts"]) + float(e["dur"])
        first = s if first is None else min(first, s)
        last = d if last is None else max(last, d)
    out = {g: v / 1000.0 / steps for g, v in sums.items()}
    out["gpu_span"] = (last - first) / 1000.0 / steps if first is not None else 0.0
    out["kernels"] = {g: v / steps for g, v in counts.items()}
    # Per group, its kernels by time (ms and launches per step), the largest first: what a miss in
    # a group is made of.
    out["top"] = {g: [[name, us / 1000.0 / steps, n / steps]
                      for name, (us, n) in sorted(names.items(), key=lambda kv: -kv[1][0])[:TOP_KERNELS]]
                  for g, names in by_name.items()}
    return out


# ---- gemmscope's step block (h39core's JSON: step.modes.<mode>.<precision>) ----

class SchemaError(Exception):
    pass


def gemmscope_step(r, precision):
    """gemmscope's predicted step for one precision: step_ms, groups (as GROUPS, embedding split out of
    "other"; recompute folded into "other"), host (exposed host time) and the step speedup vs BF16."""
    try:
        per = r["step"]["modes"][GEMMSCOPE_MODE][precision]
    except (KeyError, TypeError) as e:
        raise SchemaError(f"gemmscope's JSON has no step block for {GEMMSCOPE_MODE}/{precision} ({e!r})")
    br = per.get("breakdown") or {}
    emb = sum(g.get("total_ms") or 0.0 for g in per.get("groups") or [] if str(g.get("name", "")).startswith("embedding"))
    groups = {g: br.get(g) for g in ("gemm", "attention", "optimizer", "loss", "other")}
    if groups["other"] is not None:
        groups["other"] = groups["other"] - emb + (br.get("recompute") or 0.0)
    groups["embedding"] = emb
    return {"step_ms": per.get("step_ms"), "gpu_ms": per.get("gpu_ms"), "host_ms": per.get("host_ms"),
            "host_bound": per.get("host_bound"), "groups": groups, "host": br.get("host"),
            "speedup": (per.get("speedup_vs_bf16") or {}).get("step")}


# ---- the table ----

def pct(a, b):
    return (a / b - 1.0) * 100.0 if (a is not None and b) else None


def fmt(x, spec=".2f"):
    return "n/a" if x is None else format(x, spec)


def judge(rows, fp8_rows):
    """Marks each check-set row: pass when within the bar; returns whether all check cells passed
    (and at least one was compared)."""
    ok, judged = True, 0
    for r in rows:
        if r["set"] != "check":
            continue
        e = r.get("error_pct")
        r["pass"] = e is not None and abs(e) <= STEP_BAR_PCT
        ok &= r["pass"]
        judged += 1
    for r in fp8_rows:
        if r["set"] != "check":
            continue
        e = r.get("error_pct")
        r["pass"] = e is not None and abs(e) <= FP8_BAR_PCT
        ok &= r["pass"]
        judged += 1
    return ok and judged > 0


def table(rows, fp8_rows, device):
    lines = [f"Whole training step, PyTorch vs gemmscope ({device})", "",
             "| model | set | layers | form | precision | real step (ms) | gemmscope (ms) | error | " +
             " | ".join(f"{g} real / pred" for g in GROUPS) + " | host idle real / pred | judged |",
             "|---|---|---|---|---|---|---|---|" + "---|" * len(GROUPS) + "---|---|"]
    for r in rows:
        real, pred = r.get("real") or {}, r.get("pred") or {}
        rg, pg = real.get("groups") or {}, pred.get("groups") or {}
        cells = " | ".join(f"{fmt(rg.get(g))} / {fmt(pg.get(g))}" for g in GROUPS)
        verdict = "" if "pass" not in r else ("pass" if r["pass"] else "MISS")
        err = r.get("error_pct")
        lines.append(f"| {r['model']} | {r['set']} | {r['layers']} | {r['form']} | {r['precision']} | "
                     f"{fmt(real.get('step_ms'))} | {fmt(pred.get('step_ms'))} | "
                     f"{'n/a' if err is None else format(err, '+.1f') + '%'} | {cells} | "
                     f"{fmt(real.get('idle_ms'))} / {fmt(pred.get('host'))} | {verdict or r.get('why', '')} |")
    if fp8_rows:
        lines += ["", "| model | set | form | FP8 step speedup real | gemmscope | error | judged |",
                  "|---|---|---|---|---|---|---|"]
        for r in fp8_rows:
            err = r.get("error_pct")
            verdict = "" if "pass" not in r else ("pass" if r["pass"] else "MISS")
            lines.append(f"| {r['model']} | {r['set']} | {r['form']} | {fmt(r.get('real'), '.3f')} | "
                         f"{fmt(r.get('pred'), '.3f')} | {'n/a' if err is None else format(err, '+.1f') + '%'} | "
                         f"{verdict} |")
    return "\n".join(lines)


def fp8_speedups(rows):
    """Per (model, form) with both precisions: the FP8 step speedup, real (BF16 step / FP8 step) and
    gemmscope's (its speedup_vs_bf16, else its step times' ratio)."""
    out = []
    by = {(r["model"], r["form"], r["precision"]): r for r in rows}
    for (model, form, prec), r in by.items():
        if prec != "fp8" or (model, form, "bf16") not in by:
            continue
        b = by[(model, form, "bf16")]
        real = (b.get("real") or {}).get("step_ms"), (r.get("real") or {}).get("step_ms")
        pb, pf = (b.get("pred") or {}).get("step_ms"), (r.get("pred") or {}).get("step_ms")
        real_s = real[0] / real[1] if all(real) else None
        pred_s = (r.get("pred") or {}).get("speedup") or (pb / pf if pb and pf else None)
        out.append({"model": model, "set": r["set"], "form": form, "real": real_s, "pred": pred_s,
                    "error_pct": pct(pred_s, real_s)})
    return out


# ---- the PyTorch step (GPU) ----

def build_model(torch, m, fp8, form, per_expert):
    import validate_step as vs
    nn, F = torch.nn, torch.nn.functional
    c = dict(hidden=m["hidden"], ffn=m["ffn"], heads=m["heads"], kv_heads=m["kv_heads"], head_dim=m["head_dim"],
             gated=m["gated"], norm=m["norm"])
    Linear = vs.make_linear(torch, fp8)
    mlp = None
    if m.get("moe"):
        e = m["moe"]
        E, k, f, sf, h = e["experts"], e["top_k"], e["ffn"], e["ffn"] * e["shared"], m["hidden"]
        T = m["batch"] * m["seq"]
        align = 16 if fp8 else 1  # FP8 GEMMs need rows in multiples of 16: padded with weight-0 rows (Megatron's Fp8Padding)
        src, slot, offs = [], [], [0]
        for rows in per_expert:
            pad = (-len(rows)) % align
            src += [t for t, _ in rows] + [0] * pad
            slot += [s for _, s in rows] + [T * k] * pad
            offs.append(len(src))

        class MoE(nn.Module):
            def __init__(self, Lin):
                super().__init__()
                self.router = nn.Linear(h, E, bias=False)  # BF16 in every recipe
                self.up = nn.ModuleList(Lin(h, 2 * f) for _ in range(E))
                self.down = nn.ModuleList(Lin(f, h) for _ in range(E))
                self.sup = Lin(h, 2 * sf) if sf else None
                self.sdown = Lin(sf, h) if sf else None
                self.register_buffer("src", torch.tensor(src, dtype=torch.long), persistent=False)
                self.register_buffer("slot", torch.tensor(slot, dtype=torch.long), persistent=False)

            def forward(self, x):
                B, S, H = x.shape
                xt = x.reshape(-1, H)
                probs = torch.softmax(self.router(xt).float(), dim=-1)
                topv, _ = probs.topk(k, dim=-1)  # the drawn routing decides the experts; the router weights the rows
                w = torch.cat([topv.reshape(-1), topv.new_zeros(1)])[self.slot].to(x.dtype).unsqueeze(-1)
                xd = xt[self.src]
                outs = []
                for i in range(E):
                    if offs[i + 1] > offs[i]:
                        g, u = self.up[i](xd[offs[i]:offs[i + 1]]).chunk(2, dim=-1)
                        outs.append(self.down[i](F.silu(g) * u))
                y = torch.cat(outs) * w
                out = torch.zeros_like(xt).index_add(0, self.src, y)
                if self.sup is not None:
                    g, u = self.sup(xt).chunk(2, dim=-1)
                    out = out + self.sdown(F.silu(g) * u)
                return out.reshape(B, S, H)

        mlp = MoE
    blocks = nn.ModuleList(vs.build_layer(torch, c, fp8, mlp=mlp, Linear=Linear, rope=m["seq"])
                           for _ in range(m["run"]))
    Norm = nn.LayerNorm if m["norm"] == "layernorm" else nn.RMSNorm
    embed = nn.Embedding(m["vocab"], m["hidden"]).to(device="cuda", dtype=torch.bfloat16)
    final = Norm(m["hidden"]).to(device="cuda", dtype=torch.bfloat16)
    head = nn.Linear(m["hidden"], m["vocab"], bias=False).to(device="cuda", dtype=torch.bfloat16)

    def loss_fn(logits, targets):  # Hugging Face's causal-LM loss: upcast, then cross-entropy (mean)
        return F.cross_entropy(logits.float().reshape(-1, logits.shape[-1]), targets.reshape(-1))

    if form == "compile":
        for knob in ("recompile_limit", "cache_size_limit"):
            if hasattr(torch._dynamo.config, knob):
                setattr(torch._dynamo.config, knob, 64)
        for b in blocks:
            b.compile()
        loss_fn = torch.compile(loss_fn)
    return embed, blocks, final, head, loss_fn


def torch_case(torch, m, prec, form, per_expert, a, trace_dir):
    """The real step: wall time (ms, synchronized), per-group kernel time from the profiler, clocks."""
    from torch.profiler import ProfilerActivity, profile, record_function
    import validate_step as vs
    torch.manual_seed(0)
    torch._dynamo.reset()
    embed, blocks, final, head, loss_fn = build_model(torch, m, a.fp8_quant if prec == "fp8" else None, form,
                                                      per_expert)
    modules = [embed, *blocks, final, head]
    params = [p for mod in modules for p in mod.parameters()]
    opt = torch.optim.AdamW(params, lr=1e-5, betas=(0.9, 0.95), weight_decay=0.1, fused=True)
    ids = torch.randint(0, m["vocab"], (m["batch"], m["seq"]), device="cuda")
    targets = torch.randint(0, m["vocab"], (m["batch"], m["seq"]), device="cuda")

    def mark(name):
        def hook(grad):
            with record_function(name):
                pass
        return hook

    def step():
        with record_function("gs::embedding"):
            x = embed(ids)
        x.register_hook(mark("gs::mark:embedding_bwd"))
        for b in blocks:
            x = b(x)
        logits = head(final(x))
        logits.register_hook(mark("gs::mark:loss_bwd_end"))
        with record_function("gs::loss"):
            loss = loss_fn(logits, targets)
        with record_function("gs::mark:backward_start"):
            pass
        loss.backward()
        with record_function("gs::mark:backward_end"):
            pass
        with record_function("gs::optimizer"):
            if not a.no_clip:
                torch.nn.utils.clip_grad_norm_(params, 1.0, foreach=True)
            opt.step()
            opt.zero_grad(set_to_none=True)

    t_build = time.time()
    for _ in range(3):  # compiles, allocates the optimizer states
        step()
    torch.cuda.synchronize()
    warm_s = time.time() - t_build
    t0, n = time.time(), 0
    while time.time() - t0 < a.seconds:  # continuous steps: the power state settles
        step()
        n += 1
        if n % 4 == 0:
            torch.cuda.synchronize()
    torch.cuda.synchronize()
    with vs.ClockSampler(torch.cuda.current_device()) as clocks:
        t1 = time.perf_counter()
        for _ in range(a.timed_steps):
            step()
        torch.cuda.synchronize()
        wall = (time.perf_counter() - t1) * 1000.0 / a.timed_steps
    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
        for _ in range(a.steps):
            step()
        torch.cuda.synchronize()
    path = os.path.join(trace_dir, f"trace_{os.getpid()}_{time.time_ns()}.json")
    prof.export_chrome_trace(path)
    with open(path) as fh:
        trace = json.load(fh)
    os.unlink(path)
    g = group_times(trace, a.steps)
    peak = torch.cuda.max_memory_allocated() / 2**30
    del opt, params, modules, embed, blocks, final, head, step
    torch._dynamo.reset()  # compiled code holds the blocks it guards on
    gc.collect()
    torch.cuda.empty_cache()
    torch.cuda.reset_peak_memory_stats()
    busy = sum(g[x] for x in GROUPS)
    return {"step_ms": wall, "groups": {x: g[x] for x in GROUPS}, "gpu_busy_ms": busy, "gpu_span_ms": g["gpu_span"],
            "idle_ms": max(wall - busy, 0.0), "kernels": g["kernels"], "top": g["top"], "sm_mhz": clocks.mean(),
            "power_w": clocks.mean_power_w(), "warm_steps": n, "first_steps_s": warm_s, "peak_gib": peak}


def run_gemmscope(cmd):
    p = subprocess.run(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    if p.returncode != 0:
        raise RuntimeError(f"gemmscope exited {p.returncode}: {p.stderr.strip().splitlines()[-1:] or ''}")


# ---- the command line ----

def select(spec, table_, what):
    out = []
    for n in [x.strip() for x in spec.split(",") if x.strip()]:
        if n in ("tune", "check", "all") and what == "model":
            out += [k for k, v in table_.items() if n == "all" or v["set"] == n]
        elif n in table_:
            out.append(n)
        else:
            raise ValueError(f"unknown {what} '{n}' (known: {', '.join(table_)})")
    if not out:
        raise ValueError(f"no {what} selected")
    return list(dict.fromkeys(out))


def parse(argv):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--gemmscope", default="build/gemmscope", help="the gemmscope binary")
    ap.add_argument("--models", default="check", help="comma list of models, or tune / check / all (" +
                    ", ".join(MODELS) + ")")
    ap.add_argument("--forms", default="eager,compile", help="comma list of: " + ", ".join(FORMS))
    ap.add_argument("--precisions", default="bf16,fp8", help="comma list of: " + ", ".join(PRECISIONS))
    ap.add_argument("--seconds", type=float, default=5.0, help="continuous steps before timing (>= 3)")
    ap.add_argument("--timed-steps", type=int, default=8, help="steps timed by the host (synchronized)")
    ap.add_argument("--steps", type=int, default=4, help="steps profiled for the per-group kernel times")
    ap.add_argument("--fp8-quant", choices=["compile", "eager"], default="compile",
                    help="the FP8 linear's casts: compiled (fused, close to TE's) or eager ops")
    ap.add_argument("--no-clip", action="store_true", help="no gradient clipping (gemmscope --grad-clip off)")
    ap.add_argument("--seed", type=int, default=1234, help="the MoE routing's draw")
    ap.add_argument("--gemmscope-args", default="", help="extra gemmscope flags for every run (space separated)")
    ap.add_argument("--json", help="write the rows here (after every case)")
    ap.add_argument("--out", help="write the table here (markdown)")
    ap.add_argument("--keep-results", metavar="DIR",
                    help="keep gemmscope's result files (MODEL_FORM.json) in this folder (default: a temporary one)")
    ap.add_argument("--dry-run", action="store_true", help="print the cases and gemmscope's command lines; no GPU")
    ap.add_argument("--self-test", action="store_true", help="check the non-GPU parts on synthetic data")
    a = ap.parse_args(argv)
    a.model_list = select(a.models, MODELS, "model")
    a.form_list = select(a.forms, GEMMSCOPE_FORM, "form")
    a.precision_list = select(a.precisions, PRECISIONS, "precision")
    if a.seconds < 3 or a.timed_steps < 1 or a.steps < 1:
        raise ValueError("--seconds must be >= 3 (steady state), --timed-steps and --steps >= 1")
    if a.keep_results and not os.path.isdir(a.keep_results):
        raise ValueError(f"--keep-results: {a.keep_results} is not a folder")
    return a


def progress(msg):
    print(f"[validate_model_step {time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)


def dry_run(a):
    total = 0.0
    for name in a.model_list:
        m = MODELS[name]
        p = params(m)
        # BF16 params, grads, AdamW states: 8 bytes per parameter, before activations.
        print(f"{name} ({m['set']}): {m['run']} of {m['layers']} layers, {m['batch']} x {m['seq']} tokens, "
              f"{p / 1e9:.2f}e9 parameters trained ({params(m, m['layers']) / 1e9:.2f}e9 in the full model), "
              f"{8 * p / 2**30:.0f} GiB of weights, gradients and states")
        for form in a.form_list:
            for prec in a.precision_list:
                print(f"  PyTorch {form} {prec}")
                total += a.seconds + 8 + (40 if form == "compile" else 0)
            cmd = gemmscope_cmd(a.gemmscope, m, form, a.precision_list, not a.no_clip,
                                f"<tmp>/{name}_routing.json", f"<tmp>/{name}_{form}.json", a.gemmscope_args.split())
            print("  gemmscope: " + shlex.join(cmd))
            total += 25
    print(f"about {total / 60:.0f} min of GPU time (rough: steady-state seconds, compile ~40 s per compiled "
          f"case, ~25 s per gemmscope run)")
    return 0


def self_test():
    """The non-GPU parts on synthetic data; returns the number of failures."""
    fails = 0

    def check(cond, what):
        nonlocal fails
        if not cond:
            fails += 1
            print(f"self-test FAILED: {what}", file=sys.stderr)

    names = {
        "nvjet_sm90_tst_256x128_64x4_2x1_v_bz_coopA_TNT": "gemm",
        "cudnn_generated_fort_native_sdpa_sm90_flash_fprop_wgmma_f16_knob_3": "attention",
        "void at::native::(anonymous namespace)::multi_tensor_apply_kernel<FusedOptimizerTensorListMetadata<4>, "
        "FusedAdamMathFunctor<c10::BFloat16, 4, (ADAM_MODE)1, false>>": "optimizer",
        "void at::native::(anonymous namespace)::cunn_SoftMaxForward<4, float, float, float, LogSoftMaxForwardEpilogue>":
            "loss",
        "void at::native::(anonymous namespace)::nll_loss_forward_reduce_cuda_kernel_2d<float, float, long>": "loss",
        "void at::native::compute_grad_weight<c10::BFloat16, long>": "embedding",
        "triton_poi_fused_add_mul_0": "other",
        "void at::native::vectorized_elementwise_kernel<4, at::native::CUDAFunctor_add<c10::BFloat16>>": "other",
    }
    for n, want in names.items():
        check(classify_name(n) == want, f"classify_name({n[:50]}...) = {classify_name(n)}, want {want}")
    # One synthetic step: the loss's backward copies and the embedding's backward add fall in their
    # windows by launch time, whatever their names.
    ev = [
        {"cat": "user_annotation", "name": "gs::embedding", "ts": 0, "dur": 10},
        {"cat": "user_annotation", "name": "gs::loss", "ts": 100, "dur": 10},
        {"cat": "user_annotation", "name": "gs::mark:backward_start", "ts": 120, "dur": 1},
        {"cat": "user_annotation", "name": "gs::mark:loss_bwd_end", "ts": 150, "dur": 0},
        {"cat": "user_annotation", "name": "gs::mark:embedding_bwd", "ts": 300, "dur": 0},
        {"cat": "user_annotation", "name": "gs::mark:backward_end", "ts": 320, "dur": 0},
        {"cat": "user_annotation", "name": "gs::optimizer", "ts": 330, "dur": 50},
    ]
    kernels = [(5, "indexSelectLargeIndex", 100), (50, "nvjet_sm90_tst_x", 1000), (105, "vectorized_elementwise_kernel", 200),
               (130, "vectorized_elementwise_kernel", 300), (200, "nvjet_sm90_tst_y", 2000),
               (310, "vectorized_elementwise_kernel", 400), (340, "multi_tensor_apply_kernel", 500),
               (250, "triton_poi_fused_mul_1", 50), (260, "cudnn_generated_fort_native_sdpa_bprop", 700)]
    for i, (t, name, dur) in enumerate(kernels):
        ev.append({"cat": "cuda_runtime", "name": "cudaLaunchKernel", "ts": t, "dur": 1, "args": {"correlation": i}})
        ev.append({"cat": "kernel", "name": name, "ts": 1000 + 10 * i, "dur": dur, "args": {"correlation": i}})
    g = group_times({"traceEvents": ev}, 1)
    want = {"embedding": 0.5, "gemm": 3.0, "loss": 0.5, "optimizer": 0.5, "other": 0.05, "attention": 0.7}
    for k, v in want.items():
        check(abs(g[k] - v) < 1e-9, f"group_times {k} = {g[k]}, want {v}")
    top = g["top"]["gemm"]
    check([t[0] for t in top] == ["nvjet_sm90_tst_y", "nvjet_sm90_tst_x"] and abs(top[0][1] - 2.0) < 1e-9
          and top[0][2] == 1, f"group_times top gemm kernels = {top}")
    # The table, the speedups and the bars.
    rows = [{"model": "m", "set": "check", "layers": 2, "form": "eager", "precision": "bf16",
             "real": {"step_ms": 100.0, "groups": {x: 10.0 for x in GROUPS}, "idle_ms": 1.0},
             "pred": {"step_ms": 103.0, "groups": {x: 10.0 for x in GROUPS}, "host": 0.5, "speedup": None}},
            {"model": "m", "set": "check", "layers": 2, "form": "eager", "precision": "fp8",
             "real": {"step_ms": 82.0, "groups": {}, "idle_ms": 1.0},
             "pred": {"step_ms": 87.0, "groups": {}, "host": 0.5, "speedup": 103.0 / 87.0}}]
    for r in rows:
        r["error_pct"] = pct(r["pred"]["step_ms"], r["real"]["step_ms"])
    sp = fp8_speedups(rows)
    check(len(sp) == 1 and abs(sp[0]["real"] - 100.0 / 82.0) < 1e-12, f"fp8 speedup {sp}")
    check(not judge(rows, sp), "the FP8 step +6.1% misses")
    check(rows[0]["pass"] and not rows[1]["pass"] and sp[0]["pass"], "step bars (+3.0% passes; speedup -2.9% passes)")
    text = table(rows, sp, "test")
    check("| m | check | 2 | eager | bf16 | 100.00 | 103.00 | +3.0% |" in text, "table row")
    check("MISS" in text, "a miss is marked")
    # gemmscope's step block, read as h39core writes it.
    r = {"step": {"modes": {GEMMSCOPE_MODE: {"BF16": {
        "step_ms": 50.0, "gpu_ms": 49.0, "host_ms": 10.0, "host_bound": False,
        "breakdown": {"gemm": 30.0, "attention": 5.0, "other": 8.0, "loss": 3.0, "optimizer": 2.0, "recompute": 0.0,
                      "host": 1.0},
        "groups": [{"name": "embedding fwd", "total_ms": 0.5}, {"name": "embedding bwd", "total_ms": 1.0},
                   {"name": "RoPE fwd", "total_ms": 0.7}],
        "speedup_vs_bf16": {"step": 1.0}}}}}}
    s = gemmscope_step(r, "BF16")
    check(s["groups"]["embedding"] == 1.5 and s["groups"]["other"] == 6.5, f"step block groups {s['groups']}")
    try:
        gemmscope_step({}, "BF16")
        check(False, "a JSON without a step block is refused")
    except SchemaError:
        pass
    # Arguments.
    for bad in (["--models", "nope"], ["--forms", "jit"], ["--seconds", "1"], ["--precisions", ""]):
        try:
            parse(bad)
            check(False, f"{bad} refused")
        except ValueError:
            pass
    check(parse(["--models", "check"]).model_list == [k for k, v in MODELS.items() if v["set"] == "check"], "sets")
    per = draw_assignment(64, 8, 2, 1)
    check(sum(len(x) for x in per) == 128 and all(len({e for e in range(8) if any(t == tok for t, _ in per[e])}) == 2
                                                  for tok in range(64)), "routing: each token on top_k experts")
    cmd = gemmscope_cmd("gs", MODELS["mixtral-8x7b"], "compile", ["bf16", "fp8"], True, "r.json", "o.json")
    check("--routing" in cmd and "file:r.json" in cmd and "BF16,FP8Current" in cmd and "compile" in cmd, "command")
    print(f"self-test: {'ok' if not fails else str(fails) + ' failed'}", file=sys.stderr)
    return fails


def main(argv):
    try:
        a = parse(argv)
    except ValueError as e:
        print(f"validate_model_step: {e}", file=sys.stderr)
        return 2
    if a.self_test:
        return 1 if self_test() else 0
    if a.dry_run:
        return dry_run(a)
    if not os.access(a.gemmscope, os.X_OK):
        print(f"validate_model_step: {a.gemmscope} is not an executable gemmscope binary", file=sys.stderr)
        return 2
    import torch
    if not torch.cuda.is_available():
        print("validate_model_step: no CUDA GPU visible to PyTorch", file=sys.stderr)
        return 2
    if "fp8" in a.precision_list and torch.cuda.get_device_capability() < (8, 9):
        print("validate_model_step: FP8 needs compute capability 8.9 or newer (--precisions bf16)", file=sys.stderr)
        return 2
    dev = torch.cuda.get_device_name()
    progress(f"{dev}; torch {torch.__version__}; {len(a.model_list)} models x {len(a.form_list)} forms x "
             f"{len(a.precision_list)} precisions")
    rows = []
    from torch.nn.attention import SDPBackend, sdpa_kernel

    def save():
        fp8 = fp8_speedups(rows)
        judge(rows, fp8)
        if a.json:
            with open(a.json, "w") as fh:
                json.dump({"device": dev, "torch": torch.__version__, "bars_pct": {"step": STEP_BAR_PCT,
                           "fp8_speedup": FP8_BAR_PCT}, "gemmscope_common": GEMMSCOPE_COMMON,
                           "gemmscope_form": GEMMSCOPE_FORM, "clip": not a.no_clip, "rows": rows, "fp8": fp8},
                          fh, indent=1)
        return fp8

    with tempfile.TemporaryDirectory() as tmp, sdpa_kernel(SDPBackend.CUDNN_ATTENTION):
        sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
        for name in a.model_list:
            m = MODELS[name]
            per_expert, routing = None, os.path.join(tmp, f"{name}_routing.json")
            if m.get("moe"):
                e = m["moe"]
                per_expert = draw_assignment(m["batch"] * m["seq"], e["experts"], e["top_k"], a.seed)
                with open(routing, "w") as fh:
                    json.dump([len(x) for x in per_expert], fh)
            for form in a.form_list:
                case_rows = []
                for prec in a.precision_list:
                    progress(f"{name} {form} {prec}: PyTorch ({m['run']} layers, {m['batch']} x {m['seq']} tokens)")
                    row = {"model": name, "set": m["set"], "layers": m["run"], "form": form, "precision": prec}
                    try:
                        row["real"] = torch_case(torch, m, prec, form, per_expert, a, tmp)
                        progress(f"  real step {row['real']['step_ms']:.2f} ms "
                                 f"({row['real']['sm_mhz'] or 0:.0f} MHz, peak {row['real']['peak_gib']:.0f} GiB)")
                    except Exception as e:  # out of memory, a form PyTorch cannot run here: said, not hidden
                        row["why"] = "PyTorch: " + (str(e).splitlines()[0][:160] if str(e) else type(e).__name__)
                        progress(f"  {row['why']}")
                        torch.cuda.empty_cache()
                    case_rows.append(row)
                    rows.append(row)
                out = os.path.join(a.keep_results or tmp, f"{name}_{form}.json")
                cmd = gemmscope_cmd(a.gemmscope, m, form, a.precision_list, not a.no_clip, routing, out,
                                    a.gemmscope_args.split())
                progress(f"{name} {form}: gemmscope")
                try:
                    run_gemmscope(cmd)
                    with open(out) as fh:
                        r = json.load(fh)
                    for row in case_rows:
                        row["gemmscope_cmd"] = shlex.join(cmd)
                        row["pred"] = gemmscope_step(r, PRECISIONS[row["precision"]])
                        row["error_pct"] = pct(row["pred"]["step_ms"], (row.get("real") or {}).get("step_ms"))
                        progress(f"  {row['precision']}: predicted {fmt(row['pred']['step_ms'])} ms, "
                                 f"error {fmt(row['error_pct'], '+.1f')}%")
                except (RuntimeError, SchemaError, OSError, ValueError) as e:
                    for row in case_rows:
                        row["why"] = (row.get("why", "") + " gemmscope: " + str(e)[:200]).strip()
                    progress(f"  gemmscope: {e}")
                save()
    fp8 = save()
    ok = judge(rows, fp8)
    text = table(rows, fp8, dev)
    print(text)
    print(f"\n{dev}: check set {'within' if ok else 'NOT within'} the bars (step +-{STEP_BAR_PCT:g}%, FP8 step "
          f"speedup +-{FP8_BAR_PCT:g}%)")
    if a.out:
        with open(a.out, "w") as fh:
            fh.write(text + "\n")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
