"""What every chart shares: reading a result file, the numbers gemmscope wrote into it, labels,
footers and the atomic write of the chart file.

gemmscope validates a result file completely (its reader, `from_json`) and writes the numbers the
charts draw into it ("totals": run totals, spreads, bands, per-layer and expert breakdowns, N/A
reasons; docs/json-schema.md). `gemmscope plot` hands the script a copy with those fields written
by the running version, so the script reads them instead of summing cells. Run on its own, the
script checks only what keeps it from crashing: the input policy (docs/hostile-input.md), that the
file is a gemmscope result with times, and the types of the fields it reads.

Only the Python standard library is imported here, so bad input is reported without matplotlib.
"""

import errno
import itertools
import json
import math
import os
import random
import re
import stat
import sys
import textwrap

SCHEMA = "gemmscope.result/3"
# /2: the cells inside each GEMM; /1: files from before MoE (all dense). docs/json-schema.md.
SCHEMAS = ("gemmscope.result/3", "gemmscope.result/2", "gemmscope.result/1")
EXIT_BAD_INPUT = 2
EXIT_NO_MATPLOTLIB = 3
EXIT_STDOUT_ERROR = 74  # EX_IOERR: the chart is written, "wrote ..." could not be
MATPLOTLIB_MISSING = ("matplotlib is not installed: apt-get install python3-matplotlib "
                      "(or pip install matplotlib)")
KNOWN_MODES = ("per-gemm", "training", "pre-quantized")
KINDS = ("auto", "model", "shapes", "sweep", "modes", "roofline", "experts", "step", "fleet")
FLEET_CHART_SCHEMA = "gemmscope-fleet-chart/1"  # written by `gemmscope plot` from a fleet file
OUT_TYPES = (".png", ".svg", ".pdf")

# The input-file policy of gemmscope (docs/hostile-input.md), the same limits as the C++ reader.
MAX_INPUT_BYTES = 64 << 20
MAX_JSON_DEPTH = 64
MAX_JSON_VALUES = 1 << 21  # values in one document (kMaxJsonValues)
MAX_JSON_INT = 1 << 64     # the largest integer any field holds (uint64 clock reasons)
# The largest chart drawn: GEMMs in one result (a model plan has a few tens; shapes charts are
# read bar by bar). Drawing thousands takes minutes and gigabytes, so more is refused.
MAX_CHART_GEMMS = 256
EXIT_SIGINT, EXIT_SIGTERM = 130, 143

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


# One refusal line of at most about 400 bytes, as gemmscope's own (cli/console.hpp).
MAX_MESSAGE_CHARS = 360


def shown(text, n=200):
    """`text` as a message may quote it: a file name that is not UTF-8 (Python holds its bytes as
    surrogates, which no UTF-8 stream can write) with those bytes as U+FFFD, control characters
    as '?', cut to `n` characters with its length."""
    s = str(text).encode("utf-8", "surrogateescape").decode("utf-8", "replace")
    return clip(printable(s), n)


def fail(msg, code=EXIT_BAD_INPUT):
    try:
        sys.stderr.write("gemmscope plot: error: %s\n" % shown(msg, MAX_MESSAGE_CHARS))
    except (OSError, ValueError):
        pass
    sys.exit(code)


# ----------------------------------------------------------------------------------------------
# Reading the file (the input policy: what keeps the parser itself safe)
# ----------------------------------------------------------------------------------------------

def _is_int(v):
    return isinstance(v, int) and not isinstance(v, bool)


def _is_num(v):
    return (isinstance(v, (int, float)) and not isinstance(v, bool)
            and not (isinstance(v, float) and (math.isnan(v) or math.isinf(v))))


def clip(text, n=200):
    text = str(text)
    return text if len(text) <= n else "%s... (%d characters)" % (text[:n], len(text))


