#!/usr/bin/env python3
"""Real 2-GPU training steps against gemmscope's parallel step for the same layout.

Runs whole-model training steps of a Llama-like transformer in torch.distributed on two GPUs of one
node, four ways: DDP, FSDP (FULL_SHARD), and tensor parallel 2 with sequence parallelism written
Megatron-style with torch.distributed's autograd collectives (tp2m) and through DTensor (tp2), each timed at steady state (CUDA events around N steps after a warm-up, the slowest rank), and
compares each with the step gemmscope predicts for that layout (`--layout dp2 --dp-sharding ddp`,
`dp2.fsdp`, `tp2`; eager PyTorch kernels, BF16). The bar is +-5% on the step time.

    torchrun --nproc_per_node 2 bench/validate_parallel_real.py --gemmscope build/gemmscope --out parallel_real
    python3 bench/validate_parallel_real.py --dry-run          # what it would run, no GPU needed

One command, a few minutes on 2 x H200 (three layouts: each ~1 min of torch steps and one gemmscope
run). --out DIR keeps everything in one folder: summary.md (the table), results.json (the rows),
and per layout the gemmscope command, its parallel JSON, its text report and stderr.

gemmscope runs once per layout on rank 0 (it measures the rank's GEMMs on GPU 0 first when it is a
CUDA build, then builds the step; with --comm its measured collectives calibrate the cluster
model). Use the same GPUs for both (nothing else running).
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile
import time

MODEL = dict(hidden=2048, ffn=5632, heads=16, kv_heads=16, layers=16, vocab=32000)


def gemmscope_cmd(a, layout, out_json):
    m = MODEL
    cmd = [a.gemmscope, "--hidden_size", str(m["hidden"]), "--intermediate_size", str(m["ffn"]),
           "--num_attention_heads", str(m["heads"]), "--num_key_value_heads", str(m["kv_heads"]),
           "--num_hidden_layers", str(m["layers"]), "--vocab_size", str(m["vocab"]), "--gated-mlp",
           "--sequence_length", str(a.seq), "--layout", layout, "--gpus", "2", "--cluster", a.cluster,
           "--step-context", "eager", "--bf16-only", "--grad-reduce-type", "bf16", "--parallel-json", out_json,
           # as the torch steps run: pure BF16 parameters and Adam states (FSDP: FP32 shards, its own
           # rule), fused AdamW, no gradient clipping
           "--param-storage", "bf16", "--optimizer", "adamw-fused", "--grad-clip", "off"]
    if a.gpu:
        cmd += ["--gpu", a.gpu]
    if a.comm:
        cmd += ["--comm"]
    return cmd


LAYOUTS = {
    "ddp": lambda a: "dp2.mb{}.gb{}.ddp".format(a.mb, 2 * a.mb * a.accum),
    "fsdp": lambda a: "dp2.mb{}.gb{}.fsdp".format(a.mb, 2 * a.mb * a.accum),
    "tp2": lambda a: "tp2.mb{}.gb{}".format(a.mb, a.mb * a.accum),
    "tp2m": lambda a: "tp2.mb{}.gb{}".format(a.mb, a.mb * a.accum),
}
# What each mode is in torch.distributed.
MODE_NOTE = {
    "ddp": "DistributedDataParallel, pure BF16, one all-reduce per step (no_sync before the last micro-batch)",
    "fsdp": "FSDP FULL_SHARD per block, FP32 shards, BF16 compute and reduction (MixedPrecision)",
    "tp2": "DTensor tensor parallel 2 + sequence parallel (torch.distributed.tensor.parallel, torchtitan's plan)",
    "tp2m": "Megatron-style tensor parallel 2 + sequence parallel written with torch.distributed's autograd "
            "collectives (all-gather / reduce-scatter on the sequence, column/row-parallel linears, "
            "vocabulary-parallel LM head and cross-entropy)",
}


def rms_norm_class(torch, nn):
    """RMSNorm as a Hugging Face Llama writes it (eager ops), shared by both model builders."""
    class RMSNorm(nn.Module):
        def __init__(self, d):
            super().__init__()
            self.w = nn.Parameter(torch.ones(d))

        def forward(self, x):
            return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-6) * self.w

    return RMSNorm


def build_model(torch, nn):
    m = MODEL
    hd = m["hidden"] // m["heads"]

    RMSNorm = rms_norm_class(torch, nn)

    class Attention(nn.Module):
        def __init__(self):
            super().__init__()
            self.q = nn.Linear(m["hidden"], m["heads"] * hd, bias=False)
            self.k = nn.Linear(m["hidden"], m["kv_heads"] * hd, bias=False)
            self.v = nn.Linear(m["hidden"], m["kv_heads"] * hd, bias=False)
            self.o = nn.Linear(m["heads"] * hd, m["hidden"], bias=False)

        def forward(self, h):
            b, s, _ = h.shape
            q = self.q(h).view(b, s, -1, hd).transpose(1, 2)  # this rank's heads under TP
            k = self.k(h).view(b, s, -1, hd).transpose(1, 2)
            v = self.v(h).view(b, s, -1, hd).transpose(1, 2)
            y = torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=True)
            return self.o(y.transpose(1, 2).reshape(b, s, -1))

    class Mlp(nn.Module):
        def __init__(self):
            super().__init__()
            self.gate = nn.Linear(m["hidden"], m["ffn"], bias=False)
            self.up = nn.Linear(m["hidden"], m["ffn"], bias=False)
            self.down = nn.Linear(m["ffn"], m["hidden"], bias=False)

        def forward(self, h):
            return self.down(torch.nn.functional.silu(self.gate(h)) * self.up(h))

    class Block(nn.Module):
        def __init__(self):
            super().__init__()
            self.n1, self.n2 = RMSNorm(m["hidden"]), RMSNorm(m["hidden"])
            self.attn, self.mlp = Attention(), Mlp()

        def forward(self, x):
            x = x + self.attn(self.n1(x))
            return x + self.mlp(self.n2(x))

    class Model(nn.Module):
        def __init__(self):
            super().__init__()
            self.emb = nn.Embedding(m["vocab"], m["hidden"])
            self.blocks = nn.ModuleList(Block() for _ in range(m["layers"]))
            self.norm = RMSNorm(m["hidden"])
            self.head = nn.Linear(m["hidden"], m["vocab"], bias=False)

        def forward(self, ids):
            x = self.emb(ids)
            for blk in self.blocks:
                x = blk(x)
            return self.head(self.norm(x))

    return Model()


def build_megatron_tp(torch, nn, rank, world):
    """Tensor parallel `world` with sequence parallelism as Megatron-LM runs it: activations between
    blocks are sequence shards; each block all-gathers the sequence, runs column-parallel QKV / gate
    / up and row-parallel O / down on its heads and FFN columns, and reduce-scatters back to the
    shard; the LM head is vocabulary-parallel with a vocabulary-parallel cross-entropy."""
    import torch.distributed.nn.functional as dnn
    m = MODEL
    hd = m["hidden"] // m["heads"]
    heads, kv, ffn, vocab = m["heads"] // world, m["kv_heads"] // world, m["ffn"] // world, m["vocab"] // world

    def gather_seq(x):  # [b, s/w, h] -> [b, s, h]
        return torch.cat(dnn.all_gather(x.contiguous()), dim=1)

    def scatter_seq(x):  # [b, s, h] partial sums -> [b, s/w, h] reduced
        parts = [c.contiguous() for c in x.chunk(world, dim=1)]
        return dnn.reduce_scatter(torch.empty_like(parts[0]), parts)

    RMSNorm = rms_norm_class(torch, nn)

    class Block(nn.Module):
        def __init__(self):
            super().__init__()
            self.n1, self.n2 = RMSNorm(m["hidden"]), RMSNorm(m["hidden"])
            self.q = nn.Linear(m["hidden"], heads * hd, bias=False)
            self.k = nn.Linear(m["hidden"], kv * hd, bias=False)
            self.v = nn.Linear(m["hidden"], kv * hd, bias=False)
            self.o = nn.Linear(heads * hd, m["hidden"], bias=False)
            self.gate = nn.Linear(m["hidden"], ffn, bias=False)
            self.up = nn.Linear(m["hidden"], ffn, bias=False)
            self.down = nn.Linear(ffn, m["hidden"], bias=False)

        def forward(self, x):
            h = gather_seq(self.n1(x))
            b, s, _ = h.shape
            q = self.q(h).view(b, s, heads, hd).transpose(1, 2)
            k = self.k(h).view(b, s, kv, hd).transpose(1, 2)
            v = self.v(h).view(b, s, kv, hd).transpose(1, 2)
            y = torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=True)
            x = x + scatter_seq(self.o(y.transpose(1, 2).reshape(b, s, -1)))
            h = gather_seq(self.n2(x))
            return x + scatter_seq(self.down(torch.nn.functional.silu(self.gate(h)) * self.up(h)))

    class Model(nn.Module):
        def __init__(self):
            super().__init__()
            self.emb = nn.Embedding(m["vocab"], m["hidden"])  # replicated; the rank embeds its sequence shard
            self.blocks = nn.ModuleList(Block() for _ in range(m["layers"]))
            self.norm = RMSNorm(m["hidden"])
            self.head = nn.Linear(m["hidden"], vocab, bias=False)  # this rank's vocabulary columns

        def forward(self, ids):  # returns the mean cross-entropy over the whole sequence
            s = ids.shape[1] // world
            x = self.emb(ids[:, rank * s:(rank + 1) * s])
            for blk in self.blocks:
                x = blk(x)
            logits = self.head(gather_seq(self.norm(x))).float().view(-1, vocab)
            # vocabulary-parallel cross-entropy (Megatron's): max, sum of exponentials and the target's
            # logit reduced over the ranks' vocabulary shards
            mx = logits.detach().max(dim=-1, keepdim=True)[0]
            torch.distributed.all_reduce(mx, op=torch.distributed.ReduceOp.MAX)
            z = logits - mx
            sumexp = dnn.all_reduce(z.exp().sum(-1))
            t = ids.view(-1) - rank * vocab
            mine = (t >= 0) & (t < vocab)
            picked = z.gather(1, t.clamp(0, vocab - 1).unsqueeze(1)).squeeze(1) * mine
            picked = dnn.all_reduce(picked)
            return (sumexp.log() - picked).mean()

    return Model()


def profile_split(torch, step, steps=2):
    """Per step on this rank, from torch.profiler: CUDA kernel time outside NCCL, NCCL kernel time,
    and the kernel count (the GPU's busy time against the step's wall time shows a host-bound step)."""
    try:
        from torch.profiler import ProfilerActivity, profile
        with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
            for _ in range(steps):
                step()
            torch.cuda.synchronize()
        comp = nccl = 0.0
        n = 0
        for e in prof.events():
            if str(getattr(e, "device_type", "")).endswith("CUDA") and e.name and not e.name.startswith("Memcpy") \
                    and not e.name.startswith("Memset"):
                us = e.time_range.elapsed_us()
                n += 1
                if "nccl" in e.name.lower():
                    nccl += us
                else:
                    comp += us
        return {"compute_kernel_ms": comp / 1e3 / steps, "nccl_kernel_ms": nccl / 1e3 / steps, "kernels": n / steps}
    except Exception as ex:  # the profile is a diagnosis; the timing stands without it
        return {"profile_error": repr(ex)}


def timed_steps(a, mode):
    import torch
    import torch.distributed as dist
    from torch import nn

    rank = dist.get_rank()
    dev = torch.device("cuda", int(os.environ.get("LOCAL_RANK", rank)))
    torch.cuda.set_device(dev)
    torch.manual_seed(0)
    # DDP and TP train in pure BF16 (parameters, gradients and Adam states), FSDP keeps FP32 shards
    # and computes and reduces in BF16 (MixedPrecision): what gemmscope assumes for eager PyTorch.
    if mode == "tp2m":
        model = build_megatron_tp(torch, nn, rank, dist.get_world_size()).to(dev, dtype=torch.bfloat16)
    else:
        model = build_model(torch, nn).to(dev, dtype=torch.float32 if mode == "fsdp" else torch.bfloat16)
    if mode in ("tp2m",):
        pass
    elif mode == "ddp":
        model = nn.parallel.DistributedDataParallel(model, device_ids=[dev.index], bucket_cap_mb=160)
    elif mode == "fsdp":
        from torch.distributed.fsdp import FullyShardedDataParallel as FSDP, MixedPrecision, ShardingStrategy
        from torch.distributed.fsdp.wrap import ModuleWrapPolicy
        blk = type(model.blocks[0])
        bf16 = MixedPrecision(param_dtype=torch.bfloat16, reduce_dtype=torch.bfloat16, buffer_dtype=torch.bfloat16)
        model = FSDP(model, sharding_strategy=ShardingStrategy.FULL_SHARD, auto_wrap_policy=ModuleWrapPolicy({blk}),
                     mixed_precision=bf16, device_id=dev, limit_all_gathers=True)
    else:
        # Tensor parallel 2 with sequence parallelism, as torchtitan plans a Llama: norms and
        # residuals on sequence shards, column-parallel QKV / gate / up, row-parallel O / down.
        from torch.distributed.device_mesh import init_device_mesh
        from torch.distributed.tensor import Replicate, Shard
        from torch.distributed.tensor.parallel import (ColwiseParallel, PrepareModuleInput, RowwiseParallel,
                                                       SequenceParallel, parallelize_module)
        mesh = init_device_mesh("cuda", (2,))
        parallelize_module(model, mesh, {
            "emb": RowwiseParallel(input_layouts=Replicate(), output_layouts=Shard(1)),
            "norm": SequenceParallel(),
            "head": ColwiseParallel(input_layouts=Shard(1), output_layouts=Replicate()),
        })
        for blk in model.blocks:
            parallelize_module(blk, mesh, {
                "n1": SequenceParallel(), "n2": SequenceParallel(),
                "attn": PrepareModuleInput(input_layouts=(Shard(1),), desired_input_layouts=(Replicate(),)),
                "attn.q": ColwiseParallel(), "attn.k": ColwiseParallel(), "attn.v": ColwiseParallel(),
                "attn.o": RowwiseParallel(output_layouts=Shard(1)),
                "mlp": PrepareModuleInput(input_layouts=(Shard(1),), desired_input_layouts=(Replicate(),)),
                "mlp.gate": ColwiseParallel(), "mlp.up": ColwiseParallel(), "mlp.down": RowwiseParallel(output_layouts=Shard(1)),
            })
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4, fused=True)
    ids = torch.randint(0, MODEL["vocab"], (a.mb, a.seq), device=dev)
    loss_fn = nn.CrossEntropyLoss()

    def step():
        import contextlib
        for i in range(a.accum):
            # DDP reduces the gradients of the last micro-batch only, as gemmscope (and Megatron) do.
            sync = model.no_sync() if mode == "ddp" and i < a.accum - 1 else contextlib.nullcontext()
            with sync:
                if mode == "tp2m":
                    loss = model(ids)
                else:
                    logits = model(ids)
                    loss = loss_fn(logits.float().view(-1, MODEL["vocab"]), ids.view(-1))
                loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)

    for _ in range(a.warmup):
        step()
    torch.cuda.synchronize()
    dist.barrier()
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    for _ in range(a.steps):
        step()
    end.record()
    torch.cuda.synchronize()
    ms = torch.tensor(start.elapsed_time(end) / a.steps, device=dev)
    dist.all_reduce(ms, op=dist.ReduceOp.MAX)
    out = ms.item()
    prof = profile_split(torch, step) if a.profile else {}
    # Give the GPU back before gemmscope measures on it: the model, its states and the allocator's cache.
    del opt, model, ids
    import gc
    gc.collect()
    torch.cuda.empty_cache()
    return out, prof


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--gemmscope", default="build/gemmscope")
    ap.add_argument("--modes", default="ddp,fsdp,tp2m,tp2", help="of: " + ", ".join(LAYOUTS))
    ap.add_argument("--profile", action="store_true", help="also profile 2 steps per mode: kernel time per rank")
    ap.add_argument("--seq", type=int, default=2048)
    ap.add_argument("--mb", type=int, default=2)
    ap.add_argument("--accum", type=int, default=4, help="micro-batches per step and rank")
    ap.add_argument("--warmup", type=int, default=5)
    ap.add_argument("--steps", type=int, default=20)
    ap.add_argument("--cluster", default="dgx-h200", help="gemmscope's cluster preset for this node")
    ap.add_argument("--gpu", default="", help="gemmscope --gpu (default: the cluster's; a CUDA build matches its own GPU)")
    ap.add_argument("--comm", action="store_true", help="let gemmscope measure the collectives (--comm) to calibrate")
    ap.add_argument("--out", default="", help="folder for the results (summary.md, results.json, gemmscope's outputs)")
    ap.add_argument("--dry-run", action="store_true", help="print the gemmscope commands and the torch steps, run nothing")
    a = ap.parse_args()
    modes = [m for m in a.modes.split(",") if m]
    if a.dry_run:
        for m in modes:
            print("{}: torch.distributed {} steps of mb {} x accum {} x seq {}".format(m, m, a.mb, a.accum, a.seq))
            print("  " + " ".join(gemmscope_cmd(a, LAYOUTS[m](a), m + ".json")))
        return 0
    import torch.distributed as dist
    dist.init_process_group("nccl")
    rank = dist.get_rank()
    rows = []
    keep = a.out or tempfile.mkdtemp(prefix="parallel_real_")
    if rank == 0:
        os.makedirs(keep, exist_ok=True)
    for m in modes:
        try:
            real, prof = timed_steps(a, m)
        except Exception as ex:  # one mode's failure must not lose the others
            print("rank {}: {} failed: {!r}".format(rank, m, ex), flush=True)
            real, prof = None, {"error": repr(ex)}
        profs = [None] * dist.get_world_size()
        dist.all_gather_object(profs, prof)
        pred = None
        if rank == 0:
            out = os.path.join(keep, m + ".parallel.json")
            cmd = gemmscope_cmd(a, LAYOUTS[m](a), out)
            t0 = time.time()
            p = subprocess.run(cmd, capture_output=True, text=True)
            with open(os.path.join(keep, m + ".gemmscope.txt"), "w") as f:
                f.write("$ " + " ".join(cmd) + "\n\nrc {}  ({:.0f} s)\n\n{}\n--- stderr ---\n{}".format(
                    p.returncode, time.time() - t0, p.stdout, p.stderr))
            if p.returncode == 0:
                doc = json.load(open(out))
                pred = doc["results"][0]["step_ms"]
                src = doc["results"][0]["source"]
            else:
                src = "gemmscope failed: " + (p.stderr.strip().splitlines() or ["?"])[-1]
            rows.append((m, real, pred, src, profs))
        dist.barrier()
    if rank == 0:
        lines = ["| layout | torch step ms | gemmscope step ms | difference | compute | torch kernels per step "
                 "(rank 0: compute / NCCL ms, count) |", "|---|---:|---:|---:|---|---|"]
        ok = 0

        def prof_text(p):
            p = p[0] or {}
            if "compute_kernel_ms" not in p:
                return p.get("profile_error", p.get("error", "-"))
            return "{:.1f} / {:.1f}, {:.0f}".format(p["compute_kernel_ms"], p["nccl_kernel_ms"], p["kernels"])

        for m, real, pred, src, profs in rows:
            if real is None or pred is None:
                lines.append("| {} | {} | {} | - | {} | {} |".format(
                    m, "-" if real is None else "{:.1f}".format(real), "-" if pred is None else "{:.1f}".format(pred),
                    src, prof_text(profs)))
                continue
            diff = 100 * (pred / real - 1)
            ok += abs(diff) <= 5
            lines.append("| {} | {:.1f} | {:.1f} | {:+.1f}% | {} | {} |".format(m, real, pred, diff, src, prof_text(profs)))
        lines.append("")
        lines += ["- {}: {}".format(m, MODE_NOTE[m]) for m, *_ in rows]
        lines.append("")
        lines.append("{} of {} within +-5% (seq {}, mb {}, accum {}, {} timed steps after {} warm-up)".format(
            ok, len(rows), a.seq, a.mb, a.accum, a.steps, a.warmup))
        print("\n".join(lines))
        with open(os.path.join(keep, "summary.md"), "w") as f:
            f.write("\n".join(lines) + "\n")
        with open(os.path.join(keep, "results.json"), "w") as f:
            json.dump({"model": MODEL, "seq": a.seq, "mb": a.mb, "accum": a.accum, "cluster": a.cluster,
                       "rows": [{"layout": m, "torch": MODE_NOTE[m], "torch_step_ms": real, "gemmscope_step_ms": pred,
                                 "compute": src, "torch_profile_per_rank": profs}
                                for m, real, pred, src, profs in rows]}, f, indent=2)
        print("results in " + keep)
    dist.destroy_process_group()
    return 0


if __name__ == "__main__":
    sys.exit(main())
