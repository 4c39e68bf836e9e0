#!/usr/bin/env python3
"""Validation: gemmscope's MoE-layer GEMM time against a PyTorch MoE training step.

One expert-parallel rank's MoE layer is trained in PyTorch: the router (a BF16 linear over the
rank's own tokens, softmax, top-k), the dispatch of the rows routed to the rank's experts (an index
gather standing for the all-to-all's result), the experts (gated MLPs: up, SiLU x up, down), each
run as its own F.linear, dealt round-robin over N CUDA streams as gemmscope's `--grouped streams:N`
runs them (Transformer Engine's GroupedLinear on Hopper), the shared experts over the rank's tokens,
and the weighted combine (index_add); with --grouped-autograd the BF16 experts instead run as
Transformer Engine's GroupedLinear runs them (one autograd node per projection: every expert's GEMM
back to back in each pass, the activation once over all rows). The step is captured in a CUDA graph and replayed (--eager:
run eagerly; a Python step is host-bound with many small experts, which serializes their
kernels). Continuous steps for --seconds (steady state), then --steps profiled with
torch.profiler. The step's GEMM time is the time the GPU had a GEMM kernel running
(the union of their intervals: expert GEMMs on several streams overlap, so the sum of their
durations would count the overlap twice); the sum is reported beside it.

The routing is drawn here (each token picks top_k distinct experts uniformly, over tokens x EP
ranks), written as a counts file and handed to gemmscope (`--routing file:`), so both run the same
rows per expert on the busiest rank. gemmscope measures the same layer (`--mode pre-quantized`: the
GEMM kernels alone, as the PyTorch step's GEMM kernels are) and its MoE GEMMs are summed: router,
experts, shared experts. PyTorch's autograd writes BF16 weight gradients (beta 0), so gemmscope runs
with `--wgrad-output bf16` here (its default accumulates into an FP32 main gradient, as Megatron does).

  BF16:      F.linear in BF16                                     vs gemmscope BF16
  FP8Block:  torch._scaled_mm with 1x128 activation/gradient and 128x128 weight scales, E4M3, as
             DeepSeek-V3 trains (Wgrad: 1x128 x 1x128), where this PyTorch build has it; otherwise
             the row says which part PyTorch could not run       vs gemmscope FP8Block
  Quantization kernels differ (PyTorch eager ops vs gemmscope's), so only GEMM kernels are compared.

One command on a GPU node with PyTorch (not a CI test):

  python3 bench/validate_moe.py --gemmscope build/gemmscope [--config deepseek-v3-ep8,qwen3-30b-a3b] [--json out.json]

gemmscope runs twice: back to back and with --step-other-ms set to the step's own non-GEMM kernel
time (the step's context, as bench/validate_step.py does). The bar is judged (--judge kernels, the
default) on the second run's own kernel records: the summed durations of its GEMM kernels, kernel
time against the step's kernel time. Its event-timed cells hold the gaps between the experts'
launches besides (--judge events judges those). With --streams above 1 the step's busy time and a
sum of kernel durations differ by the overlap: judge kernels with --streams 1. --per-pass (with
--streams 1) splits the GEMM kernel time per pass: PyTorch's Fprop is the forward alone, its Dgrad
the forward and backward without weight gradients minus that, its Wgrad the whole step minus that;
gemmscope's are its cells' kernel records summed per pass.

Exit status: 0 when every compared cell is within --bar (default 5%), 1 otherwise, 2 bad usage.
"""
import argparse
import json
import os
import random
import subprocess
import sys
import tempfile
import time

import gs_result  # bench/gs_result.py: g["results"] for any schema
from validate_step import ClockSampler, classify

CONFIGS = {
    # DeepSeek-V3's MoE layer as one rank of 8-way expert parallelism sees it: 32 of 256 experts
    # (gated FFN 2048), top-8, one shared expert, 4096 tokens per rank.
    "deepseek-v3-ep8": dict(hidden=7168, ffn=2048, experts=256, top_k=8, shared=1, ep=8, tokens=4096, heads=128),
    # Qwen3-30B-A3B's MoE layer on one GPU: 128 experts of 768 (gated), top-8, 4096 tokens.
    "qwen3-30b-a3b": dict(hidden=2048, ffn=768, experts=128, top_k=8, shared=0, ep=1, tokens=4096, heads=32),
    # Check layers, never used to develop the step context's stand-ins: Mixtral-8x7B's MoE layer on
    # one GPU (8 experts of 14336, top-2: large, power-capped GEMMs) and DeepSeek-V2-Lite's (64
    # experts of 1408, top-6, two shared experts: small ones).
    "mixtral-8x7b": dict(hidden=4096, ffn=14336, experts=8, top_k=2, shared=0, ep=1, tokens=4096, heads=32),
    "deepseek-v2-lite": dict(hidden=2048, ffn=1408, experts=64, top_k=6, shared=2, ep=1, tokens=4096, heads=16),
}
MOE_OPS = ("router", "expert_up", "expert_down", "shared_up", "shared_down")


