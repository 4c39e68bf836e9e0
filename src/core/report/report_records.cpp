// The report's block of the records no other block presents (report_records.hpp).
#include "core/report/report_records.hpp"

#include <fmt/format.h>

#include <string>
#include <variant>

#include "core/results/step_context_records.hpp"
#include "core/results/step_kernel_records.hpp"

namespace gs {

namespace {

std::string value_text(const Value& v) {
  if (const double* x = std::get_if<double>(&v)) return fmt::format("{:.6g}", *x);
  if (const bool* b = std::get_if<bool>(&v)) return *b ? "true" : "false";
  return std::get<std::string>(v);
}

std::string item_text(const RunResult& r, const RecordKey& k) {
  if (items_are_gemms(k.kind)) return k.item < r.plan.gemms.size() ? r.plan.gemms[k.item].label() : "?";
  const auto it = r.item_names.find(k.kind);
  return it != r.item_names.end() && k.item < it->second.size() ? it->second[k.item] : std::to_string(k.item);
}

}  // namespace

bool kind_has_report_block(RecordKind k) {
  // The parallel step's and the layout search's blocks are printed from their records by
  // `gemmscope report` (cli/cmd_report.cpp, core/parallel/parallel_records.hpp).
  return items_are_gemms(k) || k == RecordKind::Collective || k == RecordKind::ParallelStep || k == RecordKind::Layout;
}

void add_other_records(print::Document& d, const RunResult& r) {
  using print::Align;
  print::Table t({{"Kind"}, {"Item"}, {"Pass"}, {"Mode"}, {"Precision"}, {"Rank", Align::Right}, {"Source"},
                  {"ms", Align::Right}, {"Values"}});
  t.add_header();
  for (const Record& rec : r.records) {
    const RecordKey& k = rec.key;
    // The whole step's block presents the step kernels it read (report_whole_step.hpp), the step
    // context's block its records (report_step.hpp).
    if (kind_has_report_block(k.kind) || (r.step && is_step_kernel_record(rec)) ||
        (r.timing.step_context() && is_step_context_record(rec)))
      continue;
    const Cell& c = rec.value;
    std::string values;
    for (const NamedValue& v : c.values) values += (values.empty() ? "" : ", ") + v.name + " " + value_text(v.value);
    const std::string ms = !c.ok ? "N/A" : kind_has_times(k.kind) ? fmt::format("{:.3f}", c.stats.mean_ms) : "-";
    t.add_row({to_string(k.kind), item_text(r, k), k.pass ? to_string(*k.pass) : "-", k.mode ? to_string(*k.mode) : "-",
               k.precision ? to_string(*k.precision) : "-", std::to_string(k.rank), to_string(k.source), ms,
               c.ok ? values : c.reason});
  }
  if (t.lines.size() <= 1) return;
  d.title("Other records:");
  d.table(std::move(t));
}

}  // namespace gs
