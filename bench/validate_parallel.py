#!/usr/bin/env python3
"""Validate gemmscope's parallel step against published training throughput.

Every row is a published run (its source named below): a model, a GPU count and type, a layout, a
global batch, a precision and the framework's kernels, and the tokens/s per GPU the authors
measured. gemmscope predicts the same step on a CPU (no GPU is needed: the compute comes from the
GPU spec database, the communication from the cluster spec) and the script compares per-GPU
throughput. Rows are split in two: `tune` rows are the only ones any modelling choice was looked at
against; `check` rows were never used to set anything. The bar is +-10% on the check rows.

    bench/validate_parallel.py --gemmscope build-cpu/gemmscope            # the table
    bench/validate_parallel.py --gemmscope build-cpu/gemmscope --markdown # for docs/results/
    bench/validate_parallel.py --dry-run                                  # the command lines only
    bench/validate_parallel.py --gemmscope ... --only nemo                # rows whose id contains "nemo"

Sources (docs/results/parallel_validation.md lists them with their exact tables):
  nemo2407  NVIDIA/NeMo docs/source/performance/performance_summary.md (NeMo 24.07, DGX-H100, FP8)
  bridge2509  NVIDIA-NeMo Megatron-Bridge docs/performance-summary.md, 25.09 container, DGX-H100 / DGX-B200
  mcore     NVIDIA/Megatron-LM README, strong scaling of GPT-3 175B on H100 (MFU 47% at 96 GPUs)
  mosaic    mosaicml/llm-foundry scripts/train/benchmarking/README.md (H100 80GB BF16 and FP8, A100 80GB)
  dsv3      DeepSeek-V3 technical report (arXiv 2412.19437), section 1: 180K H800 GPU hours per trillion tokens
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile

# ---- models that are not presets: flags ----
GELU = ["--no-gated-mlp"]


def mpt(d_model, heads, layers):
    """MosaicML MPT (llm-foundry yamls): expansion 4, GELU, vocab 50368, MHA."""
    return ["--hidden_size", str(d_model), "--intermediate_size", str(4 * d_model), "--num_attention_heads", str(heads),
            "--num_key_value_heads", str(heads), "--num_hidden_layers", str(layers), "--vocab_size", "50368"] + GELU


MPT = {"125m": mpt(768, 12, 12), "350m": mpt(1024, 16, 24), "760m": mpt(1536, 12, 24), "1b": mpt(2048, 16, 24),
       "3b": mpt(2560, 20, 32), "7b": mpt(4096, 32, 32), "13b": mpt(5120, 40, 40), "30b": mpt(7168, 56, 48),
       "70b": mpt(8192, 64, 80)}


def dense(h, ffn, heads, kv, layers, vocab, gated):
    return ["--hidden_size", str(h), "--intermediate_size", str(ffn), "--num_attention_heads", str(heads),
            "--num_key_value_heads", str(kv), "--num_hidden_layers", str(layers), "--vocab_size", str(vocab)] + \
        ([] if gated else GELU) + (["--gated-mlp"] if gated else [])


MODELS = {
    # GPT-3 as NeMo and Megatron configure it (GELU, MHA, vocab 50257 padded by Megatron).
    "gpt3-5b": dense(4096, 16384, 32, 32, 24, 50257, False),
    "gpt3-20b": dense(6144, 24576, 48, 48, 44, 50257, False),
    "gpt3-175b": dense(12288, 49152, 96, 96, 96, 50257, False),
    "llama2-7b": dense(4096, 11008, 32, 32, 32, 32000, True),
    "llama2-13b": dense(5120, 13824, 40, 40, 40, 32000, True),
    "llama2-70b": dense(8192, 28672, 64, 8, 80, 32000, True),
    # Nemotron-4 340B (technical report): squared-ReLU MLP (not gated), GQA 96/8, vocab 256000.
    "nemotron4-340b": dense(18432, 73728, 96, 8, 96, 256000, False),
    "llama3.1-405b": dense(16384, 53248, 128, 8, 126, 128256, True),
    "llama3-8b": ["--model", "llama-3-8b"],
    "llama3-70b": ["--model", "llama-3-70b"],
    "deepseek-v3": ["--model", "deepseek-v3"],
    "qwen3-30b-a3b": ["--model", "qwen3-30b-a3b"],
    "qwen3-235b-a22b": ["--model", "qwen3-235b-a22b"],
    "mixtral-8x7b": ["--model", "mixtral-8x7b"],
}
for k, v in MPT.items():
    MODELS["mpt-" + k] = v


def row(id, source, split, model, seq, gpus, layout, precision, published, gpu="H100", cluster="dgx-h100",
        framework="te", extra=(), note=""):
    return dict(id=id, source=source, split=split, model=model, seq=seq, gpus=gpus, layout=layout,
                precision=precision, published=published, gpu=gpu, cluster=cluster, framework=framework,
                extra=list(extra), note=note)


# NeMo's performance recipes run Transformer Engine's TP overlap and Megatron's overlapped
# gradient reduction and parameter gathers.
NEMO = ["--tp-comm-overlap", "on"]

ROWS = [
    # ---- NeMo 24.07, DGX-H100, FP8 (per-tensor delayed scaling in 24.07) ----
    row("nemo2407-gpt3-5b", "nemo2407", "check", "gpt3-5b", 2048, 64, "tp1.mb4.gb2048", "FP8Delayed", 22521, extra=NEMO),
    row("nemo2407-gpt3-20b", "nemo2407", "check", "gpt3-20b", 2048, 64, "tp2.mb2.gb256", "FP8Delayed", 5851, extra=NEMO),
    row("nemo2407-gpt3-175b-128", "nemo2407", "tune", "gpt3-175b", 2048, 128, "tp4.pp8.vpp6.mb1.gb256", "FP8Delayed", 726,
        extra=NEMO),
    row("nemo2407-gpt3-175b-512", "nemo2407", "check", "gpt3-175b", 2048, 512, "tp4.pp8.vpp6.mb2.gb2048", "FP8Delayed", 782,
        extra=NEMO),
    row("nemo2407-llama2-7b", "nemo2407", "tune", "llama2-7b", 4096, 8, "tp1.mb1.gb128", "FP8Delayed", 16847, extra=NEMO),
    row("nemo2407-llama2-13b", "nemo2407", "check", "llama2-13b", 4096, 16, "tp1.pp4.vpp10.mb1.gb128", "FP8Delayed", 8646,
        extra=NEMO),
    row("nemo2407-llama2-70b", "nemo2407", "check", "llama2-70b", 4096, 64, "tp4.pp4.vpp20.mb1.gb128", "FP8Delayed", 1707,
        extra=NEMO),
    row("nemo2407-nemotron4-340b", "nemo2407", "check", "nemotron4-340b", 4096, 128, "tp8.pp8.vpp12.mb1.gb32", "FP8Delayed",
        322, extra=NEMO),
    row("nemo2407-llama3-8b", "nemo2407", "check", "llama3-8b", 8192, 8, "tp1.cp2.mb1.gb128", "FP8Delayed", 12036, extra=NEMO),
    row("nemo2407-llama3-70b", "nemo2407", "check", "llama3-70b", 8192, 64, "tp4.pp4.cp2.vpp5.mb1.gb128", "FP8Delayed", 1533,
        extra=NEMO),
    # ---- Megatron-Bridge 25.09, DGX-H100, FP8 current scaling ----
    row("bridge2509-llama3-8b-fsdp", "bridge2509", "check", "llama3-8b", 8192, 8, "tp1.mb1.gb128.zero3", "FP8Current", 14079,
        extra=NEMO),
    row("bridge2509-llama3-70b", "bridge2509", "check", "llama3-70b", 8192, 64, "tp4.pp8.vpp5.mb1.gb128", "FP8Current", 1619,
        extra=NEMO),
    row("bridge2509-llama3.1-405b", "bridge2509", "check", "llama3.1-405b", 8192, 1024, "tp8.pp8.cp2.vpp8.mb1.gb512",
        "FP8Current", 302, extra=NEMO, note="126 layers over 64 chunks: uneven"),
    row("bridge2509-deepseek-v3", "bridge2509", "check", "deepseek-v3", 4096, 1024, "tp2.pp8.vpp4.ep64.etp1.mb1.gb8192",
        "FP8Current", 1297, extra=NEMO, note="61 layers over 32 chunks: uneven; forced-balanced routing"),
    row("bridge2509-qwen3-30b", "bridge2509", "check", "qwen3-30b-a3b", 4096, 16, "tp1.pp2.vpp24.ep8.mb2.gb512", "FP8Current",
        10494, extra=NEMO, note="token-drop"),
    row("bridge2509-qwen3-235b", "bridge2509", "check", "qwen3-235b-a22b", 4096, 256, "tp2.pp8.vpp4.ep32.etp1.mb1.gb2048",
        "FP8Current", 1204, extra=NEMO, note="token-drop; 94 layers over 32 chunks: uneven"),
    # ---- Megatron-Bridge 25.09 on Blackwell: other GPUs, predicted from their datasheets ----
    row("bridge2509-b200-llama3-8b", "bridge2509", "check", "llama3-8b", 8192, 8, "tp1.mb2.gb128", "FP8Current", 29994,
        gpu="B200", cluster="hgx-b200", extra=NEMO),
    row("bridge2509-b200-llama3.1-405b", "bridge2509", "check", "llama3.1-405b", 8192, 128, "tp4.pp8.cp2.vpp8.mb1.gb64",
        "FP8Current", 664, gpu="B200", cluster="hgx-b200", extra=NEMO, note="126 layers over 64 chunks: uneven"),
    row("bridge2509-gb200-llama3-8b", "bridge2509", "check", "llama3-8b", 8192, 8, "tp1.mb2.gb128", "FP8Current", 31357,
        gpu="GB200", cluster="gb200-nvl72", extra=NEMO),
    row("bridge2509-gb200-llama3-70b-fsdp", "bridge2509", "check", "llama3-70b", 8192, 64, "tp1.mb2.gb128.zero3",
        "FP8Current", 3986, gpu="GB200", cluster="gb200-nvl72", extra=NEMO),
    # ---- Megatron-Core README: GPT-3 175B strong scaling on H100, BF16, MFU 47% at 96 GPUs ----
    # MFU to tokens/s with Megatron's FLOPs per token: 72 L h^2 (1 + s / (6h) + V / (12 L h)) at 989.4 TFLOP/s.
    row("mcore-gpt3-175b-96", "mcore", "tune", "gpt3-175b", 2048, 96, "tp4.pp8.mb1.gb1152", "BF16",
        0.47 * 989.4e12 / (72 * 96 * 12288 ** 2 * (1 + 2048 / (6 * 12288) + 51200 / (12 * 96 * 12288))),
        note="published as MFU 47%; tokens/s from Megatron's FLOPs formula"),
    # ---- DeepSeek-V3: 2048 H800, FP8 (1x128 / 128x128 blocks), 180K GPU hours per trillion tokens ----
    row("dsv3-h800", "dsv3", "check", "deepseek-v3", 4096, 2048, "pp16.ep64.mb1.gb15360", "FP8Block", 1e12 / (180e3 * 3600),
        gpu="H800", cluster="h800-cluster", extra=["--ep-comm-overlap", "on"],
        note="DualPipe modelled as 1F1B with the EP all-to-alls overlapped; 61 layers over 16 stages: uneven"),
]

# ---- MosaicML llm-foundry, FSDP FULL_SHARD, eager PyTorch with flash attention ----
# (model, seq, gpus, mfu, mb, ga, gb, tokens/s/GPU, activation checkpointing)
MOSAIC_H100_BF16 = [
    ("70b", 2048, 64, 8, 2048, 1039, True), ("70b", 2048, 32, 2, 1024, 882, True),
    ("30b", 8192, 8, 1, 168, 1384, True), ("30b", 4096, 8, 1, 168, 1802, True), ("30b", 2048, 32, 14, 1344, 2308, True),
    ("30b", 2048, 16, 10, 480, 2263, True), ("30b", 2048, 8, 3, 504, 2002, True), ("30b", 1024, 8, 6, 1008, 2084, True),
    ("13b", 32768, 8, 1, 24, 1976, True), ("13b", 16384, 8, 3, 72, 2985, True), ("13b", 4096, 8, 10, 240, 4717, True),
    ("13b", 2048, 64, 2, 128, 4800, False), ("13b", 2048, 32, 2, 64, 4811, False), ("13b", 2048, 16, 2, 32, 4767, False),
    ("13b", 2048, 8, 2, 16, 4792, False), ("13b", 1024, 8, 40, 960, 5502, True),
    ("7b", 65536, 8, 1, 16, 1956, True), ("7b", 32768, 8, 2, 32, 3318, True), ("7b", 8192, 8, 8, 128, 6935, True),
    ("7b", 4096, 8, 16, 256, 8611, True), ("7b", 2048, 8, 6, 48, 10643, False), ("7b", 1024, 8, 64, 1024, 10203, True),
    ("3b", 65536, 8, 1, 16, 3262, True), ("3b", 32768, 8, 3, 144, 5873, True), ("3b", 16384, 8, 1, 48, 11152, False),
    ("3b", 8192, 8, 3, 144, 16578, False), ("3b", 4096, 8, 5, 240, 20964, False), ("3b", 2048, 64, 6, 1152, 22525, False),
    ("3b", 2048, 32, 6, 576, 23021, False), ("3b", 2048, 16, 10, 480, 24142, False), ("3b", 1024, 8, 20, 960, 27046, False),
    ("3b", 512, 8, 40, 1920, 27965, False),
    ("1b", 65536, 8, 1, 16, 5506, True), ("1b", 32768, 8, 1, 32, 12025, False), ("1b", 16384, 8, 2, 64, 19649, False),
    ("1b", 8192, 8, 3, 96, 29157, False), ("1b", 4096, 8, 7, 224, 38535, False), ("1b", 2048, 64, 20, 1280, 44402, False),
    ("1b", 2048, 32, 20, 640, 45130, False), ("1b", 2048, 16, 20, 320, 46037, False), ("1b", 2048, 8, 14, 112, 45455, False),
    ("1b", 1024, 8, 18, 576, 48910, False), ("1b", 512, 8, 56, 1792, 52275, False),
    ("760m", 32768, 8, 1, 16, 16291, False), ("760m", 16384, 8, 3, 48, 27815, False), ("760m", 8192, 8, 6, 96, 41825, False),
    ("760m", 4096, 8, 12, 192, 55459, False), ("760m", 2048, 32, 24, 768, 67971, False),
    ("760m", 2048, 16, 24, 384, 68551, False), ("760m", 2048, 8, 24, 384, 63147, False),
    ("760m", 1024, 8, 48, 768, 78581, False), ("760m", 512, 8, 96, 1536, 83749, False),
]
MOSAIC_H100_FP8 = [
    ("3b", 32768, 8, 3, 144, 5856, True), ("3b", 8192, 8, 3, 144, 19146, False), ("3b", 2048, 8, 10, 480, 30586, False),
    ("3b", 512, 8, 40, 1920, 36527, False), ("1b", 32768, 8, 1, 32, 12580, False), ("1b", 8192, 8, 2, 64, 32010, False),
    ("1b", 512, 8, 56, 1792, 70315, False), ("350m", 32768, 8, 1, 32, 24439, False),
    ("350m", 16384, 8, 2, 64, 42929, False), ("350m", 512, 8, 56, 1792, 154420, False),
]
MOSAIC_A100_BF16 = [  # A100 80GB, 1600 Gbps RoCE per node: another GPU, predicted from its datasheet
    ("30b", 2048, 8, 3, 504, 916, True), ("13b", 4096, 8, 10, 240, 2060, True), ("13b", 2048, 8, 2, 48, 2262, False),
    ("7b", 4096, 8, 16, 256, 3684, True), ("7b", 2048, 8, 6, 96, 4641, False), ("3b", 4096, 8, 5, 240, 9457, False),
    ("3b", 2048, 8, 10, 160, 10811, False), ("1b", 2048, 8, 14, 448, 20513, False), ("1b", 8192, 8, 3, 96, 13814, False),
    ("760m", 2048, 8, 24, 384, 32434, False), ("350m", 2048, 8, 32, 512, 58782, False),
]
MOSAIC_TUNE = {("H100", "BF16", "7b", 2048, 8), ("H100", "BF16", "13b", 2048, 64), ("H100", "FP8Delayed", "3b", 2048, 8)}


def mosaic_rows():
    out = []
    for table, gpu, cluster, precision in ((MOSAIC_H100_BF16, "H100", "dgx-h100", "BF16"),
                                           (MOSAIC_H100_FP8, "H100", "dgx-h100", "FP8Delayed"),
                                           (MOSAIC_A100_BF16, "A100", "dgx-a100", "BF16")):
        for (m, seq, gpus, mb, gb, tok, ckpt) in table:
            split = "tune" if (gpu, precision, m, seq, gpus) in MOSAIC_TUNE else "check"
            layout = "dp{}.mb{}.gb{}.fsdp".format(gpus, mb, gb)
            extra = ["--recompute", "full" if ckpt else "selective", "--grad-reduce-type", "bf16"]
            out.append(row("mosaic-{}-{}-{}-s{}-g{}".format(gpu.lower(), precision.lower(), m, seq, gpus), "mosaic", split,
                           "mpt-" + m, seq, gpus, layout, precision, tok, gpu=gpu, cluster=cluster, framework="eager",
                           extra=extra))
    return out


ROWS += mosaic_rows()

UNEVEN = {"bridge2509-llama3.1-405b", "bridge2509-b200-llama3.1-405b", "bridge2509-deepseek-v3", "bridge2509-qwen3-235b", "dsv3-h800"}


# The per-source summary's groups: a source, split where its rows differ in kind (another GPU, FP8,
# long sequences).
GROUPS = [
    ("nemo2407", "NeMo 24.07, DGX-H100, FP8 (GPT-3, Llama 2/3, Nemotron-4)"),
    ("bridge2509-h100", "Megatron-Bridge 25.09, DGX-H100, FP8 (Llama 3, DeepSeek-V3, Qwen3 MoE)"),
    ("bridge2509-blackwell", "Megatron-Bridge 25.09, B200 and GB200, FP8 (Llama 3)"),
    ("mcore", "Megatron-Core README, GPT-3 175B, H100 BF16"),
    ("mosaic-h100-bf16", "MosaicML llm-foundry, H100 BF16, sequences up to 8k"),
    ("mosaic-h100-bf16-long", "MosaicML llm-foundry, H100 BF16, sequences 16k-64k"),
    ("mosaic-h100-fp8", "MosaicML llm-foundry, H100 FP8 (Transformer Engine, delayed scaling)"),
    ("mosaic-a100", "MosaicML llm-foundry, A100 80GB BF16"),
    ("dsv3", "DeepSeek-V3 technical report, 2048 H800, FP8"),
]


def group(r):
    if r["source"] == "bridge2509":
        return "bridge2509-" + ("h100" if r["gpu"] == "H100" else "blackwell")
    if r["source"] == "mosaic":
        if r["gpu"] == "A100":
            return "mosaic-a100"
        if r["precision"] != "BF16":
            return "mosaic-h100-fp8"
        return "mosaic-h100-bf16" + ("-long" if r["seq"] > 8192 else "")
    return r["source"]


def summary(results, markdown):
    """Per split and group: rows, within +-10%, mean |error|, mean error."""
    head = ["split", "source", "rows", "within +-10%", "mean abs error", "mean error"]
    out = [("| " + " | ".join(head) + " |") if markdown else "  ".join(head)]
    if markdown:
        out.append("|" + "---|" * len(head))
    for split in ("check", "tune"):
        for key, name in GROUPS + [("", "all " + split + " rows")]:
            errs = [r["error_pct"] for r in results
                    if r["split"] == split and "error_pct" in r and (not key or group(r) == key)]
            if not errs:
                continue
            cells = [split, name, str(len(errs)), str(sum(1 for e in errs if abs(e) <= 10)),
                     "{:.1f}%".format(sum(abs(e) for e in errs) / len(errs)), "{:+.1f}%".format(sum(errs) / len(errs))]
            out.append(("| " + " | ".join(cells) + " |") if markdown else "  ".join(cells))
    return "\n".join(out)


def command(binary, r, out_json, step_efficiency=""):
    cmd = [binary] + MODELS[r["model"]] + ["--sequence_length", str(r["seq"])]
    layout = r["layout"] + (".uneven" if r["id"] in UNEVEN else "")
    cmd += ["--layout", layout, "--gpus", str(r["gpus"]), "--gpu", r["gpu"], "--cluster", r["cluster"],
            "--step-context", r["framework"], "--parallel-json", out_json]
    cmd += ["--bf16-only"] if r["precision"] == "BF16" else ["--precisions", "BF16," + r["precision"]]
    if r["model"] in ("deepseek-v3", "qwen3-30b-a3b", "qwen3-235b-a22b", "mixtral-8x7b"):
        cmd += ["--routing", "balanced"]
    if step_efficiency:
        cmd += ["--step-efficiency", step_efficiency]
    return cmd + r["extra"]


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--gemmscope", default="build-cpu/gemmscope")
    ap.add_argument("--dry-run", action="store_true", help="print the command lines only")
    ap.add_argument("--markdown", action="store_true")
    ap.add_argument("--only", default="", help="rows whose id contains this")
    ap.add_argument("--json", default="", help="write every row's prediction here")
    ap.add_argument("--split", choices=("tune", "check"), default="",
                    help="only the rows of this split (set a modelling constant with --split tune, never on check rows)")
    ap.add_argument("--step-efficiency", default="", help="passed to gemmscope (the multi-GPU sustained compute rate)")
    a = ap.parse_args()
    rows = [r for r in ROWS if a.only in r["id"] and (not a.split or r["split"] == a.split)]
    if a.dry_run:
        for r in rows:
            print(" ".join(command(a.gemmscope, r, r["id"] + ".json", a.step_efficiency)))
        return 0
    results = []
    with tempfile.TemporaryDirectory() as tmp:
        for r in rows:
            out = os.path.join(tmp, r["id"] + ".json")
            p = subprocess.run(command(a.gemmscope, r, out, a.step_efficiency), capture_output=True, text=True,
                               env=dict(os.environ, CUDA_VISIBLE_DEVICES=""))
            res = dict(r)
            if p.returncode != 0:
                res["error"] = (p.stderr.strip().splitlines() or ["exit %d" % p.returncode])[-1]
            else:
                doc = json.load(open(out))
                x = next(x for x in doc["results"] if x["precision"] == r["precision"])
                res.update(predicted=x["tokens_per_s_per_gpu"], mfu=x["mfu"], fits=x["fits"],
                           peak_gb=x["peak_memory_bytes"] / 1e9, step_ms=x["step_ms"])
                res["error_pct"] = 100 * (res["predicted"] / r["published"] - 1)
            results.append(res)
    if a.json:
        json.dump(results, open(a.json, "w"), indent=1)
    print(summary(results, a.markdown) + "\n")
    head = ["split", "row", "GPUs", "GPU", "layout", "precision", "published tok/s/GPU", "gemmscope", "error", "fits"]
    print(("| " + " | ".join(head) + " |") if a.markdown else "  ".join(head))
    if a.markdown:
        print("|" + "---|" * len(head))
    for res in results:
        cells = [res["split"], res["id"], str(res["gpus"]), res["gpu"], res["layout"], res["precision"],
                 "{:.0f}".format(res["published"])]
        if "error" in res:
            cells += ["refused: " + res["error"][:60], "", ""]
        else:
            cells += ["{:.0f}".format(res["predicted"]), "{:+.1f}%".format(res["error_pct"]),
                      "yes" if res["fits"] else "no ({:.0f} GB)".format(res["peak_gb"])]
        print(("| " + " | ".join(cells) + " |") if a.markdown else "  ".join(cells))
    for split in ("tune", "check"):
        errs = [abs(r["error_pct"]) for r in results if r["split"] == split and "error_pct" in r]
        if errs:
            within = sum(1 for e in errs if e <= 10)
            print("\n{}: {} rows, {} within +-10%, mean |error| {:.1f}%, worst {:.1f}%".format(
                split, len(errs), within, sum(errs) / len(errs), max(errs)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
