"""The fleet chart: one group of bars per GPU of a fleet file (docs/node.md). `gemmscope plot` computes
the chart document (median, slow GPUs) from the fleet file; this draws it."""

from .common import _is_int, _is_num, add_footer, clip, precision_color, printable, save, InputError


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
