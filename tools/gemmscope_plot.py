#!/usr/bin/env python3
"""Charts from a gemmscope result JSON (schema "gemmscope.result/2" or /1, see docs/json-schema.md).

usage: gemmscope_plot.py RESULT.json -o OUT.{png,svg,pdf} [--baseline BF16]
                         [--mode training|per-gemm|pre-quantized]
                         [--kind auto|model|shapes|sweep|modes|roofline|experts]

Chart kinds (docs/charts.md has the details):
  model   per-layer GEMM time, one stacked bar per precision (kind "model")
  shapes  grouped TFLOP/s bars, one group per GEMM shape (kind "shapes", few shapes)
  sweep   one figure, three panels: latency, TFLOP/s and speedup vs size (>= 5 square shapes)
  modes   speedup over the baseline, each mode side by side (needs pre-quantized and a quantizing mode)
  roofline  log-log achieved TFLOP/s vs arithmetic intensity, one point per GEMM and precision, under
          the device's datasheet roofs (needs the result's "roofline" object; "predicted" results say so)
  experts one MoE layer: rows (tokens) per expert from the routing (busiest expert-parallel rank
          highlighted) over the grouped expert GEMM time per precision, passes stacked (needs MoE data)

Mode names: training (each tensor quantized once per step, as Transformer Engine trains), per-gemm
(each GEMM quantizes its own operands: the seed tool's autocast), pre-quantized. Files written
before the rename say "autocast-shared" (= training) and "autocast" (= per-gemm); both are read.

Exit status: 0 chart written; 2 bad input (missing file, not JSON, wrong schema, dry run,
unknown precision or mode, unsupported output type); 3 matplotlib is not installed.

Every drawn bar, line and marker carries a matplotlib gid (an id= attribute in SVG output):
  model:  bar:<prec>:<OP>:fpropdgrad, bar:<prec>:<OP>:wgrad, bar:<prec>:LMHead:all,
          speedup:<prec>, na:<prec>          (OP: QKV, AttnOut, MLPUp, MLPDown)
  shapes: bar:<prec>:<shape index>, na:<prec>:<shape index>
  sweep:  line:latency:<prec>, line:tflops:<prec>, line:speedup:<prec>
  modes:  bar:<mode>:<prec>, na:<mode>:<prec>
  roofline: point:<prec>:<gemm id>, roof:<format>
  experts: bar:rows:<expert>, line:mean, line:capacity, busiest:<rank>, bar:<prec>:grouped:<pass>,
          speedup:<prec>, na:<prec>
  error bars: err:<prec> (model, experts), err:<prec>:<shape index> (shapes),
          err:<latency|tflops|speedup>:<prec> (sweep), err:<mode>:<prec> (modes)

Only the Python standard library and matplotlib are used. Keep this file free of syntax newer
than Python 3.6 so that an old interpreter still reaches the clear "matplotlib is not
installed" message instead of a SyntaxError.
"""

import os
import signal
import sys


def _early_signal(signum, frame):
    # Until main() installs its own handlers (which also remove temporary files): nothing to
    # clean up yet, so end at once with 130/143 and one line, never a traceback from an import.
    try:
        sys.stderr.write("gemmscope plot: %s\n" % ("interrupted" if signum == signal.SIGINT else "terminated"))
    finally:
        os._exit(128 + signum)


signal.signal(signal.SIGINT, _early_signal)
signal.signal(signal.SIGTERM, _early_signal)

import argparse
import errno
import itertools
import json
import logging
import math
import random
import re
import stat
import textwrap
import warnings

SCHEMA = "gemmscope.result/2"
SCHEMAS = ("gemmscope.result/2", "gemmscope.result/1")  # /1: files from before MoE (all dense)
EXIT_BAD_INPUT = 2
EXIT_NO_MATPLOTLIB = 3
EXIT_STDOUT_ERROR = 74  # EX_IOERR: the chart is written, "wrote ..." could not be
MATPLOTLIB_MISSING = ("matplotlib is not installed: apt-get install python3-matplotlib "
                      "(or pip install matplotlib)")
KNOWN_MODES = ("per-gemm", "training", "pre-quantized")
# Names older results (and --mode) use for the same modes.
MODE_ALIASES = {"autocast": "per-gemm", "per-gemm-autocast": "per-gemm", "autocast-shared": "training",
                "shared": "training", "prequantized": "pre-quantized", "pre-quantize": "pre-quantized"}
KINDS = ("auto", "model", "shapes", "sweep", "modes", "roofline", "experts", "fleet")
FLEET_CHART_SCHEMA = "gemmscope-fleet-chart/1"  # written by `gemmscope plot` from a fleet file
OUT_TYPES = (".png", ".svg", ".pdf")

# The input-file policy of gemmscope (docs/hostile-input.md), the same limits as the C++ reader.
MAX_INPUT_BYTES = 64 << 20
MAX_JSON_DEPTH = 64
MAX_JSON_VALUES = 1 << 21  # values in one document (kMaxJsonValues)
MAX_DIM = 1 << 24          # m, k, n, layers: what the plan builder accepts
MAX_JSON_INT = 1 << 64     # the largest integer any field holds (uint64 clock reasons)
MIN_MS, MAX_MS = 1e-9, 1e9  # a GEMM time in ms: 1 ps to about 11.6 days (as the C++ reader)
# The largest chart drawn: GEMMs in one result (a model plan has a few tens; shapes charts are
# read bar by bar). Drawing thousands takes minutes and gigabytes, so more is refused.
MAX_CHART_GEMMS = 256
EXIT_SIGINT, EXIT_SIGTERM = 130, 143

# Layer ops in stacking order: (op key in the JSON, label, gid name, colour).
LAYER_OPS = [
    ("qkv", "QKV", "QKV", "#1f77b4"),
    ("attn_out", "Attn Out", "AttnOut", "#ff7f0e"),
    ("mlp_up", "MLP Up", "MLPUp", "#2ca02c"),
    ("mlp_down", "MLP Down", "MLPDown", "#d62728"),
]
LM_HEAD_COLOR = "#9467bd"
PRECISION_COLORS = {
    "BF16": "#4d4d4d", "FP8Current": "#1f77b4", "FP8Delayed": "#2ca02c",
    "FP8Block": "#ff7f0e", "MXFP8": "#9467bd", "NVFP4": "#d62728",
}
EXTRA_COLORS = ["#8c564b", "#e377c2", "#17becf", "#bcbd22", "#7f7f7f"]
MODE_TEXT = {
    "per-gemm": "per-gemm (each GEMM quantizes its inputs inside the timed region: the seed tool's autocast)",
    "training": "training (each tensor quantized once per step, both layouts, as Transformer Engine trains)",
    "pre-quantized": "pre-quantized (inputs quantized once before timing: GEMM kernel only)",
}


class InputError(Exception):
    """The user's input cannot be charted; the message is printed on one line, exit 2."""


def printable(text):
    """`text` with control characters (C0, DEL, C1) replaced by '?': strings from a result file
    must not move the cursor or break the one-line message."""
    return "".join("?" if (ord(ch) < 0x20 or 0x7f <= ord(ch) < 0xa0) else ch for ch in str(text))


def fail(msg, code=EXIT_BAD_INPUT):
    sys.stderr.write("gemmscope plot: error: %s\n" % printable(msg))
    sys.exit(code)


# ----------------------------------------------------------------------------------------------
# Loading and validation (standard library only, so bad input is reported without matplotlib)
# ----------------------------------------------------------------------------------------------

def _is_int(v):
    return isinstance(v, int) and not isinstance(v, bool)


def _is_num(v):
    return (isinstance(v, (int, float)) and not isinstance(v, bool)
            and not (isinstance(v, float) and (math.isnan(v) or math.isinf(v))))


def canonical_mode(name):
    """The current name of a mode (case-insensitive, old names accepted), or the name unchanged."""
    if not isinstance(name, str):
        return name
    low = name.lower()
    return MODE_ALIASES.get(low, low if low in KNOWN_MODES else name)


def normalize_mode_names(doc):
    """Rewrites old mode names (autocast, autocast-shared) in "modes", each GEMM's "results" and
    "summary" to the current ones, so files from before the rename still chart."""
    if isinstance(doc.get("modes"), list):
        doc["modes"] = [canonical_mode(m) if isinstance(m, str) else m for m in doc["modes"]]
    objs = [g.get("results") for g in doc.get("gemms") or [] if isinstance(g, dict)] + [doc.get("summary"), doc.get("totals")]
    for obj in objs:
        if isinstance(obj, dict):
            for key in list(obj.keys()):
                new = canonical_mode(key)
                if new != key and new not in obj:
                    obj[new] = obj.pop(key)


def clip(text, n=200):
    text = str(text)
    return text if len(text) <= n else text[:n] + "..."


def read_input_file(path):
    """The bytes of the regular file at `path`, at most MAX_INPUT_BYTES. stat before open: a FIFO
    would block the open, /dev/zero would never end."""
    try:
        st = os.stat(path)
    except (OSError, ValueError) as e:
        raise InputError("cannot read %s: %s" % (path, getattr(e, "strerror", None) or e))
    if stat.S_ISDIR(st.st_mode):
        raise InputError("%s is a directory" % path)
    if not stat.S_ISREG(st.st_mode):
        raise InputError("%s is not a regular file" % path)
    if st.st_size > MAX_INPUT_BYTES:
        raise InputError("%s is %d bytes, larger than the %d MiB limit for input files" % (
            path, st.st_size, MAX_INPUT_BYTES >> 20))
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_NOCTTY", 0))
        with os.fdopen(fd, "rb") as f:
            if not stat.S_ISREG(os.fstat(f.fileno()).st_mode):
                raise InputError("%s is not a regular file" % path)
            data = f.read(MAX_INPUT_BYTES + 1)
    except OSError as e:
        raise InputError("cannot read %s: %s" % (path, e.strerror or e))
    if len(data) > MAX_INPUT_BYTES:
        raise InputError("%s is larger than the %d MiB limit for input files" % (path, MAX_INPUT_BYTES >> 20))
    return data


# A JSON string from its opening quote: escapes taken as pairs, and an unclosed string (or one
# ending in a lone backslash) runs to the end of the text. It always matches where it starts, so
# re.sub never retries it from a later quote: linear (the old pattern backtracked quadratically
# on an unclosed string of escaped quotes).
_STRING_RE = re.compile(r'"[^"\\]*(?:\\.[^"\\]*)*(?:"|\\?\Z)', re.S)
_EMPTY_RE = re.compile(r"\[[ \t\n\r]*\]|\{[ \t\n\r]*\}")
_NOT_BRACKET_RE = re.compile(r"[^\[\]{}]+")
_DEPTH_STEP = {"[": 1, "{": 1, "]": -1, "}": -1}


def json_shape_problem(text, depth_limit=MAX_JSON_DEPTH, value_limit=MAX_JSON_VALUES):
    """Why `text` may not be parsed ("nested deeper than 64 levels", "more than N values"), or
    None. Checked before json.loads, whose recursive parser would otherwise raise RecursionError
    (or exhaust the stack) on deep input, and which would spend seconds and gigabytes on tens of
    millions of values. Linear, and done by the re module and str methods rather than a Python
    loop per character."""
    opens = text.count("[") + text.count("{")
    # A value is the document's, the first of a non-empty list or object, or follows a comma
    # outside a string (object keys are not counted): at most 1 + brackets + commas.
    check_values = 1 + opens + text.count(",") > value_limit
    check_depth = opens > depth_limit
    if not check_values and not check_depth:
        return None
    bare = _STRING_RE.sub('""', text) if '"' in text else text  # the structure, strings emptied
    if check_values:
        opens = bare.count("[") + bare.count("{")
        empties = _EMPTY_RE.subn("", bare)[1]
        if 1 + bare.count(",") + opens - empties > value_limit:
            return "more than %d values (lists, objects, numbers, strings: the limit for input files)" % value_limit
    if check_depth:
        brackets = _NOT_BRACKET_RE.sub("", bare)
        if max(itertools.accumulate(map(_DEPTH_STEP.__getitem__, brackets)), default=0) > depth_limit:
            return "nested deeper than %d levels (the limit for input files)" % depth_limit
    return None


