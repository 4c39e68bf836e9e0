#!/usr/bin/env python3
"""Checks the performance sanity bars on results written by bench/run_all.sh.

Bars (H100, issue #3): BF16 >= 650 TFLOP/s on the large 5B shapes (the three GEMMs with >= 1.5
TFLOP each pass); FP8Current pre-quantized per-layer speedup vs BF16 >= 1.75x; autocast FP8Current
per-layer speedup >= 1.6x, checked for both quantizing modes (per-gemm: every GEMM quantizes its own
operands; training: each tensor once per step, as Transformer Engine does; files written before the
rename call them autocast and autocast-shared, which are read too). Each speedup
uses the BF16 time of the same mode. Prints one PASS/FAIL line per bar; exit 0 always (a report).
"""
import json
import sys

import gs_result  # bench/gs_result.py: g["results"] for any schema

out = sys.argv[1] if len(sys.argv) > 1 else "bench-results"
r = gs_result.with_results(json.load(open(f"{out}/5b.json")))
OLD = {"autocast": "per-gemm", "autocast-shared": "training"}  # mode names before the rename
r["summary"] = {OLD.get(k, k): v for k, v in r["summary"].items()}
for g in r["gemms"]:
    g["results"] = {OLD.get(k, k): v for k, v in g["results"].items()}
dev = r["device"]["name"]
big = [g for g in r["gemms"] if g["flops"] >= 1.5e12]
bf16 = [g["results"]["per-gemm"]["BF16"]["tflops"] for g in big if g["results"]["per-gemm"]["BF16"]["status"] == "ok"]
rows = [("BF16 TFLOP/s on large 5B shapes (min)", min(bf16), 650.0)]
for mode, bar in (("pre-quantized", 1.75), ("per-gemm", 1.6), ("training", 1.6)):
    if mode not in r["summary"]:
        continue
    tot = r["summary"][mode]["per_layer"]["total"]
    if tot.get("FP8Current") and tot.get("BF16"):
        rows.append((f"FP8Current {mode} per-layer speedup vs BF16", tot["BF16"] / tot["FP8Current"], bar))
print(f"device: {dev}")
for name, value, bar in rows:
    print(f"{'PASS' if value >= bar else 'FAIL'}  {name}: {value:.2f} (bar {bar})")
