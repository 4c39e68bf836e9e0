#!/usr/bin/env python3
"""A bounded fuzz stage for the chart script's reader (tools/gemmscope_plot.py, docs/hostile-input.md).

The script can be run on its own, on any file: whatever it is given, it must end with exit 0
(a chart), 2 (bad input) or 3 (no matplotlib), one line of at most about 400 bytes on stderr,
no control bytes there, and never a traceback. libFuzzer cannot drive Python, so this generates
the inputs: the result files of tests/data (and fleet chart documents built from them) mutated
structurally (a node replaced by a value of another type, a list emptied or made long, strings
with control bytes, large and negative numbers, a key removed) and byte by byte (bits flipped,
bytes inserted, deleted, spliced), each run through the script's main() in-process, up to the
chart (matplotlib's drawing is stood in for: the reader and the checks are what is fuzzed).

  scripts/fuzz_plot_reader.py --binary build/gemmscope [--seconds 60] [--seed N] [--work DIR]

A finding is written to DIR/finding-N.json with its traceback in DIR/finding-N.txt; the exit
status is 1 when there is one. Per input: at most 10 s.
"""

import argparse
import contextlib
import copy
import importlib.util
import io
import json
import os
import random
import subprocess
import sys
import tempfile
import time
import traceback

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SCRIPT = os.path.join(ROOT, "tools", "gemmscope_plot.py")
DATA = os.path.join(ROOT, "tests", "data")
MAX_LINE = 420
PER_INPUT_S = 10.0

ODD_STRINGS = ["", "\x1b]0;x\x07", "\x1b[2J", "\u009b1m", "a" * 5000, "NaN", "1e999", "\udcff", "BF16", "training",
               "per-gemm", "pre-quantized", "ok", "n/a", "model", "shapes", "gemmscope.result/2", "\x00"]
ODD_NUMBERS = [0, -1, 1, 2 ** 63, -2 ** 63, 2 ** 64, 1e308, -1e308, 5e-324, 0.5, 3]


class _Stop(Exception):
    """Raised in place of matplotlib: the reader accepted the input."""


def load_script(script):
    spec = importlib.util.spec_from_file_location("gemmscope_plot_fuzzed", script)
    gp = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(gp)

    def stop():
        raise _Stop()

    gp.setup_matplotlib = stop
    return gp


def derived_copies(binary, scratch):
    """What `gemmscope plot` hands the script for each result of tests/data (the file with the
    numbers the charts read, "totals", written by the running version; the files in tests/data
    were written by older versions and lack them): a stand-in interpreter keeps the copy. And a
    prediction (gemmscope predict --json) of the MoE run, a document of another kind."""
    fake = os.path.join(scratch, "keep_copy.sh")
    with open(fake, "w") as f:
        f.write('#!/bin/sh\n[ "$1" = -c ] && exit 0\ncp "$2" "$KEEP_COPY"\n')
    os.chmod(fake, 0o755)
    out = []
    for name in sorted(os.listdir(DATA)):
        if not name.endswith(".json"):
            continue
        keep = os.path.join(scratch, "copy-" + name)
        env = dict(os.environ, GEMMSCOPE_PYTHON=fake, KEEP_COPY=keep)
        subprocess.run([binary, "plot", os.path.join(DATA, name), "-o", os.path.join(scratch, "c.svg")], env=env,
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, timeout=60)
        if os.path.exists(keep):
            with open(keep, "rb") as f:
                out.append(f.read())
    pred = os.path.join(scratch, "predicted.json")
    subprocess.run([binary, "predict", os.path.join(DATA, "moe_mixtral_a.json"), "--gpu", "B200", "--json", pred],
                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, timeout=60)
    if os.path.exists(pred):
        with open(pred, "rb") as f:
            out.append(f.read())
    return out


def seeds(binary, scratch):
    docs = derived_copies(binary, scratch) if binary else []
    for name in sorted(os.listdir(DATA)):
        if name.endswith(".json"):
            with open(os.path.join(DATA, name), "rb") as f:
                docs.append(f.read())
    fleet_chart = {"schema": "gemmscope-fleet-chart/1", "mode": "training", "threshold": 0.03,
                   "precisions": ["BF16", "FP8Current"],
                   "gpus": [{"label": "GPU %d" % i, "layer_ms": [1.0 + i / 10, 0.6], "mean_sm_mhz": 1700,
                             "mean_temp_c": 60, "mean_power_w": 600} for i in range(3)],
                   "median_ms": [1.1, 0.6], "slow": [{"gpu": 2, "precision": 0, "over_median": 0.09}]}
    docs.append(json.dumps(fleet_chart).encode())
    return docs


def random_value(rng, depth=0):
    r = rng.random()
    if r < 0.2:
        return rng.choice(ODD_STRINGS)
    if r < 0.4:
        return rng.choice(ODD_NUMBERS)
    if r < 0.5:
        return rng.choice([None, True, False])
    if r < 0.7 and depth < 3:
        return [random_value(rng, depth + 1) for _ in range(rng.randrange(0, 4))]
    if r < 0.85 and depth < 3:
        return {rng.choice(ODD_STRINGS[:12]): random_value(rng, depth + 1) for _ in range(rng.randrange(0, 3))}
    return rng.choice([[], {}, [[]], {"": {}}])


def nodes(doc, path=()):
    """Every (container, key) of the document, depth first (bounded: documents are small)."""
    out = []
    stack = [(doc, path)]
    while stack and len(out) < 20000:
        v, p = stack.pop()
        if isinstance(v, dict):
            for k in list(v):
                out.append((v, k))
                stack.append((v[k], p + (k,)))
        elif isinstance(v, list):
            for i in range(len(v)):
                out.append((v, i))
                stack.append((v[i], p + (i,)))
    return out