def _parse_int(s):
    if len(s.lstrip("-")) > 20:  # cheap first: int() of a huge digit string is slow or refused
        raise InputError("an integer is too large (%s)" % clip(s, 40))
    v = int(s)
    if abs(v) > MAX_JSON_INT:
        raise InputError("an integer is too large (%s)" % clip(s, 40))
    return v


def _parse_float(s):
    v = float(s)
    if math.isinf(v) or math.isnan(v):
        raise InputError("a number is too large for a double (%s)" % clip(s, 40))
    return v


def _parse_constant(s):
    raise InputError("%s is not a JSON number" % s)


def parse_json(data, name):
    """`data` (bytes) as exactly one JSON value under gemmscope's input policy: UTF-8, no NUL
    byte, nesting at most MAX_JSON_DEPTH, integers at most 2^64, finite numbers only (no NaN or
    Infinity literals), nothing after the value."""
    if b"\0" in data:
        raise InputError("%s is not JSON: a NUL byte at offset %d" % (name, data.index(b"\0")))
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        raise InputError("%s is not JSON (not UTF-8 text)" % name)
    problem = json_shape_problem(text)
    if problem:
        raise InputError("%s: %s" % (name, problem))
    try:
        return json.loads(text, parse_int=_parse_int, parse_float=_parse_float, parse_constant=_parse_constant)
    except InputError as e:
        raise InputError("%s: %s" % (name, e))
    except (ValueError, RecursionError) as e:
        raise InputError("%s is not JSON: %s" % (name, clip(e)))


def select_provider(doc, name, provider):
    """Kernel providers: each GEMM's "results" hold the file's first provider's cells and
    "provider_results" the others'. `provider` (None: the first) becomes "results", so every chart
    draws that provider; doc["_provider_line"] names it for the footer when it is not plain cuBLASLt."""
    providers = doc.get("providers")
    if providers is None:
        providers = ["cublaslt"]
    if not isinstance(providers, list) or not providers or not all(isinstance(p, str) for p in providers):
        raise InputError("%s: \"providers\" must be a non-empty list of strings" % name)
    if len(set(providers)) != len(providers):
        raise InputError("%s: \"providers\" lists a provider twice" % name)
    chosen = provider if provider is not None else providers[0]
    if chosen not in providers:
        raise InputError("provider %s is not in %s (providers: %s)" % (
            clip(chosen, 80), name, clip(", ".join(providers))))
    if chosen != providers[0]:
        for i, g in enumerate(doc.get("gemms") or []):
            if not isinstance(g, dict) or g.get("results") is None:
                continue
            pr = g.get("provider_results")
            if not isinstance(pr, dict) or not isinstance(pr.get(chosen), dict):
                raise InputError("%s: gemms[%d] has no provider_results.%s" % (name, i, clip(chosen, 80)))
            g["results"] = pr[chosen]
        doc.pop("totals", None)  # written for the first provider's cells: the chosen one's are summed here
    if providers != ["cublaslt"]:
        others = [p for p in providers if p != chosen]
        doc["_provider_line"] = "kernel provider: %s%s" % (
            chosen, " (also measured: %s; gemmscope_plot.py --provider NAME charts another)" % ", ".join(others)
            if others else "")


def load_result(path, provider=None):
    name = os.path.basename(path)
    doc = parse_json(read_input_file(path), name)
    if not isinstance(doc, dict):
        raise InputError("%s is not a gemmscope result (top level is not an object)" % name)
    if isinstance(doc.get("gemms"), list):
        select_provider(doc, name, provider)
    schema = doc.get("schema")
    if schema not in SCHEMAS:
        raise InputError("%s has schema %s, expected \"%s\" (or \"%s\")" % (
            name, clip(json.dumps(schema), 80) if schema is not None else "(none)", SCHEMA, SCHEMAS[1]))
    if doc.get("kind") not in ("model", "shapes"):
        raise InputError("%s: \"kind\" must be \"model\" or \"shapes\", got %s" % (
            name, clip(json.dumps(doc.get("kind")), 80)))
    if doc.get("dry_run") is True and doc.get("dry_run_requested") is False:
        raise InputError("%s holds no results to plot: nothing could be measured (%s)" % (
            name, doc.get("why_not_measured")))
    if doc.get("dry_run") is True:
        raise InputError("%s is a dry run: it holds no results to plot" % name)
    if doc.get("modes") == [] and isinstance(doc.get("accuracy"), dict):
        raise InputError("%s is an --accuracy-only run: it holds errors, no times, so there is nothing to chart "
                         "(gemmscope report %s prints them)" % (name, name))
    normalize_mode_names(doc)
    modes = doc.get("modes")
    if not isinstance(modes, list) or not modes or not all(isinstance(m, str) for m in modes):
        raise InputError("%s: \"modes\" must be a non-empty list of strings" % name)
    precs = doc.get("precisions")
    if not isinstance(precs, list) or not precs or not all(isinstance(p, str) for p in precs):
        raise InputError("%s: \"precisions\" must be a non-empty list of strings" % name)
    for key, values in (("modes", modes), ("precisions", precs)):
        seen = set()  # a set: a list of a million names is checked in linear time
        for v in values:
            if v in seen:
                raise InputError("%s: \"%s\" lists %s twice" % (name, key, clip(v, 80)))
            seen.add(v)
    # The optional objects the charts read: absent or null, else of the right type.
    for key in ("tool", "timing", "device", "config", "summary"):
        if doc.get(key) is not None and not isinstance(doc[key], dict):
            raise InputError("%s: %s must be an object or null" % (name, key))
    if doc.get("created") is not None and not isinstance(doc["created"], str):
        raise InputError("%s: created must be a string" % name)
    notes = doc.get("notes")
    if notes is not None and (not isinstance(notes, list) or not all(isinstance(n, str) for n in notes)):
        raise InputError("%s: notes must be a list of strings" % name)
    gemms = doc.get("gemms")
    if not isinstance(gemms, list) or not gemms:
        raise InputError("%s: \"gemms\" must be a non-empty list" % name)
    any_results = False
    for i, g in enumerate(gemms):
        where = "%s: gemms[%d]" % (name, i)
        if not isinstance(g, dict):
            raise InputError(where + " is not an object")
        for key in ("pass", "op"):
            if not isinstance(g.get(key), str):
                raise InputError("%s: \"%s\" must be a string" % (where, key))
        for key in ("m", "k", "n"):
            if not _is_int(g.get(key)) or g[key] <= 0:
                raise InputError("%s: \"%s\" must be a positive integer" % (where, key))
            if g[key] > MAX_DIM:
                raise InputError("%s: \"%s\" must be at most %d, got %d" % (where, key, MAX_DIM, g[key]))
        res = g.get("results")
        if res is None:
            continue
        if not isinstance(res, dict):
            raise InputError(where + ": \"results\" is not an object")
        any_results = True
        for mode, cells in res.items():
            if not isinstance(cells, dict):
                raise InputError("%s.results.%s is not an object" % (where, clip(mode, 80)))
            for p, c in cells.items():
                cw = "%s.results.%s.%s" % (where, clip(mode, 80), clip(p, 80))
                if not isinstance(c, dict) or c.get("status") not in ("ok", "n/a"):
                    raise InputError(cw + ": a cell must be an object with status \"ok\" or \"n/a\"")
                if c["status"] == "ok" and (not _is_num(c.get("mean_ms")) or c["mean_ms"] <= 0):
                    raise InputError(cw + ": status \"ok\" needs a positive number mean_ms")
                if c["status"] == "ok" and not MIN_MS <= c["mean_ms"] <= MAX_MS:
                    raise InputError("%s.mean_ms must be from %g to %g ms, got %r" % (cw, MIN_MS, MAX_MS, c["mean_ms"]))
                if c.get("tflops") is not None and (not _is_num(c["tflops"]) or not 0 <= c["tflops"] <= 1e9):
                    raise InputError("%s.tflops must be a number from 0 to 1e9, got %s" % (cw, clip(c["tflops"], 40)))
    if not any_results:
        raise InputError("%s holds no results (a plan without measurements?)" % name)
    if doc["kind"] == "model":
        cfg = doc.get("config")
        if not isinstance(cfg, dict) or not _is_int(cfg.get("num_hidden_layers")) or cfg["num_hidden_layers"] <= 0:
            raise InputError("%s: a \"model\" result needs config.num_hidden_layers" % name)
        if cfg["num_hidden_layers"] > MAX_DIM:
            raise InputError("%s: config.num_hidden_layers must be at most %d" % (name, MAX_DIM))
    return doc


# ----------------------------------------------------------------------------------------------
# Reading values
# ----------------------------------------------------------------------------------------------

def cell(g, mode, prec):
    c = ((g.get("results") or {}).get(mode) or {}).get(prec)
    return c if isinstance(c, dict) else {"status": "n/a", "reason": "not measured"}


def cell_ms(g, mode, prec):
    c = cell(g, mode, prec)
    return float(c["mean_ms"]) if c.get("status") == "ok" else None


def cell_stdev(g, mode, prec):
    c = cell(g, mode, prec)
    if c.get("status") != "ok" or not _is_num(c.get("stdev_ms")):
        return 0.0
    return float(c["stdev_ms"])


def is_predicted(doc):
    """A gemmscope predict document: its cells hold predicted times with bands, nothing measured."""
    t = doc.get("timing")
    return (isinstance(t, dict) and t.get("method") == "predicted") or isinstance(doc.get("prediction"), dict)


def cell_band(g, mode, prec):
    """A predicted cell's band (low_ms, high_ms) (gemmscope predict, docs/predict.md), or None for a
    measured or n/a cell."""
    c = cell(g, mode, prec)
    if c.get("status") != "ok" or c.get("predicted") is not True:
        return None
    lo, hi = c.get("low_ms"), c.get("high_ms")
    if not (_is_num(lo) and _is_num(hi)) or not float(lo) <= float(c["mean_ms"]) <= float(hi):
        raise InputError("a predicted cell's low_ms and high_ms must be numbers around its mean_ms (%s %s %s)"
                         % (clip(g.get("label") or g.get("op"), 40), mode, prec))
    return float(lo), float(hi)


def band_of_sum(weighted, mode, prec):
    """The band (low, high) of a weighted sum of predicted cells, [(gemm, weight)]: the ends summed, the
    cells' bands fully correlated as gemmscope predict sums them. None when a cell has no band."""
    lo = hi = 0.0
    for g, w in weighted:
        if not w:
            continue
        b = cell_band(g, mode, prec)
        if b is None:
            return None
        lo += w * b[0]
        hi += w * b[1]
    return lo, hi


def ratio_band(num, den):
    """The band of den / num (a speedup: the baseline's time over this one's) from both bands."""
    if num is None or den is None or num[0] <= 0 or num[1] <= 0:
        return None
    return den[0] / num[1], den[1] / num[0]


def fmt_range_x(b):
    return "%s–%s" % (fmt_x(b[0]), fmt_x(b[1]))


BAND_LABEL = "band: predicted low–high\n(gemmscope predict; the cells'\nbands summed, docs/predict.md)"


def spread_of_sum(gemms, mode, prec, scale=1.0):
    """Standard deviation of a sum of cells' times (independent iterations): sqrt of summed variances."""
    return math.sqrt(sum((cell_stdev(g, mode, prec) * scale) ** 2 for g in gemms))


def gemm_weights(doc):
    """How many times each scope's GEMMs count in a model run's full-model time: "layer" in every
    layer, "dense_layer" / "moe_layer" in the dense / MoE layers (plan.dense_layers,
    plan.moe_layers; a file without them is all dense), "model" once (LM head)."""
    layers = layers_of(doc)
    plan = doc.get("plan") if isinstance(doc.get("plan"), dict) else {}
    moe = plan.get("moe_layers", 0)
    dense = plan.get("dense_layers", layers - moe if _is_int(moe) else layers)
    for key, v in (("moe_layers", moe), ("dense_layers", dense)):
        if not _is_int(v) or not 0 <= v <= layers:
            raise InputError("plan.%s must be an integer from 0 to %d (the layers), got %s" % (key, layers, clip(v, 40)))
    return {"layer": layers, "dense_layer": dense, "moe_layer": moe, "model": 1}


