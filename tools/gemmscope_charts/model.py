"""The model chart: per-layer GEMM time, one stacked bar per precision (docs/charts.md, kind "model").

Every number is gemmscope's: totals.<mode>.<precision>.layer holds one layer's GEMMs per op
(Fprop + Dgrad, Wgrad), their sum, spread, band and n/a reasons, and the LM head's time over the
layers with the bar that includes it.
"""

from .common import (band_of, config_line, device_name, add_footer, fmt_ms, fmt_range_x, fmt_x, footer_lines,
                     layers_of, lighten, na_of, provenance, ratio_band, save, tick_label, total_entry, BAND_LABEL,
                     MODE_TEXT)

# Layer ops in stacking order: (op key in the JSON, label, gid name, colour).
LAYER_OPS = [
    ("qkv", "QKV", "QKV", "#1f77b4"),
    ("attn_out", "Attn Out", "AttnOut", "#ff7f0e"),
    ("mlp_up", "MLP Up", "MLPUp", "#2ca02c"),
    ("mlp_down", "MLP Down", "MLPDown", "#d62728"),
]
LM_HEAD_COLOR = "#9467bd"


def model_breakdown(doc, mode, prec):
    """Per-layer segments of one precision, as gemmscope summed them: {op: (fprop+dgrad ms, wgrad ms)}
    for the ops the chart stacks, the LM head ms per layer (None when n/a), the per-layer total (None
    when any layer cell is n/a), whether the run has LM-head GEMMs, and the breakdown itself."""
    lay = total_entry(doc, mode, prec, "layer")
    ops = lay.get("ops") or {}
    segs = {}
    for op, _, _, _ in LAYER_OPS:
        if op in ops:
            segs[op] = (ops[op].get("fprop_dgrad_ms"), ops[op].get("wgrad_ms"))
    return segs, lay.get("lm_head_ms"), lay.get("ms"), "lm_head_ms" in lay, lay


def chart_model(doc, mode, baseline, out):
    import matplotlib.pyplot as plt
    from matplotlib.lines import Line2D
    from matplotlib.patches import Patch

    precs = doc["precisions"]
    layers = layers_of(doc)
    data = {p: model_breakdown(doc, mode, p) for p in precs}
    has_lm = any(d[3] for d in data.values())
    lm_ok_everywhere = has_lm and all(d[1] is not None for d in data.values() if d[2] is not None)

    def bar(p):
        """What gemmscope summed for the bar of `p`: one layer, with the LM head's time over the layers
        when every drawn bar has it."""
        return data[p][4]["with_lm_head"] if lm_ok_everywhere else data[p][4]

    def bar_total(p):
        return None if data[p][2] is None else float(bar(p)["ms"])

    base_total = bar_total(baseline)

    def bar_band(p):
        """A predicted bar's band (low, high): its layer cells' bands, the LM head's over the layers."""
        return band_of(bar(p), doc) if bar_total(p) is not None else None

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
        segs, lm, total, _, _ = data[p]
        if total is None:
            t = ax.text(i, ymax * 0.03, "N/A", ha="center", va="bottom", fontsize=13,
                        fontweight="bold", color="#b00020")
            t.set_gid("na:%s" % p)
            n_na, reasons = na_of(data[p][4])
            ax.text(i, ymax * 0.03 + ymax * 0.07, "%d GEMM%s n/a" % (n_na, "" if n_na == 1 else "s"),
                    ha="center", va="bottom", fontsize=8, color="#b00020")
            extra_notes.append("%s is N/A in %s mode: %s" % (p, mode, reasons))
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
        # The spread of the bar: the per-iteration stdev of its cells, summed as variances (by gemmscope).
        sd = float(bar(p).get("spread_ms") or 0.0)
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
