"""Reading gemmscope result documents in the bench scripts.

gemmscope writes schema gemmscope.result/3: every cell is a record in doc["records"] (kind "gemm"
or "grouped-gemm", item = the GEMM's index in doc["gemms"], mode, precision, provider;
docs/json-schema.md). Files of schemas 1 and 2 held the first provider's cells inside each GEMM,
g["results"][mode][precision]. with_results(doc) gives every GEMM that view for either schema, so
a script reads g["results"][mode][precision] whatever wrote the file.

The step context (what ran between timed iterations, per layer) is records too: kinds "attention"
(item "layer", pass fprop / dgrad) and "step-work" (items "other", "move", "cast"; the context's
own figures as the "other" record's values). Files written before held a "step_context" object.
step_context(doc) gives that object's fields for either layout.
"""


def with_results(doc, provider=None):
    """`doc` with g["results"][mode][precision] on every GEMM: the cells of `provider` (default the
    document's first). Schemas 1 and 2 already have it (the first provider's) and are returned as
    they are."""
    if doc.get("schema") != "gemmscope.result/3":
        return doc
    provider = provider or (doc.get("providers") or ["cublaslt"])[0]
    for g in doc["gemms"]:
        g["results"] = {m: {} for m in doc.get("modes") or []}
    for r in doc.get("records", []):
        if r.get("kind") in ("gemm", "grouped-gemm") and r.get("provider") == provider:
            doc["gemms"][r["item"]]["results"].setdefault(r["mode"], {})[r["precision"]] = r
    return doc


def step_context(doc, rank=0):
    """The step context of `rank` as the older "step_context" object's fields (other_ms, move_ms,
    cast_ms, attention_fwd_ms, attention_bwd_ms, attention_measured, attention_source, ...,
    step_estimate_per_layer), from the records or from the object; {} where the run has none."""
    if rank == 0 and isinstance(doc.get("step_context"), dict):  # an older file (rank 0's at the top level)
        return doc["step_context"]
    if doc.get("ranks") and rank < len(doc["ranks"]) and isinstance(doc["ranks"][rank].get("step_context"), dict):
        return doc["ranks"][rank]["step_context"]
    items = doc.get("items") or {}
    sc = {}
    defaults = {"other_ms": 0.0, "move_ms": 0.0, "cast_ms": 0.0, "other_from_user": False, "attention_fwd_ms": 0.0,
                "attention_bwd_ms": 0.0, "attention_measured": False, "attention_source": "", "attention_shape": ""}
    for r in doc.get("records", []):
        kind = r.get("kind")
        if kind not in ("attention", "step-work") or r.get("rank", 0) != rank:
            continue
        ms = r.get("mean_ms", 0.0) if r.get("status") == "ok" else 0.0
        values = r.get("values") or {}
        if kind == "attention":
            fwd = r.get("pass") == "fprop"
            sc["attention_fwd_ms" if fwd else "attention_bwd_ms"] = ms
            sc["attention_measured"] = r.get("source") == "measured"
            if fwd:
                sc["attention_source"] = values.get("source", "")
                sc["attention_shape"] = values.get("shape", "")
            continue
        item = items["step-work"][r["item"]]
        sc[item + "_ms"] = ms  # other_ms, move_ms, cast_ms
        if item == "other":
            sc["other_from_user"] = r.get("source") == "given"
            sc.update(values)  # kind, framework, stream_gb_per_s, efficiency, move_gb_per_s
    if not sc:
        return {}
    sc = dict(defaults, **sc)  # the figures no record holds (a quantity of 0 ms has none)
    if "step_estimate_per_layer" in doc:
        sc["step_estimate_per_layer"] = doc["step_estimate_per_layer"]
    return sc
