#include "core/parallel/parallel_report.hpp"

#include <fmt/format.h>

#include <algorithm>

namespace gs {

namespace {

using json = nlohmann::json;

std::string gb(double bytes) { return fmt::format("{:.1f}", bytes / 1e9); }
std::string ms3(double v) { return print::format_ms(v); }
std::string pct(double f) { return fmt::format("{:.1f}%", 100 * f); }

std::string layout_words(const ParallelLayout& l) {
  std::string w = fmt::format("{} ({}, {} recompute", short_string(l), to_string(l.sharding), to_string(l.recompute));
  if (l.tp > 1) w += l.sequence_parallel ? ", sequence parallel" : ", no sequence parallel";
  if (l.tp_comm_overlap) w += ", TP overlap";
  if (l.cp > 1) w += fmt::format(", CP {}", to_string(l.cp_comm));
  if (l.ep_comm_overlap) w += ", EP overlap";
  return w + ")";
}

std::string source_label(CostSource s) { return s == CostSource::Measured ? "MEASURED" : "PREDICTED"; }

}  // namespace

print::Document parallel_document(const ParallelReport& r) {
  print::Document d;
  if (r.results.empty()) return d;
  const ParallelStepResult& base = r.results.front();
  const int64_t nodes = (base.gpus + r.job.gpus_per_node - 1) / r.job.gpus_per_node;
  d.title(fmt::format("Parallel step: {} on {} x {} ({}, {} node{}), layout {}", r.job.model, base.gpus, r.job.gpu_key,
                      r.job.cluster_key, nodes, nodes == 1 ? "" : "s", layout_words(base.layout)));
  d.wrapped(fmt::format("compute: {} ({}), framework: {}", source_label(base.source), base.basis,
                        step_context_framework(r.job.framework)),
            print::kReportWidth, 2, 4);
  d.wrapped(fmt::format("communication: MODELLED on {} ({}); {}", r.job.cluster_key, r.job.cluster_name, r.job.cluster_note),
            print::kReportWidth, 2, 4);

  print::Table t({{"precision"}, {"step ms", print::Align::Right}, {"tokens/s/GPU", print::Align::Right},
                  {"TFLOP/s/GPU", print::Align::Right}, {"MFU", print::Align::Right}, {"bubble", print::Align::Right},
                  {"peak GB", print::Align::Right}, {"fits", print::Align::Left}, {"vs BF16", print::Align::Right}});
  t.add_header();
  for (const ParallelStepResult& x : r.results)
    t.add_row({to_string(x.precision), ms3(x.step_ms), fmt::format("{:.0f}", x.tokens_per_s_per_gpu),
               fmt::format("{:.0f}", x.model_tflops_per_gpu), pct(x.mfu), pct(x.bubble_fraction),
               gb(x.peak_memory_bytes), x.fits ? "yes" : fmt::format("no ({} usable)", gb(x.usable_memory_bytes)),
               &x == &base ? "" : print::format_speedup(base.step_ms / x.step_ms)});
  d.table(std::move(t));
  if (r.results.size() > 1)
    d.wrapped(fmt::format("FP8 step speedup at this layout: {} ({} vs BF16); MFU against the dense BF16 peak, model "
                          "FLOPs without recomputation",
                          print::format_speedup(base.step_ms / r.results[1].step_ms), to_string(r.results[1].precision)),
              print::kReportWidth, 2, 4);

  // Where the critical stage's time goes, per precision.
  d.title(fmt::format("Where the step goes: critical stage {} (the stage that ends last; ms per step)", base.critical_stage));
  std::vector<print::Column> cols{{"part"}};
  for (const ParallelStepResult& x : r.results) {
    cols.push_back({fmt::format("{} ms", to_string(x.precision)), print::Align::Right});
    cols.push_back({"share", print::Align::Right});
  }
  print::Table w(cols);
  w.add_header();
  for (int k = 0; k < kTimeKinds; ++k) {
    bool any = false;
    for (const ParallelStepResult& x : r.results) any = any || x.critical().ms[static_cast<size_t>(k)] > 1e-9;
    if (!any) continue;
    std::vector<print::Cell> row{to_string(static_cast<TimeKind>(k))};
    for (const ParallelStepResult& x : r.results) {
      const double v = x.critical().ms[static_cast<size_t>(k)];
      row.push_back(ms3(v));
      row.push_back(pct(v / x.step_ms));
    }
    w.add_row(std::move(row));
  }
  std::vector<print::Cell> sum{"step"};
  for (const ParallelStepResult& x : r.results) {
    sum.push_back(ms3(x.step_ms));
    sum.push_back("");
  }
  w.add_row(std::move(sum));
  d.table(std::move(w));

  // Each stage.
  d.title(fmt::format("Per stage ({}): step time split and memory per rank (GB)", to_string(base.precision)));
  print::Table s({{"stage"}, {"compute ms", print::Align::Right}, {"exposed comm ms", print::Align::Right},
                  {"bubble ms", print::Align::Right}, {"tail ms", print::Align::Right}, {"weights", print::Align::Right},
                  {"grads", print::Align::Right}, {"optimizer", print::Align::Right}, {"gathered", print::Align::Right},
                  {"activations", print::Align::Right}, {"total", print::Align::Right}});
  s.add_header();
  for (const StageResult& st : base.stages) {
    auto k = [&](TimeKind x) { return st.ms[static_cast<size_t>(x)]; };
    const double compute = k(TimeKind::Gemm) + k(TimeKind::Attention) + k(TimeKind::Other) + k(TimeKind::Recompute);
    const double comm = k(TimeKind::TpComm) + k(TimeKind::CpComm) + k(TimeKind::EpComm) + k(TimeKind::FsdpComm) + k(TimeKind::PpSend);
    const double tail = k(TimeKind::DpComm) + k(TimeKind::Optimizer) + k(TimeKind::ParamGather);
    s.add_row({fmt::format("{}", st.stage), ms3(compute), ms3(comm), ms3(k(TimeKind::Bubble)), ms3(tail),
               gb(st.memory.weights_bytes), gb(st.memory.grads_bytes), gb(st.memory.optimizer_bytes),
               gb(st.memory.gathered_bytes), gb(st.memory.activation_bytes), gb(st.memory.total_bytes())});
  }
  d.table(std::move(s));

  // The collectives of a step.
  d.title(fmt::format("Communication of one step on a rank of stage 0 ({}; MODELLED{})", to_string(base.precision),
                      r.job.fp8_param_gather ? "; FP8 parameter gathers (--fp8-param-gather)" : ""));
  print::Table c({{"group"}, {"collective"}, {"what"}, {"MiB", print::Align::Right}, {"ranks", print::Align::Right},
                  {"algo"}, {"ms each", print::Align::Right}, {"x/step", print::Align::Right},
                  {"exposed ms", print::Align::Right}});
  c.add_header();
  for (const StepCollective& x : base.collectives)
    c.add_row({x.group, x.p2p ? "send/recv" : to_string(x.kind), x.what, fmt::format("{:.1f}", x.bytes / 1048576.0),
               fmt::format("{}", x.ranks), to_string(x.algo), ms3(x.ms), fmt::format("{:.0f}", x.per_step), ms3(x.exposed_ms)});
  d.table(std::move(c));
  // The FP8 recipe's parameter gathers where --fp8-param-gather makes them differ from BF16's above.
  if (r.job.fp8_param_gather)
    for (size_t i = 1; i < r.results.size(); ++i)
      for (const StepCollective& x : r.results[i].collectives)
        if (x.group == "DP" && x.kind == CollKind::AllGather && !x.p2p)
          for (const StepCollective& b : base.collectives)
            if (b.group == x.group && b.kind == x.kind && !b.p2p && b.bytes != x.bytes)
              d.wrapped(fmt::format("{}: the DP parameter all-gather sends {:.1f} MiB ({:.1f} MiB in {}), {} ms each", to_string(r.results[i].precision),
                                    x.bytes / 1048576.0, b.bytes / 1048576.0, to_string(base.precision), ms3(x.ms)),
                        print::kReportWidth, 2, 4);
  std::vector<print::Item> notes;
  for (const std::string& n : base.notes) notes.emplace_back(n);
  for (const std::string& n : r.notes) notes.emplace_back(n);
  if (!notes.empty()) d.list(std::move(notes));
  return d;
}

std::string render_parallel_text(const ParallelReport& r) { return print::render(parallel_document(r), print::Format::Text); }

namespace {

json result_json(const ParallelStepResult& x) {
  json j = {{"precision", to_string(x.precision)}, {"source", to_string(x.source)}, {"basis", x.basis},
            {"layout", to_string(x.layout)}, {"gpus", x.gpus}, {"step_ms", x.step_ms},
            {"tokens_per_step", x.tokens_per_step}, {"tokens_per_s_per_gpu", x.tokens_per_s_per_gpu},
            {"model_tflops_per_gpu", x.model_tflops_per_gpu}, {"mfu", x.mfu}, {"bubble_fraction", x.bubble_fraction},
            {"critical_stage", x.critical_stage}, {"peak_memory_bytes", x.peak_memory_bytes},
            {"usable_memory_bytes", x.usable_memory_bytes}, {"fits", x.fits}};
  json stages = json::array();
  for (const StageResult& s : x.stages) {
    json st;
    st["stage"] = s.stage;
    json parts = json::object();
    for (int k = 0; k < kTimeKinds; ++k) parts[to_string(static_cast<TimeKind>(k))] = s.ms[static_cast<size_t>(k)];
    st["ms"] = parts;
    st["memory"] = {{"weights_bytes", s.memory.weights_bytes},   {"grads_bytes", s.memory.grads_bytes},
                    {"optimizer_bytes", s.memory.optimizer_bytes}, {"gathered_bytes", s.memory.gathered_bytes},
                    {"activation_bytes", s.memory.activation_bytes}, {"total_bytes", s.memory.total_bytes()},
                    {"params", s.memory.params}};
    stages.push_back(st);
  }
  j["stages"] = stages;
  json colls = json::array();
  for (const StepCollective& c : x.collectives)
    colls.push_back({{"group", c.group}, {"kind", c.p2p ? "send/recv" : to_string(c.kind)}, {"what", c.what},
                     {"bytes", c.bytes}, {"ranks", c.ranks}, {"ranks_per_domain", c.placement.per_domain},
                     {"algo", to_string(c.algo)}, {"ms", c.ms}, {"per_step", c.per_step}, {"exposed_ms", c.exposed_ms}});
  j["collectives"] = colls;
  j["notes"] = x.notes;
  return j;
}

}  // namespace

json parallel_json(const ParallelReport& r) {
  json j = {{"schema", "gemmscope.parallel/1"},
            {"model", r.job.model},
            {"gpu", {{"key", r.job.gpu_key}, {"name", r.job.gpu_name}}},
            {"cluster", {{"key", r.job.cluster_key}, {"name", r.job.cluster_name}, {"note", r.job.cluster_note}}},
            {"framework", to_string(r.job.framework)},
            {"fp8_param_gather", r.job.fp8_param_gather}};
  json res = json::array();
  for (const ParallelStepResult& x : r.results) res.push_back(result_json(x));
  j["results"] = res;
  if (r.results.size() > 1) j["fp8_step_speedup"] = r.results[0].step_ms / r.results[1].step_ms;
  j["notes"] = r.notes;
  return j;
}

std::string parallel_trace_text(const ParallelReport& r) {
  std::vector<TraceTrack> tracks;
  for (size_t i = 0; i < r.results.size(); ++i)
    for (TraceTrack t : r.results[i].trace) {
      t.pid += static_cast<int>(i) * 1000;  // one process per stage and precision
      tracks.push_back(std::move(t));
    }
  const ParallelStepResult* first = r.results.empty() ? nullptr : &r.results.front();
  return chrome_trace(tracks, {{"generator", "gemmscope parallel step (modelled timeline)"},
                               {"model", r.job.model},
                               {"cluster", r.job.cluster_key},
                               {"layout", first ? to_string(first->layout) : ""}});
}

print::Document layouts_document(const SearchResult& s, const ParallelJobInfo& job, int64_t gpus, int64_t global_batch,
                                 Precision precision, int top) {
  print::Document d;
  d.title(fmt::format("Layouts: {} on {} x {} ({}), global batch {} sequences, {}{}", job.model, gpus, job.gpu_key,
                      job.cluster_key, global_batch, to_string(precision),
                      job.fp8_param_gather ? ", FP8 parameter gathers (--fp8-param-gather)" : ""));
  d.wrapped(fmt::format("{} candidates: {} fit, {} do not fit, {} refused by a framework rule; compute {}", s.candidates,
                        s.ranked.size(), s.not_fitting.size(),
                        s.candidates - static_cast<int64_t>(s.ranked.size() + s.not_fitting.size()), s.basis),
            print::kReportWidth, 2, 4);
  print::Table t({{"#", print::Align::Right}, {"layout"}, {"sharding"}, {"recompute"}, {"step ms", print::Align::Right},
                  {"tokens/s/GPU", print::Align::Right}, {"MFU", print::Align::Right}, {"bubble", print::Align::Right},
                  {"peak GB", print::Align::Right}, {"behind the best"}});
  t.add_header();
  const size_t n = std::min<size_t>(s.ranked.size(), static_cast<size_t>(std::max(0, top)));
  for (size_t i = 0; i < n; ++i) {
    const SearchCandidate& c = s.ranked[i];
    t.add_row({fmt::format("{}", i + 1), short_string(c.layout), to_string(c.layout.sharding), to_string(c.layout.recompute),
               ms3(c.result.step_ms), fmt::format("{:.0f}", c.result.tokens_per_s_per_gpu), pct(c.result.mfu),
               pct(c.result.bubble_fraction), gb(c.result.peak_memory_bytes), i == 0 ? "the fastest" : c.why});
  }
  d.table(std::move(t));
  std::vector<print::Item> others;
  if (s.ranked.size() > n)
    others.emplace_back(fmt::format("{} more fitting layouts are slower still (the slowest: {})", s.ranked.size() - n,
                                    s.ranked.back().why));
  for (size_t i = 0; i < std::min<size_t>(s.not_fitting.size(), 3); ++i)
    others.emplace_back(fmt::format("does not fit: {} {}", short_string(s.not_fitting[i].layout), s.not_fitting[i].why));
  if (s.not_fitting.size() > 3) others.emplace_back(fmt::format("and {} more that do not fit", s.not_fitting.size() - 3));
  for (const auto& [rule, count] : s.refused) others.emplace_back(fmt::format("refused {} x: {}", count, rule));
  if (!others.empty()) {
    d.title("The other layouts");
    d.list(std::move(others));
  }
  return d;
}

json layouts_json(const SearchResult& s, const ParallelJobInfo& job, int64_t gpus, int64_t global_batch, Precision precision,
                  int top) {
  json j = {{"schema", "gemmscope.layouts/1"}, {"model", job.model},        {"gpu", job.gpu_key},
            {"cluster", job.cluster_key},        {"gpus", gpus},              {"global_batch", global_batch},
            {"precision", to_string(precision)}, {"candidates", s.candidates}, {"basis", s.basis},
            {"fp8_param_gather", job.fp8_param_gather}};
  json ranked = json::array();
  for (size_t i = 0; i < s.ranked.size() && static_cast<int>(i) < top; ++i) {
    json x = result_json(s.ranked[i].result);
    x["why"] = s.ranked[i].why;
    ranked.push_back(x);
  }
  j["ranked"] = ranked;
  json over = json::array();
  for (const SearchCandidate& c : s.not_fitting) over.push_back({{"layout", to_string(c.layout)}, {"why", c.why}});
  j["not_fitting"] = over;
  json refused = json::object();
  for (const auto& [rule, count] : s.refused) refused[rule] = count;
  j["refused"] = refused;
  return j;
}

}  // namespace gs
