"""The roofline chart: achieved TFLOP/s over arithmetic intensity under the device's datasheet roofs
(docs/charts.md, kind "roofline"), from the result's "roofline" object (gemmscope writes it; `gemmscope
plot` adds it from the GPU spec database to a file without one)."""

from .common import (_is_num, add_footer, config_line, device_name, precision_color, provenance, save,
                     InputError)


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
