#!/usr/bin/env python3
"""Charts from a gemmscope result JSON (schema "gemmscope.result/3", /2 or /1, see docs/json-schema.md).

usage: gemmscope_plot.py RESULT.json -o OUT.{png,svg,pdf} [--baseline BF16]
                         [--mode training|per-gemm|pre-quantized]
                         [--kind auto|model|shapes|sweep|modes|roofline|experts|step]

Chart kinds (docs/charts.md has the details):
  model   per-layer GEMM time, one stacked bar per precision (kind "model")
  shapes  grouped TFLOP/s bars, one group per GEMM shape (kind "shapes", few shapes)
  sweep   one figure, three panels: latency, TFLOP/s and speedup vs size (>= 5 square shapes)
  modes   speedup over the baseline, each mode side by side (needs pre-quantized and a quantizing mode)
  roofline  log-log achieved TFLOP/s vs arithmetic intensity, one point per GEMM and precision, under
          the device's datasheet roofs (needs the result's "roofline" object; "predicted" results say so)
  experts one MoE layer: rows (tokens) per expert from the routing (busiest expert-parallel rank
          highlighted) over the grouped expert GEMM time per precision, passes stacked (needs MoE data)
  step    the whole training step per precision, its breakdown stacked (GEMMs, attention, other, loss,
          optimizer, recompute, host), step and GEMM-only speedups on top (needs a timed "step")

Mode names: training (each tensor quantized once per step, as Transformer Engine trains), per-gemm
(each GEMM quantizes its own operands: the seed tool's autocast), pre-quantized. Files written
before the rename say "autocast-shared" (= training) and "autocast" (= per-gemm): `gemmscope plot`
charts them under the current names.

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
  step:   bar:<prec>:<category>, speedup:<prec>, na:<prec>
  error bars: err:<prec> (model, experts), err:<prec>:<shape index> (shapes),
          err:<latency|tflops|speedup>:<prec> (sweep), err:<mode>:<prec> (modes)

The charts live in the package gemmscope_charts/ next to this file, one module per kind (common.py
holds what they share); the build copies both next to the gemmscope binary. They read the numbers
gemmscope computed and wrote into the result (docs/json-schema.md: "totals"); `gemmscope plot`
validates the file with gemmscope's reader first and hands the script a copy with those numbers
written by the running version.

Only the Python standard library and matplotlib are used. Keep this file and the package free of
syntax newer than Python 3.6 so that an old interpreter still reaches the clear "matplotlib is not
installed" message instead of a SyntaxError.
"""

import os
import signal
import sys


# The signals that end a process by default and that a user, a terminal or the system sends:
# each ends the script with one line and 128 + its number, after removing any temporary chart
# file (a signal that is ignored, under nohup say, stays ignored). SIGINT is Python's
# KeyboardInterrupt. Python itself ignores SIGPIPE and SIGXFSZ (a write beyond `ulimit -f` fails
# with "File too large", which save() reports).
_FATAL_SIGNALS = [getattr(signal, n) for n in ("SIGTERM", "SIGHUP", "SIGQUIT", "SIGALRM", "SIGUSR1", "SIGUSR2",
                                               "SIGVTALRM", "SIGPROF") if hasattr(signal, n)]


def _signal_words(signum):
    if signum == signal.SIGINT:
        return "interrupted"
    if signum == signal.SIGTERM:
        return "terminated"
    try:
        return "terminated by %s" % signal.Signals(signum).name
    except ValueError:
        return "terminated by signal %d" % signum


def _early_signal(signum, frame):
    # Until main() installs its own handlers (which also remove temporary files): nothing to
    # clean up yet, so end at once with 128 + signal and one line, never a traceback from an import.
    try:
        sys.stderr.write("gemmscope plot: %s\n" % _signal_words(signum))
    finally:
        os._exit(128 + signum)


for _s in [signal.SIGINT] + _FATAL_SIGNALS:
    if signal.getsignal(_s) == signal.SIG_DFL or _s == signal.SIGINT:
        signal.signal(_s, _early_signal)

import argparse
import logging
import warnings

