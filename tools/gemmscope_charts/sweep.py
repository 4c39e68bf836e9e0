"""The sweep chart: latency, TFLOP/s and speedup against size, one figure with three panels
(docs/charts.md, kind "sweep"). Each point is one cell; the speedup panel divides the baseline's cell
by this one's, at the baseline the chart is drawn against."""

from .common import (add_footer, cell_ms, cell_stdev, cell_tflops, device_name, footer_lines, is_predicted, na_of,
                     precision_color, provenance, ratio_sd, repeats_of, save, tick_label, total_entry, MODE_TEXT)


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
        n_na, reasons = na_of(total_entry(doc, mode, p))
        if n_na:
            extra.append("%s N/A (gap in its lines): %s" % (p, reasons))
    if is_predicted(doc):
        extra.insert(0, "PREDICTED times: each cell's band (low_ms..high_ms) is in the file, not drawn on this chart")
    fig.tight_layout(rect=(0, 0, 1, 0.97))
    add_footer(fig, footer_lines(doc, mode, precs, extra), provenance(doc), -0.01)
    save(fig, out)
    plt.close(fig)