def read_input_file(path):
    """The bytes of the regular file at `path`, at most MAX_INPUT_BYTES. stat before open: a FIFO
    would block the open, /dev/zero would never end."""
    name = shown(path)
    try:
        st = os.stat(path)
    except (OSError, ValueError) as e:
        raise InputError("cannot read %s: %s" % (name, shown(getattr(e, "strerror", None) or e)))
    if stat.S_ISDIR(st.st_mode):
        raise InputError("%s is a directory" % name)
    if not stat.S_ISREG(st.st_mode):
        raise InputError("%s is not a regular file" % name)
    if st.st_size > MAX_INPUT_BYTES:
        raise InputError("%s is %d bytes, larger than the %d MiB limit for input files" % (
            name, st.st_size, MAX_INPUT_BYTES >> 20))
    # os.read on the descriptor, never a buffered reader: on a file that is "regular" but reads
    # like a device (/proc/kmsg: EAGAIN under O_NONBLOCK), a buffered read returns None.
    chunks, total = [], 0
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_NOCTTY", 0) |
                     getattr(os, "O_CLOEXEC", 0))
        try:
            if not stat.S_ISREG(os.fstat(fd).st_mode):
                raise InputError("%s is not a regular file" % name)
            while True:
                try:
                    chunk = os.read(fd, 1 << 20)
                except InterruptedError:
                    continue
                if not chunk:
                    break
                total += len(chunk)
                if total > MAX_INPUT_BYTES:
                    raise InputError("%s is larger than the %d MiB limit for input files" % (name, MAX_INPUT_BYTES >> 20))
                chunks.append(chunk)
        finally:
            os.close(fd)
    except OSError as e:
        raise InputError("cannot read %s: %s" % (name, shown(e.strerror or e)))
    return b"".join(chunks)


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


# ----------------------------------------------------------------------------------------------
# A gemmscope result: what the charts read, checked for type only (gemmscope's reader checks the rest)
# ----------------------------------------------------------------------------------------------

OLD_FILE = ("%s has no %s: it was written by an older gemmscope (or edited); chart it with `gemmscope plot`, "
            "which validates it and writes the numbers the charts read")


def _object_or_null(doc, key, name):
    if doc.get(key) is not None and not isinstance(doc[key], dict):
        raise InputError("%s: %s must be an object or null" % (name, key))


def _string_list(doc, key, name):
    v = doc.get(key)
    if not isinstance(v, list) or not v or not all(isinstance(x, str) for x in v):
        raise InputError("%s: \"%s\" must be a non-empty list of strings" % (name, key))
    return v


GEMM_KINDS = ("gemm", "grouped-gemm")


def _cell_ok(c):
    return isinstance(c, dict) and (c.get("status") == "n/a" or _is_num(c.get("mean_ms")))


def gemm_cells(doc, name):
    """The GEMM cells of a result by (provider, mode, precision, GEMM index). Schema 3 holds them
    as records (kind "gemm" or "grouped-gemm", item = the GEMM's index); schemas 1 and 2 inside each
    GEMM ("results" for the first provider, "provider_results" for the others)."""
    providers = doc.get("providers") or ["cublaslt"]
    cells = {}
    if doc.get("schema") == SCHEMA:
        records = doc.get("records")
        if not isinstance(records, list):
            raise InputError("%s: \"records\" must be a list" % name)
        for i, r in enumerate(records):
            if not isinstance(r, dict) or r.get("kind") not in GEMM_KINDS:
                continue
            key = (r.get("provider"), r.get("mode"), r.get("precision"), r.get("item"))
            if not all(isinstance(k, str) for k in key[:3]) or not _is_int(key[3]) or not _cell_ok(r):
                raise InputError("%s: records[%d] must be a GEMM record with strings provider, mode and precision, "
                                 "an integer item and status \"n/a\" or a number mean_ms" % (name, i))
            cells[key] = r
        return cells
    for i, g in enumerate(doc["gemms"]):
        where = "%s: gemms[%d]" % (name, i)
        per_provider = [(providers[0], g.get("results"))]
        pr = g.get("provider_results")
        if isinstance(pr, dict):
            per_provider += [(p, pr.get(p)) for p in providers[1:] if p in pr]
        for provider, res in per_provider:
            if res is None and provider != providers[0]:
                continue
            if not isinstance(res, dict) or not all(isinstance(cs, dict) and all(_cell_ok(c) for c in cs.values())
                                                    for cs in res.values()):
                raise InputError(where + ": \"results\" must hold one object of cells per mode, each with status "
                                 "\"n/a\" or a number mean_ms")
            for mode, cs in res.items():
                for prec, c in cs.items():
                    cells[(provider, mode, prec, i)] = c
    return cells


