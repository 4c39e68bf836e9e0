#!/usr/bin/env python3
"""Validate `gemmscope predict` against measured runs (docs/predict.md, "Validation").

For each --pair A.json B.json (two measured runs of the same plan and build on different GPUs,
e.g. H100 and H200): predicts B's GPU from A and A's GPU from B, and prints per mode and
precision the predicted and measured per-layer totals, the error and whether the measured value
lies in the predicted band. The bar is +-10% on every per-layer total (exit 1 if any misses).

--b300-from RUN.json additionally predicts an HGX B300 from a Hopper run of the 5B config and
prints the error against the seed tutorial's B300 table (per-layer ms). Nothing in the model is
tuned to that table; the errors are reported as they come out, not held to the bar.

Usage:
  bench/validate_predict.py [--gemmscope build/gemmscope] --pair h100_5b.json h200_5b.json \\
      [--pair h100_qwen.json h200_qwen.json] [--b300-from h100_5b.json] [--markdown]
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile

BAR = 0.10

# Seed tutorial (reference 000), 5B config on "NVIDIA B300 SXM6 AC", per-layer GEMM ms.
# Its FP8Delayed always quantizes in the timed loop, also with --pre-quantize.
SEED_B300 = {
    "autocast": {"BF16": 12.758, "FP8Current": 9.147, "FP8Delayed": 7.802, "MXFP8": 8.984, "NVFP4": 6.453},
    "pre-quantized": {"BF16": 13.102, "FP8Current": 6.812, "FP8Delayed": 8.123, "MXFP8": 7.161, "NVFP4": 3.764},
}


def load(path):
    with open(path) as f:
        return json.load(f)


def gpu_key(gemmscope, device_name):
    # The spec database's own matching, through predict --list-gpus would not tell which entry a
    # device name matches; ask predict itself by predicting the run onto the name.
    return device_name


def predict(gemmscope, run, gpu):
    with tempfile.TemporaryDirectory() as d:
        out = os.path.join(d, "pred.json")
        p = subprocess.run([gemmscope, "predict", run, "--gpu", gpu, "--json", out],
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        if p.returncode != 0:
            sys.exit("gemmscope predict %s --gpu %s failed (%d): %s" % (run, gpu, p.returncode, p.stderr.strip()))
        return load(out)


def totals(doc):
    """{mode: {precision: per-layer total ms or None}} from a result's summary."""
    out = {}
    for mode, s in (doc.get("summary") or {}).items():
        out[mode] = dict(s["per_layer"]["total"])
    return out


def bands(pred):
    return pred["prediction"]["per_layer"]


def row(cells, md):
    return ("| " + " | ".join(cells) + " |") if md else "  ".join("%-14s" % c for c in cells)


def check_pair(gemmscope, a_path, b_path, md):
    a, b = load(a_path), load(b_path)
    ok = True
    for src_path, src, dst in ((a_path, a, b), (b_path, b, a)):
        target = dst["device"]["name"]
        pred = predict(gemmscope, src_path, target)
        model = (dst.get("config") or {}).get("name", dst["kind"])
        print("\n%s: predicted %s from %s (%s)" % (model, target, src["device"]["name"], os.path.basename(src_path)))
        print(row(["mode", "precision", "predicted ms", "band", "measured ms", "error", "in band", "+-10%"], md))
        if md:
            print("|" + "---|" * 8)
        meas, got, bd = totals(dst), totals(pred), bands(pred)
        for mode in dst["modes"]:
            for prec in dst["precisions"]:
                m = meas.get(mode, {}).get(prec)
                p = got.get(mode, {}).get(prec)
                if m is None or p is None:
                    print(row([mode, prec, "n/a" if p is None else "%.3f" % p, "", "n/a" if m is None else "%.3f" % m,
                               "", "", ""], md))
                    continue
                lo, hi = bd[mode][prec]["low_ms"], bd[mode][prec]["high_ms"]
                err = p / m - 1
                inband = lo <= m <= hi
                passed = abs(err) <= BAR
                ok &= passed
                print(row([mode, prec, "%.3f" % p, "%.2f-%.2f" % (lo, hi), "%.3f" % m, "%+.1f%%" % (100 * err),
                           "yes" if inband else "NO", "PASS" if passed else "FAIL"], md))
    return ok


def b300(gemmscope, run_path, md):
    src = load(run_path)
    pred = predict(gemmscope, run_path, "B300")
    got, bd = totals(pred), bands(pred)
    print("\nB300 (predicted from %s, %s) vs the seed tutorial's measured B300 table (reference 000)" %
          (src["device"]["name"], os.path.basename(run_path)))
    print(row(["seed mode", "precision", "predicted ms", "band", "seed ms", "error", "in band"], md))
    if md:
        print("|" + "---|" * 7)
    for mode, table in SEED_B300.items():
        for prec, seed in table.items():
            # The seed's "autocast" is our per-gemm mode (each GEMM quantizes its own operands),
            # and its FP8Delayed quantizes inside the timed loop in both of its modes. (gemmscope
            # predict writes the current mode names, also for result files from before the rename.)
            our_mode = "per-gemm" if (prec == "FP8Delayed" or mode == "autocast") else mode
            if our_mode not in got or got[our_mode].get(prec) is None:
                print(row([mode, prec, "n/a", "", "%.3f" % seed, "", ""], md))
                continue
            p = got[our_mode][prec]
            lo, hi = bd[our_mode][prec]["low_ms"], bd[our_mode][prec]["high_ms"]
            label = mode if our_mode == mode else "%s (ours: %s)" % (mode, our_mode)
            print(row([label, prec, "%.3f" % p, "%.2f-%.2f" % (lo, hi), "%.3f" % seed, "%+.1f%%" % (100 * (p / seed - 1)),
                       "yes" if lo <= seed <= hi else "NO"], md))


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    here = os.path.dirname(os.path.abspath(__file__))
    ap.add_argument("--gemmscope", default=os.path.join(here, "..", "build", "gemmscope"))
    ap.add_argument("--pair", nargs=2, action="append", default=[], metavar=("A.json", "B.json"))
    ap.add_argument("--b300-from", metavar="RUN.json")
    ap.add_argument("--markdown", action="store_true")
    args = ap.parse_args()
    if not args.pair and not args.b300_from:
        ap.error("give --pair A.json B.json and/or --b300-from RUN.json")
    ok = True
    for a, b in args.pair:
        ok &= check_pair(args.gemmscope, a, b, args.markdown)
    if args.b300_from:
        b300(args.gemmscope, args.b300_from, args.markdown)
    if args.pair:
        print("\nH100<->H200 bar (+-10%% on every per-layer total): %s" % ("PASS" if ok else "FAIL"))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
