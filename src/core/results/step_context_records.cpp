// The step context as records of a result document (step_context_records.hpp).
#include "core/results/step_context_records.hpp"

#include <fmt/format.h>

#include <map>

#include "core/results/record_values.hpp"
#include "core/util/error.hpp"

namespace gs {

using nlohmann::json;
using namespace json_fields;

namespace {

constexpr const char* kAttentionItem = "layer";
constexpr const char* kWorkItems[] = {"other", "move", "cast"};  // the step-work items, in item order
enum WorkItem { kOther, kMove, kCast };
constexpr Range kGbps{0.0, 1e6, " GB/s"};

bool is_step_context_kind(RecordKind k) { return k == RecordKind::Attention || k == RecordKind::StepWork; }

// The attention's words on its forward record's values.
const Fields<StepContextInfo>& attention_word_fields() {
  static const Fields<StepContextInfo> t = {
      text<StepContextInfo>("source", [](auto& c) -> auto& { return c.attention_source; },
                            [](const StepContextInfo& c) { return !c.attention_source.empty(); }, 400),
      text<StepContextInfo>("shape", [](auto& c) -> auto& { return c.attention_shape; },
                            [](const StepContextInfo& c) { return !c.attention_shape.empty(); }, 200),
  };
  return t;
}

// The item of `kind` named `name`, added to the kind's items where it is not there yet.
uint32_t item_of(RunResult& r, RecordKind kind, const std::string& name) {
  std::vector<std::string>& names = r.item_names[kind];
  for (size_t i = 0; i < names.size(); ++i)
    if (names[i] == name) return static_cast<uint32_t>(i);
  names.push_back(name);
  return static_cast<uint32_t>(names.size() - 1);
}

// A quantity's cell: its time per layer (a cell of one sample, as a step kernel's), N/A at 0 ms.
Cell time_cell(double ms, const std::string& why_none) {
  return ms > 0 ? Cell::measured(summarize({ms})) : Cell::na(why_none);
}

void add(RunResult& r, RecordKind kind, const std::string& item, std::optional<Pass> pass, Source source, uint32_t rank,
         Cell c) {
  RecordKey k;
  k.kind = kind;
  k.item = item_of(r, kind, item);
  k.pass = pass;
  k.source = source;
  k.rank = rank;
  r.records.add(k, std::move(c));
}

}  // namespace

void add_step_context_records(RunResult& r, const StepContextInfo& c, uint32_t rank) {
  for (const char* item : kWorkItems) item_of(r, RecordKind::StepWork, item);  // one item order for every rank
  const Source work = c.other_from_user ? Source::Given : Source::Modelled;
  Cell other = time_cell(c.other_ms, "no memory-bound work in this step context");
  json v = json::object();
  write_fields(step_context_value_fields(), c, v);
  set_values(other, v);
  add(r, RecordKind::StepWork, kWorkItems[kOther], std::nullopt, work, rank, std::move(other));
  if (c.move_ms > 0) add(r, RecordKind::StepWork, kWorkItems[kMove], std::nullopt, work, rank, time_cell(c.move_ms, ""));
  if (c.cast_ms > 0)
    add(r, RecordKind::StepWork, kWorkItems[kCast], std::nullopt, Source::Modelled, rank, time_cell(c.cast_ms, ""));
  if (!(c.attention_ms() > 0) && !c.attention_measured && c.attention_source.empty() && c.attention_shape.empty()) return;
  const Source att = c.attention_measured ? Source::Measured : Source::Modelled;
  const std::string none = "no attention ran in this step context";
  Cell fwd = time_cell(c.attention_fwd_ms, none);
  json words = json::object();
  write_fields(attention_word_fields(), c, words);
  set_values(fwd, words);
  add(r, RecordKind::Attention, kAttentionItem, Pass::Fprop, att, rank, std::move(fwd));
  add(r, RecordKind::Attention, kAttentionItem, Pass::Dgrad, att, rank, time_cell(c.attention_bwd_ms, none));
}

namespace {

// One rank's step context records, by quantity, with their positions in the table for messages.
struct Found {
  const Record* attention[2] = {};  // fprop, dgrad
  const Record* work[3] = {};       // other, move, cast
  size_t at_attention[2] = {}, at_work[3] = {};
};

std::string item_name(const RunResult& r, const RecordKey& k) {
  const auto it = r.item_names.find(k.kind);
  return it != r.item_names.end() && k.item < it->second.size() ? it->second[k.item] : fmt::format("item {}", k.item);
}

// The step context records of `rank` (every rank: nullopt), each checked on its own.
std::map<uint32_t, Found> collect(const RunResult& r, std::optional<uint32_t> rank, const std::string& name) {
  std::map<uint32_t, Found> out;
  for (size_t i = 0; i < r.records.size(); ++i) {
    const Record& rec = r.records[i];
    const RecordKey& k = rec.key;
    if (!is_step_context_kind(k.kind) || (rank && k.rank != *rank)) continue;
    const std::string item = item_name(r, k);
    const std::string where = fmt::format("{}: records[{}] ({} {})", name, i, to_string(k.kind), clip_text(item, 80));
    if (k.mode || k.precision || k.provider)
      throw UsageError(where + ": a step context record has no mode, precision or provider (one figure per layer)");
    Found& f = out[k.rank];
    const Record** slot = nullptr;
    size_t* at = nullptr;
    if (k.kind == RecordKind::Attention) {
      if (item != kAttentionItem)
        throw UsageError(fmt::format("{}: unknown attention item '{}' (the step context's is '{}')", where,
                                     clip_text(item, 80), kAttentionItem));
      if (k.pass != Pass::Fprop && k.pass != Pass::Dgrad)
        throw UsageError(where + ": an attention record's pass is fprop (the forward) or dgrad (the backward)");
      if (k.source != Source::Measured && k.source != Source::Modelled)
        throw UsageError(fmt::format("{}: attention is measured or modelled, not {}", where, to_string(k.source)));
      const int p = k.pass == Pass::Fprop ? 0 : 1;
      slot = &f.attention[p];
      at = &f.at_attention[p];
    } else {
      int w = -1;
      for (int x = 0; x < 3; ++x)
        if (item == kWorkItems[x]) w = x;
      if (w < 0) throw UsageError(fmt::format("{}: unknown step-work item '{}' (other, move, cast)", where, clip_text(item, 80)));
      if (k.pass) throw UsageError(where + ": a step-work record has no pass");
      const bool given_ok = w != kCast;  // the casts are modelled; --step-other-ms gives the rest
      if (k.source != Source::Modelled && !(given_ok && k.source == Source::Given))
        throw UsageError(fmt::format("{}: step work '{}' is {}, not {}", where, item,
                                     given_ok ? "modelled or given (--step-other-ms)" : "modelled", to_string(k.source)));
      slot = &f.work[w];
      at = &f.at_work[w];
    }
    if (*slot)
      throw UsageError(fmt::format("{} repeats records[{}]: one record per quantity of a rank's step context", where, *at));
    if (rec.value.ok && !(rec.value.stats.mean_ms > 0 && rec.value.stats.mean_ms <= kMaxStepOtherMs))
      throw UsageError(fmt::format("{}: its time must be above 0 and at most {:g} ms per layer, got {:g}", where,
                                   kMaxStepOtherMs, rec.value.stats.mean_ms));
    *slot = &rec;
    *at = i;
  }
  return out;
}

double ms_of(const Record* rec) { return rec && rec->value.ok ? rec->value.stats.mean_ms : 0.0; }

// The step context of one rank's records, checked as a whole.
StepContextInfo rebuild(const Found& f, uint32_t rank, const std::string& name) {
  const std::string whose = fmt::format("{}: rank {}'s step context", name, rank);
  const Record* other = f.work[kOther];
  if (!other) throw UsageError(whose + " has no step-work 'other' record (the one holding the context's figures)");
  const std::string where = fmt::format("{}: records[{}] (step-work other)", name, f.at_work[kOther]);
  StepContextInfo c;
  read_fields(step_context_value_fields(), values_object(other->value), c, where + ": values");
  c.other_ms = ms_of(other);
  c.other_from_user = other->key.source == Source::Given;
  if (const Record* move = f.work[kMove]; move && move->key.source != other->key.source)
    throw UsageError(fmt::format("{}: records[{}] (step-work move) is {}, its 'other' record {}: both are the model's or "
                                 "both --step-other-ms's",
                                 name, f.at_work[kMove], to_string(move->key.source), to_string(other->key.source)));
  c.move_ms = ms_of(f.work[kMove]);
  c.cast_ms = ms_of(f.work[kCast]);
  const Record *fwd = f.attention[0], *bwd = f.attention[1];
  if (!fwd != !bwd)
    throw UsageError(fmt::format("{} has attention's {} record without its {} one", whose, fwd ? "fprop" : "dgrad",
                                 fwd ? "dgrad" : "fprop"));
  if (!fwd) return c;
  if (fwd->key.source != bwd->key.source)
    throw UsageError(fmt::format("{}'s attention is {} forward and {} backward: one source for both passes", whose,
                                 to_string(fwd->key.source), to_string(bwd->key.source)));
  c.attention_fwd_ms = ms_of(fwd);
  c.attention_bwd_ms = ms_of(bwd);
  c.attention_measured = fwd->key.source == Source::Measured;
  read_fields(attention_word_fields(), values_object(fwd->value), c,
              fmt::format("{}: records[{}] (attention layer): values", name, f.at_attention[0]));
  return c;
}

}  // namespace

bool is_step_context_record(const Record& rec) { return is_step_context_kind(rec.key.kind); }

const Fields<StepContextInfo>& step_context_value_fields() {
  static const Fields<StepContextInfo> t = {
      custom<StepContextInfo>(
          "kind", [](const StepContextInfo& c, json& o) { o["kind"] = to_string(c.kind); },
          [](const json& o, StepContextInfo& c, const std::string& where) {
            try {
              c.kind = step_context_from_string(get_or<std::string>(o, "kind", where, "none"));
            } catch (const UsageError&) {
              throw UsageError(where + ".kind must be one of te, eager, compile, none");
            }
          }),
      derived<StepContextInfo>("framework",
                               [](const StepContextInfo& c) -> std::optional<json> { return step_context_framework(c.kind); }),
      number<StepContextInfo>("stream_gb_per_s", [](auto& c) -> auto& { return c.stream_gb_per_s; }, kGbps),
      number<StepContextInfo>("efficiency", [](auto& c) -> auto& { return c.efficiency; }, {0.0, 100.0, ""}),
      number<StepContextInfo>("move_gb_per_s", [](auto& c) -> auto& { return c.move_gb_per_s; }, kGbps),
  };
  return t;
}

void clear_step_context_records(RunResult& r, uint32_t rank) {
  bool any = false;
  for (const Record& rec : r.records) any = any || (is_step_context_record(rec) && rec.key.rank == rank);
  if (!any) return;
  RecordTable kept;
  kept.reserve(r.records.size());
  bool left[2] = {false, false};  // attention, step-work records of other ranks
  for (const Record& rec : r.records) {
    if (is_step_context_record(rec) && rec.key.rank == rank) continue;
    if (is_step_context_record(rec)) left[rec.key.kind == RecordKind::Attention ? 0 : 1] = true;
    kept.add(rec.key, rec.value);
  }
  r.records = std::move(kept);
  if (!left[0]) r.item_names.erase(RecordKind::Attention);
  if (!left[1]) r.item_names.erase(RecordKind::StepWork);
}

void set_step_context_records(RunResult& r, const StepContextInfo& c, uint32_t rank) {
  clear_step_context_records(r, rank);
  add_step_context_records(r, c, rank);
}

std::optional<StepContextInfo> step_context_view(const RunResult& r, uint32_t rank, const std::string& name) {
  const std::map<uint32_t, Found> found = collect(r, rank, name);
  if (found.empty()) return std::nullopt;
  return rebuild(found.begin()->second, rank, name);
}

void check_step_context_records(const RunResult& r, const std::string& name) {
  for (const auto& [rank, f] : collect(r, std::nullopt, name)) rebuild(f, rank, name);
}

}  // namespace gs
