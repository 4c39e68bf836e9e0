"""The modes chart: each precision's speedup over the baseline in every mode side by side
(docs/charts.md, kind "modes"). The times are gemmscope's run totals (totals.<mode>.<precision>: the
full model of a model run, the sum of a shapes run's GEMMs) with their spreads and bands; the 95%
intervals of the speedups come from summary.<mode>.intervals (--repeats)."""

from .common import (add_footer, config_line, device_name, fmt_x, footer_lines, lighten, na_of, precision_flags,
                     provenance, ratio_band, ratio_sd, run_total, run_total_band, run_total_sd, save,
                     summary_interval, tick_label, total_entry, InputError, KNOWN_MODES)


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
                n_na, reasons = na_of(total_entry(doc, m, p))
                extra.append("%s N/A in %s mode: %s" % (p, m, reasons if n_na else
                                                          "the baseline %s has n/a cells" % baseline))
    fig.tight_layout()
    fig.subplots_adjust(top=0.84 if doc["kind"] == "model" else 0.87)
    add_footer(fig, footer_lines(doc, modes[0], doc["precisions"], extra), provenance(doc), -0.01)
    save(fig, out)
    plt.close(fig)