def written_total(doc, mode, prec):
    """The "totals" entry gemmscope wrote for (mode, prec) (docs/json-schema.md): the time the
    speedups are taken from ("ms"), its spread ("spread_ms") and a prediction's band ("low_ms",
    "high_ms"), computed by gemmscope itself. None for a file written before "totals" existed, which
    the functions below then sum from the cells as gemmscope does."""
    totals = doc.get("totals")
    if totals is None:
        return None
    entry = (totals.get(mode) or {}).get(prec) if isinstance(totals, dict) and isinstance(totals.get(mode), dict) else None
    where = "totals.%s.%s" % (clip(mode, 80), clip(prec, 80))
    if not isinstance(entry, dict):
        raise InputError(where + " must be an object (the file lists the mode and the precision)")
    for key in ("ms", "spread_ms", "low_ms", "high_ms"):
        v = entry.get(key)
        if v is not None and (not _is_num(v) or not 0 <= v <= MAX_MS * MAX_DIM):
            raise InputError("%s.%s must be a time from 0 to %g ms, got %s" % (where, key, MAX_MS * MAX_DIM, clip(v, 40)))
    return entry


def run_total_sd(doc, mode, prec):
    """±1 standard deviation of run_total: the cells' per-iteration stdevs, each times the number of
    times its GEMM counts (layers), summed as variances (root-sum-square)."""
    written = written_total(doc, mode, prec)
    if written is not None:
        return float(written.get("spread_ms") or 0.0)
    if doc["kind"] != "model":
        return spread_of_sum(doc["gemms"], mode, prec)
    w = gemm_weights(doc)
    return math.sqrt(sum((w.get(g.get("scope", "layer"), 0) * cell_stdev(g, mode, prec)) ** 2 for g in doc["gemms"]))


def run_total_band(doc, mode, prec):
    """The band of run_total for a predicted document (each GEMM as many times as it counts), or None."""
    if not is_predicted(doc):
        return None
    written = written_total(doc, mode, prec)
    if written is not None:
        if written.get("low_ms") is None or written.get("high_ms") is None:
            return None
        return float(written["low_ms"]), float(written["high_ms"])
    if doc["kind"] != "model":
        return band_of_sum([(g, 1) for g in doc["gemms"]], mode, prec)
    w = gemm_weights(doc)
    return band_of_sum([(g, w.get(g.get("scope", "layer"), 0)) for g in doc["gemms"]], mode, prec)


def summary_interval(doc, mode, key, name):
    """The 95% interval written by --repeats (N >= 3) as summary.<mode>.intervals: key
    "per_layer_total" or "full_model" with a precision name, or "speedups" with a speedup name
    ("FP8Current vs BF16"). (median, lo, hi, n), or None when the file has none."""
    ivs = ((doc.get("summary") or {}).get(mode) or {})
    if not isinstance(ivs, dict):
        raise InputError("summary.%s must be an object" % mode)
    ivs = ivs.get("intervals")
    if ivs is None:
        return None
    where = "summary.%s.intervals" % mode
    if not isinstance(ivs, dict):
        raise InputError(where + " must be an object")
    if key == "speedups":
        entries = ivs.get("speedups") or []
        if not isinstance(entries, list) or not all(isinstance(e, dict) for e in entries):
            raise InputError(where + ".speedups must be a list of objects")
        iv = next((e.get("interval") for e in entries if e.get("name") == name), None)
    else:
        obj = ivs.get(key) or {}
        if not isinstance(obj, dict):
            raise InputError("%s.%s must be an object" % (where, key))
        iv = obj.get(name)
    if iv is None:
        return None
    where = "%s.%s.%s" % (where, key, name)
    if not isinstance(iv, dict) or not all(_is_num(iv.get(k)) and 0 <= iv[k] <= MAX_MS * MAX_DIM
                                           for k in ("median", "lo", "hi")):
        raise InputError(where + " must be an object with numbers median, lo and hi")
    if iv["lo"] > iv["hi"] or not _is_int(iv.get("n")) or iv["n"] < 1:
        raise InputError(where + " must have lo <= hi and a count n >= 1")
    return (float(iv["median"]), float(iv["lo"]), float(iv["hi"]), iv["n"])


def ratio_sd(ratio, a, sd_a, b, sd_b):
    """±1 stdev of ratio = a / b from the stdevs of a and b: relative errors combined as root-sum-square."""
    if not a or not b:
        return 0.0
    return ratio * math.sqrt((sd_a / a) ** 2 + (sd_b / b) ** 2)


def cell_tflops(g, mode, prec):
    c = cell(g, mode, prec)
    if c.get("status") != "ok":
        return None
    if _is_num(c.get("tflops")) and c["tflops"] > 0:
        return float(c["tflops"])
    return 2.0 * g["m"] * g["k"] * g["n"] / (float(c["mean_ms"]) * 1e-3) / 1e12


def sum_or_none(values):
    values = list(values)
    if any(v is None for v in values):
        return None
    return sum(values)


def shape_str(g):
    return "%dx%dx%d" % (g["m"], g["k"], g["n"])


def repeats_of(doc):
    """timing.repeats (--repeats N: every cell measured N times), 1 when absent."""
    n = (doc.get("timing") or {}).get("repeats", 1)
    return n if _is_int(n) and n >= 1 else 1


def layers_of(doc):
    cfg = doc.get("config") or {}
    return cfg.get("num_hidden_layers") or 1


def na_reasons(doc, mode, prec, gemms=None):
    """Short 'pass op: reason' strings for the n/a cells of one precision."""
    out = []
    for g in (gemms if gemms is not None else doc["gemms"]):
        c = cell(g, mode, prec)
        if c.get("status") != "ok":
            what = g.get("label") or g["op"]
            if g["pass"] != "shape":
                what = "%s %s" % (g["pass"], what)
            out.append("%s: %s" % (what, c.get("reason") or "n/a"))
    return out


def na_summary(reasons):
    """Groups 'what: reason' strings by reason: '12 GEMMs: reason' or 'a, b: reason'."""
    groups = []
    for r in reasons:
        what, _, why = r.partition(": ")
        for g in groups:
            if g[0] == why:
                g[1].append(what)
                break
        else:
            groups.append((why, [what]))
    parts = []
    for why, whats in groups:
        head = ", ".join(whats) if len(whats) <= 2 else "%d GEMMs" % len(whats)
        parts.append("%s: %s" % (head, why))
    return "; ".join(parts)


def precision_flags(doc, mode, prec):
    """'emulated' / 'unverified on hardware' markers from the notes that concern `prec`:
    top-level notes that start with the precision's name, and "note"/"notes" in its cells."""
    texts = []
    for n in doc.get("notes") or []:
        if isinstance(n, str) and re.match(re.escape(prec) + r"\b", n):
            texts.append(n)
    for g in doc["gemms"]:
        c = cell(g, mode, prec)
        if isinstance(c.get("note"), str):
            texts.append(c["note"])
        if isinstance(c.get("notes"), list):
            texts.extend(t for t in c["notes"] if isinstance(t, str))
    low = " ".join(texts).lower()
    flags = []
    if "emulat" in low:
        flags.append("emulated")
    if "unverified" in low:
        flags.append("unverified on hardware")
    return flags, texts


def precision_color(prec, precs):
    if prec in PRECISION_COLORS:
        return PRECISION_COLORS[prec]
    extra = [p for p in precs if p not in PRECISION_COLORS]
    return EXTRA_COLORS[extra.index(prec) % len(EXTRA_COLORS)]


def lighten(color, amount):
    from matplotlib.colors import to_rgb
    r, g, b = to_rgb(color)
    return (r + (1 - r) * amount, g + (1 - g) * amount, b + (1 - b) * amount)


def fmt_ms(v):
    if v >= 100:
        return "%.0f" % v
    if v >= 10:
        return "%.1f" % v
    if v >= 1:
        return "%.2f" % v
    return "%.3f" % v


def fmt_x(v):
    return "%.2fx" % v


# ----------------------------------------------------------------------------------------------
# Shared decoration
# ----------------------------------------------------------------------------------------------

def device_name(doc):
    dev = doc.get("device")
    if isinstance(dev, dict) and isinstance(dev.get("name"), str) and dev["name"]:
        return dev["name"]
    return "unknown GPU"


def config_line(doc):
    cfg = doc.get("config") or {}
    parts = []
    for key, label in (("hidden_size", "hidden"), ("intermediate_size", "intermediate"),
                       ("num_attention_heads", "heads"), ("num_hidden_layers", "layers"),
                       ("tokens", "tokens")):
        v = cfg.get(key)
        if _is_int(v):
            parts.append("%s %s" % (label, "{:,}".format(v)))
    kv = cfg.get("num_key_value_heads")
    if _is_int(kv) and _is_int(cfg.get("num_attention_heads")) and kv != cfg["num_attention_heads"]:
        parts.insert(3, "kv heads %d" % kv)
    line = ", ".join(parts)
    if isinstance(cfg.get("name"), str) and cfg["name"]:
        line = "%s: %s" % (cfg["name"], line)
    return line


def provenance(doc):
    tool = doc.get("tool") or {}
    timing = doc.get("timing") or {}
    bits = ["gemmscope %s" % tool.get("version", "?")]
    if timing:
        t = "%s" % timing.get("method", "?")
        if timing.get("method") == "predicted":
            t = "predicted times (nothing measured on this GPU)"
        elif _is_int(timing.get("warmup")) and _is_int(timing.get("iters")):
            t += ", %d warmup + %d timed iterations, mean" % (timing["warmup"], timing["iters"])
        bits.append(t)
    if isinstance(doc.get("created"), str):
        bits.append(doc["created"])
    return "  |  ".join(bits)


def tick_label(doc, mode, prec):
    flags, _ = precision_flags(doc, mode, prec)
    if flags:
        return "%s\n(%s)" % (prec, ", ".join(flags))
    return prec


def footer_lines(doc, mode, precs, extra=()):
    """Notes a reader needs: emulated/unverified precisions, skipped precisions, n/a reasons."""
    lines = ([doc["_provider_line"]] if isinstance(doc.get("_provider_line"), str) else []) + list(extra)
    seen = set()
    for p in precs:
        flags, texts = precision_flags(doc, mode, p)
        if flags:
            for t in texts:
                if t not in seen:
                    seen.add(t)
                    lines.append(t)
    known = set(PRECISION_COLORS) | set(doc["precisions"])
    for n in doc.get("notes") or []:
        if not isinstance(n, str) or n in seen:
            continue
        head = n.split(":", 1)[0].strip()
        if head in known:
            seen.add(n)
            lines.append(n)
    return lines


def add_footer(fig, lines, provenance_text, y_top):
    """Writes notes under the axes; returns nothing. `y_top` is a figure y coordinate."""
    wrapped = []
    for ln in lines[:8]:
        wrapped.extend(textwrap.wrap(ln, 150) or [""])
    if len(lines) > 8:
        wrapped.append("(%d more notes in the JSON)" % (len(lines) - 8))
    wrapped.append(provenance_text)
    fig.text(0.01, y_top, "\n".join(wrapped), ha="left", va="top", fontsize=7.5, color="#444444")


# Temporary chart files not yet renamed over their targets: removed on every way out,
# SIGINT and SIGTERM included.
_TEMP_FILES = []


def _create_temp(out):
    """A new file OUT.tmp-XXXXXX next to `out` (the name gemmscope's output check proves
    creatable), created with O_EXCL and O_NOFOLLOW: never an existing file, never through a
    symlink planted there. Returns (fd, path)."""
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_CLOEXEC", 0)
    chars = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789"
    for _ in range(100):
        tmp = out + ".tmp-" + "".join(random.choice(chars) for _ in range(6))
        try:
            return os.open(tmp, flags, 0o666), tmp
        except OSError as e:
            if e.errno != errno.EEXIST:
                raise
    raise OSError(errno.EEXIST, "no free temporary file name")


def save(fig, out):
    """Draws `fig` into a temporary file in the target's directory, then renames it over `out`:
    a failed or interrupted write never leaves a truncated chart or clobbers an existing one."""
    ext = os.path.splitext(out)[1].lower()
    kw = {}
    if ext in (".svg", ".pdf"):
        kw["metadata"] = {"Date": None}  # no timestamp: the same input gives the same SVG
    tmp = None
    try:
        fd, tmp = _create_temp(out)
        _TEMP_FILES.append(tmp)
        with os.fdopen(fd, "wb") as f:
            fig.savefig(f, format=ext[1:], dpi=150, bbox_inches="tight", **kw)
        os.replace(tmp, out)
    except OSError as e:
        raise InputError("cannot write %s: %s" % (out, e.strerror or e))
    finally:
        if tmp is not None:
            _remove_temp(tmp)


