#!/usr/bin/env python3
"""Does the work between GEMMs change the GEMMs' own speed? (the evidence behind --step-other-ms)

A power-capped GPU running GEMMs back to back sits at its power limit; a training step runs
memory-bound kernels (norms, activations, quantization) between its GEMMs, and the GPU holds a
higher clock. This times one GEMM continuously for 3 s per condition (the last 2 s counted, CUDA
events around each GEMM only) with, after every GEMM:
  none   nothing (gemmscope's default: back to back)
  mem r  copies through HBM lasting r x the GEMM's time (memory-bound work; --step-other-ms runs
         an activation kernel instead, which draws more power: bench/power_probe.py)
  idle r a sleep kernel lasting r x the GEMM's time (an idle GPU: host gaps)
and prints the GEMM's mean time and the mean SM clock (NVML) per condition.

  python3 bench/step_context_probe.py
"""
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import torch  # noqa: E402
from validate_step import ClockSampler  # noqa: E402


def main():
    torch.manual_seed(0)
    BF = torch.bfloat16
    x = torch.randn(64 << 20, device="cuda", dtype=BF)  # 128 MB, well beyond the L2
    y = torch.empty_like(x)

    def mean_ms(fn, n=50):
        for _ in range(5):
            fn()
        s, e = torch.cuda.Event(True), torch.cuda.Event(True)
        torch.cuda.synchronize()
        s.record()
        for _ in range(n):
            fn()
        e.record()
        torch.cuda.synchronize()
        return s.elapsed_time(e) / n

    copy_ms = mean_ms(lambda: y.copy_(x), 100)
    cycles_per_ms = 1e6 / mean_ms(lambda: torch.cuda._sleep(1000000), 20)  # the sleep kernel counts SM cycles

    def shapes():
        m, k, n = 15872, 4096, 16384
        a = torch.randn(m, k, device="cuda", dtype=BF)
        b = torch.randn(k, n, device="cuda", dtype=BF)
        yield "BF16 15872x4096x16384", lambda: torch.mm(a, b)
        if torch.cuda.get_device_capability() >= (8, 9):
            aq, bq = a.to(torch.float8_e4m3fn), b.t().contiguous().to(torch.float8_e4m3fn)
            one = torch.ones((), device="cuda")
            yield "FP8 15872x4096x16384", lambda: torch._scaled_mm(aq, bq.t(), scale_a=one, scale_b=one,
                                                                   out_dtype=BF, use_fast_accum=True)
        m, k, n = 8192, 3584, 3584
        a2 = torch.randn(m, k, device="cuda", dtype=BF)
        b2 = torch.randn(k, n, device="cuda", dtype=BF)
        yield "BF16 8192x3584x3584", lambda: torch.mm(a2, b2)

    def condition(fn, between, seconds=3.0):
        batches = []
        t0 = time.time()
        with ClockSampler(torch.cuda.current_device()) as clock:
            while time.time() - t0 < seconds:
                batch = []
                for _ in range(20):
                    s, e = torch.cuda.Event(True), torch.cuda.Event(True)
                    s.record()
                    fn()
                    e.record()
                    batch.append((s, e))
                    between()
                torch.cuda.synchronize()
                batches.append((time.time() - t0, batch))
        ts = [s.elapsed_time(e) for t, b in batches if t > 1.0 for s, e in b]
        return sum(ts) / len(ts), clock.mean()

    print(f"device: {torch.cuda.get_device_name()}; torch {torch.__version__}; 128 MB copy {copy_ms:.3f} ms")
    print("| GEMM | after each GEMM | GEMM ms | vs back to back | mean SM clock (MHz) |")
    print("|---|---|---|---|---|")
    for name, fn in shapes():
        quick = mean_ms(fn)
        base = None
        for kind, r in [("none", 0)] + [(k, r) for k in ("mem", "idle") for r in (0.1, 0.25, 0.5)]:
            reps = max(1, round(r * quick / copy_ms))
            cycles = int(r * quick * cycles_per_ms) if kind == "idle" else 0
            between = {"none": lambda: None,
                       "mem": lambda: [y.copy_(x) for _ in range(reps)],
                       "idle": lambda: torch.cuda._sleep(cycles)}[kind]
            ms, mhz = condition(fn, between)
            base = base or ms
            label = "nothing" if kind == "none" else f"{kind} {r:g}x"
            mhz_s = f"{mhz:.0f}" if mhz else "n/a"
            print(f"| {name} | {label} | {ms:.4f} | {base / ms:.3f}x | {mhz_s} |", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
