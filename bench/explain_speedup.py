#!/usr/bin/env python3
"""Explains a model run's FP8 speedups from its measured parts.

Reads a gemmscope result JSON of a model plan measured in training and pre-quantized mode
(`gemmscope --model M --mode both --json run.json`) and, optionally, the same model measured with
`--wgrad-output bf16` (`--wgrad-bf16 other.json`). For each low-precision recipe it prints, over
the full model (each GEMM counted as often as it runs per step):

  1. the pre-quantized speedup: the GEMM kernels alone against BF16's;
  2. the training speedup, and the time training adds: the quantization each tensor gets once per
     step (training - pre-quantized), beside the quantization kernels' own time from the cells'
     kernel records and their bytes (the plan's traffic model), as a bandwidth and a share of the
     copy bandwidth (--copy-gbps, or the copy figure of a bench/quant_bandwidth.cu --json file);
  3. with --wgrad-bf16: what accumulating Wgrad into FP32 main gradients costs, measured (the
     Wgrad cells of both runs) against its traffic model (FP32 read + write instead of a BF16
     write per weight-gradient element, at the copy bandwidth).

Only measured numbers and the plan's byte counts are used; nothing is fitted. The full-model time of
each mode and recipe is the file's own ("totals", which gemmscope computes); a file without them
(from an older gemmscope) gets them summed here from its cells, and the output says so. The sums
the file does not carry (the Wgrad pass alone, bytes, kernel records) are summed here from the cells,
each GEMM weighted by how often it runs per step. One command, on any machine with the JSON files
(no GPU needed):

  python3 bench/explain_speedup.py run.json [--wgrad-bf16 run_bf16.json] [--copy-gbps 3011 | --quant-bandwidth qb.json]
"""
import argparse
import json
import sys

import gs_result  # bench/gs_result.py: g["results"] for any schema

SCOPES = ("layer", "dense_layer", "moe_layer", "model")


def weights(doc):
    plan = doc.get("plan") or {}
    layers = int(doc["config"].get("num_hidden_layers") or doc["config"].get("layers") or 0)
    moe = int(plan.get("moe_layers", 0))
    dense = int(plan.get("dense_layers", layers - moe))
    return {"layer": moe + dense, "dense_layer": dense, "moe_layer": moe, "model": 1}


def cells(doc, mode, prec, passes=None):
    """(weight, gemm, cell) of every measured cell of mode/prec, each GEMM with its count per step."""
    w = weights(doc)
    for g in doc["gemms"]:
        if passes and g.get("pass", "").lower() not in passes:
            continue
        c = ((g.get("results") or {}).get(mode) or {}).get(prec)
        if c and c.get("status") == "ok":
            yield w.get(g.get("scope", "layer"), 0), g, c


def summed_ms(doc, mode, prec, passes=None):
    """The ok cells' times of mode/prec (optionally only some passes), each GEMM times its count per step."""
    return sum(n * c["mean_ms"] for n, _, c in cells(doc, mode, prec, passes))


def has_totals(doc):
    """Whether the file carries gemmscope's full-model totals ("totals", scope "full_model")."""
    t = doc.get("totals")
    return isinstance(t, dict) and t.get("scope") == "full_model"


def total_ms(doc, mode, prec):
    """The full-model time of mode/prec: the file's "totals" (None where a cell is n/a), or, in a
    file without them, the ok cells summed here."""
    if not has_totals(doc):
        return summed_ms(doc, mode, prec)
    return ((doc["totals"].get(mode) or {}).get(prec) or {}).get("ms")


def na_summary(doc, mode, prec):
    """Why a total is n/a, from the file's "totals"."""
    na = (((doc.get("totals") or {}).get(mode) or {}).get(prec) or {}).get("na") or {}
    return na.get("summary") or "a cell is n/a"


def quant_bytes(g, mode, prec):
    """The plan's quantization bytes of a cell: in training mode the tensors it is first to use."""
    key = "quantize_shared" if mode == "training" else "quantize"
    return ((g.get("bytes") or {}).get(prec) or {}).get(key, 0.0)


