#!/usr/bin/env python3
"""Validate `gemmscope predict` against measured runs (docs/predict.md, "Validation").

--pair A.json B.json (two measured runs of the same plan on different GPUs of one generation, e.g.
H100 and H200; repeatable): predicts B's GPU from A and A's GPU from B and prints per mode and
precision the predicted and measured per-layer totals, the error and whether the measurement lies
in the band. Bar: +-10% on every per-layer total.

--datasheet RUN.json (repeatable): predicts the run's plan on its own GPU from the datasheet and the
published priors alone (gemmscope predict --datasheet-only), the cells' errors feeding the
datasheet-only bands.

Bands: every predicted cell's measured / predicted - 1 is a sample of data/predict_errors.json
(--write-errors FILE writes them). Coverage is checked leave-one-model-out: for each model the bands
are rebuilt from the other models' samples only (gemmscope predict --band-errors), and the script
counts how often the measurement lies inside (cells and per-layer totals). Bar: >= 90% for each
transfer kind.

--b300-from RUN.json predicts an HGX B300 from a Hopper run of the 5B config and compares the
per-layer totals with the seed tutorial's B300 table (reference 000). Nothing in the model or its
priors is set from that table; the bar is +-15% for every recipe of both seed modes.

Usage:
  bench/validate_predict.py [--gemmscope build/gemmscope] --pair h100_5b.json h200_5b.json \\
      [--pair h100_qwen.json h200_qwen.json] [--datasheet RUN.json ...] [--b300-from h100_5b.json] \\
      [--write-errors data/predict_errors.json] [--markdown]
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile

BAR = 0.10
B300_BAR = 0.15
COVERAGE_BAR = 0.90
CLASSES = ["near-ridge", "low", "mid", "high"]

# Seed tutorial (reference 000), 5B config on "NVIDIA B300 SXM6 AC", per-layer GEMM ms.
# Its FP8Delayed always quantizes in the timed loop, also with --pre-quantize.
SEED_B300 = {
    "autocast": {"BF16": 12.758, "FP8Current": 9.147, "FP8Delayed": 7.802, "MXFP8": 8.984, "NVFP4": 6.453},
    "pre-quantized": {"BF16": 13.102, "FP8Current": 6.812, "FP8Delayed": 8.123, "MXFP8": 7.161, "NVFP4": 3.764},
}


def load(path):
    with open(path) as f:
        return json.load(f)


def predict(gemmscope, run, gpu, extra=()):
    with tempfile.TemporaryDirectory() as d:
        out = os.path.join(d, "pred.json")
        p = subprocess.run([gemmscope, "predict", run, "--gpu", gpu, "--json", out, *extra],
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        if p.returncode != 0:
            sys.exit("gemmscope predict %s --gpu %s failed (%d): %s" % (run, gpu, p.returncode, p.stderr.strip()))
        return load(out)


def model_of(doc):
    return (doc.get("config") or {}).get("name", doc.get("kind", "?"))


def totals(doc):
    """{mode: {precision: per-layer total ms or None}} from a result's summary."""
    out = {}
    for mode, s in (doc.get("summary") or {}).items():
        out[mode] = dict(s["per_layer"]["total"])
    return out


def cell_samples(measured, pred, transfer, arch):
    """Per predicted cell measured in the run: (model, transfer, arch, precision, mode, class, deviation)."""
    out = []
    model = model_of(measured)
    for gm, gp in zip(measured["gemms"], pred["gemms"]):
        for mode, cells in gp.get("results", {}).items():
            for prec, c in cells.items():
                m = gm.get("results", {}).get(mode, {}).get(prec)
                if not m or m.get("status") != "ok" or c.get("status") != "ok" or "size_class" not in c:
                    continue
                if not (m["mean_ms"] > 0 and c["mean_ms"] > 0):
                    continue
                out.append({"model": model, "arch": arch, "transfer": transfer, "precision": prec, "mode": mode,
                            "size_class": CLASSES.index(c["size_class"]), "deviation": m["mean_ms"] / c["mean_ms"] - 1,
                            "_in": c["min_ms"] <= m["mean_ms"] <= c["max_ms"]})
    return out


def row(cells, md):
    return ("| " + " | ".join(cells) + " |") if md else "  ".join("%-14s" % c for c in cells)


def archs_of(gemmscope):
    here = os.path.dirname(os.path.abspath(__file__))
    for path in (os.path.join(os.path.dirname(os.path.abspath(gemmscope)), "gpus.json"),
                 os.path.join(here, "..", "data", "gpus.json")):
        if os.path.exists(path):
            return {g["key"]: g["arch"] for g in load(path)["gpus"]}
    sys.exit("no gpus.json next to %s or in data/" % gemmscope)


