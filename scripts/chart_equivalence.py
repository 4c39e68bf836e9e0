#!/usr/bin/env python3
"""Before/after check of a change to the result model: the charts, reports and comparisons of two
gemmscope binaries must be the same.

    scripts/chart_equivalence.py --before OLD/gemmscope --after build-cpu/gemmscope [--out DIR]

Each binary charts every case below with its own chart script (the gemmscope_plot.py next to it):
the result files in tests/data with every chart kind, mode and baseline they take, those of
docs/results with their default chart, documents edited
the way tests/core/cli/test_plot.cpp edits them, `gemmscope predict` documents (each binary writes
its own, so its JSON writer is in the loop) and a fleet file. Per case it compares

  - the exit status, and for a chart that was drawn the PNG bytes (matplotlib's Agg output is
    deterministic for the same figure);
  - the JSON document the chart script received (captured by a wrapper given as
    GEMMSCOPE_PLOT_SCRIPT), after putting both into one canonical form: the GEMM cells and accuracy
    values by (provider, mode, precision, GEMM), whether a file holds them inside each GEMM (schemas
    1 and 2) or as records (schema 3), the schema name left out;

and, per result file, `gemmscope report` (text and --markdown) and `gemmscope compare` of the file
with itself, byte for byte. Needs python3 with matplotlib. Exit status 0: every case the same.
"""
import argparse
import filecmp
import glob
import json
import os
import shutil
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
KINDS = ("auto", "model", "shapes", "sweep", "modes", "roofline", "experts", "step")

WRAPPER = r'''
import os, runpy, shutil, sys
shutil.copyfile(sys.argv[1], os.environ["GS_CAPTURE_JSON"])
script = os.environ["GS_REAL_PLOT_SCRIPT"]
sys.argv[0] = script
sys.path.insert(0, os.path.dirname(script))
runpy.run_path(script, run_name="__main__")
'''


def load(path):
    with open(path) as f:
        return json.load(f)


def dump(doc, path):
    with open(path, "w") as f:
        json.dump(doc, f)
    return path


def is_result(doc):
    return isinstance(doc, dict) and str(doc.get("schema", "")).startswith("gemmscope.result/")


# ---- the canonical form of a chart document --------------------------------------------------

KEY_FIELDS = ("kind", "item", "pass", "mode", "precision", "provider", "rank", "source")


def canonical_cell(c, predicted_flag=True):
    c = dict(c)
    for k in KEY_FIELDS:
        c.pop(k, None)
    c.update(c.pop("values", {}))  # schema 3 keeps a record's own quantities under "values"
    if not predicted_flag:
        c.pop("predicted", None)
    return c


def canonical(doc):
    """The document with its cells by key and the layout of the schema left out."""
    if not is_result(doc):
        return doc
    doc = json.loads(json.dumps(doc))
    providers = doc.get("providers") or ["cublaslt"]
    cells, accuracy = {}, {}
    if doc.get("schema") == "gemmscope.result/3":
        for r in doc.pop("records", []):
            key = "%s|%s|%s|%s" % (r.get("provider"), r.get("mode"), r.get("precision"), r.get("item"))
            if r.get("kind") == "accuracy":
                c = canonical_cell(r)
                if r.get("source") == "emulated":
                    c["emulated"] = True
                elif c.get("status") == "ok":
                    c["emulated"] = False
                accuracy[key] = c
            else:
                cells[key] = canonical_cell(r)
    for i, g in enumerate(doc.get("gemms", [])):
        per = [(providers[0], g.pop("results", None))]
        per += list((g.pop("provider_results", None) or {}).items())
        for provider, res in per:
            for mode, cs in (res or {}).items():
                for prec, c in cs.items():
                    # schema 2 marked every predicted cell, n/a ones too; schema 3 says it in the key
                    cells["%s|%s|%s|%s" % (provider, mode, prec, i)] = canonical_cell(c, c.get("status") == "ok")
        for prec, c in (g.pop("accuracy", None) or {}).items():
            accuracy["None|None|%s|%d" % (prec, i)] = canonical_cell(c)
    doc.pop("schema", None)
    doc["_cells"] = cells
    doc["_accuracy"] = accuracy
    return doc


def first_difference(a, b, path="$"):
    if type(a) != type(b):
        return "%s: %s vs %s" % (path, type(a).__name__, type(b).__name__)
    if isinstance(a, dict):
        for k in sorted(set(a) | set(b)):
            if k not in a or k not in b:
                return "%s.%s: only in %s" % (path, k, "before" if k in a else "after")
            d = first_difference(a[k], b[k], "%s.%s" % (path, k))
            if d:
                return d
        return None
    if isinstance(a, list):
        if len(a) != len(b):
            return "%s: %d vs %d items" % (path, len(a), len(b))
        for i, (x, y) in enumerate(zip(a, b)):
            d = first_difference(x, y, "%s[%d]" % (path, i))
            if d:
                return d
        return None
    return None if a == b else "%s: %r vs %r" % (path, a, b)