def _remove_temp(tmp):
    try:
        os.unlink(tmp)
    except OSError:
        pass  # renamed already (the usual case), or gone
    if tmp in _TEMP_FILES:
        _TEMP_FILES.remove(tmp)


class _Terminated(BaseException):
    """SIGTERM, raised where the script is so that temporary files are removed on the way out."""


def _on_sigterm(signum, frame):
    raise _Terminated()


# ----------------------------------------------------------------------------------------------
# Model chart: one stacked bar per precision
# ----------------------------------------------------------------------------------------------

def model_breakdown(doc, mode, prec):
    """Per-layer segments of one precision: {op: (fprop+dgrad ms, wgrad ms)}, the LM head ms per
    layer (None when absent or n/a), the per-layer total (None when any layer cell is n/a)."""
    layer = [g for g in doc["gemms"] if g.get("scope", "layer") == "layer"]
    segs = {}
    for op, _, _, _ in LAYER_OPS:
        gs = [g for g in layer if g["op"] == op]
        if not gs:
            continue
        fd = sum_or_none(cell_ms(g, mode, prec) for g in gs if g["pass"] in ("fprop", "dgrad"))
        wg = sum_or_none(cell_ms(g, mode, prec) for g in gs if g["pass"] == "wgrad")
        segs[op] = (fd, wg)
    # ops the chart has no colour for (future kinds) still count in the total
    others = [g for g in layer if g["op"] not in dict((o[0], 1) for o in LAYER_OPS)]
    other_ms = sum_or_none(cell_ms(g, mode, prec) for g in others)
    total = sum_or_none([v for fw in segs.values() for v in fw] + [other_ms])
    summ = ((((doc.get("summary") or {}).get(mode) or {}).get("per_layer") or {}).get("total") or {})
    if prec in summ and summ[prec] is None:
        total = None  # the run itself says n/a
    once = [g for g in doc["gemms"] if g.get("scope") == "model"]
    lm = None
    if once:
        s = sum_or_none(cell_ms(g, mode, prec) for g in once)
        lm = None if s is None else s / layers_of(doc)
    return segs, lm, total, bool(once)


def chart_model(doc, mode, baseline, out):
    import matplotlib.pyplot as plt
    from matplotlib.lines import Line2D
    from matplotlib.patches import Patch

    precs = doc["precisions"]
    layers = layers_of(doc)
    data = {p: model_breakdown(doc, mode, p) for p in precs}
    has_lm = any(d[3] for d in data.values())
    lm_ok_everywhere = has_lm and all(d[1] is not None for d in data.values() if d[2] is not None)

    def bar_total(p):
        segs, lm, total, _ = data[p]
        if total is None:
            return None
        if lm_ok_everywhere:
            return total + lm
        return total

    base_total = bar_total(baseline)
    def bar_band(p):
        """A predicted bar's band (low, high): its layer cells' bands, the LM head's over the layers."""
        if not is_predicted(doc) or bar_total(p) is None:
            return None
        weighted = [(g, 1) for g in doc["gemms"] if g.get("scope", "layer") == "layer"]
        if lm_ok_everywhere:
            weighted += [(g, 1.0 / layers) for g in doc["gemms"] if g.get("scope") == "model"]
        return band_of_sum(weighted, mode, p)

    bands = {p: bar_band(p) for p in precs}
    heights = [bar_total(p) for p in precs if bar_total(p) is not None]
    heights += [b[1] for b in bands.values() if b is not None]
    ymax = max(heights) if heights else 1.0
    drawn = {"sd": False, "band": False}

    fig_w = max(7.5, 1.45 * len(precs) + 4.2)
    fig, ax = plt.subplots(figsize=(fig_w, 6.0))
    width = 0.62
    extra_notes = []
    for i, p in enumerate(precs):
        segs, lm, total, _ = data[p]
        if total is None:
            t = ax.text(i, ymax * 0.03, "N/A", ha="center", va="bottom", fontsize=13,
                        fontweight="bold", color="#b00020")
            t.set_gid("na:%s" % p)
            reasons = na_reasons(doc, mode, p, [g for g in doc["gemms"] if g.get("scope", "layer") == "layer"])
            ax.text(i, ymax * 0.03 + ymax * 0.07, "%d GEMM%s n/a" % (len(reasons), "" if len(reasons) == 1 else "s"),
                    ha="center", va="bottom", fontsize=8, color="#b00020")
            extra_notes.append("%s is N/A in %s mode: %s" % (p, mode, na_summary(reasons)))
            continue
        bottom = 0.0
        for op, label, gidname, color in LAYER_OPS:
            if op not in segs:
                continue
            fd, wg = segs[op]
            for value, part, col in ((fd, "fpropdgrad", color), (wg, "wgrad", lighten(color, 0.55))):
                if value is None or value <= 0:
                    continue
                r = ax.bar(i, value, width, bottom=bottom, color=col, edgecolor="white", linewidth=0.6)
                r.patches[0].set_gid("bar:%s:%s:%s" % (p, gidname, part))
                if value >= ymax * 0.045:
                    ax.text(i, bottom + value / 2, fmt_ms(value), ha="center", va="center", fontsize=7,
                            color="white" if part == "fpropdgrad" else "#222222")
                bottom += value
        if lm_ok_everywhere and lm:
            r = ax.bar(i, lm, width, bottom=bottom, color=lighten(LM_HEAD_COLOR, 0.3), edgecolor="white",
                       hatch="///", linewidth=0.6)
            r.patches[0].set_gid("bar:%s:LMHead:all" % p)
            if lm >= ymax * 0.045:
                ax.text(i, bottom + lm / 2, fmt_ms(lm), ha="center", va="center", fontsize=7, color="#222222",
                        bbox=dict(boxstyle="square,pad=0.1", facecolor="white", edgecolor="none", alpha=0.85))
            bottom += lm
        if p == baseline:
            label_txt = "%s ms\nbaseline" % fmt_ms(bottom)
        elif base_total is not None:
            label_txt = "%s ms\n%s" % (fmt_ms(bottom), fmt_x(base_total / bottom))
        else:
            label_txt = "%s ms\n(no baseline)" % fmt_ms(bottom)
        # The spread of the bar: the per-iteration stdev of its cells, summed as variances.
        layer_g = [g for g in doc["gemms"] if g.get("scope", "layer") == "layer"]
        once_g = [g for g in doc["gemms"] if g.get("scope") == "model"] if (lm_ok_everywhere and lm) else []
        sd = math.sqrt(spread_of_sum(layer_g, mode, p) ** 2 + spread_of_sum(once_g, mode, p, 1.0 / layers) ** 2)
        band = bands[p]
        if band is not None:  # a prediction: its band, low..high, not a stdev
            eb = ax.errorbar(i, bottom, yerr=[[max(0.0, bottom - band[0])], [max(0.0, band[1] - bottom)]], fmt="none",
                             ecolor="#111111", elinewidth=1.0, capsize=4)
            eb.lines[2][0].set_gid("err:%s" % p)
            drawn["band"] = True
            sd = max(0.0, band[1] - bottom)
            rb = ratio_band(band, bands.get(baseline)) if p != baseline else None
            if rb is not None:
                label_txt += "\n(%s)" % fmt_range_x(rb)
        elif sd > 0:
            eb = ax.errorbar(i, bottom, yerr=sd, fmt="none", ecolor="#111111", elinewidth=1.0, capsize=4)
            eb.lines[2][0].set_gid("err:%s" % p)
            drawn["sd"] = True
        t = ax.text(i, bottom + sd + ymax * 0.012, label_txt, ha="center", va="bottom", fontsize=9,
                    fontweight="bold" if p != baseline else "normal")
        t.set_gid("speedup:%s" % p)

    ax.set_xticks(range(len(precs)))
    ax.set_xticklabels([tick_label(doc, mode, p) for p in precs], fontsize=9)
    ax.set_xlim(-0.6, len(precs) - 0.4)
    ax.set_ylim(0, ymax * 1.17)
    unit = "GEMM time per layer (ms)"
    if lm_ok_everywhere:
        unit = "GEMM time per layer (ms)\n(LM head: its time / %d layers)" % layers
    ax.set_ylabel(unit)
    ax.yaxis.grid(True, color="#dddddd", linewidth=0.6)
    ax.set_axisbelow(True)
    for side in ("top", "right"):
        ax.spines[side].set_visible(False)

    handles = []
    for op, label, _, color in LAYER_OPS:
        if any(op in data[p][0] for p in precs):
            handles.append(Patch(facecolor=color, label=label))
    if lm_ok_everywhere:
        handles.append(Patch(facecolor=lighten(LM_HEAD_COLOR, 0.3), hatch="///", edgecolor="white",
                             label="LM head / %d layers\n(all passes)" % layers))
    handles.append(Patch(facecolor="#555555", label="Fprop + Dgrad (solid)"))
    handles.append(Patch(facecolor=lighten("#555555", 0.55), label="Wgrad (light)"))
    if drawn["band"]:
        handles.append(Line2D([0], [0], color="#111111", marker="_", markersize=8,
                              label=BAND_LABEL + "\nspeedup range: baseline's band\nover this bar's band"))
    if drawn["sd"]:
        handles.append(Line2D([0], [0], color="#111111", marker="_", markersize=8, label="error bar: ±1 stdev\n(all passes measured)"))
    ax.legend(handles=handles, loc="upper left", bbox_to_anchor=(1.01, 1.0), frameon=False, fontsize=9)

    base_word = "speedup vs %s above each bar" % baseline
    fig.suptitle("Per-layer GEMM time by precision on %s" % device_name(doc), fontsize=13,
                 fontweight="bold", x=0.01, ha="left")
    ax.set_title("%s\nMode: %s  |  %s" % (config_line(doc), MODE_TEXT.get(mode, mode), base_word),
                 fontsize=9, loc="left", color="#333333")

    if any(g.get("scope") in ("moe_layer", "dense_layer") for g in doc["gemms"]):
        extra_notes.insert(0, "This model has experts: the GEMMs of its MoE and dense MLP layers (router, experts, "
                              "shared experts, dense MLP) are not in these bars; --kind experts charts the experts.")
    if has_lm and not lm_ok_everywhere:
        extra_notes.insert(0, "LM head (runs once per step) is left out: it is n/a for some precision.")
    elif not has_lm:
        cfg = doc.get("config") or {}
        if cfg.get("vocab_size"):
            extra_notes.insert(0, "LM head GEMMs are not in this result and are not shown.")
    fig.tight_layout()
    fig.subplots_adjust(top=0.84)
    add_footer(fig, footer_lines(doc, mode, precs, extra_notes), provenance(doc), -0.01)
    save(fig, out)
    plt.close(fig)


# ----------------------------------------------------------------------------------------------
# Shapes chart: grouped TFLOP/s bars
# ----------------------------------------------------------------------------------------------

def group_label(doc, g):
    if g["pass"] == "shape":
        return shape_str(g)
    return "%s %s\n%s" % (g["pass"].capitalize(), g.get("label") or g["op"], shape_str(g))