class Job:
    """One prediction to validate: a run predicted onto a GPU (another run's, or its own datasheet)."""

    def __init__(self, src_path, measured_path, transfer):
        self.src_path, self.measured_path, self.transfer = src_path, measured_path, transfer
        self.measured = load(measured_path)
        self.model = model_of(self.measured)

    def run(self, gemmscope, errors_file=None):
        extra = ["--datasheet-only"] if self.transfer == "datasheet-only" else []
        if errors_file:
            extra += ["--band-errors", errors_file]
        return predict(gemmscope, self.src_path, self.measured["device"]["name"], extra)


def check_pair(pred, job, md):
    src = load(job.src_path)
    target = job.measured["device"]["name"]
    print("\n%s: predicted %s from %s (%s)" % (job.model, target, src["device"]["name"], os.path.basename(job.src_path)))
    print(row(["mode", "precision", "predicted ms", "band", "measured ms", "error", "in band", "+-10%"], md))
    if md:
        print("|" + "---|" * 8)
    meas, got, bd = totals(job.measured), totals(pred), pred["prediction"]["per_layer"]
    ok = True
    for mode in job.measured["modes"]:
        for prec in job.measured["precisions"]:
            m = meas.get(mode, {}).get(prec)
            p = got.get(mode, {}).get(prec)
            if m is None or p is None:
                continue
            lo, hi = bd[mode][prec]["low_ms"], bd[mode][prec]["high_ms"]
            err = p / m - 1
            passed = abs(err) <= BAR
            ok &= passed
            print(row([mode, prec, "%.3f" % p, "%.2f-%.2f" % (lo, hi), "%.3f" % m, "%+.1f%%" % (100 * err),
                       "yes" if lo <= m <= hi else "NO", "PASS" if passed else "FAIL"], md))
    return ok


def total_coverage(pred, job, misses=None):
    """(inside, total) of the per-layer totals (and MoE-layer totals) of a prediction; the totals
    outside their band are appended to `misses`."""
    inside = total = 0
    meas = job.measured.get("summary") or {}
    for key in ("per_layer", "moe_layer"):
        bands = pred["prediction"].get(key) or {}
        for mode, per in bands.items():
            for prec, b in (per or {}).items():
                if not b:
                    continue
                scope = "moe_total" if key == "moe_layer" else "total"
                m = ((meas.get(mode) or {}).get("per_layer") or {}).get(scope, {}).get(prec)
                if m is None:
                    continue
                total += 1
                inside += b["low_ms"] <= m <= b["high_ms"]
                if misses is not None and not b["low_ms"] <= m <= b["high_ms"]:
                    misses.append("%s %s onto %s, %s %s %s: measured %.3f, band %.3f-%.3f" % (
                        job.transfer, job.model, job.measured["device"]["name"], key, mode, prec, m, b["low_ms"],
                        b["high_ms"]))
    return inside, total


def loo(gemmscope, jobs, samples, md):
    """Leave-one-model-out coverage per transfer kind; returns whether every kind reaches the bar."""
    models = sorted({j.model for j in jobs})
    stats = {}
    misses = []
    with tempfile.TemporaryDirectory() as d:
        for model in models:
            path = os.path.join(d, "errors.json")
            kept = [s for s in samples if s["model"] != model]
            write_errors(path, kept, ["leave-one-out: without %s" % model])
            for job in (j for j in jobs if j.model == model):
                pred = job.run(gemmscope, path)
                st = stats.setdefault(job.transfer, {"cells": [0, 0], "totals": [0, 0]})
                for s in cell_samples(job.measured, pred, job.transfer, ""):
                    st["cells"][0] += s["_in"]
                    st["cells"][1] += 1
                i, t = total_coverage(pred, job, misses)
                st["totals"][0] += i
                st["totals"][1] += t
    print("\nBand coverage, leave-one-model-out (each model's bands built without its own errors):")
    print(row(["transfer", "cells inside", "cells", "coverage", "totals inside", "totals", "coverage", ">= 90%"], md))
    if md:
        print("|" + "---|" * 8)
    ok = True
    for kind, st in sorted(stats.items()):
        c = st["cells"][0] / max(1, st["cells"][1])
        t = st["totals"][0] / max(1, st["totals"][1])
        passed = c >= COVERAGE_BAR and t >= COVERAGE_BAR
        ok &= passed
        print(row([kind, str(st["cells"][0]), str(st["cells"][1]), "%.1f%%" % (100 * c), str(st["totals"][0]),
                   str(st["totals"][1]), "%.1f%%" % (100 * t), "PASS" if passed else "FAIL"], md))
    for m in misses:
        print("%s outside its band (leave-one-model-out): %s" % ("-" if md else " ", m))
    return ok