sys.dont_write_bytecode = True  # no __pycache__ in the source tree or next to an installed binary
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))  # the package gemmscope_charts/ next to this file
try:
    from gemmscope_charts import experts, fleet, model, modes, roofline, shapes, step, sweep
    from gemmscope_charts.common import (
        EXIT_NO_MATPLOTLIB, EXIT_SIGINT, EXIT_SIGTERM, EXIT_STDOUT_ERROR, FLEET_CHART_SCHEMA, KINDS, KNOWN_MODES,
        MATPLOTLIB_MISSING, OUT_TYPES, SCHEMA, InputError, _TEMP_FILES, _create_temp, _remove_temp, clip, fail,
        is_predicted, load_result, parse_json, read_input_file, run_total, run_total_band, save, shown)
except ImportError as e:  # the script copied without its package: one line, charting unavailable (3)
    sys.stderr.write("gemmscope plot: error: the chart package gemmscope_charts/ next to %s cannot be imported (%s)\n"
                     % (os.path.basename(__file__), e))
    sys.exit(3)


# Reached through this module by tests and tools (load_result is looked up here at run time, so a
# stand-in replaces it).
__all__ = ["main", "run", "load_result", "save", "_create_temp", "_TEMP_FILES", "InputError", "is_predicted",
           "run_total", "run_total_band"]


class _Terminated(BaseException):
    """A fatal signal, raised where the script is so that temporary files are removed on the way out."""

    def __init__(self, signum):
        BaseException.__init__(self, signum)
        self.signum = signum


def _on_fatal_signal(signum, frame):
    raise _Terminated(signum)


def pick_kind(doc, requested):
    if requested != "auto":
        return requested
    if doc["kind"] == "model":
        # The model chart stacks the dense per-layer ops only; a model with experts gets the experts chart.
        return "experts" if experts.has_moe(doc) else "model"
    gemms = doc["gemms"]
    if len(gemms) >= 5 and all(sweep.is_square(g) for g in gemms):
        return "sweep"
    return "shapes"

def parse_args(argv):
    ap = argparse.ArgumentParser(
        prog="gemmscope_plot.py",
        description="Draw a chart from a gemmscope result JSON (schema %s)." % SCHEMA,
        epilog="exit status: 0 chart written, 2 bad input, 3 matplotlib missing")
    ap.add_argument("result", metavar="RESULT.json")
    ap.add_argument("-o", "--output", required=True, metavar="OUT", help="OUT.png, OUT.svg or OUT.pdf")
    ap.add_argument("--baseline", default=None, help="precision the speedups are taken against (default BF16)")
    ap.add_argument("--mode", default=None, type=str.lower, choices=KNOWN_MODES,
                    help="which mode to chart (default: training when present, else per-gemm)")
    ap.add_argument("--kind", default="auto", choices=KINDS,
                    help="chart kind (default auto: from the JSON)")
    ap.add_argument("--provider", default=None,
                    help="kernel provider whose cells to chart (default: the run's first, its main columns)")
    ap.add_argument("--name", default=None,
                    help="what messages call the input (default: its file name; gemmscope plot passes the file it "
                         "was given when the script reads a copy)")
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
    draw_guarded(lambda: fleet.chart_fleet(doc, out), "cannot chart this fleet")
    return _say_written("wrote %s (fleet chart)" % shown(out))


def _say_written(line):
    """The one line on stdout; the chart is written whatever happens to it."""
    try:
        print(line)
        sys.stdout.flush()
    except OSError as e:  # the chart is written; the line about it could not be (/dev/full): EX_IOERR
        sys.stderr.write("gemmscope plot: error writing to stdout: %s\n" % shown(e.strerror or e))
        try:  # the unwritten line goes to /dev/null at exit instead of a second error
            os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        except OSError:
            pass
        return EXIT_STDOUT_ERROR
    return 0