def select_provider(doc, name, provider):
    """Kernel providers: the file holds each provider's cells ("totals" the first provider's sums,
    "provider_totals" the others'). `provider` (None: the first) is the one every chart draws: each
    GEMM's "_cells" get its cells by (mode, precision) and "totals" its sums; doc["_provider_line"]
    names it for the footer when it is not plain cuBLASLt."""
    providers = doc.get("providers")
    if providers is None:
        providers = ["cublaslt"]
    if not isinstance(providers, list) or not providers or not all(isinstance(p, str) for p in providers):
        raise InputError("%s: \"providers\" must be a non-empty list of strings" % name)
    chosen = provider if provider is not None else providers[0]
    if chosen not in providers:
        raise InputError("provider %s is not in %s (providers: %s)" % (
            clip(chosen, 80), name, clip(", ".join(providers))))
    gemms = doc["gemms"]
    for g in gemms:
        g["_cells"] = {}
    for (v, m, p, gi), c in gemm_cells(doc, name).items():
        if v == chosen and 0 <= gi < len(gemms):
            gemms[gi]["_cells"][(m, p)] = c
    for i, g in enumerate(gemms):
        if not g["_cells"] and (chosen != providers[0] or doc.get("schema") == SCHEMA):
            raise InputError("%s: gemms[%d] has no %s" % (name, i, (
                "records of provider %s" if doc.get("schema") == SCHEMA else "provider_results.%s") % clip(chosen, 80)))
    if chosen != providers[0]:
        pt = doc.get("provider_totals")
        if not isinstance(pt, dict) or not isinstance(pt.get(chosen), dict):
            raise InputError(OLD_FILE % (name, "provider_totals.%s" % clip(chosen, 80)))
        doc["totals"] = pt[chosen]
    if providers != ["cublaslt"]:
        others = [p for p in providers if p != chosen]
        doc["_provider_line"] = "kernel provider: %s%s" % (
            chosen, " (also measured: %s; gemmscope_plot.py --provider NAME charts another)" % ", ".join(others)
            if others else "")