def chart_shapes(doc, mode, baseline, out):
    import matplotlib.pyplot as plt

    precs = doc["precisions"]
    gemms = doc["gemms"]
    n = len(gemms)
    width = 0.8 / len(precs)
    vals = {p: [cell_tflops(g, mode, p) for g in gemms] for p in precs}
    allv = [v for p in precs for v in vals[p] if v is not None]
    ymax = max(allv) if allv else 1.0

    fig_w = min(30.0, max(8.0, n * (0.32 * len(precs) + 0.5) + 3.5))
    fig, ax = plt.subplots(figsize=(fig_w, 5.8))
    shape_err = {"sd": False, "band": False}
    for j, p in enumerate(precs):
        color = precision_color(p, precs)
        for i, g in enumerate(gemms):
            x = i - 0.4 + width * (j + 0.5)
            v = vals[p][i]
            if v is None:
                t = ax.text(x, ymax * 0.01, "N/A", ha="center", va="bottom", rotation=90, fontsize=8,
                            color="#b00020", fontweight="bold")
                t.set_gid("na:%s:%d" % (p, i))
                continue
            r = ax.bar(x, v, width * 0.92, color=color, label=tick_label(doc, mode, p).replace("\n", " ") if i == 0 else None)
            r.patches[0].set_gid("bar:%s:%d" % (p, i))
            sd = v * cell_stdev(g, mode, p) / cell_ms(g, mode, p)  # TFLOP/s spread from the time's stdev
            band = cell_band(g, mode, p)
            if band is not None:  # a prediction: TFLOP/s at the band's high and low times
                ms = cell_ms(g, mode, p)
                eb = ax.errorbar(x, v, yerr=[[v - v * ms / band[1]], [v * ms / band[0] - v]], fmt="none",
                                 ecolor="#111111", elinewidth=0.8, capsize=2)
                eb.lines[2][0].set_gid("err:%s:%d" % (p, i))
                shape_err["band"] = True
            elif sd > 0:
                eb = ax.errorbar(x, v, yerr=sd, fmt="none", ecolor="#111111", elinewidth=0.8, capsize=2)
                eb.lines[2][0].set_gid("err:%s:%d" % (p, i))
                shape_err["sd"] = True
            ax.text(x, v + ymax * 0.01, "%.0f" % v, ha="center", va="bottom", rotation=90, fontsize=7)
    # the legend needs an entry for a precision whose first cell is n/a
    for p in precs:
        if vals[p] and vals[p][0] is None:
            ax.bar(0, 0, 0, color=precision_color(p, precs), label=tick_label(doc, mode, p).replace("\n", " "))
    ax.set_xticks(range(n))
    ax.set_xticklabels([group_label(doc, g) for g in gemms], fontsize=8,
                       rotation=30 if n > 6 else 0, ha="right" if n > 6 else "center")
    ax.set_xlim(-0.6, n - 0.4)
    ax.set_ylim(0, ymax * 1.15)
    ax.set_ylabel("Throughput (TFLOP/s, 2·M·K·N / mean time)")
    ax.set_xlabel("GEMM shape (M x K x N)")
    ax.yaxis.grid(True, color="#dddddd", linewidth=0.6)
    ax.set_axisbelow(True)
    for side in ("top", "right"):
        ax.spines[side].set_visible(False)
    ax.legend(loc="upper left", bbox_to_anchor=(1.01, 1.0), frameon=False, fontsize=9, title="Precision")
    fig.suptitle("GEMM throughput per shape on %s" % device_name(doc), fontsize=13, fontweight="bold",
                 x=0.01, ha="left")
    ax.set_title("Mode: %s" % MODE_TEXT.get(mode, mode), fontsize=9, loc="left", color="#333333")
    extra = []
    for p in precs:
        r = na_reasons(doc, mode, p)
        if r:
            extra.append("%s N/A: %s" % (p, na_summary(r)))
    if shape_err["band"]:
        extra.insert(0, "error bars: the predicted band of each cell (gemmscope predict, docs/predict.md), as TFLOP/s")
    if shape_err["sd"]:
        extra.insert(0, "error bars: ±1 stdev of each cell's time, as TFLOP/s")
    fig.tight_layout()
    add_footer(fig, footer_lines(doc, mode, precs, extra), provenance(doc), -0.01)
    save(fig, out)
    plt.close(fig)


# ----------------------------------------------------------------------------------------------
# Sweep chart: latency, TFLOP/s and speedup against size, one figure with three panels
# ----------------------------------------------------------------------------------------------

def is_square(g):
    return g["m"] == g["k"] == g["n"]


def chart_sweep(doc, mode, baseline, out):
    import matplotlib.pyplot as plt
    from matplotlib.ticker import FixedLocator, FuncFormatter, NullLocator

    precs = doc["precisions"]
    square = all(is_square(g) for g in doc["gemms"])
    pts = []
    for g in doc["gemms"]:
        size = g["m"] if square else (float(g["m"]) * g["k"] * g["n"]) ** (1.0 / 3.0)
        pts.append((size, g))
    pts.sort(key=lambda t: t[0])
    xs = [s for s, _ in pts]
    nan = float("nan")

    fig, axes = plt.subplots(1, 3, figsize=(17, 5.4))
    ax_lat, ax_tf, ax_sp = axes
    any_err = [False]
    for p in precs:
        color = precision_color(p, precs)
        lat = [cell_ms(g, mode, p) for _, g in pts]
        tf = [cell_tflops(g, mode, p) for _, g in pts]
        label = tick_label(doc, mode, p).replace("\n", " ")
        (l1,) = ax_lat.plot(xs, [nan if v is None else v for v in lat], "o-", color=color, label=label, ms=4)
        l1.set_gid("line:latency:%s" % p)
        (l2,) = ax_tf.plot(xs, [nan if v is None else v for v in tf], "o-", color=color, label=label, ms=4)
        l2.set_gid("line:tflops:%s" % p)
        if p != baseline:
            sp = []
            for _, g in pts:
                a, b = cell_ms(g, mode, baseline), cell_ms(g, mode, p)
                sp.append(nan if a is None or b is None else a / b)
            (l3,) = ax_sp.plot(xs, sp, "o-", color=color, label=label, ms=4)
            l3.set_gid("line:speedup:%s" % p)
        # Error bars: ±1 stdev of each cell (per iteration; pooled over repeats when the run has them),
        # scaled to TFLOP/s, and for the speedup the two cells' relative stdevs as root-sum-square.
        sds = [cell_stdev(g, mode, p) for _, g in pts]  # 0 for predicted cells: their bands are noted below
        bars = [("latency", ax_lat, lat, sds)]
        bars.append(("tflops", ax_tf, tf, [None if t is None else t * sd / l for t, sd, l in zip(tf, sds, lat)]))
        if p != baseline:
            sp_sd = []
            for (_, g), v in zip(pts, sp):
                a, b = cell_ms(g, mode, baseline), cell_ms(g, mode, p)
                sp_sd.append(None if a is None or b is None else
                             ratio_sd(v, a, cell_stdev(g, mode, baseline), b, cell_stdev(g, mode, p)))
            bars.append(("speedup", ax_sp, sp, sp_sd))
        for panel, ax, ys, es in bars:
            keep = [(x, y, e) for x, y, e in zip(xs, ys, es) if y is not None and e and e > 0 and y == y]
            if not keep:
                continue
            # on the log latency axis a bar cannot reach zero: its lower arm stops at a tenth of the value
            lower = [min(e, 0.9 * y) if panel == "latency" else e for _, y, e in keep]
            eb = ax.errorbar([k[0] for k in keep], [k[1] for k in keep], yerr=[lower, [k[2] for k in keep]],
                             fmt="none", ecolor=color, elinewidth=0.9, capsize=2.5, alpha=0.9)
            eb.lines[2][0].set_gid("err:%s:%s" % (panel, p))
            any_err[0] = True
    ax_sp.axhline(1.0, color=precision_color(baseline, precs), linestyle="--", linewidth=1.0,
                  label="%s (= 1)" % baseline)

    size_label = "Matrix size N (M = K = N)" if square else "Size: cube root of M·K·N"
    for ax in axes:
        ax.set_xscale("log", base=2)
        ax.xaxis.set_major_locator(FixedLocator(xs))
        ax.xaxis.set_minor_locator(NullLocator())
        ax.set_xticklabels(["%d" % round(x) for x in xs], rotation=45 if len(xs) > 8 else 0, fontsize=8)
        ax.set_xlabel(size_label)
        ax.grid(True, color="#dddddd", linewidth=0.6)
        ax.set_axisbelow(True)
        for side in ("top", "right"):
            ax.spines[side].set_visible(False)
    ax_lat.set_yscale("log")
    ax_lat.yaxis.set_major_formatter(FuncFormatter(lambda v, _pos: "%g" % v))
    ax_lat.set_ylabel("Latency (ms, mean, log scale)")
    ax_lat.set_title("Latency vs size", fontsize=10)
    ax_tf.set_ylabel("Throughput (TFLOP/s)")
    ax_tf.set_ylim(bottom=0)
    ax_tf.set_title("Throughput vs size", fontsize=10)
    ax_sp.set_ylabel("Speedup vs %s (x, higher is faster)" % baseline)
    ax_sp.set_title("Speedup over %s vs size" % baseline, fontsize=10)
    ax_sp.set_ylim(bottom=0)

    handles, labels = ax_lat.get_legend_handles_labels()
    if any_err[0]:
        from matplotlib.lines import Line2D
        handles.append(Line2D([0], [0], color="#111111", marker="|", linestyle="none", markersize=9))
        labels.append("error bar: ±1 stdev per cell%s (speedup: both cells, root-sum-square)" % (
            " (pooled over %d repeats)" % repeats_of(doc) if repeats_of(doc) > 1 else ""))
    fig.legend(handles, labels, loc="lower center", bbox_to_anchor=(0.5, 0.91), ncol=len(handles),
               frameon=False, fontsize=9)
    fig.suptitle("GEMM size sweep on %s  |  mode: %s" % (device_name(doc), MODE_TEXT.get(mode, mode)),
                 fontsize=12, fontweight="bold", y=1.0)
    extra = []
    for p in precs:
        r = na_reasons(doc, mode, p)
        if r:
            extra.append("%s N/A (gap in its lines): %s" % (p, na_summary(r)))
    if is_predicted(doc):
        extra.insert(0, "PREDICTED times: each cell's band (low_ms..high_ms) is in the file, not drawn on this chart")
    fig.tight_layout(rect=(0, 0, 1, 0.97))
    add_footer(fig, footer_lines(doc, mode, precs, extra), provenance(doc), -0.01)
    save(fig, out)
    plt.close(fig)


# ----------------------------------------------------------------------------------------------
# Modes chart: autocast vs pre-quantized speedup over the baseline
# ----------------------------------------------------------------------------------------------

def run_total(doc, mode, prec):
    """Time the speedups are taken from: the full-model GEMM time of a model run (per-layer total
    x layers + LM head), the sum over all GEMMs of a shapes run. None when any cell is n/a."""
    written = written_total(doc, mode, prec)
    if written is not None:
        return None if written.get("ms") is None else float(written["ms"])
    if doc["kind"] == "model":
        full = ((((doc.get("summary") or {}).get(mode) or {}).get("full_model")) or {})
        if prec in full:
            v = full[prec]
            if v is not None and (not _is_num(v) or not MIN_MS <= v <= MAX_MS * MAX_DIM):
                raise InputError("summary.%s.full_model.%s must be a time from %g to %g ms, got %s" % (
                    mode, prec, MIN_MS, MAX_MS * MAX_DIM, clip(v, 40)))
            return v
        segs, lm, total, has_lm = model_breakdown(doc, mode, prec)
        if total is None or (has_lm and lm is None):
            return None
        return total * layers_of(doc) + (lm * layers_of(doc) if lm else 0.0)
    return sum_or_none(cell_ms(g, mode, prec) for g in doc["gemms"])