def traced(doc, mode, prec):
    """Over the cells with kernel records (grouped cells over several streams have none): their
    count, the quantization kernels' time (ms) and the cells' quantization bytes."""
    n_cells, ms, nbytes = 0, 0.0, 0.0
    for n, g, c in cells(doc, mode, prec):
        kt = c.get("kernel_time_us")
        if not kt:
            continue
        n_cells += 1
        ms += n * kt.get("quantize", 0.0) / 1000.0
        nbytes += n * quant_bytes(g, mode, prec)
    return n_cells, ms, nbytes


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("result")
    ap.add_argument("--wgrad-bf16", help="the same model measured with --wgrad-output bf16 (training mode)")
    ap.add_argument("--copy-gbps", type=float, help="device-to-device copy bandwidth, read + write (GB/s)")
    ap.add_argument("--quant-bandwidth", help="a bench/quant_bandwidth.cu --json file: its copy bandwidth")
    a = ap.parse_args()
    try:
        with open(a.result) as fh:
            doc = gs_result.with_results(json.load(fh))
        other = None
        if a.wgrad_bf16:
            with open(a.wgrad_bf16) as fh:
                other = gs_result.with_results(json.load(fh))
        copy = a.copy_gbps
        if a.quant_bandwidth:
            with open(a.quant_bandwidth) as fh:
                copy = float(json.load(fh)["copy"]["gbps"])
    except (OSError, ValueError, KeyError) as e:
        print(f"explain_speedup: {e}", file=sys.stderr)
        return 2
    if doc.get("kind") != "model" or not {"training", "pre-quantized"} <= set(doc.get("modes", [])):
        print("explain_speedup: needs a model run measured with --mode both (training and pre-quantized)", file=sys.stderr)
        return 2
    precs = [p for p in doc["precisions"] if p != "BF16"]
    if "BF16" not in doc["precisions"] or not precs:
        print("explain_speedup: needs BF16 and at least one low-precision recipe", file=sys.stderr)
        return 2
    dev = (doc.get("device") or {}).get("name", "?")
    name = doc["config"].get("name", "?")
    print(f"{name} on {dev} (gemmscope {doc.get('tool', {}).get('version', '?')}); full model, each GEMM as often as "
          f"it runs per step")
    if not has_totals(doc):
        print(f"note: {a.result} has no \"totals\" (an older gemmscope wrote it): its full-model times are summed "
              f"here from its ok cells")
    bf = {m: total_ms(doc, m, "BF16") for m in ("training", "pre-quantized")}
    for m, ms in bf.items():
        if ms is None:
            print(f"explain_speedup: BF16's {m} total is n/a ({na_summary(doc, m, 'BF16')}): no speedup to explain",
                  file=sys.stderr)
            return 2
    print(f"BF16: training {bf['training']:.1f} ms, pre-quantized {bf['pre-quantized']:.1f} ms (BF16 quantizes "
          f"nothing: the difference is noise)")
    for p in precs:
        tr, pq = total_ms(doc, "training", p), total_ms(doc, "pre-quantized", p)
        if tr is None or pq is None:
            why = "; ".join(f"{m}: {na_summary(doc, m, p)}" for m, t in (("training", tr), ("pre-quantized", pq)) if t is None)
            print(f"\n{p}: total n/a ({why})")
            continue
        if not tr or not pq:
            continue
        qb = sum(n * quant_bytes(g, "training", p) for n, g, _ in cells(doc, "training", p))
        n_all = sum(1 for _ in cells(doc, "training", p))
        print(f"\n{p}:")
        print(f"  1. GEMM kernels alone (pre-quantized): {pq:.1f} ms, {bf['pre-quantized'] / pq:.2f}x BF16")
        print(f"  2. training: {tr:.1f} ms, {bf['training'] / tr:.2f}x BF16; it adds {tr - pq:.1f} ms "
              f"({(tr - pq) / tr * 100:.0f}% of its time) to the GEMMs: each tensor quantized once per step, "
              f"{qb / 1e9:.1f} GB of quantization traffic (the plan's traffic model)")
        if copy:
            print(f"     that traffic at the {copy:.0f} GB/s copy bandwidth: {qb / (copy * 1e9) * 1000:.1f} ms; the "
                  f"measured addition is {(tr - pq) / (qb / (copy * 1e9) * 1000):.2f}x it")
        n_tr, qk, qbt = traced(doc, "training", p)
        if qk > 0:
            gbps = qbt / (qk / 1000.0) / 1e9
            share = f", {gbps / copy * 100:.0f}% of the copy bandwidth" if copy else ""
            print(f"     the quantization kernels themselves (kernel records of {n_tr} of {n_all} cells; grouped "
                  f"cells over several streams have none): {qk:.1f} ms for {qbt / 1e9:.1f} GB, {gbps:.0f} GB/s{share}")
        if other is not None and p in other.get("precisions", []):
            wa = summed_ms(doc, "training", p, {"wgrad"})
            wb = summed_ms(other, "training", p, {"wgrad"})
            extra = sum(n * g["m"] * g["n"] * 6.0 for n, g, _ in cells(doc, "training", p, {"wgrad"}))
            model = f", traffic model {extra / (copy * 1e9) * 1000:.1f} ms at the copy bandwidth" if copy else ""
            print(f"  3. Wgrad into FP32 main gradients: {wa:.1f} ms vs {wb:.1f} ms with a BF16 output (another run): "
                  f"{wa - wb:+.1f} ms for {extra / 1e9:.1f} GB more traffic{model}")
    if other is not None:
        wa, wb = summed_ms(doc, "training", "BF16", {"wgrad"}), summed_ms(other, "training", "BF16", {"wgrad"})
        print(f"\nBF16 Wgrad into FP32 main gradients: {wa:.1f} ms vs {wb:.1f} ms with a BF16 output: {wa - wb:+.1f} ms")
    return 0


if __name__ == "__main__":
    sys.exit(main())