def load_result(path, provider=None, name=None):
    """The result document at `path`, checked for what the charts read. `name` (default: the file's
    name) is how messages call it; doc["_name"] keeps it."""
    name = name or os.path.basename(path)
    doc = parse_json(read_input_file(path), name)
    if not isinstance(doc, dict):
        raise InputError("%s is not a gemmscope result (top level is not an object)" % name)
    schema = doc.get("schema")
    if schema not in SCHEMAS:
        raise InputError("%s has schema %s, expected \"%s\" (or \"%s\", \"%s\")" % (
            name, clip(json.dumps(schema), 80) if schema is not None else "(none)", SCHEMA, SCHEMAS[1], SCHEMAS[2]))
    if doc.get("kind") not in ("model", "shapes"):
        raise InputError("%s: \"kind\" must be \"model\" or \"shapes\", got %s" % (
            name, clip(json.dumps(doc.get("kind")), 80)))
    if doc.get("dry_run") is True and doc.get("dry_run_requested") is False:
        raise InputError("%s holds no results to plot: nothing could be measured (%s)" % (
            name, shown(doc.get("why_not_measured"), 160)))
    if doc.get("dry_run") is True:
        raise InputError("%s is a dry run: it holds no results to plot" % name)
    if doc.get("modes") == [] and isinstance(doc.get("accuracy"), dict):
        raise InputError("%s is an --accuracy-only run: it holds errors, no times, so there is nothing to chart "
                         "(gemmscope report %s prints them)" % (name, name))
    modes = _string_list(doc, "modes", name)
    precs = _string_list(doc, "precisions", name)
    for key in ("tool", "timing", "device", "config", "summary", "plan"):
        _object_or_null(doc, key, name)
    if doc.get("created") is not None and not isinstance(doc["created"], str):
        raise InputError("%s: created must be a string" % name)
    notes = doc.get("notes")
    if notes is not None and (not isinstance(notes, list) or not all(isinstance(n, str) for n in notes)):
        raise InputError("%s: notes must be a list of strings" % name)
    gemms = doc.get("gemms")
    if not isinstance(gemms, list) or not gemms:
        raise InputError("%s: \"gemms\" must be a non-empty list" % name)
    if len(gemms) > MAX_CHART_GEMMS:
        raise InputError("%s has %d GEMMs; a chart draws at most %d (chart a part of the run, or read it with "
                         "gemmscope report)" % (name, len(gemms), MAX_CHART_GEMMS))
    for i, g in enumerate(gemms):
        where = "%s: gemms[%d]" % (name, i)
        if not isinstance(g, dict) or not isinstance(g.get("pass"), str) or not isinstance(g.get("op"), str) or \
                not all(_is_int(g.get(k)) and g[k] > 0 for k in ("m", "k", "n")):
            raise InputError(where + " must be an object with strings pass and op and positive integers m, k, n")
    select_provider(doc, name, provider)
    totals = doc.get("totals")
    for m in modes:
        per_mode = totals.get(m) if isinstance(totals, dict) else None
        for p in precs:
            entry = per_mode.get(p) if isinstance(per_mode, dict) else None
            if not isinstance(entry, dict):
                raise InputError(OLD_FILE % (name, "totals.%s.%s" % (clip(m, 80), clip(p, 80))))
    doc["_name"] = name
    return doc


# ----------------------------------------------------------------------------------------------
# Reading values: cells for per-GEMM bars and lines, "totals" for every sum
# ----------------------------------------------------------------------------------------------

def cell(g, mode, prec):
    """The cell of GEMM `g` in the charted provider (select_provider)."""
    c = (g.get("_cells") or {}).get((mode, prec))
    return c if isinstance(c, dict) else {"status": "n/a", "reason": "not measured"}


def cell_ms(g, mode, prec):
    c = cell(g, mode, prec)
    return float(c["mean_ms"]) if c.get("status") == "ok" else None


def cell_stdev(g, mode, prec):
    c = cell(g, mode, prec)
    if c.get("status") != "ok" or not _is_num(c.get("stdev_ms")):
        return 0.0
    return float(c["stdev_ms"])


def cell_tflops(g, mode, prec):
    """The cell's TFLOP/s as gemmscope wrote it (2·M·K·N / mean time), None for an n/a cell."""
    c = cell(g, mode, prec)
    return float(c["tflops"]) if c.get("status") == "ok" else None


def cell_band(g, mode, prec):
    """A predicted cell's band (low_ms, high_ms) (gemmscope predict, docs/predict.md), or None for a
    measured or n/a cell."""
    c = cell(g, mode, prec)
    if c.get("status") != "ok" or c.get("predicted") is not True:
        return None
    return float(c["low_ms"]), float(c["high_ms"])


def is_predicted(doc):
    """A gemmscope predict document: its cells hold predicted times with bands, nothing measured."""
    t = doc.get("timing")
    return (isinstance(t, dict) and t.get("method") == "predicted") or isinstance(doc.get("prediction"), dict)