def draw_routing(c, seed):
    """Counts per expert over the EP group (random: each token picks top_k distinct experts), the
    busiest rank (the first with the most rows) and its experts' counts."""
    rng = random.Random(seed)
    E, k = c["experts"], c["top_k"]
    counts = [0] * E
    for _ in range(c["tokens"] * c["ep"]):
        for e in rng.sample(range(E), k):
            counts[e] += 1
    local = E // c["ep"]
    rank_rows = [sum(counts[r * local:(r + 1) * local]) for r in range(c["ep"])]
    busiest = rank_rows.index(max(rank_rows))
    return counts, busiest, counts[busiest * local:(busiest + 1) * local]


def fp8_block_ops(torch):
    """Block-scaled FP8 linear pieces on torch._scaled_mm (1x128 / 128x128 scales, E4M3)."""
    F = torch.nn.functional
    E4M3 = torch.float8_e4m3fn
    fmax = torch.finfo(E4M3).max

    def pad_to(t, rows, cols):
        return F.pad(t, (0, cols - t.shape[1], 0, rows - t.shape[0])) if (rows, cols) != tuple(t.shape) else t

    def up128(n):
        return (n + 127) // 128 * 128

    def q1x128(t):  # [M, K] -> q [M, K], scales [M, ceil(K/128)] with stride (1, M); partial blocks as zeros
        M, K = t.shape
        b = pad_to(t.float(), M, up128(K)).reshape(M, up128(K) // 128, 128)
        amax = b.abs().amax(-1).clamp(min=1e-12)
        s = fmax / amax
        q = (b * s.unsqueeze(-1)).clamp(-fmax, fmax).to(E4M3).reshape(M, up128(K))[:, :K].contiguous()
        return q, (1.0 / s).t().contiguous().t()

    def q128x128(w):  # [N, K] -> q [N, K], scales [ceil(N/128), ceil(K/128)] row-major
        N, K = w.shape
        b = pad_to(w.float(), up128(N), up128(K)).reshape(up128(N) // 128, 128, up128(K) // 128, 128)
        amax = b.abs().amax(dim=(1, 3)).clamp(min=1e-12)
        s = fmax / amax
        q = (b * s[:, None, :, None]).clamp(-fmax, fmax).to(E4M3).reshape(up128(N), up128(K))[:N, :K].contiguous()
        return q, (1.0 / s).contiguous()

    def mm(a, sa, bt, sbt):
        """a [M,K] (1x128 scales sa [M,K/128] col-major); bt [N,K] with scales sbt (1x128 [N,K/128] col-major
        or 128x128 [N/128,K/128] row-major). Returns a . bt^T in BF16."""
        return torch._scaled_mm(a, bt.t(), scale_a=sa, scale_b=sbt.t(), out_dtype=torch.bfloat16)

    class Fn(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x, w):
            xq, xs = q1x128(x)
            wq, ws = q128x128(w)
            ctx.save_for_backward(x, w)
            return mm(xq, xs, wq, ws)

        @staticmethod
        def backward(ctx, dy):
            x, w = ctx.saved_tensors
            dyq, dys = q1x128(dy)
            wtq, wts = q128x128(w.t().contiguous())  # Dgrad: dX = dY . W, W^T's tiles
            dx = mm(dyq, dys, wtq, wts)
            if not ctx.needs_input_grad[1]:  # a weight without a gradient (--per-pass): no Wgrad
                return dx, None
            dytq, dyts = q1x128(dy.t().contiguous())  # Wgrad: dW = dY^T . X, 1x128 along tokens
            xtq, xts = q1x128(x.t().contiguous())
            dw = mm(dytq, dyts, xtq, xts)
            return dx, dw

    return Fn


def torch_moe_step(torch, c, local_counts, precision, streams, seconds, steps, trace_dir, graph=True, passes="all",
                   grouped=False):
    """passes: "all" (the training step), "fprop+dgrad" (weights without gradients: no Wgrad GEMMs)
    or "fprop" (the forward alone). The GEMM kernel time of one pass is a difference of two of these
    (with --streams 1 the kernels run one at a time, so their durations add up)."""
    F = torch.nn.functional
    torch.manual_seed(0)
    dev, bf = "cuda", torch.bfloat16
    h, f, T, E = c["hidden"], c["ffn"], c["tokens"], c["experts"]
    n_local = len(local_counts)
    # FP8: each expert's rows padded to 16, as Megatron's Fp8Padding and gemmscope pad them.
    align = 16 if precision != "BF16" else 1
    local_counts = [(n + align - 1) // align * align for n in local_counts]
    R = sum(local_counts)
    lin = F.linear
    if precision == "FP8Block":
        Fn = fp8_block_ops(torch)
        lin = Fn.apply
    w_router = (torch.randn(E, h, device=dev, dtype=bf) * 0.02).requires_grad_()
    w_up = [(torch.randn(2 * f, h, device=dev, dtype=bf) * 0.02).requires_grad_() for _ in range(n_local)]
    w_down = [(torch.randn(h, f, device=dev, dtype=bf) * 0.02).requires_grad_() for _ in range(n_local)]
    # The shared experts as one MLP of their summed width, as gemmscope plans them (and Megatron runs them).
    sf = f * c["shared"]
    w_sup = [(torch.randn(2 * sf, h, device=dev, dtype=bf) * 0.02).requires_grad_()] if sf else []
    w_sdown = [(torch.randn(h, sf, device=dev, dtype=bf) * 0.02).requires_grad_()] if sf else []
    x_own = torch.randn(T, h, device=dev, dtype=bf, requires_grad=True)
    x_recv = torch.randn(R, h, device=dev, dtype=bf, requires_grad=True)  # the all-to-all's result
    perm = torch.randperm(R, device=dev)  # rows arrive unsorted: dispatch gathers them by expert
    gate = torch.rand(R, 1, device=dev, dtype=bf)
    dy_own = torch.randn(T, h, device=dev, dtype=bf)
    dy_recv = torch.randn(R, h, device=dev, dtype=bf)
    side = [torch.cuda.Stream() for _ in range(streams)]
    offs = [0]
    for n in local_counts:
        offs.append(offs[-1] + n)
    params = [w_router, x_own, x_recv] + w_up + w_down + w_sup + w_sdown
    if passes != "all":
        for w in [w_router] + w_up + w_down + w_sup + w_sdown:
            w.requires_grad_(False)
        params = [x_own, x_recv]

    def expert(xe, wu, wd):
        g, u = lin(xe, wu).chunk(2, dim=-1)
        return lin(F.silu(g) * u, wd)

    class GroupedLinear(torch.autograd.Function):
        """Every local expert's linear in one autograd node, as Transformer Engine's GroupedLinear
        runs them: the forward's GEMMs back to back, then in backward every expert's Dgrad, then
        every expert's Wgrad; the activation between the two projections runs once over all rows."""

        @staticmethod
        def forward(ctx, x, *ws):
            ctx.save_for_backward(x, *ws)
            out = torch.empty(x.shape[0], ws[0].shape[0], device=x.device, dtype=x.dtype)
            for e in range(n_local):
                if offs[e + 1] > offs[e]:
                    torch.mm(x[offs[e]:offs[e + 1]], ws[e].t(), out=out[offs[e]:offs[e + 1]])
            return out

        @staticmethod
        def backward(ctx, dy):
            x, *ws = ctx.saved_tensors
            dy = dy.contiguous()
            dx = torch.empty_like(x) if ctx.needs_input_grad[0] else None
            if dx is not None:
                for e in range(n_local):
                    if offs[e + 1] > offs[e]:
                        torch.mm(dy[offs[e]:offs[e + 1]], ws[e], out=dx[offs[e]:offs[e + 1]])
            dws = [None] * n_local
            for e in range(n_local):
                if ctx.needs_input_grad[1 + e]:
                    dws[e] = (dy[offs[e]:offs[e + 1]].t() @ x[offs[e]:offs[e + 1]] if offs[e + 1] > offs[e]
                              else torch.zeros_like(ws[e]))
            return (dx, *dws)

    def grouped_experts(xd):
        g, u = GroupedLinear.apply(xd, *w_up).chunk(2, dim=-1)
        return GroupedLinear.apply(F.silu(g) * u, *w_down)

    def body():
        logits = F.linear(x_own, w_router)  # the router: BF16 in every recipe
        probs = torch.softmax(logits.float(), dim=-1)
        topv, _ = probs.topk(c["top_k"], dim=-1)
        xd = x_recv[perm]  # dispatch by index
        if grouped:
            y = grouped_experts(xd) * gate
        else:
            main = torch.cuda.current_stream()
            outs = [None] * n_local
            for s in side:
                s.wait_stream(main)
            for e in range(n_local):
                if local_counts[e] == 0:
                    continue
                s = side[e % streams]
                with torch.cuda.stream(s):
                    outs[e] = expert(xd[offs[e]:offs[e + 1]], w_up[e], w_down[e])
            for s in side:
                main.wait_stream(s)
            y = torch.cat([o for o in outs if o is not None]) * gate
        combined = torch.zeros_like(x_recv).index_add(0, perm, y)  # combine
        shared = expert(x_own, w_sup[0], w_sdown[0]) if w_sup else 0
        loss = (combined * dy_recv).sum() + ((shared + x_own) * dy_own).sum() + topv.sum()
        if passes != "fprop":
            loss.backward()

    def eager_step():
        for p in params:
            p.grad = None
        body()

    step, how = eager_step, "eager"
    for _ in range(3):
        eager_step()
    torch.cuda.synchronize()
    if graph:
        # The whole step (forward, backward, every expert stream) as one CUDA graph: replays carry no
        # host launch gaps, so small experts' kernels overlap across the streams as gemmscope's
        # pre-enqueued grouped loop runs them (a Python eager step is host-bound at ~128 experts and
        # serializes them). Gradients are written in place by every replay.
        try:
            for p in params:
                p.grad = None
            side_warm = torch.cuda.Stream()
            side_warm.wait_stream(torch.cuda.current_stream())
            with torch.cuda.stream(side_warm):
                for _ in range(2):
                    for p in params:
                        p.grad = None
                    body()
            torch.cuda.current_stream().wait_stream(side_warm)
            for p in params:
                p.grad = None
            g = torch.cuda.CUDAGraph()
            with torch.cuda.graph(g):
                body()
            step, how = g.replay, "CUDA graph"
            for _ in range(3):
                step()
            torch.cuda.synchronize()
        except Exception as e:  # capture unsupported here: the eager step, said so
            torch.cuda.synchronize()
            how = "eager (graph capture failed: " + (str(e).splitlines()[0][:120] if str(e) else type(e).__name__) + ")"
            step = eager_step
    t0, n_warm = time.time(), 0
    while time.time() - t0 < seconds:
        step()
        n_warm += 1
        if n_warm % 10 == 0:
            torch.cuda.synchronize()
    from torch.profiler import ProfilerActivity, profile
    with ClockSampler(torch.cuda.current_device()) as clocks, profile(activities=[ProfilerActivity.CUDA]) as prof:
        for _ in range(steps):
            step()
        torch.cuda.synchronize()
    path = os.path.join(trace_dir, f"moe_{precision}_{os.getpid()}_{time.time_ns()}.json")
    prof.export_chrome_trace(path)
    with open(path) as fh:
        trace = json.load(fh)
    os.unlink(path)
    sums, names, spans = {"gemm": 0.0, "attention": 0.0, "other": 0.0}, {}, []
    for ev in trace.get("traceEvents", []):
        if ev.get("cat") != "kernel" or "dur" not in ev:
            continue
        cls = classify(ev.get("name", ""))
        sums[cls] += ev["dur"]
        if cls == "gemm":
            names[ev["name"]] = names.get(ev["name"], 0) + 1
            spans.append((float(ev["ts"]), float(ev["ts"]) + float(ev["dur"])))
    out = {k: v / 1000.0 / steps for k, v in sums.items()}
    # Experts on several streams run concurrently: the sum of their kernels' durations counts the
    # overlap twice (and each concurrent kernel runs slower). The time the GPU spent with a GEMM
    # running, the union of the GEMM kernels' intervals, is what gemmscope's grouped cell times.
    busy, end = 0.0, -1e30
    for a, b in sorted(spans):
        if b <= end:
            continue
        busy += b - max(a, end)
        end = b
    out["gemm_sum"] = out["gemm"]
    out["gemm"] = busy / 1000.0 / steps
    out["sm_mhz"] = clocks.mean()
    out["power_w"] = clocks.mean_power_w()
    out["temp_c"] = clocks.mean_temp_c()
    out["capped_share"] = clocks.capped_share()
    out["thermal_share"] = clocks.thermal_share()
    out["how"] = how
    out["warm_steps"] = n_warm
    out["gemm_kernels"] = names
    return out


def gemmscope_moe(binary, c, counts_path, precisions, streams, extra):
    with tempfile.TemporaryDirectory() as d:
        out = os.path.join(d, "r.json")
        cmd = [binary, "--hidden_size", str(c["hidden"]), "--intermediate_size", str(2 * c["ffn"]),
               "--num_attention_heads", str(c["heads"]), "--num_hidden_layers", "1", "--gated-mlp",
               "--num-experts", str(c["experts"]), "--top-k", str(c["top_k"]),
               "--moe-intermediate-size", str(c["ffn"]), "--shared-experts", str(c["shared"]),
               "--expert-parallel", str(c["ep"]), "--routing", "file:" + counts_path,
               "--micro_batch_size", "1", "--sequence_length", str(c["tokens"]),
               "--grouped", f"streams:{streams}", "--precisions", ",".join(precisions),
               "--mode", "pre-quantized", "--wgrad-output", "bf16",
               # The PyTorch step has no attention and no modelled work: gemmscope runs its GEMMs back
               # to back, or with --step-other-ms (in `extra`) the step's own non-GEMM time alone.
               "--step-context", "none", "-q", "--json", out] + extra
        subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL)
        with open(out) as fh:
            r = gs_result.with_results(json.load(fh))
    mode = list(r["gemms"][0]["results"].keys())[0]
    # --step-other-ms is spread over a layer's GEMMs by FLOPs; this layer also has attention
    # projections, which the PyTorch step does not run: scale the step's figure by this ratio.
    layer = sum(g["flops"] for g in r["gemms"] if g.get("scope") in ("layer", "moe_layer"))
    moe = sum(g["flops"] for g in r["gemms"] if g.get("op") in MOE_OPS)
    ratio = layer / moe if moe else 1.0
    totals, kernels, missing = {}, {}, {}
    for p in precisions:
        t, k, miss, per_pass, names, mhz, watts, temps = 0.0, 0.0, [], {}, {}, {}, {}, {}
        for g in r["gemms"]:
            if g.get("op") not in MOE_OPS:
                continue
            cell = g["results"][mode][p]
            if cell.get("status") == "ok":
                t += cell["mean_ms"]
                # The cell's own kernel records (a few iterations traced after its timed loop): the
                # GEMM kernels' summed durations, without the gaps between the experts' launches.
                kt = (cell.get("kernel_time_us") or {}).get("gemm")
                k = k + kt / 1000.0 if (k is not None and kt) else None
                ps = g.get("pass", "?").lower()
                for kr in cell.get("kernels") or []:  # the kernels gemmscope's cell ran, per pass
                    if kr.get("class") == "gemm":
                        names.setdefault(ps, {})[kr["name"]] = names.get(ps, {}).get(kr["name"], 0) + kr.get("count", 1)
                # The cell's SM clock (sampled during its timed loop), weighted by its kernel time.
                ck = (cell.get("clock") or {}).get("sm_mhz")
                if kt and ck:
                    w, s_ = mhz.get(ps, (0.0, 0.0))
                    mhz[ps] = (w + kt, s_ + kt * ck)
                tc = (cell.get("clock") or {}).get("temp_c")
                if kt and tc is not None:
                    w, s_ = temps.get(ps, (0.0, 0.0))
                    temps[ps] = (w + kt, s_ + kt * tc)
                pw = (cell.get("clock") or {}).get("power_w")
                if kt and pw:
                    w, s_ = watts.get(ps, (0.0, 0.0))
                    watts[ps] = (w + kt, s_ + kt * pw)
                if kt and per_pass.get(ps, 0.0) is not None:
                    per_pass[ps] = per_pass.get(ps, 0.0) + kt / 1000.0
                else:
                    per_pass[ps] = None
            else:
                miss.append(f"{g['pass']} {g['op']}: {cell.get('reason', cell.get('status'))}")
        totals[p], kernels[p], missing[p] = t, k, miss
        kernels[p + "/passes"] = per_pass
        kernels[p + "/names"] = names
        kernels[p + "/mhz"] = {ps: (v[1] / v[0]) for ps, v in mhz.items() if v[0] > 0}
        kernels[p + "/watts"] = {ps: (v[1] / v[0]) for ps, v in watts.items() if v[0] > 0}
        kernels[p + "/temp"] = {ps: (v[1] / v[0]) for ps, v in temps.items() if v[0] > 0}
    return totals, missing, ratio, kernels


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--gemmscope", default="build/gemmscope")
    ap.add_argument("--config", default="deepseek-v3-ep8,qwen3-30b-a3b", help="comma list of: " + ", ".join(CONFIGS))
    ap.add_argument("--seconds", type=float, default=10.0, help="continuous steps before profiling (>= 5)")
    ap.add_argument("--steps", type=int, default=20, help="profiled steps")
    ap.add_argument("--streams", type=int, default=4, help="expert streams on both sides (gemmscope --grouped streams:N)")
    ap.add_argument("--bar", type=float, default=5.0, help="allowed |gemmscope/PyTorch - 1| in percent")
    ap.add_argument("--seed", type=int, default=1234)
    ap.add_argument("--eager", action="store_true",
                    help="run the PyTorch step eagerly (default: captured in a CUDA graph, no host launch gaps)")
    ap.add_argument("--judge", choices=["kernels", "events"], default="kernels",
                    help="what the bar judges: gemmscope's GEMM kernel records (kernel time against the step's "
                         "kernel time, the default) or its event-timed cells in the step's context (kernels plus "
                         "the gaps between the experts' launches)")
    ap.add_argument("--per-pass", action="store_true",
                    help="also split the GEMM kernel time per pass: the PyTorch step is run twice more (forward "
                         "alone; forward and backward without weight gradients), each pass a difference of two "
                         "steps' GEMM kernel time (needs --streams 1, where kernel durations add up)")
    ap.add_argument("--torch-blas", choices=["default", "cublas", "cublaslt"], default="default",
                    help="the BLAS library PyTorch's F.linear runs on (torch.backends.cuda.preferred_blas_library): "
                         "its default (cuBLAS's cublasGemmEx on CUDA), or cublaslt, the library Transformer Engine "
                         "and gemmscope call (same kernels; the algorithm's configuration may differ)")
    ap.add_argument("--grouped-autograd", action="store_true",
                    help="BF16: the experts as one autograd node per projection, as Transformer Engine's GroupedLinear "
                         "runs them (forward GEMMs back to back; backward: every expert's Dgrad, then every expert's "
                         "Wgrad; the activation once over all rows) instead of per-expert F.linear interleaved with "
                         "per-expert elementwise kernels (needs --streams 1; FP8Block rows keep the per-expert step)")
    ap.add_argument("--precisions", default="BF16,FP8Block", help="comma list of: BF16, FP8Block")
    ap.add_argument("--json")
    ap.add_argument("--gemmscope-args", default="")
    a = ap.parse_args()
    names = [n.strip() for n in a.config.split(",") if n.strip()]
    bad = [n for n in names if n not in CONFIGS]
    if bad or a.seconds < 5 or a.streams < 1 or not os.access(a.gemmscope, os.X_OK) or (a.per_pass and a.streams != 1) or (a.grouped_autograd and a.streams != 1):
        print(f"validate_moe: bad usage (configs {bad or 'ok'}, --seconds >= 5, --streams >= 1, "
              f"executable --gemmscope, --per-pass and --grouped-autograd with --streams 1)", file=sys.stderr)
        return 2
    import torch
    if not torch.cuda.is_available():
        print("validate_moe: no CUDA GPU visible to PyTorch", file=sys.stderr)
        return 2
    if a.torch_blas != "default":
        torch.backends.cuda.preferred_blas_library(a.torch_blas)
    blas = str(torch.backends.cuda.preferred_blas_library()).split(".")[-1]
    dev = torch.cuda.get_device_name()
    print(f"device: {dev}; torch {torch.__version__}; {a.seconds:g} s of continuous steps, then {a.steps} profiled; "
          f"experts over {a.streams} streams on both sides; PyTorch BLAS: {blas}"
          f"{'; BF16 experts as one autograd node per projection (GroupedLinear order)' if a.grouped_autograd else ''}",
          flush=True)
    rows, ok_all = [], True
    with tempfile.TemporaryDirectory() as d:
        for n in names:
            c = CONFIGS[n]
            counts, busiest, local = draw_routing(c, a.seed)
            path = os.path.join(d, f"{n}_counts.json")
            with open(path, "w") as fh:
                json.dump(counts, fh)
            precs = [q.strip() for q in a.precisions.split(",") if q.strip() in ("BF16", "FP8Block")]
            gs, missing, ratio, _ = gemmscope_moe(a.gemmscope, c, path, precs, a.streams, a.gemmscope_args.split())
            for p in precs:
                try:
                    ga = a.grouped_autograd and p == "BF16"
                    t = torch_moe_step(torch, c, local, p, a.streams, a.seconds, a.steps, d, graph=not a.eager,
                                       grouped=ga)
                    # In the step's context: told how long the step's other (non-GEMM) kernels ran per
                    # layer, nothing about its GEMMs (as validate_step.py does; docs/step-context.md).
                    other = round(t["other"], 3)
                    gi, _, _, gk = gemmscope_moe(a.gemmscope, c, path, [p], a.streams,
                                             a.gemmscope_args.split() + ["--step-other-ms", str(round(other * ratio, 3))])
                except Exception as e:  # e.g. no block-scaled _scaled_mm in this PyTorch build
                    msg = str(e).splitlines()[0][:200] if str(e) else type(e).__name__
                    print(f"  {n:<16} {p:<9} PyTorch step could not run: {msg}", flush=True)
                    rows.append({"config": n, "precision": p, "compared": False, "why": msg})
                    continue
                split = None
                if a.per_pass:
                    # Sums of GEMM kernel durations (streams 1: nothing overlaps), one step each way.
                    t_f = torch_moe_step(torch, c, local, p, a.streams, a.seconds, a.steps, d, graph=not a.eager,
                                         passes="fprop", grouped=ga)
                    t_fd = torch_moe_step(torch, c, local, p, a.streams, a.seconds, a.steps, d, graph=not a.eager,
                                          passes="fprop+dgrad", grouped=ga)
                    f_only, f_dgrad = t_f["gemm_sum"], t_fd["gemm_sum"]
                    tp = {"fprop": f_only, "dgrad": f_dgrad - f_only, "wgrad": t["gemm_sum"] - f_dgrad}

                    def minus(x, y):  # kernel launch counts of one run less another's
                        out = {k: v - y.get(k, 0) for k, v in x.items()}
                        return {k: v for k, v in out.items() if v > 0}
                    tk = {"fprop": t_f["gemm_kernels"], "dgrad": minus(t_fd["gemm_kernels"], t_f["gemm_kernels"]),
                          "wgrad": minus(t["gemm_kernels"], t_fd["gemm_kernels"])}
                    gp = gk.get(p + "/passes") or {}
                    gn = gk.get(p + "/names") or {}
                    gm = gk.get(p + "/mhz") or {}
                    # The SM clock each side ran at: PyTorch's sampled over its profiled steps (the pass
                    # runs: Fprop alone, Fprop+Dgrad, the whole step), gemmscope's per cell.
                    tm = {"fprop": t_f["sm_mhz"], "dgrad": t_fd["sm_mhz"], "wgrad": t["sm_mhz"]}
                    tw = {"fprop": t_f["power_w"], "dgrad": t_fd["power_w"], "wgrad": t["power_w"]}
                    gw = gk.get(p + "/watts") or {}
                    gt = gk.get(p + "/temp") or {}
                    tt = {"fprop": t_f["temp_c"], "dgrad": t_fd["temp_c"], "wgrad": t["temp_c"]}
                    tcap = {"fprop": t_f["capped_share"], "dgrad": t_fd["capped_share"], "wgrad": t["capped_share"]}
                    split = {ps: {"torch_ms": tp[ps], "gemmscope_ms": gp.get(ps), "gemmscope_kernels": gn.get(ps, {}),
                                  "torch_kernels": tk[ps], "torch_sm_mhz": tm[ps], "gemmscope_sm_mhz": gm.get(ps),
                                  "torch_power_w": tw[ps], "gemmscope_power_w": gw.get(ps),
                                  "torch_temp_c": tt[ps], "gemmscope_temp_c": gt.get(ps),
                                  "torch_power_capped_share": tcap[ps],
                                  "error_pct": ((gp[ps] / tp[ps] - 1.0) * 100.0) if gp.get(ps) and tp[ps] > 0 else None}
                             for ps in ("fprop", "dgrad", "wgrad")}
                    print(f"  {n:<16} {p:<9} per pass (GEMM kernels, ms): " + "; ".join(
                        f"{ps} PyTorch {v['torch_ms']:.3f} gemmscope "
                        f"{v['gemmscope_ms'] if v['gemmscope_ms'] is not None else float('nan'):.3f} "
                        f"({v['error_pct'] if v['error_pct'] is not None else float('nan'):+.1f}%)"
                        for ps, v in split.items()), flush=True)
                    print(f"  {n:<16} {p:<9} per pass (SM clock, MHz): " + "; ".join(
                        f"{ps} PyTorch {v['torch_sm_mhz'] or float('nan'):.0f} gemmscope "
                        f"{v['gemmscope_sm_mhz'] or float('nan'):.0f}" for ps, v in split.items()), flush=True)
                    print(f"  {n:<16} {p:<9} per pass (board power, W; PyTorch: the mean over its profiled steps, "
                          f"gemmscope: its cells): " + "; ".join(
                              f"{ps} PyTorch {v['torch_power_w'] or float('nan'):.0f} gemmscope "
                              f"{v['gemmscope_power_w'] or float('nan'):.0f}" for ps, v in split.items()), flush=True)
                    print(f"  {n:<16} {p:<9} per pass (GPU temperature, C; PyTorch: mean over its profiled steps "
                          f"[share of NVML samples at the power cap], gemmscope: its cells): " + "; ".join(
                              f"{ps} PyTorch {v['torch_temp_c'] if v['torch_temp_c'] is not None else float('nan'):.1f} "
                              f"[{v['torch_power_capped_share'] if v['torch_power_capped_share'] is not None else float('nan'):.2f}] "
                              f"gemmscope {v['gemmscope_temp_c'] if v['gemmscope_temp_c'] is not None else float('nan'):.1f}"
                              for ps, v in split.items()), flush=True)
                g = gs[p]
                err = (g / t["gemm"] - 1.0) * 100.0 if t["gemm"] > 0 else float("nan")
                err_in = (gi[p] / t["gemm"] - 1.0) * 100.0 if t["gemm"] > 0 else float("nan")
                # Kernel time against kernel time: the PyTorch figure sums its GEMM kernels' busy time;
                # gemmscope's cell time also holds the gaps between the experts' launches.
                gkp = gk.get(p)
                err_k = (gkp / t["gemm"] - 1.0) * 100.0 if (gkp and t["gemm"] > 0) else float("nan")
                judged = err_k if a.judge == "kernels" else err_in
                ok = abs(judged) <= a.bar and not missing[p]
                ok_all &= ok
                rows.append({"config": n, "precision": p, "compared": True, "torch_step": t["how"], "torch_gemm_ms": t["gemm"],
                             "torch_gemm_kernel_sum_ms": t["gemm_sum"],
                             "torch_other_ms": t["other"], "torch_sm_mhz": t["sm_mhz"], "gemmscope_ms": g,
                             "error_pct": err, "step_other_ms": other, "gemmscope_step_ms": gi[p],
                             "error_step_pct": err_in, "gemmscope_kernels_ms": gkp, "error_kernels_pct": err_k,
                             "judged_on": a.judge, "pass": ok, "gemmscope_na": missing[p], "local_experts": len(local),
                             "busiest_rank": busiest, "rows": sum(local), "empty_experts": local.count(0),
                             "warm_steps": t["warm_steps"], "torch_gemm_kernels": t["gemm_kernels"],
                             "per_pass": split})
                print(f"  {n:<16} {p:<9} {len(local)} experts, {sum(local)} rows: PyTorch GEMM kernels busy "
                      f"{t['gemm']:8.3f} ms/step (sum of durations {t['gemm_sum']:.3f}; {t['how']}) | gemmscope back to back "
                      f"{g:8.3f} ms ({err:+6.2f}%) | with --step-other-ms {other:g}: {gi[p]:8.3f} ms ({err_in:+6.2f}%), "
                      f"its GEMM kernels {gkp if gkp else float('nan'):8.3f} ms ({err_k:+6.2f}%) "
                      f"{'PASS' if ok else 'FAIL'}"
                      f"{' (gemmscope N/A: ' + '; '.join(missing[p]) + ')' if missing[p] else ''}", flush=True)
    print()
    print("| config | precision | experts on the rank | rows | PyTorch step: GEMM kernels busy (ms) | its other kernels (ms) | "
          "gemmscope back to back (ms) | error | gemmscope --step-other-ms (ms) | error | its GEMM kernels (ms) | error |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|")
    for r in rows:
        if r["compared"]:
            print(f"| {r['config']} | {r['precision']} | {r['local_experts']} | {r['rows']} | {r['torch_gemm_ms']:.3f} | "
                  f"{r['torch_other_ms']:.3f} | {r['gemmscope_ms']:.3f} | {r['error_pct']:+.1f}% | "
                  f"{r['gemmscope_step_ms']:.3f} | {r['error_step_pct']:+.1f}% | "
                  f"{(r['gemmscope_kernels_ms'] or float('nan')):.3f} | {r['error_kernels_pct']:+.1f}% |")
        else:
            print(f"| {r['config']} | {r['precision']} | | | not run: {r['why']} | | | | | | | |")
    compared = [r for r in rows if r["compared"]]
    print(f"\n{dev}: {sum(r['pass'] for r in compared)} of {len(compared)} compared cells within ±{a.bar:g}% (judged on {a.judge})")
    if a.json:
        with open(a.json, "w") as fh:
            json.dump({"device": dev, "torch": torch.__version__, "torch_blas": blas,
                       "grouped_autograd": a.grouped_autograd, "bar_pct": a.bar, "rows": rows}, fh,
                      indent=1)
    return 0 if ok_all and compared else 1


if __name__ == "__main__":
    sys.exit(main())
