#!/usr/bin/env python3
"""Probe: does a GEMM run faster when its input was just written by the kernel before it (the
input is in L2, as in a training step where a norm, an activation or a cast produces it) than when
that kernel wrote elsewhere (the input is read from HBM, as when a stand-in streams other buffers
before the GEMM)?  Same traffic in both loops; only the producer's output buffer differs.

One command on a GPU node with PyTorch:  python3 bench/l2_producer_probe.py
Prints, per GEMM, the loop time per iteration (producer + GEMM) warm and cold, and cold/warm - 1.
"""
import argparse, time
import torch

SHAPES = {  # name: (tokens, hidden, qkv_out, ffn, gated)
    "tinyllama-1.1b": (16384, 2048, 2048 + 2 * 256, 5632, True),
    "qwen3-1.7b": (16384, 2048, 2048 + 2 * 1024, 6144, True),
    "llama3-8b": (8192, 4096, 4096 + 2 * 1024, 14336, True),
    "llama3-70b": (4096, 8192, 8192 + 2 * 1024, 28672, True),
}


def gemms(tokens, hidden, qkv, ffn, gated):
    up = 2 * ffn if gated else ffn
    # (name, M, N, K): D[M,N] = A[M,K] @ B[N,K]^T, the A operand is the freshly produced one
    return [("Fprop QKV", tokens, qkv, hidden), ("Fprop MLP-up", tokens, up, hidden),
            ("Fprop MLP-down", tokens, hidden, ffn), ("Dgrad MLP-up", tokens, hidden, up),
            ("Dgrad QKV", tokens, hidden, qkv)]


def loop_ms(producer, gemm, iters):
    s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    s.record()
    for _ in range(iters):
        producer()
        gemm()
    e.record()
    e.synchronize()
    return s.elapsed_time(e) / iters


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--iters", type=int, default=100)
    ap.add_argument("--rounds", type=int, default=4)
    ap.add_argument("--fp8", action="store_true", help="also FP8 (torch._scaled_mm, per-tensor scales)")
    a = ap.parse_args()
    dev = torch.cuda.get_device_name()
    print(f"device: {dev}; L2 {torch.cuda.get_device_properties(0).L2_cache_size >> 20} MiB")
    # warm the clocks to the power-capped steady state
    big = torch.randn(8192, 8192, device="cuda", dtype=torch.bfloat16)
    t0 = time.time()
    while time.time() - t0 < 8:
        big @ big
    torch.cuda.synchronize()
    precs = ["BF16"] + (["FP8"] if a.fp8 else [])
    print("| layer | GEMM | precision | warm ms | cold ms | cold/warm - 1 |\n|---|---|---|---|---|---|")
    for cfg, shp in SHAPES.items():
        for name, M, N, K in gemms(*shp):
            for prec in precs:
                src = torch.randn(M, K, device="cuda", dtype=torch.bfloat16)
                if prec == "BF16":
                    A = torch.empty_like(src); A2 = torch.empty_like(src)
                    B = torch.randn(N, K, device="cuda", dtype=torch.bfloat16)
                    D = torch.empty(M, N, device="cuda", dtype=torch.bfloat16)
                    gemm = lambda: torch.mm(A, B.t(), out=D)
                    warm = lambda: A.copy_(src)
                    cold = lambda: A2.copy_(src)
                else:
                    f8 = torch.float8_e4m3fn
                    A = torch.empty(M, K, device="cuda", dtype=f8); A2 = torch.empty_like(A)
                    B = torch.randn(N, K, device="cuda", dtype=torch.bfloat16).to(f8)
                    one = torch.ones((), device="cuda")
                    gemm = lambda: torch._scaled_mm(A, B.t(), scale_a=one, scale_b=one, out_dtype=torch.bfloat16,
                                                    use_fast_accum=True)
                    warm = lambda: A.copy_(src)
                    cold = lambda: A2.copy_(src)
                gemm_alone = loop_ms(lambda: None, gemm, 10)  # compile/heuristics out of the way
                w, c = [], []
                for _ in range(a.rounds):
                    w.append(loop_ms(warm, gemm, a.iters))
                    c.append(loop_ms(cold, gemm, a.iters))
                wm, cm = sorted(w)[len(w) // 2], sorted(c)[len(c) // 2]
                print(f"| {cfg} | {name} {M}x{N}x{K} | {prec} | {wm:.4f} | {cm:.4f} | {100 * (cm / wm - 1):+.2f}% |",
                      flush=True)
                del src, A, A2, B


if __name__ == "__main__":
    main()