def chart_modes(doc, baseline, out):
    import matplotlib.pyplot as plt

    modes = [m for m in KNOWN_MODES if m in doc["modes"]]
    precs = [p for p in doc["precisions"] if p != baseline]
    if not precs:
        raise InputError("the modes chart needs a precision besides the baseline %s" % baseline)
    sp = {}
    err = {}  # (mode, prec): ("interval", lo, hi, n) from the repeats, or ("sd", sd)
    for m in modes:
        base = run_total(doc, m, baseline)
        base_sd = run_total_sd(doc, m, baseline)
        for p in precs:
            t = run_total(doc, m, p)
            sp[(m, p)] = None if base is None or t is None or t <= 0 else base / t
            if sp[(m, p)] is None:
                continue
            iv = summary_interval(doc, m, "speedups", "%s vs %s" % (p, baseline)) if doc["kind"] == "model" else None
            rb = ratio_band(run_total_band(doc, m, p), run_total_band(doc, m, baseline))
            if rb is not None:  # a prediction: the speedup's band
                err[(m, p)] = ("band", rb[0], rb[1], 0)
            elif iv is not None:
                err[(m, p)] = ("interval", iv[1], iv[2], iv[3])
            else:
                sd = ratio_sd(sp[(m, p)], base, base_sd, t, run_total_sd(doc, m, p))
                if sd > 0:
                    err[(m, p)] = ("sd", sd)
    allv = [v for v in sp.values() if v is not None] + [e[2] for e in err.values() if e[0] in ("interval", "band")]
    allv += [sp[k] + e[1] for k, e in err.items() if e[0] == "sd"]
    ymax = max(allv + [1.0])

    fig, ax = plt.subplots(figsize=(max(7.5, 1.6 * len(precs) + 4.0), 5.6))
    width = 0.76 / len(modes)
    styles = {"per-gemm": dict(color="#1f77b4"),
              "training": dict(color="#17becf", hatch="..", edgecolor="#0f7f8a"),
              "pre-quantized": dict(color=lighten("#1f77b4", 0.55), hatch="//", edgecolor="#1f77b4")}
    for j, m in enumerate(modes):
        for i, p in enumerate(precs):
            x = i + (j - (len(modes) - 1) / 2.0) * width
            v = sp[(m, p)]
            if v is None:
                t = ax.text(x, ymax * 0.02, "N/A", ha="center", va="bottom", fontsize=10, color="#b00020",
                            fontweight="bold", rotation=90)
                t.set_gid("na:%s:%s" % (m, p))
                continue
            r = ax.bar(x, v, width * 0.94, label=m if i == 0 else None, linewidth=0.8, **styles[m])
            r.patches[0].set_gid("bar:%s:%s" % (m, p))
            top = v
            e = err.get((m, p))
            if e is not None:
                if e[0] == "band":  # a prediction's speedup band, lo..hi around the predicted value
                    eb = ax.errorbar(x, v, yerr=[[max(0.0, v - e[1])], [max(0.0, e[2] - v)]], fmt="none",
                                     ecolor="#111111", elinewidth=1.0, capsize=4)
                    top = max(v, e[2])
                elif e[0] == "interval":  # the interval of the median speedup over the repeats, lo..hi
                    eb = ax.errorbar(x, (e[1] + e[2]) / 2.0, yerr=(e[2] - e[1]) / 2.0, fmt="none", ecolor="#111111",
                                     elinewidth=1.0, capsize=4)
                    top = max(v, e[2])
                else:
                    eb = ax.errorbar(x, v, yerr=[[min(e[1], v)], [e[1]]], fmt="none", ecolor="#111111", elinewidth=1.0, capsize=4)
                    top = v + e[1]
                eb.lines[2][0].set_gid("err:%s:%s" % (m, p))
            ax.text(x, top + ymax * 0.012, fmt_x(v), ha="center", va="bottom", fontsize=9, fontweight="bold")
    for m in modes:  # legend entries for a mode whose first bar is N/A
        if sp[(m, precs[0])] is None:
            ax.bar(0, 0, 0, label=m, **styles[m])
    ax.axhline(1.0, color="#555555", linestyle="--", linewidth=0.9)
    ax.text(len(precs) - 0.38, 1.0, "%s = 1.00x" % baseline, va="center", ha="left", fontsize=8, color="#555555",
            clip_on=False)  # right of the axes, clear of the bars
    ax.set_xticks(range(len(precs)))
    ax.set_xticklabels([tick_label(doc, modes[-1], p) if precision_flags(doc, modes[-1], p)[0]
                        else tick_label(doc, modes[0], p) for p in precs], fontsize=9)
    ax.set_xlim(-0.6, len(precs) - 0.4)
    ax.set_ylim(0, ymax * 1.15)
    what = "full-model GEMM time" if doc["kind"] == "model" else "sum of all GEMM times"
    ax.set_ylabel("Speedup vs %s (x, %s)" % (baseline, what))
    ax.yaxis.grid(True, color="#dddddd", linewidth=0.6)
    ax.set_axisbelow(True)
    for side in ("top", "right"):
        ax.spines[side].set_visible(False)
    handles, labels = ax.get_legend_handles_labels()
    kinds = set(e[0] for e in err.values())
    if kinds:
        from matplotlib.lines import Line2D
        what = "full-model time" if doc["kind"] == "model" else "summed time"
        if "band" in kinds:
            handles.append(Line2D([0], [0], color="#111111", marker="_", markersize=8))
            labels.append("band: predicted speedup range\n(the baseline's band over this\none's, gemmscope predict)")
        if "interval" in kinds:
            n = max(e[3] for e in err.values() if e[0] == "interval")
            handles.append(Line2D([0], [0], color="#111111", marker="_", markersize=8))
            labels.append("error bar: 95%% interval of the\nmedian speedup over %d repeats" % n)
        if "sd" in kinds:
            handles.append(Line2D([0], [0], color="#111111", marker="_", markersize=8))
            labels.append("error bar: ±1 stdev of the speedup\n(cells' stdevs over the %s,\nroot-sum-square; every GEMM\n"
                          "and pass measured)" % what)
    ax.legend(handles, labels, loc="upper left", bbox_to_anchor=(1.01, 1.0), frameon=False, fontsize=9, title="Mode")
    fig.suptitle("%s speedup over %s on %s" % (" vs ".join(modes).capitalize(), baseline, device_name(doc)),
                 fontsize=12, fontweight="bold", x=0.01, ha="left")
    sub = "per-gemm includes the quantization of the inputs; pre-quantized times the GEMM kernel only"
    if "training" in modes:
        sub = ("training: each tensor quantized once per step (TE); per-gemm: every GEMM quantizes its inputs; "
               "pre-quantized: GEMM kernel only")
    if doc["kind"] == "model":
        sub = config_line(doc) + "\n" + sub
    ax.set_title(sub, fontsize=9, loc="left", color="#333333")
    extra = []
    for m in modes:
        for p in precs:
            if sp[(m, p)] is None:
                r = na_reasons(doc, m, p)
                extra.append("%s N/A in %s mode: %s" % (p, m, na_summary(r) if r else
                                                          "the baseline %s has n/a cells" % baseline))
    fig.tight_layout()
    fig.subplots_adjust(top=0.84 if doc["kind"] == "model" else 0.87)
    add_footer(fig, footer_lines(doc, modes[0], doc["precisions"], extra), provenance(doc), -0.01)
    save(fig, out)
    plt.close(fig)


# ----------------------------------------------------------------------------------------------
# Experts chart: rows per expert (routing) over the grouped expert GEMM time of one MoE layer
# ----------------------------------------------------------------------------------------------

MAX_EXPERTS_DRAWN = 4096  # one bar each (the largest MoE models have a few hundred experts)
EXPERT_PASSES = [("fprop", "Fprop", "#1f77b4"), ("dgrad", "Dgrad", "#2ca02c"), ("wgrad", "Wgrad", "#ff7f0e")]


def moe_data(doc, name):
    """The MoE parts of a result, checked: the grouped expert GEMMs (each with `group_dim` and
    `group`, the rows per expert of the busiest EP rank's experts) and plan.routing (rows per
    expert over the whole EP group; None in a file without it). InputError when there are none."""
    grouped = []
    for i, g in enumerate(doc["gemms"]):
        if g.get("group_dim") is None and g.get("group") is None:
            continue
        where = "%s: gemms[%d]" % (name, i)
        if g.get("group_dim") not in ("m", "k"):
            raise InputError("%s: \"group_dim\" must be \"m\" or \"k\", got %s" % (where, clip(json.dumps(g.get("group_dim")), 40)))
        grp = g.get("group")
        if not isinstance(grp, list) or not grp or len(grp) > MAX_DIM or not all(_is_int(v) and v >= 0 for v in grp):
            raise InputError("%s: \"group\" must be a non-empty list of per-expert sizes >= 0" % where)
        if len(grp) > MAX_EXPERTS_DRAWN:
            raise InputError("%s: %d experts, more than the experts chart draws (%d)" % (where, len(grp), MAX_EXPERTS_DRAWN))
        if sum(grp) != g[g["group_dim"]]:
            raise InputError("%s: \"group\" sums to %d, not %s = %d" % (where, sum(grp), g["group_dim"], g[g["group_dim"]]))
        grouped.append(g)
    if not grouped:
        raise InputError("%s has no MoE data to chart: no grouped expert GEMMs (the experts chart needs a model with "
                         "experts, e.g. --model mixtral-8x7b)" % name)
    plan = doc.get("plan")
    rt = plan.get("routing") if isinstance(plan, dict) else None
    if rt is None:
        return grouped, None
    rw = "%s: plan.routing" % name
    if not isinstance(rt, dict):
        raise InputError(rw + " must be an object")
    counts = rt.get("counts")
    if not isinstance(counts, list) or not counts or len(counts) > MAX_DIM or \
            not all(_is_int(v) and 0 <= v <= MAX_JSON_INT for v in counts):
        raise InputError(rw + ".counts must be a non-empty list of rows per expert (integers >= 0)")
    if len(counts) > MAX_EXPERTS_DRAWN:
        raise InputError("%s: %d experts, more than the experts chart draws (%d)" % (rw, len(counts), MAX_EXPERTS_DRAWN))
    experts, ep = rt.get("experts", len(counts)), rt.get("expert_parallel", 1)
    if not _is_int(experts) or not _is_int(ep) or ep < 1 or experts != len(counts) or experts % ep:
        raise InputError(rw + ": experts, expert_parallel and counts do not agree")
    for key in ("top_k", "tokens", "capacity", "dropped"):
        if rt.get(key) is not None and (not _is_int(rt[key]) or rt[key] < 0):
            raise InputError("%s.%s must be an integer >= 0" % (rw, key))
    local = experts // ep
    rank_rows = [sum(counts[r * local:(r + 1) * local]) for r in range(ep)]
    busiest = rank_rows.index(max(rank_rows))  # as gemmscope's reader: the first rank with the most rows
    routing = dict(rt)
    routing.update(counts=counts, experts=experts, expert_parallel=ep, local=local, rank_rows=rank_rows,
                   busiest_rank=busiest)
    return grouped, routing