# ---- the cases ---------------------------------------------------------------------------------

def edited_cases(work):
    """Documents edited as tests/core/cli/test_plot.cpp edits them (schema-2 fixtures)."""
    data = os.path.join(ROOT, "tests", "data")
    out = []
    doc = load(os.path.join(data, "model_5b_both_modes.json"))
    doc["modes"] = ["autocast", "autocast-shared", "pre-quantized"]
    for g in doc["gemms"]:
        shared = json.loads(json.dumps(g["results"]["autocast"]))
        for c in shared.values():
            if c["status"] == "ok":
                c["mean_ms"] *= 0.9
        g["results"]["autocast-shared"] = shared
    out.append((dump(doc, os.path.join(work, "three_modes.json")), ["--kind", "modes"]))
    doc = load(os.path.join(data, "sweep_square.json"))
    for g in doc["gemms"]:
        for cells in g["results"].values():
            for c in cells.values():
                c.pop("stdev_ms", None)
    out.append((dump(doc, os.path.join(work, "sweep_no_sd.json")), []))
    doc = load(os.path.join(data, "shapes_4.json"))
    doc["modes"] = ["per-gemm", "pre-quantized"]
    for g in doc["gemms"]:
        g["results"]["per-gemm"] = g["results"].pop("autocast")
        pq = json.loads(json.dumps(g["results"]["per-gemm"]))
        for c in pq.values():
            if c["status"] == "ok":
                c["mean_ms"] *= 0.8
        g["results"]["pre-quantized"] = pq
    out.append((dump(doc, os.path.join(work, "shapes_modes.json")), ["--kind", "modes"]))
    moe = os.path.join(data, "moe_mixtral_ep2_synthetic.json")
    doc = load(moe)
    doc["plan"]["routing"]["expert_parallel"] = 1
    out.append((dump(doc, os.path.join(work, "moe_ep1.json")), ["--kind", "experts"]))
    doc = load(moe)
    doc["plan"].pop("routing", None)
    out.append((dump(doc, os.path.join(work, "moe_no_routing.json")), ["--kind", "experts"]))
    doc = load(moe)
    for g in doc["gemms"]:
        if g.get("group_dim") is not None:
            g["results"][doc["modes"][0]]["FP8Current"] = {"status": "n/a", "reason": "cuBLASLt: NOT_SUPPORTED"}
    out.append((dump(doc, os.path.join(work, "moe_na.json")), ["--kind", "experts"]))
    # A fleet file of two GPUs (schema gemmscope-fleet/1, as --all-gpus wrote it), the second slower.
    run = load(os.path.join(data, "model_5b_autocast.json"))
    slow = json.loads(json.dumps(run))
    for g in slow["gemms"]:
        for cells in g["results"].values():
            for c in cells.values():
                if c["status"] == "ok":
                    c["mean_ms"] *= 1.1
    fleet = {"schema": "gemmscope-fleet/1", "threshold": 0.03, "mode": run["modes"][0],
             "gpus": [{"label": "GPU 0", "run": run}, {"label": "GPU 1", "run": slow}]}
    out.append((dump(fleet, os.path.join(work, "fleet.json")), []))
    out.append((os.path.join(work, "fleet.json"), ["--kind", "fleet"]))
    return out


