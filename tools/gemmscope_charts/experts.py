"""The experts chart: one MoE layer (docs/charts.md, kind "experts"). Top: rows (tokens) per expert from
the routing gemmscope wrote (plan.routing: counts, the busiest expert-parallel rank, mean rows);
bottom: the grouped expert GEMM time per precision, passes stacked, from totals.<mode>.<precision>.experts."""

from .common import (_is_int, add_footer, band_of, config_line, device_name, fmt_ms, fmt_range_x, fmt_x,
                     footer_lines, na_of, provenance, ratio_band, save, tick_label, total_entry, BAND_LABEL,
                     InputError, OLD_FILE)

MAX_EXPERTS_DRAWN = 4096  # one bar each (the largest MoE models have a few hundred experts)
EXPERT_PASSES = [("fprop", "Fprop", "#1f77b4"), ("dgrad", "Dgrad", "#2ca02c"), ("wgrad", "Wgrad", "#ff7f0e")]


def has_moe(doc):
    """Whether the result has grouped (MoE expert) GEMMs."""
    return any(g.get("group_dim") is not None or g.get("group") is not None for g in doc["gemms"])


def moe_data(doc, name):
    """The MoE parts of a result (gemmscope's reader checked them): the grouped expert GEMMs (each with
    `group_dim` and `group`, the rows per expert of the busiest EP rank's experts) and plan.routing (rows
    per expert over the whole EP group, with the busiest rank and the mean; None in a file without it).
    InputError when there are none, or more experts than the chart draws."""
    grouped = []
    for i, g in enumerate(doc["gemms"]):
        if g.get("group_dim") is None and g.get("group") is None:
            continue
        grp = g.get("group")
        if g.get("group_dim") not in ("m", "k") or not isinstance(grp, list) or not grp or \
                not all(_is_int(v) for v in grp):
            raise InputError("%s: gemms[%d]: \"group_dim\" must be \"m\" or \"k\" and \"group\" a list of "
                             "per-expert sizes" % (name, i))
        if len(grp) > MAX_EXPERTS_DRAWN:
            raise InputError("%s: gemms[%d]: %d experts, more than the experts chart draws (%d)" % (
                name, i, len(grp), MAX_EXPERTS_DRAWN))
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
    if not isinstance(counts, list) or not counts or not all(_is_int(v) for v in counts):
        raise InputError(rw + ".counts must be a non-empty list of rows per expert")
    if len(counts) > MAX_EXPERTS_DRAWN:
        raise InputError("%s: %d experts, more than the experts chart draws (%d)" % (rw, len(counts), MAX_EXPERTS_DRAWN))
    for key in ("expert_parallel", "local_experts", "busiest_rank", "mean_rows", "max_over_mean"):
        if key not in rt:
            raise InputError(OLD_FILE % (name, "plan.routing." + key))
    return grouped, rt


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
        counts, ep, local, busiest = rt["counts"], rt["expert_parallel"], rt["local_experts"], rt["busiest_rank"]
        first = busiest * local
        hot = range(first, first + local) if ep > 1 else range(0)
        title = "Rows (tokens) per expert, all %d experts of the %s" % (
            len(counts), "EP group (%d ranks x %d experts)" % (ep, local) if ep > 1 else "layer")
    else:  # no routing in the file: the grouped GEMM's own groups (the busiest rank's experts)
        up = next((g for g in grouped if g["group_dim"] == "m"), grouped[0])
        counts, ep, local, busiest, first, hot = up["group"], 1, len(up["group"]), 0, 0, range(0)
        title = "Rows (tokens) per expert of the grouped GEMMs (%s %s)" % (up["pass"], up.get("label") or up["op"])
    n_e = len(counts)
    mean = float(rt["mean_rows"]) if rt is not None else float(sum(counts)) / n_e
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
    ebands = {}
    for p in precs:  # the grouped GEMMs' times per pass, their sum, spread and band, as gemmscope summed them
        e = total_entry(doc, mode, p, "experts")
        parts = dict((ps, e[ps + "_ms"]) for ps, _, _ in EXPERT_PASSES if ps + "_ms" in e)
        data[p] = (parts, e.get("ms"), float(e.get("spread_ms") or 0.0), e)
        ebands[p] = band_of(e, doc) if e.get("ms") is not None else None
    totals = [d[1] + d[2] for d in data.values() if d[1] is not None] + [b[1] for b in ebands.values() if b]
    drawn = {"sd": False, "band": False}
    ymax = max(totals) if totals else 1.0
    base_total = data[baseline][1]
    extra = []
    width = 0.6
    for i, p in enumerate(precs):
        parts, total, sd, e = data[p]
        if total is None:
            t = ax_t.text(i, ymax * 0.03, "N/A", ha="center", va="bottom", fontsize=13, fontweight="bold",
                          color="#b00020")
            t.set_gid("na:%s" % p)
            extra.append("%s is N/A for the expert GEMMs in %s mode: %s" % (p, mode, na_of(e)[1]))
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
        bits.append("max/mean %.2f" % rt["max_over_mean"])
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