def chart_experts(doc, mode, baseline, out, name):
    import matplotlib.pyplot as plt
    from matplotlib.lines import Line2D
    from matplotlib.patches import Patch

    grouped, rt = moe_data(doc, name)
    precs = doc["precisions"]
    method = str((doc.get("timing") or {}).get("method", ""))
    if method == "predicted" or isinstance(doc.get("prediction"), dict):
        how = "PREDICTED"
    elif method.startswith("synthetic"):
        how = "SYNTHETIC times (not measured)"
    else:
        how = "measured"

    fig, (ax_r, ax_t) = plt.subplots(2, 1, figsize=(max(9.0, 1.5 * len(precs) + 5.0), 9.6),
                                     gridspec_kw={"height_ratios": [1.0, 1.15]})

    # -- top: rows (tokens) per expert --
    if rt is not None:
        counts, ep, local, busiest = rt["counts"], rt["expert_parallel"], rt["local"], rt["busiest_rank"]
        first = busiest * local
        hot = range(first, first + local) if ep > 1 else range(0)
        title = "Rows (tokens) per expert, all %d experts of the %s" % (
            len(counts), "EP group (%d ranks x %d experts)" % (ep, local) if ep > 1 else "layer")
    else:  # no routing in the file: the grouped GEMM's own groups (the busiest rank's experts)
        up = next((g for g in grouped if g["group_dim"] == "m"), grouped[0])
        counts, ep, local, busiest, first, hot = up["group"], 1, len(up["group"]), 0, 0, range(0)
        title = "Rows (tokens) per expert of the grouped GEMMs (%s %s)" % (up["pass"], up.get("label") or up["op"])
    n_e = len(counts)
    mean = float(sum(counts)) / n_e
    base_col, hot_col = "#8fa8c8", "#d62728"
    bars = ax_r.bar(range(n_e), counts, 0.8, color=[hot_col if e in hot else base_col for e in range(n_e)],
                    linewidth=0)
    for e, (patch, c) in enumerate(zip(bars.patches, counts)):
        patch.set_gid("bar:rows:%d" % e)
        if n_e <= 24:
            ax_r.text(e, c, "{:,}".format(c), ha="center", va="bottom", fontsize=7, color="#333333")
    ax_r.axhline(mean, color="#111111", linestyle="--", linewidth=1.0, gid="line:mean")
    handles = [Patch(facecolor=base_col, label="rows routed to the expert"),
               Line2D([0], [0], color="#111111", linestyle="--", label="mean %s rows per expert" % "{:,.0f}".format(mean))]
    top = max(max(counts), 1)  # every expert empty: still an axis
    if rt is not None and rt.get("capacity"):
        ax_r.axhline(rt["capacity"], color="#9467bd", linestyle=":", linewidth=1.2, gid="line:capacity")
        handles.append(Line2D([0], [0], color="#9467bd", linestyle=":",
                              label="capacity %s rows (%s dropped)" % ("{:,}".format(rt["capacity"]),
                                                                        "{:,}".format(rt.get("dropped") or 0))))
        top = max(top, rt["capacity"])
    if ep > 1:
        for rank in range(1, ep):
            if ep <= 64:
                ax_r.axvline(rank * local - 0.5, color="#bbbbbb", linewidth=0.6)
        handles.insert(1, Patch(facecolor=hot_col, label="busiest EP rank (%d) — sets the step time" % busiest))
        t = ax_r.text(first + (local - 1) / 2.0, top * 1.04, "busiest EP rank — sets the step time", ha="center",
                      va="bottom", fontsize=8.5, color=hot_col, fontweight="bold")
        t.set_gid("busiest:%d" % busiest)
    ax_r.set_xlim(-0.7, n_e - 0.3)
    ax_r.set_ylim(0, top * 1.16)
    ax_r.set_xlabel("expert")
    ax_r.set_ylabel("rows (tokens) per expert")
    if n_e <= 32:
        ax_r.set_xticks(range(n_e))
    ax_r.set_title(title, fontsize=10, loc="left")
    ax_r.legend(handles=handles, loc="upper left", bbox_to_anchor=(1.01, 1.0), frameon=False, fontsize=8.5)

    # -- bottom: grouped expert GEMM time per precision, stacked by pass --
    data = {}
    for p in precs:
        parts = {}
        for ps, _, _ in EXPERT_PASSES:
            mine = [g for g in grouped if g["pass"] == ps]
            if mine:
                parts[ps] = sum_or_none(cell_ms(g, mode, p) for g in mine)
        total = sum_or_none(parts.values())
        data[p] = (parts, total, spread_of_sum(grouped, mode, p))
    ebands = {p: band_of_sum([(g, 1) for g in grouped], mode, p) if is_predicted(doc) and data[p][1] is not None
              else None for p in precs}
    totals = [d[1] + d[2] for d in data.values() if d[1] is not None] + [b[1] for b in ebands.values() if b]
    drawn = {"sd": False, "band": False}
    ymax = max(totals) if totals else 1.0
    base_total = data[baseline][1]
    extra = []
    width = 0.6
    for i, p in enumerate(precs):
        parts, total, sd = data[p]
        if total is None:
            t = ax_t.text(i, ymax * 0.03, "N/A", ha="center", va="bottom", fontsize=13, fontweight="bold",
                          color="#b00020")
            t.set_gid("na:%s" % p)
            extra.append("%s is N/A for the expert GEMMs in %s mode: %s" % (p, mode, na_summary(na_reasons(doc, mode, p, grouped))))
            continue
        bottom = 0.0
        for ps, _, color in EXPERT_PASSES:
            v = parts.get(ps)
            if not v:
                continue
            r = ax_t.bar(i, v, width, bottom=bottom, color=color, edgecolor="white", linewidth=0.6)
            r.patches[0].set_gid("bar:%s:grouped:%s" % (p, ps))
            if v >= ymax * 0.06:
                ax_t.text(i, bottom + v / 2, fmt_ms(v), ha="center", va="center", fontsize=7.5, color="white")
            bottom += v
        if p == baseline:
            lab = "%s ms\nbaseline" % fmt_ms(bottom)
        elif base_total:
            lab = "%s ms\n%s" % (fmt_ms(bottom), fmt_x(base_total / bottom))
        else:
            lab = "%s ms\n(no baseline)" % fmt_ms(bottom)
        if ebands[p] is not None:  # a prediction: its band, low..high
            lo, hi = ebands[p]
            eb = ax_t.errorbar(i, bottom, yerr=[[max(0.0, bottom - lo)], [max(0.0, hi - bottom)]], fmt="none",
                               ecolor="#111111", elinewidth=1.0, capsize=4)
            eb.lines[2][0].set_gid("err:%s" % p)
            drawn["band"] = True
            sd = max(0.0, hi - bottom)
            rb = ratio_band(ebands[p], ebands.get(baseline)) if p != baseline else None
            if rb is not None:
                lab += "\n(%s)" % fmt_range_x(rb)
        elif sd > 0:
            eb = ax_t.errorbar(i, bottom, yerr=[[min(sd, bottom)], [sd]], fmt="none", ecolor="#111111",
                               elinewidth=1.0, capsize=4)
            eb.lines[2][0].set_gid("err:%s" % p)
            drawn["sd"] = True
        t = ax_t.text(i, bottom + sd + ymax * 0.015, lab, ha="center", va="bottom", fontsize=9,
                      fontweight="normal" if p == baseline else "bold")
        t.set_gid("speedup:%s" % p)
    ax_t.set_xticks(range(len(precs)))
    ax_t.set_xticklabels([tick_label(doc, mode, p) for p in precs], fontsize=9)
    ax_t.set_xlim(-0.6, len(precs) - 0.4)
    ax_t.set_ylim(0, ymax * 1.22)
    ax_t.set_ylabel("grouped expert GEMM time\nper MoE layer (ms)")
    ax_t.yaxis.grid(True, color="#dddddd", linewidth=0.6)
    ax_t.set_axisbelow(True)
    ops = []
    for g in grouped:  # plan order: Expert Up, Expert Down
        if (g.get("label") or g["op"]) not in ops:
            ops.append(g.get("label") or g["op"])
    ax_t.set_title("Grouped GEMMs (%s) of %s, passes stacked; mode: %s; speedup vs %s above each bar" % (
        " + ".join(ops), "the busiest EP rank's %d experts" % len(grouped[0]["group"]) if ep > 1
        else "%d experts" % len(grouped[0]["group"]),
        mode, baseline), fontsize=9.5, loc="left")
    word = how.split(" ")[0].lower()  # measured / predicted / synthetic: what every pass's time is
    handles = [Patch(facecolor=c, label="%s (%s)" % (lab, word)) for ps, lab, c in EXPERT_PASSES
               if any(g["pass"] == ps for g in grouped)]
    if drawn["band"]:
        handles.append(Line2D([0], [0], color="#111111", marker="_", markersize=8, label=BAND_LABEL))
    if drawn["sd"]:
        handles.append(Line2D([0], [0], color="#111111", marker="_", markersize=8,
                              label="error bar: ±1 stdev\n(cells root-sum-square)"))
    ax_t.legend(handles=handles, loc="upper left", bbox_to_anchor=(1.01, 1.0), frameon=False, fontsize=8.5)
    for ax in (ax_r, ax_t):
        for side in ("top", "right"):
            ax.spines[side].set_visible(False)

    moe = (doc.get("config") or {}).get("moe") or {}
    sub = [config_line(doc)]
    bits = []
    if _is_int(moe.get("num_experts")):
        bits.append("%d experts, top-%s" % (moe["num_experts"], moe.get("top_k", "?")))
    if _is_int(moe.get("expert_intermediate_size")):
        bits.append("expert FFN %s" % "{:,}".format(moe["expert_intermediate_size"]))
    bits.append("expert parallel %d" % ep)
    if rt is not None:
        r_txt = "routing %s (seed %s)" % (rt.get("routing", "?"), rt.get("seed", "?"))
        if _is_int(rt.get("tokens")) and _is_int(rt.get("top_k")):
            r_txt += ": %s tokens%s x top-%d" % ("{:,}".format(rt["tokens"]), " x %d ranks" % ep if ep > 1 else "",
                                                  rt["top_k"])
        bits.append(r_txt)
        bits.append("max/mean %.2f" % (max(counts) / mean if mean else 0.0))
    sub.append(", ".join(bits))
    fig.suptitle("MoE experts of one MoE layer, %s on %s" % (how, device_name(doc)), fontsize=13,
                 fontweight="bold", x=0.01, ha="left")
    fig.text(0.01, 0.955, "\n".join(x for x in sub if x), fontsize=9, color="#333333", ha="left", va="top")
    extra.insert(0, "One routing draw stands for every MoE layer; the grouped GEMMs hold the real rows (padding to "
                    "the recipe's alignment is computed, not counted as FLOPs).")
    for n in doc.get("notes") or []:
        if n.startswith("SYNTHETIC"):
            extra.insert(0, n)
    fig.tight_layout(rect=(0, 0, 1, 0.93))
    add_footer(fig, footer_lines(doc, mode, precs, extra), provenance(doc), -0.005)
    save(fig, out)
    plt.close(fig)


# ----------------------------------------------------------------------------------------------
# Roofline chart: achieved TFLOP/s vs arithmetic intensity under the datasheet roofs
# ----------------------------------------------------------------------------------------------

def chart_roofline(doc, mode, out):
    import matplotlib.pyplot as plt
    rf = doc.get("roofline")
    if not isinstance(rf, dict) or not rf.get("gpu"):
        why = rf.get("note") if isinstance(rf, dict) and isinstance(rf.get("note"), str) else (
            "the result has no roofline (written before gemmscope had one, or without the GPU spec database)")
        raise InputError("no roofline to draw: %s" % why)
    predicted = isinstance(doc.get("prediction"), dict)
    bw = rf["memory_bandwidth_gbs"]["value"] * 1e9
    pts = [c for c in rf.get("cells", []) if c.get("mode") == mode and _is_num(c.get("achieved_tflops"))]
    if not pts:
        raise InputError("no %s cells with a time in mode %s" % ("predicted" if predicted else "measured", mode))
    fig, ax = plt.subplots(figsize=(10, 6.5))
    xs = [c["intensity"] for c in pts]
    peaks = [(f, v["value"]) for f, v in (rf.get("peak_tflops") or {}).items() if isinstance(v, dict)]
    ridges = [peak * 1e12 / bw for f, peak in peaks if any(c["format"] == f for c in pts)]
    lo, hi = min([min(xs) / 4.0] + [r / 2.0 for r in ridges]), max(xs) * 4.0
    seen_formats = set(c["format"] for c in pts)
    by_peak = {}  # formats with the same peak share one roof (FP8 and MXFP8 on Blackwell)
    for f, peak in peaks:
        if f in seen_formats:
            by_peak.setdefault(peak, []).append(f)
    for peak, fs in sorted(by_peak.items()):
        f = "/".join(fs)
        ridge = peak * 1e12 / bw
        grid = [lo * (hi / lo) ** (i / 200.0) for i in range(201)]
        ys = [min(peak, bw * x / 1e12) for x in grid]
        ax.plot(grid, ys, linestyle="--", linewidth=1.2, color="#777777", gid="roof:%s" % f)
        ax.annotate("%s roof %.0f TFLOP/s (ridge %.0f FLOP/B)" % (f, peak, ridge), (hi, peak),
                    ha="right", va="bottom", fontsize=8, color="#555555")
    precs = [p for p in doc["precisions"] if any(c["precision"] == p for c in pts)]
    for p in precs:
        color = precision_color(p, doc["precisions"])
        mine = [c for c in pts if c["precision"] == p]
        for c in mine:
            ax.scatter([c["intensity"]], [c["achieved_tflops"]], s=28, color=color,
                       marker="o" if c.get("bound") == "compute" else "^", gid="point:%s:%d" % (p, c["gemm"]))
        ax.scatter([], [], s=28, color=color, label=p)
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("arithmetic intensity (FLOP per byte of the timed region)")
    ax.set_ylabel("%s TFLOP/s" % ("predicted" if predicted else "achieved"))
    ax.grid(True, which="both", alpha=0.25)
    ax.legend(loc="lower right", fontsize=8, title="o compute-bound, ^ memory-bound", title_fontsize=7)
    what = "PREDICTED roofline" if predicted else "Roofline"
    ax.set_title("%s on %s (%s), mode %s\n%s" % (what, rf.get("gpu_name", device_name(doc)), rf["gpu"], mode,
                                                 config_line(doc) or "%d GEMMs" % len(doc["gemms"])), fontsize=10)
    lines = ["roofs: dense datasheet peaks and memory bandwidth (data/gpus.json, each with its source)"]
    if predicted:
        lines.insert(0, "PREDICTED times, not measurements (gemmscope predict; docs/predict.md)")
    fig.subplots_adjust(bottom=0.2)
    add_footer(fig, lines, provenance(doc), 0.08)
    save(fig, out)
    plt.close(fig)


# ----------------------------------------------------------------------------------------------
# Driver
# ----------------------------------------------------------------------------------------------

def has_moe(doc):
    """Whether the result has grouped (MoE expert) GEMMs."""
    return any(g.get("group_dim") is not None or g.get("group") is not None for g in doc["gemms"])


