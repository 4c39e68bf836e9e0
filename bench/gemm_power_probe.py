#!/usr/bin/env python3
"""Does an MoE layer's GEMM time at the power cap depend on what runs between the GEMMs, or on the
GEMMs' own operands? One rank's expert GEMMs (every expert's Fprop, Dgrad and Wgrad of both
projections, BF16, GroupedLinear order) captured in a CUDA graph and replayed for --seconds, in
three variants:
  randn      operands as gemmscope fills them: activations and gradients N(0,1), weights N(0,0.02)
  step-like  the down projection's input is SiLU(g) x u of the up projection's output, and the
             gradients are N(0,1) x a U(0,1) gate, as bench/validate_moe.py's step makes them
  +other     randn, with memory-bound work between the passes (--other-ms per step: a GELU over a
             256 MiB buffer, a row gather by index, or an index_add combine)
For each: the GEMM kernels' time per step (CUDA events around each GEMM group), the SM clock, board
power and temperature (NVML). One command on a GPU node:

  python3 bench/gemm_power_probe.py [--config mixtral-8x7b|deepseek-v3-ep8] [--seconds 8]
"""
import argparse
import sys
import time

from validate_step import ClockSampler

CONFIGS = {
    "mixtral-8x7b": dict(hidden=4096, ffn=14336, experts=8, rows=1024),
    "deepseek-v3-ep8": dict(hidden=7168, ffn=2048, experts=32, rows=1039),
}


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--config", default="mixtral-8x7b", choices=sorted(CONFIGS))
    ap.add_argument("--seconds", type=float, default=8.0)
    ap.add_argument("--other-ms", type=float, default=3.2, help="memory-bound work per step in the +other variants")
    a = ap.parse_args()
    import torch
    F = torch.nn.functional
    c = CONFIGS[a.config]
    h, f, E, M = c["hidden"], c["ffn"], c["experts"], c["rows"]
    dev, bf = "cuda", torch.bfloat16
    torch.manual_seed(0)
    wu = [torch.randn(2 * f, h, device=dev, dtype=bf) * 0.02 for _ in range(E)]
    wd = [torch.randn(h, f, device=dev, dtype=bf) * 0.02 for _ in range(E)]
    x = torch.randn(E * M, h, device=dev, dtype=bf)
    # Operand sets: randn everywhere, or shaped as the step shapes them.
    act_randn = torch.randn(E * M, f, device=dev, dtype=bf)
    g_up_randn = torch.randn(E * M, 2 * f, device=dev, dtype=bf)
    g_down_randn = torch.randn(E * M, h, device=dev, dtype=bf)
    with torch.no_grad():
        up = torch.cat([x[e * M:(e + 1) * M] @ wu[e].t() for e in range(E)])
        gg, uu = up.chunk(2, dim=-1)
        act_step = (F.silu(gg) * uu).contiguous()
        gate = torch.rand(E * M, 1, device=dev, dtype=bf)
        g_down_step = (torch.randn(E * M, h, device=dev, dtype=bf) * gate).contiguous()
        # d(up) through SiLU x u, as autograd forms it from the down projection's Dgrad
        sg = torch.sigmoid(gg.float())
        dact = torch.cat([g_down_step[e * M:(e + 1) * M] @ wd[e] for e in range(E)]).float()
        g_up_step = torch.cat([dact * (sg * (1 + gg.float() * (1 - sg))) * uu.float(), dact * F.silu(gg.float())],
                              dim=-1).to(bf).contiguous()
    out_up = torch.empty(E * M, 2 * f, device=dev, dtype=bf)
    out_dn = torch.empty(E * M, h, device=dev, dtype=bf)
    dx_dn = torch.empty(E * M, f, device=dev, dtype=bf)
    dx_up = torch.empty(E * M, h, device=dev, dtype=bf)
    dwu = [torch.empty_like(w) for w in wu]
    dwd = [torch.empty_like(w) for w in wd]
    big = torch.randn(128 << 20, device=dev, dtype=bf)
    rows = torch.randn(E * M, h, device=dev, dtype=bf)
    perm = torch.randperm(E * M, device=dev)

    def gemms(act, g_dn, g_up):
        # Each pass over every expert in turn (GroupedLinear order); s: the expert's rows.
        passes = (lambda e, s: torch.mm(x[s], wu[e].t(), out=out_up[s]),       # Fprop up
                  lambda e, s: torch.mm(act[s], wd[e].t(), out=out_dn[s]),     # Fprop down
                  lambda e, s: torch.mm(g_dn[s], wd[e], out=dx_dn[s]),         # Dgrad down
                  lambda e, s: torch.mm(g_dn[s].t(), act[s], out=dwd[e]),      # Wgrad down
                  lambda e, s: torch.mm(g_up[s], wu[e], out=dx_up[s]),         # Dgrad up
                  lambda e, s: torch.mm(g_up[s].t(), x[s], out=dwu[e]))        # Wgrad up
        for gemm in passes:
            for e in range(E):
                gemm(e, slice(e * M, (e + 1) * M))

    def calib(fn):
        for _ in range(3):
            fn()
        torch.cuda.synchronize()
        s, e = torch.cuda.Event(True), torch.cuda.Event(True)
        s.record()
        for _ in range(20):
            fn()
        e.record()
        torch.cuda.synchronize()
        return s.elapsed_time(e) / 20

    others = {
        "gelu": lambda: F.gelu(big),
        "gather": lambda: rows[perm],
        "index_add": lambda: torch.zeros_like(rows).index_add_(0, perm, rows),
    }
    reps = {k: max(1, round(a.other_ms / calib(fn))) for k, fn in others.items()}

    variants = [("randn", act_randn, g_down_randn, g_up_randn, None),
                ("step-like", act_step, g_down_step, g_up_step, None)]
    variants += [(f"randn +{k} {a.other_ms:g} ms", act_randn, g_down_randn, g_up_randn, k) for k in others]
    print(f"device: {torch.cuda.get_device_name()}; torch {torch.__version__}; {a.config}: {E} experts x {M} rows, "
          f"hidden {h}, ffn {f}; {a.seconds:g} s per variant")
    print("| variant | GEMM kernels per step (ms) | SM clock (MHz) | power (W) | temperature (C) | power-capped share |")
    print("|---|---|---|---|---|---|")
    for name, act, g_dn, g_up, other in variants:
        # Steps queued back to back (the host launches far faster than the GPU runs them), events
        # around each step's GEMMs, synchronized every 16 steps: no idle gaps between steps.
        def run(seconds, times=None):
            t0 = time.time()
            while time.time() - t0 < seconds:
                evs = []
                for _ in range(16):
                    e0, e1 = torch.cuda.Event(True), torch.cuda.Event(True)
                    e0.record()
                    gemms(act, g_dn, g_up)
                    e1.record()
                    if other:
                        for _ in range(reps[other]):
                            others[other]()
                    evs.append((e0, e1))
                torch.cuda.synchronize()
                if times is not None:
                    times.extend(e0.elapsed_time(e1) for e0, e1 in evs)

        run(a.seconds * 0.5)  # steady state first
        times = []
        with ClockSampler(torch.cuda.current_device()) as clk:
            run(a.seconds * 0.5, times)
        times.sort()
        med = times[len(times) // 2]
        print(f"| {name} | {med:.3f} | {clk.mean() or float('nan'):.0f} | {clk.mean_power_w() or float('nan'):.0f} | "
              f"{clk.mean_temp_c() or float('nan'):.1f} | {clk.capped_share() if clk.capped_share() is not None else float('nan'):.2f} |",
              flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