def mutate_structure(doc, rng):
    doc = copy.deepcopy(doc)
    for _ in range(rng.randrange(1, 4)):
        ns = nodes(doc)
        if not ns:
            return random_value(rng)
        parent, key = rng.choice(ns)
        op = rng.random()
        if op < 0.6:
            parent[key] = random_value(rng)
        elif op < 0.75 and isinstance(parent, dict):
            del parent[key]
        elif op < 0.9 and isinstance(parent[key], list) and parent[key]:
            parent[key] = parent[key] * rng.choice([0, 2, 50])
        else:
            parent[key] = copy.deepcopy(rng.choice(ns)[0])
    return doc


def mutate_bytes(data, rng):
    b = bytearray(data)
    for _ in range(rng.randrange(1, 8)):
        if not b:
            b += bytes([rng.randrange(256)])
            continue
        i = rng.randrange(len(b))
        op = rng.random()
        if op < 0.3:
            b[i] ^= 1 << rng.randrange(8)
        elif op < 0.5:
            b.insert(i, rng.choice(b'{}[],:"\\0123456789eE-+.ntf\x00\xff '))
        elif op < 0.7:
            del b[i:i + rng.randrange(1, 16)]
        else:
            j = rng.randrange(len(b))
            b[i:i] = b[j:j + rng.randrange(1, 64)]
    return bytes(b)


def check_one(gp, data, work, args_extra):
    """Runs the script on `data`; None when the outcome is documented, else why not."""
    path = os.path.join(work, "input.json")
    with open(path, "wb") as f:
        f.write(data)
    err = io.StringIO()
    code = None
    t0 = time.monotonic()
    with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
        try:
            code = gp.main([path, "-o", os.path.join(work, "chart.svg")] + args_extra)
        except _Stop:
            code = 0
        except SystemExit as e:
            code = e.code if isinstance(e.code, int) else 1
        except BaseException:  # noqa: B902 -- any other exception is the finding
            return "exception:\n" + traceback.format_exc()
    seconds = time.monotonic() - t0
    text = err.getvalue()
    if seconds > PER_INPUT_S:
        return "took %.1f s" % seconds
    if code not in (0, 2, 3):
        return "exit status %r, stderr %r" % (code, text[:500])
    if code != 0 or text:
        if text.count("\n") != 1 or not text.endswith("\n"):
            return "stderr is not one line: %r" % text[:500]
        if len(text.encode("utf-8", "surrogateescape")) > MAX_LINE:
            return "a line of %d bytes" % len(text.encode("utf-8", "surrogateescape"))
        if any(ord(c) < 0x20 and c != "\n" or 0x7f <= ord(c) < 0xa0 for c in text):
            return "control characters on stderr: %r" % text[:200]
        if "Traceback" in text:
            return "a traceback: %r" % text[:500]
    for name in os.listdir(work):
        if ".tmp-" in name:
            return "temporary file left: %s" % name
    return None


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--seconds", type=float, default=60)
    ap.add_argument("--seed", type=int, default=None)
    ap.add_argument("--work", default=None, help="where findings go (default: a temporary folder)")
    ap.add_argument("--script", default=SCRIPT, help="the chart script (default: tools/gemmscope_plot.py)")
    ap.add_argument("--binary", default=None,
                    help="a gemmscope binary: seeds are then the copies `gemmscope plot` hands the script (with the "
                         "charts' totals), which reach every check; without it only the files of tests/data")
    a = ap.parse_args()
    seed = a.seed if a.seed is not None else random.randrange(1 << 30)
    rng = random.Random(seed)
    work = a.work or tempfile.mkdtemp(prefix="gemmscope-fuzz-plot-")
    os.makedirs(work, exist_ok=True)
    scratch = tempfile.mkdtemp(prefix="gemmscope-fuzz-plot-run-")
    gp = load_script(a.script)
    raw = seeds(a.binary, scratch)
    if a.binary and len(raw) <= len([n for n in os.listdir(DATA) if n.endswith(".json")]):
        print("fuzz_plot_reader: %s made no chart copies" % a.binary)
        return 1
    parsed = []
    for data in raw:
        try:
            parsed.append(json.loads(data))
        except ValueError:
            pass
    deadline = time.monotonic() + a.seconds
    runs = findings = 0
    kinds = [[], ["--kind", "model"], ["--kind", "shapes"], ["--kind", "experts"], ["--kind", "modes"],
             ["--kind", "roofline"], ["--kind", "sweep"], ["--mode", "training"], ["--baseline", "FP8Current"],
             ["--provider", "cublaslt"]]
    while time.monotonic() < deadline:
        if rng.random() < 0.7:
            doc = mutate_structure(rng.choice(parsed), rng)
            try:
                data = json.dumps(doc, allow_nan=rng.random() < 0.1).encode("utf-8", "surrogatepass")
            except (ValueError, TypeError):
                continue
        else:
            data = mutate_bytes(rng.choice(raw), rng)
        extra = rng.choice(kinds)
        why = check_one(gp, data, scratch, extra)
        runs += 1
        if why:
            findings += 1
            base = os.path.join(work, "finding-%d" % findings)
            with open(base + ".json", "wb") as f:
                f.write(data)
            with open(base + ".txt", "w") as f:
                f.write("args: %r\n%s\n" % (extra, why))
            print("fuzz_plot_reader: finding %d (%s): %s" % (findings, " ".join(extra), why.splitlines()[0][:300]))
            if findings >= 10:
                break
    print("fuzz_plot_reader: %d inputs in %.0f s (seed %d), %d finding(s)%s" % (
        runs, a.seconds, seed, findings, (" in " + work) if findings else ""))
    return 1 if findings else 0


if __name__ == "__main__":
    sys.exit(main())
