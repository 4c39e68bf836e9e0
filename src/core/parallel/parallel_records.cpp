// The parallel step and the layout search as records (parallel_records.hpp).
#include "core/parallel/parallel_records.hpp"

#include <fmt/format.h>

#include <stdexcept>

#include "core/run/runner.hpp"
#include "core/util/error.hpp"
#include "core/util/text_util.hpp"

namespace gs {

namespace {

constexpr size_t kMaxItemChars = 200;  // what a reader keeps of an item's name

// A number of a struct S by name, for both directions.
template <class S>
struct Number {
  const char* name;
  double S::*member;
};
using StepNumber = Number<ParallelStepResult>;
using MemoryNumber = Number<RankMemory>;

// The numbers of a step, and of a rank's memory.
const std::vector<StepNumber>& step_numbers() {
  static const std::vector<StepNumber> t = {
      {"step_ms", &ParallelStepResult::step_ms},
      {"tokens_per_step", &ParallelStepResult::tokens_per_step},
      {"tokens_per_s_per_gpu", &ParallelStepResult::tokens_per_s_per_gpu},
      {"model_flops_per_step", &ParallelStepResult::model_flops_per_step},
      {"model_tflops_per_gpu", &ParallelStepResult::model_tflops_per_gpu},
      {"mfu", &ParallelStepResult::mfu},
      {"bubble_fraction", &ParallelStepResult::bubble_fraction},
      {"usable_memory_bytes", &ParallelStepResult::usable_memory_bytes},
      {"peak_memory_bytes", &ParallelStepResult::peak_memory_bytes},
  };
  return t;
}

const std::vector<MemoryNumber>& memory_numbers() {
  static const std::vector<MemoryNumber> t = {
      {"memory.params", &RankMemory::params},
      {"memory.expert_params", &RankMemory::expert_params},
      {"memory.weights_bytes", &RankMemory::weights_bytes},
      {"memory.grads_bytes", &RankMemory::grads_bytes},
      {"memory.optimizer_bytes", &RankMemory::optimizer_bytes},
      {"memory.gathered_bytes", &RankMemory::gathered_bytes},
      {"memory.fp8_copy_bytes", &RankMemory::fp8_copy_bytes},
      {"memory.activation_bytes", &RankMemory::activation_bytes},
      {"memory.inflight_microbatches", &RankMemory::inflight_microbatches},
  };
  return t;
}

std::string part_name(int k) { return fmt::format("ms.{}", to_string(static_cast<TimeKind>(k))); }
std::string stage_item(int64_t s) { return fmt::format("stage {}", s); }

Source source_of(CostSource s) { return s == CostSource::Measured ? Source::Modelled : Source::Predicted; }
CostSource cost_source_of(Source s) { return s == Source::Modelled ? CostSource::Measured : CostSource::Predicted; }

// A record's value by name, as what it must be; UsageError naming the record.
double number(const Record& rec, const char* name, const std::string& where) {
  if (const std::optional<double> v = rec.value.number(name)) return *v;
  throw UsageError(fmt::format("{} ({}) has no number values.{}", where, rec.key.describe(), name));
}
int64_t whole(const Record& rec, const char* name, const std::string& where) {
  const double v = number(rec, name, where);
  if (!(v >= 0 && v <= 1e15) || v != static_cast<double>(static_cast<int64_t>(v)))
    throw UsageError(fmt::format("{} ({}): values.{} must be a whole number from 0 to 1e15", where, rec.key.describe(), name));
  return static_cast<int64_t>(v);
}
bool flag(const Record& rec, const char* name, const std::string& where) {
  if (const Value* v = rec.value.value(name))
    if (const bool* b = std::get_if<bool>(v)) return *b;
  throw UsageError(fmt::format("{} ({}) has no true/false values.{}", where, rec.key.describe(), name));
}
std::string text(const Record& rec, const char* name, const std::string& where) {
  if (const Value* v = rec.value.value(name))
    if (const std::string* s = std::get_if<std::string>(v)) return *s;
  throw UsageError(fmt::format("{} ({}) has no text values.{}", where, rec.key.describe(), name));
}

// The step's own values (kind parallel-step item "step", and every layout of the search).
void put_step(Cell& c, const ParallelStepResult& x) {
  c.set("gpus", static_cast<double>(x.gpus));
  for (const StepNumber& n : step_numbers()) c.set(n.name, x.*n.member);
  c.set("critical_stage", static_cast<double>(x.critical_stage));
  c.set("fits", x.fits);
}
void read_step(const Record& rec, ParallelStepResult& x, const std::string& where) {
  x.gpus = whole(rec, "gpus", where);
  for (const StepNumber& n : step_numbers()) x.*n.member = number(rec, n.name, where);
  x.critical_stage = whole(rec, "critical_stage", where);
  x.fits = flag(rec, "fits", where);
  x.source = cost_source_of(rec.key.source);
}

Cell stage_cell(const StageResult& s) {
  Cell c;
  c.ok = true;
  for (int k = 0; k < kTimeKinds; ++k) c.set(part_name(k), s.ms[static_cast<size_t>(k)]);
  c.set("pipeline_end_ms", s.pipeline_end_ms);
  for (const MemoryNumber& n : memory_numbers()) c.set(n.name, s.memory.*n.member);
  c.set("memory.total_bytes", s.memory.total_bytes());  // for readers of the file; derived again
  return c;
}
StageResult read_stage(const Record& rec, int64_t stage, const std::string& where) {
  StageResult s;
  s.stage = stage;
  s.memory.stage = stage;
  for (int k = 0; k < kTimeKinds; ++k) s.ms[static_cast<size_t>(k)] = number(rec, part_name(k).c_str(), where);
  s.pipeline_end_ms = number(rec, "pipeline_end_ms", where);
  for (const MemoryNumber& n : memory_numbers()) s.memory.*n.member = number(rec, n.name, where);
  return s;
}

std::string collective_name(const StepCollective& c) { return c.p2p ? "send/recv" : to_string(c.kind); }

Cell collective_cell(const StepCollective& c) {
  Cell v;
  v.ok = true;
  v.set("group", c.group);
  v.set("collective", collective_name(c));
  v.set("what", c.what);
  v.set("p2p", c.p2p);
  v.set("bytes", c.bytes);
  v.set("ranks", static_cast<double>(c.ranks));
  v.set("ranks_per_domain", static_cast<double>(c.placement.per_domain));
  v.set("algo", to_string(c.algo));
  v.set("ms", c.ms);
  v.set("per_step", c.per_step);
  v.set("exposed_ms", c.exposed_ms);
  v.set("hidden_ms", c.ms * c.per_step - c.exposed_ms);  // for readers of the file; derived again
  return v;
}

template <class E>
E by_name(const std::string& name, std::initializer_list<E> all, const char* what, const std::string& where) {
  for (E e : all)
    if (name == to_string(e)) return e;
  throw UsageError(fmt::format("{}: unknown {} '{}'", where, what, clip_text(name, 80)));
}

StepCollective read_collective(const Record& rec, const std::string& where) {
  StepCollective c;
  c.group = text(rec, "group", where);
  c.what = text(rec, "what", where);
  c.p2p = flag(rec, "p2p", where);
  if (!c.p2p)
    c.kind = by_name(text(rec, "collective", where),
                     {CollKind::AllGather, CollKind::ReduceScatter, CollKind::AllReduce, CollKind::AllToAll}, "collective", where);
  c.bytes = number(rec, "bytes", where);
  c.ranks = whole(rec, "ranks", where);
  c.placement.ranks = c.ranks;
  c.placement.per_domain = whole(rec, "ranks_per_domain", where);
  c.algo = by_name(text(rec, "algo", where), {CollAlgo::Ring, CollAlgo::Nvls, CollAlgo::Tree, CollAlgo::Direct}, "algorithm",
                   where);
  c.ms = number(rec, "ms", where);
  c.per_step = number(rec, "per_step", where);
  c.exposed_ms = number(rec, "exposed_ms", where);
  return c;
}

uint32_t add_item(RunResult& r, RecordKind k, const std::string& name) {
  std::vector<std::string>& names = r.item_names[k];
  names.push_back(clip_text(name, kMaxItemChars));
  return static_cast<uint32_t>(names.size() - 1);
}

const std::vector<std::string>& items(const RunResult& r, RecordKind k) {
  static const std::vector<std::string> none;
  const auto it = r.item_names.find(k);
  return it == r.item_names.end() ? none : it->second;
}

bool is_parallel_record(const RecordKey& k) {
  return k.kind == RecordKind::ParallelStep || (k.kind == RecordKind::Collective && k.source != Source::Measured);
}

}  // namespace

void add_parallel_step_records(RunResult& r, const ParallelReport& rep) {
  for (const Record& rec : r.records)
    if (is_parallel_record(rec.key) || r.parallel)
      throw std::logic_error("add_parallel_step_records: the run holds a parallel step already");
  ParallelRun p;
  p.job = rep.job;
  p.notes = rep.notes;
  if (!rep.results.empty()) p.layout = rep.results.front().layout;
  const uint32_t step_item = add_item(r, RecordKind::ParallelStep, "step");
  std::vector<uint32_t> stage_items;
  for (const ParallelStepResult& x : rep.results) {
    p.steps.push_back({x.precision, x.basis, x.notes});
    RecordKey k;
    k.kind = RecordKind::ParallelStep;
    k.precision = x.precision;
    k.source = source_of(x.source);
    k.item = step_item;
    Cell step;
    step.ok = true;
    put_step(step, x);
    r.records.add(k, std::move(step));
    for (size_t s = 0; s < x.stages.size(); ++s) {
      while (stage_items.size() <= s)
        stage_items.push_back(add_item(r, RecordKind::ParallelStep, stage_item(static_cast<int64_t>(stage_items.size()))));
      k.item = stage_items[s];
      r.records.add(k, stage_cell(x.stages[s]));
    }
    RecordKey ck = k;
    ck.kind = RecordKind::Collective;
    for (const StepCollective& c : x.collectives) {
      ck.item = add_item(r, RecordKind::Collective, fmt::format("{} {}: {}", c.group, collective_name(c), c.what));
      r.records.add(ck, collective_cell(c));
    }
  }
  r.parallel = std::move(p);
}

ParallelReport parallel_report_from(const RunResult& r) {
  ParallelReport rep;
  if (!r.parallel || r.parallel->steps.empty()) return rep;
  rep.job = r.parallel->job;
  rep.notes = r.parallel->notes;
  const std::vector<std::string>& step_items = items(r, RecordKind::ParallelStep);
  for (const ParallelStepInfo& info : r.parallel->steps) {
    ParallelStepResult x;
    x.precision = info.precision;
    x.basis = info.basis;
    x.notes = info.notes;
    x.layout = r.parallel->layout;
    const std::string where = fmt::format("the parallel step's {} records", to_string(info.precision));
    bool have_step = false;
    for (const Record& rec : r.records) {
      const RecordKey& k = rec.key;
      if (k.precision != info.precision) continue;
      if (k.kind == RecordKind::ParallelStep && k.item < step_items.size()) {
        const std::string& item = step_items[k.item];
        if (item == "step") {
          read_step(rec, x, where);
          have_step = true;
        } else if (item == stage_item(static_cast<int64_t>(x.stages.size()))) {
          x.stages.push_back(read_stage(rec, static_cast<int64_t>(x.stages.size()), where));
        } else {
          throw UsageError(fmt::format("{}: item '{}' is not \"step\" or the next stage", where, clip_text(item, 80)));
        }
      } else if (k.kind == RecordKind::Collective && k.source != Source::Measured) {
        x.collectives.push_back(read_collective(rec, where));
      }
    }
    if (!have_step) throw UsageError(where + ": there is no record of item \"step\"");
    if (x.stages.empty() || static_cast<size_t>(x.critical_stage) >= x.stages.size())
      throw UsageError(fmt::format("{}: the critical stage {} has no record (of {} stages)", where, x.critical_stage,
                                   x.stages.size()));
    rep.results.push_back(std::move(x));
  }
  return rep;
}

RunResult layouts_result(const Plan& plan, const SearchResult& s, const ParallelJobInfo& job, const ParallelLayout& base,
                         const LayoutSearchInfo& info) {
  RunResult r;
  r.plan = plan;
  r.dry_run = true;
  r.why_not_measured = "gemmscope layouts: the layouts ranked, predicted; no GEMM was timed";
  r.created = utc_now_iso8601();
  ParallelRun p;
  p.job = job;
  p.layout = base;
  p.search = info;
  p.search->basis = s.basis;
  p.search->candidates = s.candidates;
  p.search->refused = s.refused;
  r.parallel = std::move(p);
  const auto add = [&](const SearchCandidate& c, int64_t place) {
    RecordKey k;
    k.kind = RecordKind::Layout;
    k.item = add_item(r, RecordKind::Layout, to_string(c.layout));
    k.precision = info.precision;
    k.source = source_of(c.result.source);
    Cell v;
    v.ok = true;
    v.set("place", static_cast<double>(place));
    v.set("recompute", to_string(c.layout.recompute));
    v.set("why", c.why);
    put_step(v, c.result);
    r.records.add(k, std::move(v));
  };
  for (size_t i = 0; i < s.ranked.size(); ++i) add(s.ranked[i], static_cast<int64_t>(i + 1));
  for (const SearchCandidate& c : s.not_fitting) add(c, 0);
  return r;
}

SearchResult search_from(const RunResult& r) {
  SearchResult s;
  if (!r.parallel || !r.parallel->search) return s;
  s.candidates = r.parallel->search->candidates;
  s.basis = r.parallel->search->basis;
  s.refused = r.parallel->search->refused;
  const std::vector<std::string>& names = items(r, RecordKind::Layout);
  for (const Record& rec : r.records) {
    if (rec.key.kind != RecordKind::Layout) continue;
    const std::string where = fmt::format("layout record '{}'", clip_text(names.at(rec.key.item), 80));
    SearchCandidate c;
    c.layout = r.parallel->layout;
    parse_layout(names.at(rec.key.item), c.layout, where);
    const std::string recompute = text(rec, "recompute", where);
    const std::optional<Recompute> rc = recompute_names().find(recompute);
    if (!rc) throw UsageError(fmt::format("{}: values.recompute '{}' is not none, selective or full", where, clip_text(recompute, 40)));
    c.layout.recompute = *rc;
    c.evaluated = true;
    c.why = text(rec, "why", where);
    read_step(rec, c.result, where);
    c.result.layout = c.layout;
    c.result.precision = r.parallel->search->precision;
    const int64_t place = whole(rec, "place", where);
    if (place > 0 && place != static_cast<int64_t>(s.ranked.size()) + 1)
      throw UsageError(fmt::format("{}: place {} out of order", where, place));
    (place > 0 ? s.ranked : s.not_fitting).push_back(std::move(c));
  }
  return s;
}

}  // namespace gs