def pick_kind(doc, requested):
    if requested != "auto":
        return requested
    if doc["kind"] == "model":
        # The model chart stacks the dense per-layer ops only; a model with experts gets the experts chart.
        return "experts" if has_moe(doc) else "model"
    gemms = doc["gemms"]
    if len(gemms) >= 5 and all(is_square(g) for g in gemms):
        return "sweep"
    return "shapes"


def load_fleet_chart(doc, name):
    """The fleet chart document (`gemmscope plot` writes it from a fleet file), checked."""
    precs = doc.get("precisions")
    gpus = doc.get("gpus")
    if not isinstance(precs, list) or not precs or not all(isinstance(p, str) for p in precs) or len(precs) > 16:
        raise InputError("%s: \"precisions\" must be 1 to 16 names" % name)
    if not isinstance(gpus, list) or not gpus or len(gpus) > 4096:
        raise InputError("%s: \"gpus\" must be a list of 1 to 4096 GPUs" % name)
    for i, g in enumerate(gpus):
        ms = g.get("layer_ms") if isinstance(g, dict) else None
        if not isinstance(g, dict) or not isinstance(g.get("label"), str) or not isinstance(ms, list) or \
                len(ms) != len(precs) or not all(v is None or (_is_num(v) and 0 < v < 1e9) for v in ms):
            raise InputError("%s: gpus[%d] needs a \"label\" and one time per precision" % (name, i))
    med = doc.get("median_ms")
    if not isinstance(med, list) or len(med) != len(precs) or not all(v is None or (_is_num(v) and v > 0) for v in med):
        raise InputError("%s: \"median_ms\" must hold one time per precision" % name)
    slow = doc.get("slow")
    if not isinstance(slow, list) or not all(
            isinstance(w, dict) and _is_int(w.get("gpu")) and 0 <= w["gpu"] < len(gpus) and
            _is_int(w.get("precision")) and 0 <= w["precision"] < len(precs) for w in slow):
        raise InputError("%s: \"slow\" must name GPUs and precisions by index" % name)
    if not _is_num(doc.get("threshold")):
        raise InputError("%s: \"threshold\" must be a number" % name)
    return doc


def chart_fleet(doc, out):
    """One group of bars per GPU (one bar per precision: its per-layer GEMM time), the median GPU's
    time as a dashed line per precision, slow GPUs outlined in red with their excess."""
    import matplotlib.pyplot as plt
    precs, gpus = doc["precisions"], doc["gpus"]
    n, k = len(gpus), len(precs)
    width = 0.8 / k
    fig, ax = plt.subplots(figsize=(max(6.0, min(40.0, 1.2 * n + 3)), 4.8))
    slow = {(w["gpu"], w["precision"]): w.get("over_median") for w in doc["slow"]}
    for p, prec in enumerate(precs):
        color = precision_color(prec, precs)
        xs = [i + (p - (k - 1) / 2) * width for i in range(n)]
        hs = [g["layer_ms"][p] or 0 for g in gpus]
        bars = ax.bar(xs, hs, width * 0.95, color=color, label=prec)
        for i, b in enumerate(bars):
            if (i, p) in slow:
                b.set_edgecolor("#d62728")
                b.set_linewidth(2)
                over = slow[(i, p)]
                ax.annotate("+%.1f%%" % (100 * over) if _is_num(over) else "slow", (b.get_x() + b.get_width() / 2,
                            b.get_height()), ha="center", va="bottom", fontsize=7, color="#d62728")
            elif gpus[i]["layer_ms"][p] is None:
                ax.annotate("N/A", (b.get_x() + b.get_width() / 2, 0), ha="center", va="bottom", fontsize=7)
        if doc["median_ms"][p]:
            ax.axhline(doc["median_ms"][p], color=color, linestyle="--", linewidth=0.8)
    ax.set_xticks(range(n))
    ax.set_xticklabels([clip(printable(g["label"]), 40) for g in gpus], rotation=20 if n > 2 else 0,
                       ha="right" if n > 2 else "center", fontsize=7)
    ax.set_ylabel("per-layer GEMM time (ms, measured)")
    ax.set_title("Fleet: %d GPUs at once, %s mode; dashed: the median GPU" % (n, clip(printable(str(doc.get("mode"))), 40)))
    ax.legend(fontsize=8)
    lines = []
    for g in gpus:
        parts = []
        for key, fmt in (("mean_sm_mhz", "%.0f MHz"), ("mean_temp_c", "%.0f C"), ("mean_power_w", "%.0f W")):
            if _is_num(g.get(key)):
                parts.append(fmt % g[key])
        if parts:
            lines.append("%s: %s" % (clip(printable(g["label"]), 60), ", ".join(parts)))
    lines.append("red outline: slower than the median by more than %.1f%%" % (100 * doc["threshold"]))
    fig.subplots_adjust(bottom=0.28)
    add_footer(fig, lines, "gemmscope fleet chart", 0.12)
    save(fig, out)


def parse_args(argv):
    ap = argparse.ArgumentParser(
        prog="gemmscope_plot.py",
        description="Draw a chart from a gemmscope result JSON (schema %s)." % SCHEMA,
        epilog="exit status: 0 chart written, 2 bad input, 3 matplotlib missing")
    ap.add_argument("result", metavar="RESULT.json")
    ap.add_argument("-o", "--output", required=True, metavar="OUT", help="OUT.png, OUT.svg or OUT.pdf")
    ap.add_argument("--baseline", default=None, help="precision the speedups are taken against (default BF16)")
    ap.add_argument("--mode", default=None, type=canonical_mode, choices=KNOWN_MODES,
                    help="which mode to chart (default: training when present, else per-gemm); old names accepted")
    ap.add_argument("--kind", default="auto", choices=KINDS,
                    help="chart kind (default auto: from the JSON)")
    ap.add_argument("--provider", default=None,
                    help="kernel provider whose cells to chart (default: the run's first, its main columns)")
    return ap.parse_args(argv)


def setup_matplotlib():
    """Agg, stable SVG output; a missing matplotlib is one line and its own exit status."""
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot  # noqa: F401  (fail here, not half-way through a chart)
        # SVG keeps text as <text> (searchable, editable, smaller); ids are stable across runs.
        matplotlib.rcParams["svg.fonttype"] = "none"
        matplotlib.rcParams["svg.hashsalt"] = "gemmscope"
    except ImportError:
        fail(MATPLOTLIB_MISSING, EXIT_NO_MATPLOTLIB)


def draw_guarded(draw, what):
    """Runs draw(). numpy's RuntimeWarnings (overflow, invalid value) mean the numbers cannot be
    drawn: one line and a failure, not warnings on stderr followed by a chart of nonsense. A value
    the checks let through but a chart cannot use is still the file's problem: `what` says whose."""
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("error", RuntimeWarning)
            warnings.simplefilter("ignore", UserWarning)
            draw()
    except InputError as e:
        fail(str(e))
    except (KeyError, TypeError, ValueError, AttributeError, IndexError, ArithmeticError, RecursionError,
            MemoryError, RuntimeWarning) as e:
        fail("%s (%s: %s)" % (what, type(e).__name__, clip(e)))


def run_fleet_chart(doc, out):
    setup_matplotlib()
    draw_guarded(lambda: chart_fleet(doc, out), "cannot chart this fleet")
    print("wrote %s (fleet chart)" % out)
    return 0


def main(argv=None):
    """Runs `run`; SIGINT and SIGTERM end it with status 130 and 143, one line and no traceback,
    after removing any temporary chart file."""
    signal.signal(signal.SIGTERM, _on_sigterm)
    signal.signal(signal.SIGINT, signal.default_int_handler)  # KeyboardInterrupt, caught below
    try:
        return run(argv)
    except KeyboardInterrupt:
        code, what = EXIT_SIGINT, "interrupted"
    except _Terminated:
        code, what = EXIT_SIGTERM, "terminated"
    for tmp in list(_TEMP_FILES):
        _remove_temp(tmp)
    try:
        sys.stderr.write("gemmscope plot: %s\n" % what)
    except (OSError, ValueError):
        pass
    return code


def run(argv=None):
    # UserWarnings (a glyph missing from the font, a layout that does not fit) are matplotlib
    # talking to a developer: they would make stderr several lines and may echo bytes from the
    # file. Its logger, too, is kept to errors.
    warnings.simplefilter("ignore", UserWarning)
    logging.getLogger("matplotlib").setLevel(logging.ERROR)
    args = parse_args(sys.argv[1:] if argv is None else argv)
    try:
        ext = os.path.splitext(args.output)[1].lower()
        if ext not in OUT_TYPES:
            raise InputError("output %s: unsupported type, use .png, .svg or .pdf" % args.output)
        name = os.path.basename(args.result)
        head = parse_json(read_input_file(args.result), name)
        if isinstance(head, dict) and head.get("schema") == FLEET_CHART_SCHEMA:
            return run_fleet_chart(load_fleet_chart(head, name), args.output)
        if args.kind == "fleet":
            raise InputError("--kind fleet needs a fleet file; chart it with gemmscope plot FLEET.json")
        try:
            # load_result(path) alone unless --provider is given (tests stand in a one-argument one)
            doc = load_result(args.result) if args.provider is None else load_result(args.result, args.provider)
        except (RecursionError, MemoryError, ArithmeticError) as e:
            raise InputError("%s cannot be read: %s" % (os.path.basename(args.result), clip(type(e).__name__)))
        if args.mode is not None and args.mode not in doc["modes"]:
            raise InputError("mode %s is not in %s (modes: %s)" % (
                args.mode, os.path.basename(args.result), clip(", ".join(doc["modes"]))))
        mode = args.mode or next((m for m in ("training", "per-gemm") if m in doc["modes"]), doc["modes"][0])
        if args.baseline is not None:
            if args.baseline not in doc["precisions"]:
                raise InputError("baseline %s is not in %s (precisions: %s)" % (
                    args.baseline, os.path.basename(args.result), clip(", ".join(doc["precisions"]))))
            baseline = args.baseline
        else:
            baseline = "BF16" if "BF16" in doc["precisions"] else doc["precisions"][0]
        kind = pick_kind(doc, args.kind)
        if len(doc["gemms"]) > MAX_CHART_GEMMS:
            raise InputError("%s has %d GEMMs; a chart draws at most %d (chart a part of the run, or read it with "
                             "gemmscope report)" % (os.path.basename(args.result), len(doc["gemms"]), MAX_CHART_GEMMS))
        if kind == "modes" and not ("pre-quantized" in doc["modes"] and
                                    any(m in doc["modes"] for m in ("per-gemm", "training"))):
            raise InputError("the modes chart needs pre-quantized and a quantizing mode (training or per-gemm) "
                             "(%s has: %s)" % (
                os.path.basename(args.result), clip(", ".join(doc["modes"]))))
        if kind == "experts":
            moe_data(doc, os.path.basename(args.result))  # no grouped GEMMs: bad input, before matplotlib
        if kind == "model" and doc["kind"] != "model":
            raise InputError("the model chart needs a model-config result (%s is kind \"%s\")" % (
                os.path.basename(args.result), doc["kind"]))
    except InputError as e:
        fail(str(e))

    setup_matplotlib()

    def draw():
        if kind == "model":
            chart_model(doc, mode, baseline, args.output)
        elif kind == "shapes":
            chart_shapes(doc, mode, baseline, args.output)
        elif kind == "sweep":
            chart_sweep(doc, mode, baseline, args.output)
        elif kind == "roofline":
            chart_roofline(doc, mode, args.output)
        elif kind == "experts":
            chart_experts(doc, mode, baseline, args.output, os.path.basename(args.result))
        else:
            chart_modes(doc, baseline, args.output)

    draw_guarded(draw, "%s: cannot chart this result" % os.path.basename(args.result))
    try:
        print("wrote %s (%s chart%s)" % (args.output, kind, "" if kind == "modes" else ", mode " + mode))
        sys.stdout.flush()
    except OSError as e:  # the chart is written; the line about it could not be (/dev/full): EX_IOERR
        sys.stderr.write("gemmscope plot: error writing to stdout: %s\n" % (e.strerror or e))
        try:  # the unwritten line goes to /dev/null at exit instead of a second error
            os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        except OSError:
            pass
        return EXIT_STDOUT_ERROR
    return 0


if __name__ == "__main__":
    sys.exit(main())
