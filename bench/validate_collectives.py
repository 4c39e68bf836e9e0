#!/usr/bin/env python3
"""Validate gemmscope's NCCL collective times against torch.distributed (NCCL backend).

Run with one process per GPU, e.g. on a 2-GPU node:

    torchrun --nproc_per_node 2 bench/validate_collectives.py --gemmscope out/gpu/gemmscope

Rank 0 first runs `gemmscope ... --comm-only --comm-json` for each layout below (before any
torch process touches a GPU; the other ranks wait for it), then every rank replays each measured
collective whose communicator size equals the world size with torch.distributed at the same byte
counts and types. torch is timed as nccl-tests times: --iters collectives back to back between
two CUDA events on every rank, the mean per collective, the slowest rank, the median of --rounds
such runs (timing each call alone after a barrier would add the ranks' launch skew and torch's
stream hand-off to every sample; gemmscope launches every GPU's collective from one thread and
times each one with events on its stream, the slowest rank, the median over iterations). A
collective passes when the two agree within --tolerance (5%). Bus bandwidth is stated as nccl-tests defines it (size / time x
2(n-1)/n for all-reduce, (n-1)/n for all-gather, reduce-scatter and all-to-all). Collectives
smaller than --min-bytes are latency-bound and reported without a verdict.

Exit status: 0 all judged collectives pass, 1 a failure, 2 bad input (no gemmscope, no GPU).
"""
import argparse
import json
import os
import shlex
import statistics
import subprocess
import sys
import time

LAYOUTS = [
    # TP 2 with sequence parallelism: activation all-gathers (BF16, FP8) and reduce-scatters.
    "--model llama-3-8b --tensor-parallel 2",
    # TP 2 without it: all-reduces.
    "--model llama-3-8b --tensor-parallel 2 --sequence-parallel off",
    # EP 2, even and uneven routing: all-to-all(v) dispatch (BF16, FP8 + scales) and combine; DP 2.
    "--model mixtral-8x7b --expert-parallel 2 --routing balanced",
    "--model mixtral-8x7b --expert-parallel 2 --routing hot:0.6",
    # DP 2: ZeRO-1 (FP32 gradients), ZeRO-3 (BF16 gradients, weights gathered in BF16 and FP8).
    "--model llama-3-8b --data-parallel 2",
    "--model llama-3-8b --data-parallel 2 --zero-stage 3 --grad-reduce-type bf16",
]


def bus_factor(kind, n):
    return 2.0 * (n - 1) / n if kind == "all-reduce" else (n - 1) / n


def row_bytes(c, t):
    size = {"FP32": 4, "BF16": 2, "FP8": 1}[t]
    b = c["width"] * size
    if t == "FP8" and c.get("block_scales"):
        b += (c["width"] + 127) // 128 * 4
    return b


