"""Reading gemmscope result documents in the bench scripts.

gemmscope writes schema gemmscope.result/3: every cell is a record in doc["records"] (kind "gemm"
or "grouped-gemm", item = the GEMM's index in doc["gemms"], mode, precision, provider;
docs/json-schema.md). Files of schemas 1 and 2 held the first provider's cells inside each GEMM,
g["results"][mode][precision]. with_results(doc) gives every GEMM that view for either schema, so
a script reads g["results"][mode][precision] whatever wrote the file.
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