def main(argv=None):
    """Runs `run`; SIGINT, SIGTERM and the other fatal signals (_FATAL_SIGNALS) end it with status
    128 + signal (130, 143, ...), one line and no traceback, after removing any temporary chart file."""
    for s in _FATAL_SIGNALS:
        if signal.getsignal(s) in (signal.SIG_DFL, _early_signal):
            signal.signal(s, _on_fatal_signal)
    signal.signal(signal.SIGINT, signal.default_int_handler)  # KeyboardInterrupt, caught below
    try:
        return run(argv)
    except KeyboardInterrupt:
        code, what = EXIT_SIGINT, _signal_words(signal.SIGINT)
    except _Terminated as t:
        code, what = 128 + t.signum, _signal_words(t.signum)
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
        return _run_checked(args)
    except InputError as e:
        fail(str(e))
    except (KeyError, TypeError, ValueError, AttributeError, IndexError, ArithmeticError, RecursionError,
            MemoryError) as e:
        # A field of a type the checks did not expect: the file's problem, never a traceback.
        fail("%s: cannot chart this result (%s: %s)" % (
            shown(args.name or os.path.basename(args.result)), type(e).__name__, shown(e, 120)))


def _run_checked(args):
    try:
        ext = os.path.splitext(args.output)[1].lower()
        if ext not in OUT_TYPES:
            raise InputError("output %s: unsupported type, use .png, .svg or .pdf" % shown(args.output))
        name = args.name or os.path.basename(args.result)
        head = parse_json(read_input_file(args.result), name)
        if isinstance(head, dict) and head.get("schema") == FLEET_CHART_SCHEMA:
            return run_fleet_chart(fleet.load_fleet_chart(head, name), args.output)
        if args.kind == "fleet":
            raise InputError("--kind fleet needs a fleet file; chart it with gemmscope plot FLEET.json")
        try:
            # load_result(path) alone unless --provider or --name is given (tests stand in a one-argument one)
            doc = load_result(args.result) if args.provider is None and args.name is None else \
                load_result(args.result, args.provider, name)
        except (RecursionError, MemoryError, ArithmeticError) as e:
            raise InputError("%s cannot be read: %s" % (name, clip(type(e).__name__)))
        if args.mode is not None and args.mode not in doc["modes"]:
            raise InputError("mode %s is not in %s (modes: %s)" % (
                args.mode, name, clip(", ".join(doc["modes"]))))
        mode = args.mode or next((m for m in ("training", "per-gemm") if m in doc["modes"]), doc["modes"][0])
        if args.baseline is not None:
            if args.baseline not in doc["precisions"]:
                raise InputError("baseline %s is not in %s (precisions: %s)" % (
                    args.baseline, name, clip(", ".join(doc["precisions"]))))
            baseline = args.baseline
        else:
            baseline = "BF16" if "BF16" in doc["precisions"] else doc["precisions"][0]
        kind = pick_kind(doc, args.kind)
        if kind == "modes" and not ("pre-quantized" in doc["modes"] and
                                    any(m in doc["modes"] for m in ("per-gemm", "training"))):
            raise InputError("the modes chart needs pre-quantized and a quantizing mode (training or per-gemm) "
                             "(%s has: %s)" % (
                name, clip(", ".join(doc["modes"]))))
        if kind == "experts":
            experts.moe_data(doc, name)  # no grouped GEMMs: bad input, before matplotlib
        if kind == "step":
            step.step_data(doc, mode, name)  # no timed step: bad input, before matplotlib
        if kind == "model" and doc["kind"] != "model":
            raise InputError("the model chart needs a model-config result (%s is kind \"%s\")" % (
                name, doc["kind"]))
    except InputError as e:
        fail(str(e))

    setup_matplotlib()

    def draw():
        if kind == "model":
            model.chart_model(doc, mode, baseline, args.output)
        elif kind == "shapes":
            shapes.chart_shapes(doc, mode, baseline, args.output)
        elif kind == "sweep":
            sweep.chart_sweep(doc, mode, baseline, args.output)
        elif kind == "roofline":
            roofline.chart_roofline(doc, mode, args.output)
        elif kind == "experts":
            experts.chart_experts(doc, mode, baseline, args.output, name)
        elif kind == "step":
            step.chart_step(doc, mode, baseline, args.output, name)
        else:
            modes.chart_modes(doc, baseline, args.output)

    draw_guarded(draw, "%s: cannot chart this result" % name)
    return _say_written("wrote %s (%s chart%s)" % (shown(args.output), kind, "" if kind == "modes" else ", mode " + mode))

if __name__ == "__main__":
    sys.exit(main())