def run_gemmscope(args, out_dir):
    results = []
    for i, layout in enumerate(LAYOUTS):
        path = os.path.join(out_dir, f"comm{i}.json")
        cmd = [args.gemmscope] + shlex.split(layout) + [
            "--comm-only", "--comm-iters", str(args.iters), "--comm-json", path]
        print("rank 0: " + " ".join(shlex.quote(a) for a in cmd), flush=True)
        p = subprocess.run(cmd, capture_output=True, text=True)
        if p.returncode != 0:
            print(p.stdout + p.stderr, file=sys.stderr)
            raise SystemExit(f"gemmscope failed (exit {p.returncode}) for: {layout}")
        print(p.stdout, flush=True)
        results.append((layout, path))
    return results


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--gemmscope", required=True, help="the gemmscope binary (a CUDA build)")
    ap.add_argument("--out", default="/tmp/gs_validate_collectives", help="scratch folder for the comm JSON files")
    ap.add_argument("--iters", type=int, default=20, help="collectives per timed run (torch side, as nccl-tests' -n)")
    ap.add_argument("--rounds", type=int, default=5, help="timed runs; the median is kept (torch side)")
    ap.add_argument("--warmup", type=int, default=5)
    ap.add_argument("--tolerance", type=float, default=0.05)
    ap.add_argument("--min-bytes", type=int, default=1 << 20)
    ap.add_argument("--json", help="write the comparison here (rank 0)")
    args = ap.parse_args()

    rank = int(os.environ.get("RANK", "0"))
    world = int(os.environ.get("WORLD_SIZE", "1"))
    local = int(os.environ.get("LOCAL_RANK", "0"))
    if world < 2:
        print("validate_collectives: run under torchrun with 2 or more processes (one per GPU)", file=sys.stderr)
        return 2
    done = os.path.join(args.out, "gemmscope.done")
    if rank == 0:
        os.makedirs(args.out, exist_ok=True)
        if os.path.exists(done):
            os.remove(done)
        if not os.access(args.gemmscope, os.X_OK):
            print(f"validate_collectives: {args.gemmscope} is not executable", file=sys.stderr)
            return 2
        layouts = run_gemmscope(args, args.out)
        with open(done, "w") as f:
            json.dump(layouts, f)
    else:
        # Wait without touching the GPU: gemmscope measures on every GPU of the node meanwhile.
        deadline = time.time() + 1800
        while not os.path.exists(done):
            if time.time() > deadline:
                print("validate_collectives: gave up waiting for rank 0's gemmscope runs", file=sys.stderr)
                return 2
            time.sleep(0.5)
        time.sleep(0.5)
        with open(done) as f:
            layouts = json.load(f)

    import torch
    import torch.distributed as dist

    torch.cuda.set_device(local)
    dist.init_process_group("nccl", device_id=torch.device("cuda", local))
    dev = torch.device("cuda", local)
    dtypes = {"FP32": torch.float32, "BF16": torch.bfloat16}

    def timed(fn):
        # As nccl-tests times: a run of --iters collectives back to back between two events, the
        # mean per collective; one such run per round, the median of --rounds rounds (the slowest
        # rank's). Timing each collective alone between a barrier and an event would add the ranks'
        # launch skew and torch's stream hand-off to every sample (tens of us on a 0.2 ms collective);
        # gemmscope launches both GPUs' collectives from one thread, which has neither.
        for _ in range(args.warmup):
            fn()
        samples = []
        start = torch.cuda.Event(enable_timing=True)
        stop = torch.cuda.Event(enable_timing=True)
        for _ in range(args.rounds):
            torch.cuda.synchronize()
            dist.barrier(device_ids=[local])
            torch.cuda.synchronize()
            start.record()
            for _ in range(args.iters):
                fn()
            stop.record()
            stop.synchronize()
            samples.append(start.elapsed_time(stop) / args.iters)
        t = torch.tensor(samples, dtype=torch.float64, device=dev)
        dist.all_reduce(t, op=dist.ReduceOp.MAX)  # the slowest rank of each round
        return statistics.median(t.tolist())

    rows = []
    failed = 0
    for layout, path in layouts:
        with open(path) as f:
            doc = json.load(f)
        # --comm-json writes a result document with the collectives in its "comm" block
        # (gemmscope.result/3); files of the earlier gemmscope-comm/1 schema are that block itself.
        doc = doc.get("comm", doc)
        if not doc.get("measured"):
            raise SystemExit(f"{path}: gemmscope measured nothing ({doc.get('notes')})")
        for c in doc["collectives"]:
            n, kind = c["ranks"], c["kind"]
            for t, y in c["types"].items():
                if "ms" not in y:
                    continue
                if n != world:
                    if rank == 0:
                        print(f"skip ({n} ranks, world {world}): {c['what']}")
                    continue
                size = y["size_bytes"]
                if kind == "all-gather":
                    total = c["rows"] * row_bytes(c, t)
                    src = torch.zeros(total // n, dtype=torch.uint8, device=dev)
                    dst = torch.empty(total, dtype=torch.uint8, device=dev)
                    fn = lambda: dist.all_gather_into_tensor(dst, src)
                elif kind == "reduce-scatter":
                    elems = c["rows"] * c["width"]
                    src = torch.zeros(elems, dtype=dtypes[t], device=dev)
                    dst = torch.empty(elems // n, dtype=dtypes[t], device=dev)
                    fn = lambda: dist.reduce_scatter_tensor(dst, src)
                elif kind == "all-reduce":
                    buf = torch.zeros(c["rows"] * c["width"], dtype=dtypes[t], device=dev)
                    fn = lambda: dist.all_reduce(buf)
                elif kind == "all-to-all":
                    m, rb = c["matrix"], row_bytes(c, t)
                    send = [m[rank * n + j] * rb for j in range(n)]
                    recv = [m[i * n + rank] * rb for i in range(n)]
                    src = torch.zeros(max(sum(send), 1), dtype=torch.uint8, device=dev)[: sum(send)]
                    dst = torch.empty(max(sum(recv), 1), dtype=torch.uint8, device=dev)[: sum(recv)]
                    fn = lambda: dist.all_to_all_single(dst, src, output_split_sizes=recv, input_split_sizes=send)
                else:
                    continue
                torch_ms = timed(fn)
                del fn
                gs_ms = y["ms"]
                diff = torch_ms / gs_ms - 1 if gs_ms > 0 else float("inf")
                judged = size >= args.min_bytes
                ok = abs(diff) <= args.tolerance if judged else None
                failed += ok is False
                f = bus_factor(kind, n)
                rows.append({
                    "layout": layout, "collective": kind, "what": c["what"], "type": t, "size_bytes": size,
                    "gemmscope_ms": gs_ms, "torch_ms": torch_ms, "diff": diff,
                    "gemmscope_bus_gbs": size / (gs_ms * 1e-3) * f / 1e9,
                    "torch_bus_gbs": size / (torch_ms * 1e-3) * f / 1e9,
                    "verdict": "PASS" if ok else ("FAIL" if ok is False else "latency-bound, not judged"),
                })
                torch.cuda.empty_cache()
    if rank == 0:
        print(f"\ngemmscope (NCCL, one process) vs torch.distributed (NCCL, {world} processes); "
              f"{torch.cuda.get_device_name(dev)} x {world}; median of {args.iters}, slowest rank; "
              f"bar +-{args.tolerance * 100:.0f}%")
        print(f"{'collective':<15} {'type':<5} {'what':<44} {'MiB':>9} {'gs ms':>9} {'torch ms':>9} "
              f"{'diff':>7} {'gs GB/s':>8} {'torch GB/s':>10}  verdict")
        for r in rows:
            print(f"{r['collective']:<15} {r['type']:<5} {r['what'][:44]:<44} {r['size_bytes'] / 2**20:>9.2f} "
                  f"{r['gemmscope_ms']:>9.3f} {r['torch_ms']:>9.3f} {r['diff'] * 100:>6.1f}% "
                  f"{r['gemmscope_bus_gbs']:>8.1f} {r['torch_bus_gbs']:>10.1f}  {r['verdict']}")
        judged = [r for r in rows if r["verdict"] in ("PASS", "FAIL")]
        print(f"\n{len(judged) - failed} of {len(judged)} judged collectives within the bar"
              + ("" if failed == 0 else f"; {failed} FAIL"))
        if args.json:
            with open(args.json, "w") as f:
                json.dump({"device": torch.cuda.get_device_name(dev), "world": world,
                           "tolerance": args.tolerance, "rows": rows}, f, indent=2)
    dist.destroy_process_group()
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