def total_entry(doc, mode, prec, part=None):
    """totals.<mode>.<prec> (docs/json-schema.md), the numbers gemmscope wrote for the charts; `part`
    "layer" (one layer, per op: the model chart) or "experts" (the grouped expert GEMMs) picks a
    breakdown."""
    entry = doc["totals"][mode][prec]
    if part is None:
        return entry
    sub = entry.get(part)
    if not isinstance(sub, dict):
        raise InputError(OLD_FILE % (doc.get("_name", "the result"), "totals.%s.%s.%s" % (mode, prec, part)))
    return sub


def band_of(entry, doc):
    """The band (low_ms, high_ms) of a sum for a predicted document, or None."""
    if not is_predicted(doc) or entry.get("low_ms") is None or entry.get("high_ms") is None:
        return None
    return float(entry["low_ms"]), float(entry["high_ms"])


def run_total(doc, mode, prec):
    """Time the speedups are taken from: the full-model GEMM time of a model run (every GEMM as many
    times as it runs in a step), the sum over all GEMMs of a shapes run. None when any cell is n/a."""
    ms = total_entry(doc, mode, prec).get("ms")
    return None if ms is None else float(ms)


def run_total_sd(doc, mode, prec):
    """±1 standard deviation of run_total: the cells' stdevs, each times the times its GEMM counts,
    summed as variances (root-sum-square)."""
    return float(total_entry(doc, mode, prec).get("spread_ms") or 0.0)


def run_total_band(doc, mode, prec):
    """The band of run_total for a predicted document, or None."""
    return band_of(total_entry(doc, mode, prec), doc)


def na_of(entry):
    """(number of n/a GEMMs, their reasons grouped by reason) of a totals entry or breakdown."""
    na = entry.get("na") or {}
    return int(na.get("gemms") or 0), str(na.get("summary") or "")


def ratio_band(num, den):
    """The band of den / num (a speedup: the baseline's time over this one's) from both bands."""
    if num is None or den is None or num[0] <= 0 or num[1] <= 0:
        return None
    return den[0] / num[1], den[1] / num[0]


def fmt_range_x(b):
    return "%s–%s" % (fmt_x(b[0]), fmt_x(b[1]))


BAND_LABEL = "band: predicted low–high\n(gemmscope predict; the cells'\nbands summed, docs/predict.md)"

def summary_interval(doc, mode, key, name):
    """The 95% interval written by --repeats (N >= 3) as summary.<mode>.intervals: key
    "per_layer_total" or "full_model" with a precision name, or "speedups" with a speedup name
    ("FP8Current vs BF16"). (median, lo, hi, n), or None when the file has none."""
    ivs = (((doc.get("summary") or {}).get(mode) or {}).get("intervals"))
    if not isinstance(ivs, dict):
        return None
    if key == "speedups":
        iv = next((e.get("interval") for e in ivs.get("speedups") or [] if e.get("name") == name), None)
    else:
        iv = (ivs.get(key) or {}).get(name)
    if not isinstance(iv, dict):
        return None
    return (float(iv["median"]), float(iv["lo"]), float(iv["hi"]), iv["n"])


def ratio_sd(ratio, a, sd_a, b, sd_b):
    """±1 stdev of ratio = a / b from the stdevs of a and b: relative errors combined as root-sum-square."""
    if not a or not b:
        return 0.0
    return ratio * math.sqrt((sd_a / a) ** 2 + (sd_b / b) ** 2)


def shape_str(g):
    return "%dx%dx%d" % (g["m"], g["k"], g["n"])


def repeats_of(doc):
    """timing.repeats (--repeats N: every cell measured N times), 1 when absent."""
    n = (doc.get("timing") or {}).get("repeats", 1)
    return n if _is_int(n) and n >= 1 else 1


def layers_of(doc):
    cfg = doc.get("config") or {}
    return cfg.get("num_hidden_layers") or 1


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
