"""The shapes chart: grouped TFLOP/s bars, one group per GEMM, one bar per precision (docs/charts.md,
kind "shapes"). Bars are the cells' TFLOP/s as gemmscope wrote them; the N/A notes its grouped reasons."""

from .common import (add_footer, cell_band, cell_ms, cell_stdev, cell_tflops, device_name, footer_lines, na_of,
                     precision_color, provenance, save, shape_str, tick_label, total_entry, MODE_TEXT)


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
        n_na, reasons = na_of(total_entry(doc, mode, p))
        if n_na:
            extra.append("%s N/A: %s" % (p, reasons))
    if shape_err["band"]:
        extra.insert(0, "error bars: the predicted band of each cell (gemmscope predict, docs/predict.md), as TFLOP/s")
    if shape_err["sd"]:
        extra.insert(0, "error bars: ±1 stdev of each cell's time, as TFLOP/s")
    fig.tight_layout()
    add_footer(fig, footer_lines(doc, mode, precs, extra), provenance(doc), -0.01)
    save(fig, out)
    plt.close(fig)