def result_files():
    files = sorted(glob.glob(os.path.join(ROOT, "tests", "data", "*.json")))
    files += sorted(glob.glob(os.path.join(ROOT, "docs", "results", "*.json")))
    return [f for f in files if is_result(load(f))]


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--before", required=True, help="the gemmscope binary before the change")
    ap.add_argument("--after", required=True, help="the gemmscope binary after the change")
    ap.add_argument("--out", help="keep the charts and captured documents here (default: a temporary folder)")
    ap.add_argument("--quick", action="store_true", help="tests/data only, no docs/results files")
    args = ap.parse_args()
    work = args.out or tempfile.mkdtemp(prefix="gs_chart_eq_")
    os.makedirs(work, exist_ok=True)
    wrapper = os.path.join(work, "capture_plot.py")
    with open(wrapper, "w") as f:
        f.write(WRAPPER)
    bins = {"before": os.path.abspath(args.before), "after": os.path.abspath(args.after)}

    def run(side, argv, capture=None):
        env = dict(os.environ)
        if capture:
            env["GEMMSCOPE_PLOT_SCRIPT"] = wrapper
            env["GS_REAL_PLOT_SCRIPT"] = os.path.join(os.path.dirname(bins[side]), "gemmscope_plot.py")
            env["GS_CAPTURE_JSON"] = capture
        p = subprocess.run([bins[side]] + argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env)
        return p.returncode, p.stdout, p.stderr

    cases = []
    files = result_files()
    if args.quick:
        files = [f for f in files if "/tests/data/" in f]
    for f in files:
        if "/docs/results/" in f:  # the measured runs of docs/results: their default chart
            cases.append((f, []))
            continue
        for k in KINDS:
            cases.append((f, ["--kind", k]))
        doc = load(f)
        for m in doc.get("modes") or []:
            cases.append((f, ["--mode", m]))
        if "FP8Current" in (doc.get("precisions") or []):
            cases.append((f, ["--baseline", "FP8Current"]))
    cases += edited_cases(work)
    # Predictions: each binary writes its own document (its JSON writer), then charts it.
    predicted = []
    for f in [os.path.join(ROOT, "tests", "data", n) for n in ("model_5b_both_modes.json", "shapes_4.json",
                                                               "moe_mixtral_a.json")]:
        name = os.path.splitext(os.path.basename(f))[0]
        paths = {}
        for side in bins:
            paths[side] = os.path.join(work, "%s_%s_predicted_b200.json" % (side, name))
            rc, out, err = run(side, ["predict", f, "--gpu", "B200", "--json", paths[side]])
            if rc != 0:
                print("predict %s (%s): exit %d: %s" % (name, side, rc, err.decode(errors="replace").strip()))
        predicted.append((paths, f))
    failures = []
    n = 0

    def check_chart(label, inputs, extra):
        nonlocal n
        n += 1
        res = {}
        for side in bins:
            png = os.path.join(work, "%03d_%s.png" % (n, side))
            cap = os.path.join(work, "%03d_%s.json" % (n, side))
            if os.path.exists(cap):
                os.remove(cap)
            rc, _, err = run(side, ["plot", inputs[side], "-o", png] + extra, capture=cap)
            res[side] = (rc, png, cap, err)
        (rca, pnga, capa, erra), (rcb, pngb, capb, errb) = res["before"], res["after"]
        what = "%s %s" % (label, " ".join(extra))
        if rca != rcb:
            failures.append("%s: exit %d before, %d after (%s)" % (what, rca, rcb, errb.decode(errors="replace").strip()))
            return
        if rca != 0:
            return
        if not filecmp.cmp(pnga, pngb, shallow=False):
            failures.append("%s: the PNG differs (%s, %s)" % (what, pnga, pngb))
        if os.path.exists(capa) and os.path.exists(capb):
            d = first_difference(canonical(load(capa)), canonical(load(capb)))
            if d:
                failures.append("%s: the chart document differs: %s" % (what, d))

    for f, extra in cases:
        check_chart(os.path.relpath(f, ROOT), {"before": f, "after": f}, extra)
    for paths, src in predicted:
        if all(os.path.exists(p) for p in paths.values()):
            for extra in (["--kind", "auto"], ["--kind", "roofline"], ["--kind", "modes"]):
                check_chart("predict B200 of " + os.path.relpath(src, ROOT), paths, extra)
            d = first_difference(canonical(load(paths["before"])), canonical(load(paths["after"])))
            if d:
                failures.append("predict B200 of %s: the documents differ: %s" % (os.path.relpath(src, ROOT), d))
    charts = n
    # Reports and compare, byte for byte.
    texts = 0
    for f in files + [p for p, _ in edited_cases(work) if "fleet" not in p]:
        for argv in (["report", f], ["report", "--markdown", f], ["compare", f, f]):
            texts += 1
            a, b = run("before", argv), run("after", argv)
            if a != b:
                failures.append("%s: output differs (exit %d vs %d)" % (" ".join(argv), a[0], b[0]))
    for paths, src in predicted:
        if all(os.path.exists(p) for p in paths.values()):
            texts += 1
            a, b = run("before", ["report", paths["before"]]), run("after", ["report", paths["after"]])
            if a[0] != b[0] or a[1] != b[1]:
                failures.append("report of the B200 prediction of %s differs" % os.path.relpath(src, ROOT))
    print("%d chart cases, %d report/compare outputs compared; %d differences" % (charts, texts, len(failures)))
    for x in failures:
        print("  " + x)
    if not args.out:
        shutil.rmtree(work, ignore_errors=True)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
