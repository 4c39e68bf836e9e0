#!/usr/bin/env python3
"""How much power do a training step's non-GEMM kernels draw, against --step-other-ms's stand-in?

--step-other-ms replaces a step's non-GEMM kernels with a stand-in kernel of the same duration.
What decides the GEMMs' clocks is the power those kernels draw, so this runs each kind in a loop
for 4 s and prints its time, bandwidth, mean power (NVML, sampled every 10 ms over the last 1.5 s)
and mean SM clock: an idle GPU, a plain copy (the first stand-in, before 0e5677b), the FP8 step's
fused amax/cast/transpose (torch.compile, as bench/validate_step.py runs it), a LayerNorm and a
GELU of the BF16 step (the stand-in now runs a GELU), and a BF16 GEMM for scale.

  python3 bench/power_probe.py
"""
import ctypes
import sys
import threading
import time

import torch


def main():
    nvml = ctypes.CDLL("libnvidia-ml.so.1")
    if nvml.nvmlInit_v2() != 0:
        print("power_probe: NVML not available", file=sys.stderr)
        return 2
    handle = ctypes.c_void_p()
    nvml.nvmlDeviceGetHandleByIndex_v2(torch.cuda.current_device(), ctypes.byref(handle))

    def read(fn, *args):
        v = ctypes.c_uint()
        return v.value if fn(handle, *args, ctypes.byref(v)) == 0 else None

    def run(name, fn, bytes_per_call, seconds=4.0):
        for _ in range(3):  # compile, allocate
            fn()
        torch.cuda.synchronize()
        samples, stop = [], threading.Event()

        def sampler():
            while not stop.is_set():
                samples.append((time.time(), read(nvml.nvmlDeviceGetPowerUsage),
                                read(nvml.nvmlDeviceGetClockInfo, 1)))  # mW, NVML_CLOCK_SM
                time.sleep(0.01)

        t = threading.Thread(target=sampler, daemon=True)
        t0 = time.time()
        t.start()
        s, e = torch.cuda.Event(True), torch.cuda.Event(True)
        calls, first = 0, None
        while time.time() - t0 < seconds:
            if first is None and time.time() - t0 > 1.5:
                torch.cuda.synchronize()
                s.record()
                first = calls
            for _ in range(10):
                fn()
                calls += 1
            torch.cuda.synchronize()
        e.record()
        torch.cuda.synchronize()
        stop.set()
        t.join()
        ms = s.elapsed_time(e) / max(calls - first, 1)
        late = [(p, c) for ts, p, c in samples if ts - t0 > seconds - 1.5 and p is not None and c is not None]
        watts = sum(p for p, _ in late) / len(late) / 1000
        mhz = sum(c for _, c in late) / len(late)
        tbs = f"{bytes_per_call / ms / 1e9:.2f}" if bytes_per_call else "-"
        print(f"| {name} | {ms:.3f} | {tbs} | {watts:.0f} | {mhz:.0f} |", flush=True)

    torch.manual_seed(0)
    BF = torch.bfloat16
    x = torch.randn(64 << 20, device="cuda", dtype=BF)
    y = torch.empty_like(x)
    big = torch.randn(15872, 16384, device="cuda", dtype=BF)
    small = torch.randn(15872, 4096, device="cuda", dtype=BF)
    E4M3 = torch.float8_e4m3fn

    def quant_dual(t, dtype):  # bench/validate_step.py's FP8 cast: amax, rowwise and transposed copies
        fmax = torch.finfo(dtype).max
        amax = t.abs().amax().float().clamp(min=1e-12)
        scale = fmax / amax
        q = (t.float() * scale).clamp(-fmax, fmax).to(dtype)
        return q, q.t().contiguous(), scale.reciprocal()

    qd = torch.compile(quant_dual, dynamic=False)
    ln = torch.nn.LayerNorm(4096, device="cuda", dtype=BF)
    m = torch.randn(8192, 8192, device="cuda", dtype=BF)
    print(f"device: {torch.cuda.get_device_name()}; torch {torch.__version__}")
    print("| kernel loop | ms per call | TB/s | mean power (W) | mean SM clock (MHz) |")
    print("|---|---|---|---|---|")
    with torch.no_grad():
        run("idle (sleep kernel)", lambda: torch.cuda._sleep(1000000), 0)
        run("copy 128 MB (the first --step-other-ms stand-in)", lambda: y.copy_(x), 2 * x.numel() * 2)
        # amax read (2 B) + cast read (2 B) + two FP8 writes (1 B each) per element
        run("FP8 amax + cast + transpose, compiled, 15872x16384", lambda: qd(big, E4M3), big.numel() * 6)
        run("LayerNorm 15872x4096", lambda: ln(small), small.numel() * 4)
        run("GELU 15872x16384", lambda: torch.nn.functional.gelu(big), big.numel() * 4)
        run("BF16 GEMM 8192^3", lambda: torch.mm(m, m), 0)
        # An MoE layer's data movement (bench/validate_moe.py's DeepSeek-V3 EP 8 rank: 33,240 routed
        # rows of 7168): dispatch by index, combine by index_add, the gather's backward
        # (index_put with accumulate), the gate product and SiLU x up on the experts' rows.
        R, H, F2 = 33240, 7168, 4096
        xr = torch.randn(R, H, device="cuda", dtype=BF)
        yr = torch.randn(R, H, device="cuda", dtype=BF)
        gu = torch.randn(R, F2, device="cuda", dtype=BF)
        gate = torch.rand(R, 1, device="cuda", dtype=BF)
        perm = torch.randperm(R, device="cuda")
        run("MoE dispatch: gather rows by index, 33240x7168", lambda: xr[perm], 2 * xr.numel() * 2)
        run("MoE combine: zeros + index_add, 33240x7168", lambda: torch.zeros_like(xr).index_add_(0, perm, yr),
            4 * xr.numel() * 2)
        run("MoE gather backward: index_put accumulate, 33240x7168",
            lambda: torch.zeros_like(xr).index_put_((perm,), yr, accumulate=True), 4 * xr.numel() * 2)
        run("MoE gate product, 33240x7168", lambda: yr * gate, 2 * yr.numel() * 2)
        run("MoE SiLU x up, 33240x(2x2048)", lambda: torch.nn.functional.silu(gu[:, :F2 // 2]) * gu[:, F2 // 2:],
            (gu.numel() + gu.numel() // 2) * 2)
    return 0


if __name__ == "__main__":
    sys.exit(main())
