#!/usr/bin/env python3
"""Peer check for fused attention: gemmscope's cuDNN SDPA (attention_bench) vs PyTorch's SDPA.

One command on a GPU node with PyTorch (CUDA) and a gemmscope CUDA build with cuDNN attention
(not a CI test):

    python3 bench/attention_peer.py --bin build/attention_bench [--json attention_peer.json]

For a handful of training layers (hidden 2048 to 8192, MHA and GQA, sequence 2048 to 8192, causal,
BF16, head dim 128) it times the same attention three ways:

  * gemmscope: build/attention_bench (cuDNN's SDPA forward and backward graphs through
    cudnn-frontend, BSHD tensors, libcudnn loaded at run time);
  * torch cuDNN: torch.nn.functional.scaled_dot_product_attention under
    torch.nn.attention.sdpa_kernel(SDPBackend.CUDNN_ATTENTION) (PyTorch's own cuDNN, from its wheel);
  * torch flash: the same under SDPBackend.FLASH_ATTENTION (FlashAttention-2 kernels in PyTorch).

PyTorch's tensors are BSHD in memory (allocated [b, s, h, d] and viewed as [b, h, s, d]), as
Transformer Engine's "bshd" layout. GQA runs with enable_gqa=True; where a backend refuses it the
cell says so (no silent fallback). Forward: one SDPA call; backward: torch.autograd.grad of the
output with a fixed dO and retain_graph, so only the attention backward runs. Times are medians
of CUDA-event-timed calls after a warm-up (calls of milliseconds: host launch time does not show).
TFLOP/s use gemmscope's count (causal halved; backward 2 x pairs x (3 d_qk + 2 d_v)). The ratio
printed is gemmscope's time over PyTorch's (1.00: same time; < 1: gemmscope faster).
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile

# name, hidden, heads, kv heads, batch, sequence (head dim = hidden / heads = 128 in all)
LAYERS = [
    ("h2048-mha-s2048", 2048, 16, 16, 4, 2048),
    ("h2048-gqa-s4096 (Qwen3-1.7B-like)", 2048, 16, 8, 2, 4096),
    ("h4096-mha-s4096", 4096, 32, 32, 2, 4096),
    ("h4096-gqa-s8192 (Llama-3-8B-like)", 4096, 32, 8, 1, 8192),
    ("h6144-mha-s2048 (GPT-NeoX-20B-like)", 6144, 48, 48, 2, 2048),
    ("h8192-gqa-s4096 (Llama-3-70B-like)", 8192, 64, 8, 1, 4096),
]


def flops(b, s, h, dqk, dv, causal):
    pairs = b * h * s * s * (0.5 if causal else 1.0)
    return 2 * pairs * (dqk + dv), 2 * pairs * (3 * dqk + 2 * dv)


def run_gemmscope(binary, b, s, h, hkv, d, causal, iters, warmup):
    with tempfile.TemporaryDirectory() as tmp:
        out = os.path.join(tmp, "a.json")
        cmd = [binary, "--batch", str(b), "--seq", str(s), "--heads", str(h), "--kv-heads", str(hkv),
               "--head-dim", str(d), "--causal" if causal else "--no-causal", "--iters", str(iters),
               "--warmup", str(warmup), "--json", out]
        p = subprocess.run(cmd, capture_output=True, text=True)
        if p.returncode != 0:
            return {"error": (p.stderr.strip() or p.stdout.strip() or f"exit {p.returncode}").splitlines()[-1]}
        with open(out) as f:
            r = json.load(f)
        return {"fwd_ms": r["forward"]["median_ms"], "bwd_ms": r["backward"]["median_ms"], "cudnn": r["cudnn"]}


def median(xs):
    xs = sorted(xs)
    n = len(xs)
    return xs[n // 2] if n % 2 else 0.5 * (xs[n // 2 - 1] + xs[n // 2])


def run_torch(backend_name, b, s, h, hkv, d, causal, iters, warmup):
    import torch
    import torch.nn.functional as F
    from torch.nn.attention import SDPBackend, sdpa_kernel

    backend = getattr(SDPBackend, backend_name)
    dev = "cuda"
    g = torch.Generator(device=dev).manual_seed(1)

    def bshd(heads):  # [b, s, h, d] in memory, viewed as [b, h, s, d]
        return torch.randn(b, s, heads, d, device=dev, dtype=torch.bfloat16, generator=g).transpose(1, 2)

    q = bshd(h).requires_grad_()
    k = bshd(hkv).requires_grad_()
    v = bshd(hkv).requires_grad_()
    do = bshd(h)
    kw = {"is_causal": causal}
    if hkv != h:
        kw["enable_gqa"] = True
    try:
        with sdpa_kernel([backend]):
            o = F.scaled_dot_product_attention(q, k, v, **kw)
            torch.autograd.grad(o, (q, k, v), do, retain_graph=True)
            torch.cuda.synchronize()

            def timed(fn):
                for _ in range(warmup):
                    fn()
                torch.cuda.synchronize()
                ms = []
                for _ in range(iters):
                    a = torch.cuda.Event(enable_timing=True)
                    z = torch.cuda.Event(enable_timing=True)
                    a.record()
                    fn()
                    z.record()
                    z.synchronize()
                    ms.append(a.elapsed_time(z))
                return median(ms)

            # Grad enabled: the training forward (it also writes the softmax statistics).
            fwd = timed(lambda: F.scaled_dot_product_attention(q, k, v, **kw))
            bwd = timed(lambda: torch.autograd.grad(o, (q, k, v), do, retain_graph=True))
        return {"fwd_ms": fwd, "bwd_ms": bwd}
    except RuntimeError as e:
        return {"error": str(e).strip().splitlines()[0][:160]}
    finally:
        del q, k, v, do
        torch.cuda.empty_cache()


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--bin", default="build/attention_bench")
    ap.add_argument("--json", help="write every number here")
    ap.add_argument("--iters", type=int, default=30)
    ap.add_argument("--warmup", type=int, default=10)
    ap.add_argument("--no-causal", action="store_true", help="no mask (default: causal, as LLM training)")
    args = ap.parse_args()
    causal = not args.no_causal
    try:
        import torch
    except ImportError:
        print("attention_peer: PyTorch is not installed", file=sys.stderr)
        return 1
    if not torch.cuda.is_available():
        print("attention_peer: PyTorch sees no CUDA device", file=sys.stderr)
        return 1
    print(f"device: {torch.cuda.get_device_name()}, torch {torch.__version__}, "
          f"torch's cuDNN {torch.backends.cudnn.version()}")
    rows = []
    for name, hidden, h, hkv, b, s in LAYERS:
        d = hidden // h
        ff, bf = flops(b, s, h, d, d, causal)
        row = {"layer": name, "hidden": hidden, "heads": h, "kv_heads": hkv, "batch": b, "seq": s, "head_dim": d,
               "causal": causal, "fwd_flops": ff, "bwd_flops": bf,
               "gemmscope": run_gemmscope(args.bin, b, s, h, hkv, d, causal, args.iters, args.warmup),
               "torch_cudnn": run_torch("CUDNN_ATTENTION", b, s, h, hkv, d, causal, args.iters, args.warmup),
               "torch_flash": run_torch("FLASH_ATTENTION", b, s, h, hkv, d, causal, args.iters, args.warmup)}
        rows.append(row)

    def cell(r, key, flop):
        if "error" in r:
            return f"{'n/a':>8} {'':>6}"
        return f"{r[key]:8.3f} {flop / (r[key] * 1e-3) / 1e12:6.0f}"

    def ratio(g, t, key):
        return f"{g[key] / t[key]:6.2f}" if "error" not in g and "error" not in t else f"{'n/a':>6}"

    for key, label, fl in (("fwd_ms", "forward", "fwd_flops"), ("bwd_ms", "backward", "bwd_flops")):
        print(f"\n{label} (ms, TFLOP/s; ratio = gemmscope ms / torch ms)")
        print(f"{'layer':38} {'gemmscope':>15} {'torch cuDNN':>15} {'torch flash':>15} {'/cuDNN':>6} {'/flash':>6}")
        for r in rows:
            g, c, f = r["gemmscope"], r["torch_cudnn"], r["torch_flash"]
            print(f"{r['layer']:38} {cell(g, key, r[fl])} {cell(c, key, r[fl])} {cell(f, key, r[fl])} "
                  f"{ratio(g, c, key)} {ratio(g, f, key)}")
    for r in rows:
        for who in ("gemmscope", "torch_cudnn", "torch_flash"):
            if "error" in r[who]:
                print(f"note: {r['layer']}: {who}: {r[who]['error']}")
    cudnn = next((r["gemmscope"]["cudnn"] for r in rows if "cudnn" in r["gemmscope"]), "?")
    print(f"\ngemmscope's cuDNN: {cudnn} (libcudnn.so.9 loaded at run time); all times measured, FLOPs modelled")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"schema": "gemmscope.attention_peer/1", "device": torch.cuda.get_device_name(),
                       "torch": torch.__version__, "torch_cudnn": torch.backends.cudnn.version(),
                       "gemmscope_cudnn": cudnn, "iters": args.iters, "rows": rows}, f, indent=1)
        print(f"wrote {args.json}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