def write_errors(path, samples, sources):
    doc = {"schema": "gemmscope.predict_errors/1",
           "about": ("Measured prediction errors of gemmscope predict (measured / predicted - 1, per predicted cell) over "
                     "gemmscope's own runs; written by bench/validate_predict.py --write-errors. The bands of "
                     "gemmscope predict are built from them (docs/predict.md, 'Error band')."),
           "sources": sources,
           "samples": [{k: v for k, v in s.items() if not k.startswith("_")} for s in samples]}
    with open(path, "w") as f:
        f.write("{\n")
        for k in ("schema", "about", "sources"):
            f.write(" %s: %s,\n" % (json.dumps(k), json.dumps(doc[k])))
        f.write(' "samples": [\n')
        f.write(",\n".join("  " + json.dumps(s, sort_keys=True) for s in doc["samples"]))
        f.write("\n ]\n}\n")


def b300(gemmscope, run_path, md):
    src = load(run_path)
    pred = predict(gemmscope, run_path, "B300")
    got, bd = totals(pred), pred["prediction"]["per_layer"]
    print("\nB300 (predicted from %s, %s) vs the seed tutorial's measured B300 table (reference 000)" %
          (src["device"]["name"], os.path.basename(run_path)))
    print(row(["seed mode", "precision", "predicted ms", "band", "seed ms", "error", "in band", "+-15%"], md))
    if md:
        print("|" + "---|" * 8)
    ok = True
    for mode, table in SEED_B300.items():
        for prec, seed in table.items():
            # The seed's "autocast" is our per-gemm mode (each GEMM quantizes its own operands),
            # and its FP8Delayed quantizes inside the timed loop in both of its modes.
            our_mode = "per-gemm" if (prec == "FP8Delayed" or mode == "autocast") else mode
            if our_mode not in got or got[our_mode].get(prec) is None:
                print(row([mode, prec, "n/a", "", "%.3f" % seed, "", "", "FAIL"], md))
                ok = False
                continue
            p = got[our_mode][prec]
            lo, hi = bd[our_mode][prec]["low_ms"], bd[our_mode][prec]["high_ms"]
            err = p / seed - 1
            passed = abs(err) <= B300_BAR
            ok &= passed
            label = mode if our_mode == mode else "%s (ours: %s)" % (mode, our_mode)
            print(row([label, prec, "%.3f" % p, "%.2f-%.2f" % (lo, hi), "%.3f" % seed, "%+.1f%%" % (100 * err),
                       "yes" if lo <= seed <= hi else "NO", "PASS" if passed else "FAIL"], md))
    return ok


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    here = os.path.dirname(os.path.abspath(__file__))
    ap.add_argument("--gemmscope", default=os.path.join(here, "..", "build", "gemmscope"))
    ap.add_argument("--pair", nargs=2, action="append", default=[], metavar=("A.json", "B.json"))
    ap.add_argument("--datasheet", action="append", default=[], metavar="RUN.json")
    ap.add_argument("--b300-from", metavar="RUN.json")
    ap.add_argument("--write-errors", metavar="FILE")
    ap.add_argument("--markdown", action="store_true")
    args = ap.parse_args()
    if not args.pair and not args.b300_from and not args.datasheet:
        ap.error("give --pair A.json B.json, --datasheet RUN.json and/or --b300-from RUN.json")
    arch = archs_of(args.gemmscope)
    jobs = []
    for a, b in args.pair:
        jobs += [Job(a, b, "same-arch"), Job(b, a, "same-arch")]
    jobs += [Job(r, r, "datasheet-only") for r in args.datasheet]
    ok = True
    samples = []
    for job in jobs:
        pred = job.run(args.gemmscope)
        samples += cell_samples(job.measured, pred, job.transfer, arch.get(pred["prediction"]["target"], "?"))
        if job.transfer == "same-arch":
            ok &= check_pair(pred, job, args.markdown)
    if args.pair:
        print("\nSame-generation bar (+-10%% on every per-layer total): %s" % ("PASS" if ok else "FAIL"))
    if jobs:
        ok &= loo(args.gemmscope, jobs, samples, args.markdown)
    if args.write_errors:
        srcs = sorted({os.path.basename(j.measured_path) for j in jobs} | {os.path.basename(j.src_path) for j in jobs})
        write_errors(args.write_errors, samples, srcs)
        print("\nwrote %d error samples of %d models to %s" % (len(samples), len({j.model for j in jobs}), args.write_errors))
    if args.b300_from:
        b_ok = b300(args.gemmscope, args.b300_from, args.markdown)
        print("\nB300 bar (+-15%% on every recipe of the seed's table): %s" % ("PASS" if b_ok else "FAIL"))
        ok &= b_ok
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
