// Collectives as records of a result document (comm_records.hpp).
#include "core/node/comm_records.hpp"

#include <fmt/format.h>

#include <string>

#include "core/report/report.hpp"
#include "core/run/runner.hpp"

namespace gs {

namespace {

// "TP all-gather of the LN output before QKV (BF16)": the group, the collective and its wire type.
std::string item_name(const Collective& c, CommType t) {
  return fmt::format("{} {} ({})", to_string(c.group), c.what, to_string(t));
}

void put_overlap(Cell& v, const char* prefix, const OverlapTiming& o) {
  const auto key = [&](const char* name) { return fmt::format("{}.{}", prefix, name); };
  v.set(key("gemm_alone_ms"), o.gemm_alone_ms);
  v.set(key("gemm_overlap_ms"), o.gemm_overlap_ms);
  v.set(key("comm_overlap_ms"), o.comm_overlap_ms);
  v.set(key("both_ms"), o.both_ms);
  v.set(key("exposed_ms"), o.exposed_ms());
}

}  // namespace

void add_collective_records(RunResult& r, const CommResult& c) {
  std::vector<std::string>& names = r.item_names[RecordKind::Collective];
  names.clear();
  RecordTable kept;
  for (const Record& rec : r.records)
    if (rec.key.kind != RecordKind::Collective) kept.add(rec.key, rec.value);
  r.records = std::move(kept);
  for (size_t i = 0; i < c.collectives.size(); ++i) {
    const Collective& x = c.collectives[i];
    std::vector<CommType> types = {x.type_bf16};  // the BF16 recipe's, then the FP8 recipes' where it differs
    if (x.type_fp8 != x.type_bf16) types.push_back(x.type_fp8);
    for (const CommType t : types) {
      const uint32_t item = static_cast<uint32_t>(names.size());
      names.push_back(item_name(x, t));
      const CommMeasurement* m = c.find(i, t);
      if (!m) continue;
      RecordKey k;
      k.kind = RecordKind::Collective;
      k.item = item;
      k.pass = x.backward ? Pass::Dgrad : Pass::Fprop;
      Cell v;
      v.ok = true;
      v.set("ms", m->timing.ms);
      v.set("ms_min", m->timing.ms_min);
      v.set("ms_max", m->timing.ms_max);
      v.set("iterations", static_cast<double>(m->timing.iterations));
      v.set("size_bytes", static_cast<double>(x.size_bytes(t)));
      v.set("bus_gbs", x.bus_bandwidth_gbs(t, m->timing.ms));
      if (m->overlap) put_overlap(v, "overlap_bf16", *m->overlap);
      if (m->overlap_fp8) put_overlap(v, "overlap_fp8", *m->overlap_fp8);
      r.records.add(k, std::move(v));
    }
  }
}

nlohmann::json comm_block_json(const CommResult& c, const Plan& plan) {
  nlohmann::json j = comm_to_json(c, plan);
  j.erase("schema");
  return j;
}

nlohmann::json comm_document(const Plan& plan, const CommResult& c) {
  RunResult r;
  r.plan = plan;
  r.dry_run = true;
  r.why_not_measured = "the collectives only (--comm-json): no GEMM was timed";
  r.created = utc_now_iso8601();
  add_collective_records(r, c);
  nlohmann::json j = to_json(r);
  j["comm"] = comm_block_json(c, plan);
  return j;
}

}  // namespace gs
