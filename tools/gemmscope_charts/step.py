"""The step chart: the whole training step of a model run, one stacked bar per precision (docs/charts.md,
kind "step"). Segments are the breakdown gemmscope computed (step.modes.<mode>.<precision>.breakdown:
GEMMs, attention, other, loss, optimizer, recompute, and the host's time beyond the GPU's); above each
bar its step time and its step speedup over BF16 beside the GEMM-only speedup (speedup_vs_bf16). The
script sums nothing: every number is the file's."""

from .common import (add_footer, config_line, device_name, footer_lines, provenance, save, InputError)

CATEGORIES = (("gemm", "GEMMs", "#1f77b4"), ("attention", "attention", "#ff7f0e"), ("other", "other (norms, "
              "activations, RoPE, embedding, ...)", "#2ca02c"), ("loss", "loss", "#d62728"),
              ("optimizer", "optimizer, clip, zero-grad", "#9467bd"), ("recompute", "recompute", "#8c564b"),
              ("host", "host beyond the GPU", "#7f7f7f"))


def _number(v, what):
    if v is None:
        return None
    if isinstance(v, bool) or not isinstance(v, (int, float)) or v != v or v < 0 or v > 1e12:
        raise InputError("%s must be a number >= 0 or null" % what)
    return float(v)


def step_data(doc, mode, name):
    """The step entries of `mode`, per precision, checked: {prec: entry}."""
    step = doc.get("step")
    if not isinstance(step, dict) or not step.get("timed"):
        raise InputError("%s has no timed whole step (a model run measured by this gemmscope writes one)" % name)
    modes = step.get("modes")
    if not isinstance(modes, dict) or not isinstance(modes.get(mode), dict):
        raise InputError("%s: step.modes has no mode %s" % (name, mode))
    out = {}
    for p in doc["precisions"]:
        e = modes[mode].get(p)
        if not isinstance(e, dict) or not isinstance(e.get("breakdown"), dict):
            raise InputError("%s: step.modes.%s.%s must hold a breakdown" % (name, mode, p))
        where = "%s: step.modes.%s.%s" % (name, mode, p)
        _number(e.get("step_ms"), where + ".step_ms")
        for key, _, _ in CATEGORIES:
            _number(e["breakdown"].get(key), "%s.breakdown.%s" % (where, key))
        out[p] = e
    return out


def chart_step(doc, mode, baseline, out, name):
    import matplotlib.pyplot as plt

    data = step_data(doc, mode, name)
    precs = list(doc["precisions"])
    fig, ax = plt.subplots(figsize=(max(7.5, 1.5 * len(precs) + 4.5), 5.8))
    tops = [data[p].get("step_ms") or 0 for p in precs]
    ymax = max(tops + [1e-9])
    drawn = set()
    for i, p in enumerate(precs):
        e = data[p]
        if e.get("step_ms") is None:
            t = ax.text(i, ymax * 0.02, "unknown", ha="center", va="bottom", fontsize=10, color="#b00020",
                        fontweight="bold", rotation=90)
            t.set_gid("na:%s" % p)
            continue
        bottom = 0.0
        for key, label, color in CATEGORIES:
            v = e["breakdown"].get(key) or 0.0
            if v <= 0:
                continue
            r = ax.bar(i, v, 0.62, bottom=bottom, color=color, label=label if key not in drawn else None,
                       edgecolor="white", linewidth=0.6)
            r.patches[0].set_gid("bar:%s:%s" % (p, key))
            drawn.add(key)
            if v > ymax * 0.06:
                ax.text(i, bottom + v / 2.0, "%.1f" % v, ha="center", va="center", fontsize=8, color="white")
            bottom += v
        sp = e.get("speedup_vs_bf16") or {}
        label = "%.1f ms" % e["step_ms"]
        if p != baseline and sp.get("step") is not None:
            label += "\nstep %.2fx" % sp["step"]
            if sp.get("gemm") is not None:
                label += " (GEMMs %.2fx)" % sp["gemm"]
        t = ax.text(i, bottom + ymax * 0.012, label, ha="center", va="bottom", fontsize=9, fontweight="bold")
        t.set_gid("speedup:%s" % p)
    ax.set_xticks(range(len(precs)))
    ax.set_xticklabels(precs, fontsize=9)
    ax.set_xlim(-0.6, len(precs) - 0.4)
    ax.set_ylim(0, ymax * 1.22)
    ax.set_ylabel("Whole training step (ms)")
    ax.yaxis.grid(True, color="#dddddd", linewidth=0.6)
    ax.set_axisbelow(True)
    for side in ("top", "right"):
        ax.spines[side].set_visible(False)
    ax.legend(loc="upper left", bbox_to_anchor=(1.01, 1.0), frameon=False, fontsize=9, title="Where the step goes")
    what = "PREDICTED" if doc.get("timing", {}).get("method") == "predicted" else "estimated"
    fig.suptitle("Whole training step on %s (%s, %s mode)" % (device_name(doc), what, mode), fontsize=12,
                 fontweight="bold", x=0.01, ha="left")
    base = data.get(baseline) or {}
    extra = []
    mem = (base.get("memory") or {})
    if mem.get("total") is not None:
        dev = mem.get("device")
        extra.append("memory per GPU (%s, modelled): %.1f GB%s" % (
            baseline, mem["total"] * 1e-9,
            "" if dev is None else (" of %.1f GB: %s" % (dev * 1e-9, "fits" if mem.get("fits") else "does NOT fit"))))
    if base.get("mfu") is not None:
        extra.append("MFU %.1f%% (Megatron-LM's model FLOPs over the dense BF16 peak)" % (100 * base["mfu"]))
    extra.append("each group measured or modelled as the result's step.modes.%s.<precision>.groups[].source says"
                 % mode)
    ax.set_title(config_line(doc), fontsize=9, loc="left", color="#333333")
    fig.tight_layout()
    fig.subplots_adjust(top=0.86)
    add_footer(fig, footer_lines(doc, mode, precs, extra), provenance(doc), -0.01)
    save(fig, out)
    plt.close(fig)
