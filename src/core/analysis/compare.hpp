// Comparison of two gemmscope result files (docs/json-schema.md): A is the reference, B the
// candidate. Both are read with from_json into a RunResult. GEMMs are matched by (pass, op, m, k,
// n) and, for grouped (MoE expert) GEMMs, their per-expert sizes; grouped GEMMs whose per-expert
// rows differ (another routing) are still paired by (pass, op, grouped dimension, expert count,
// the other two sizes) and marked. For every mode and precision present in both files the ratio
// B/A of the mean times is computed, per GEMM and, for model runs, for the totals each file's
// summarize_mode sums (what its text report prints): the per-layer total (models with experts: a
// dense layer's and a MoE layer's, and the MoE layer's routed experts) and the full model; and
// the speedups (each precision vs BF16, NVFP4 vs MXFP8) of A against B's.
//
// Flags, with threshold t (default 0.05):
//   regression   B is slower than A by more than t:  B/A > 1 + t   (speedups: B's lower, A/B > 1 + t)
//   improvement  A is slower than B by more than t:  A/B > 1 + t   (the mirror image)
// A difference beyond t that the measurements cannot tell from noise is not flagged ("within
// noise", CompareCell::within_noise):
//   - a GEMM: |B - A| <= stdev A + stdev B of the two cells;
//   - a total or a speedup, when both files hold >= 3 repeats (--repeats, 95% intervals of the
//     median from repeats.hpp): the two intervals overlap;
//   - otherwise: |B - A| <= spread A + spread B, a file's spread being the root-sum-square of its
//     cells' stdevs, each weighted as the total weights the cell (layers for the full model); a
//     speedup x/y's relative spread is the root-sum-square of x's and y's.
// A predicted file (gemmscope predict, RunResult::predicted) carries a band per cell: a value is
// judged against it, not against the threshold ("within band", NoiseBasis::Band):
//   - a GEMM: the other file's value +- its stdev (its band, when both are predictions) overlaps
//     the band: never flagged, however far from the predicted time;
//   - a total: the band summed over the same GEMMs as the total (predict adds bands, fully
//     correlated), against the other file's value +- its spread (or its 95% interval);
//   - a speedup x/y: [x low / y high, x high / y low] of the full model's bands.
// Outside the band the threshold applies as above (a measured time slower than the whole band by
// more than t is a regression).
// A cell that is ok in A and n/a in B counts as a regression (B lost the GEMM); n/a in A and ok
// in B as an improvement.
#pragma once

#include <nlohmann/json.hpp>

#include <optional>
#include <string>
#include <vector>

#include "core/util/printer.hpp"
#include "core/results/repeats.hpp"
#include "core/results/results.hpp"

namespace gs {

enum class Verdict { Same, Regression, Improvement, BothNA };

struct CompareOptions {
  double threshold = 0.05;  // relative, 0.05 = 5 %
  std::string mode;         // empty: every mode present in both files
};

// How a difference beyond the threshold was judged against noise.
enum class NoiseBasis {
  None,       // not judged: within the threshold, or a value is n/a
  Spread,     // cells' stdevs (GEMMs: stdev A + stdev B; totals and speedups: weighted root-sum-square)
  Intervals,  // both files' 95% intervals over >= 3 repeats
  Band,       // a predicted file's band (gemmscope predict) holds the other value: never flagged
};

struct CompareCell {
  std::string precision;
  std::optional<double> a_ms, b_ms;  // nullopt: n/a in that file (speedup rows: the speedups, not ms)
  std::optional<double> ratio;       // b_ms / a_ms when both are ok
  Verdict verdict = Verdict::Same;
  // Beyond the threshold, but the measurements do not tell the two values apart (see the top of
  // this file): not flagged.
  bool within_noise = false;
  NoiseBasis noise = NoiseBasis::None;
  // What the noise was judged by: the spreads (ms, or the speedup's), or the intervals.
  double a_spread = 0, b_spread = 0;
  std::optional<Interval> a_interval, b_interval;
  // Predicted files: the band of the predicted value (lo..hi; speedup rows: of the speedup).
  std::optional<Interval> a_band, b_band;
};

// One matched GEMM in one mode.
struct CompareGemmRow {
  std::string pass, op, label;
  long long m = 0, k = 0, n = 0;
  size_t experts = 0;  // grouped GEMMs: the number of experts (groups); 0 for a dense GEMM
  // Grouped GEMMs paired although their per-expert rows differ: what differs
  // ("rows per expert 983..1071 (sum 8192) vs 900..1100 (sum 8192)"); empty when they are equal.
  std::string group_difference;
  std::vector<CompareCell> cells;  // one per common precision, in A's order
};

// Totals of one mode (model runs): "per-layer total" (a dense model), or "dense-layer total",
// "MoE-layer total" and "MoE layer: routed experts" (models with experts), and "full model".
struct CompareTotalRow {
  std::string what;
  std::vector<CompareCell> cells;
};

// One speedup ("FP8Current vs BF16": how much faster the first is) of A against B's; the cell's
// a_ms / b_ms hold the speedups, ratio B/A; a lower speedup in B is a regression.
struct CompareSpeedupRow {
  std::string name;
  CompareCell cell;
};

struct CompareMode {
  std::string mode;
  std::vector<CompareGemmRow> gemms;
  std::vector<CompareTotalRow> totals;
  std::vector<CompareSpeedupRow> speedups;
  NoiseBasis totals_noise = NoiseBasis::Spread;  // Intervals when both files have repeat intervals
};

struct CompareResult {
  std::string a_path, b_path;  // as given (empty for in-memory documents)
  std::string a_device, b_device, a_created, b_created;
  std::string kind;
  double threshold = 0.05;
  std::vector<std::string> precisions;                       // compared: in both, A's order
  std::vector<std::string> only_a_precisions, only_b_precisions;
  std::vector<std::string> only_a_modes, only_b_modes;       // present in one file only
  std::vector<std::string> unmatched_a, unmatched_b;         // "fprop qkv 15872x4096x12288"
  // What A and B measured differently (model config, recipe options, timing settings), one
  // "what: A's vs B's" each ("timing.iters: 100 vs 50"); printed as notes, ratios still computed.
  std::vector<std::string> differences;
  std::vector<CompareMode> modes;
  bool a_predicted = false, b_predicted = false;  // gemmscope predict documents: judged by their bands
  // Both files name a device, and not the same one, and neither is a prediction: a printed warning.
  bool different_gpus = false;
  // Grouped GEMMs paired with different per-expert rows: "fprop expert_up 8192x4096x28672: ...".
  std::vector<std::string> group_differences;
  int regressions = 0;   // flagged GEMMs, totals and speedups together
  int improvements = 0;

  bool has_regressions() const { return regressions > 0; }
};

// from_json(doc, name), and a UsageError naming `name` when the result holds no times to
// compare: a dry run, no modes (--accuracy-only), no precisions.
RunResult comparable_result(const nlohmann::json& doc, const std::string& name);
// The same check, for a document only.
void validate_result_json(const nlohmann::json& doc, const std::string& name);

// Reads and checks a result file (read_json_file, comparable_result); UsageError on a missing
// file, bad JSON, a document from_json rejects, a dry run.
nlohmann::json load_result_json(const std::string& path);

// Compares two results. Modes and precisions are compared by name (to_string), every mode the
// results hold. UsageError when they cannot be compared: no times in one, different kinds, no
// common mode (or opt.mode, matched as written, missing from one), no common precision, no
// common GEMM. The json overload reads the documents with comparable_result, named "A" and "B".
CompareResult compare_results(const RunResult& a, const RunResult& b, const CompareOptions& opt = {});
CompareResult compare_results(const nlohmann::json& a, const nlohmann::json& b, const CompareOptions& opt = {});
CompareResult compare_files(const std::string& a_path, const std::string& b_path, const CompareOptions& opt = {});

// "5%" -> 0.05, "0.05" -> 0.05: one meaning each, a number with '%' is a percentage, one without a
// fraction. A bare number of 1 or more ("5") is refused with the suggestion "5%", never guessed.
// Decimal numbers only (parse_decimal_number: no 0x10, inf, nan); "-0" is 0. UsageError for
// anything else, negative values or values of 100 % and more.
double parse_threshold(const std::string& text);

// The report of a comparison as one document (core/util/printer.hpp): the files, the notes ("A and B
// differ in ..." per difference), per mode the B/A per GEMM, the totals and the speedups, the
// unmatched GEMMs, the regressions and improvements, the result. Text and markdown print the same
// document (format_compare_text, format_compare_markdown): the same rows and values, markdown with
// its own headings and order (the result first, the tables per GEMM after the totals, the
// regressions listed but not the improvements). Strings from the files (device names, dates) have
// control characters replaced by '?'.
print::Document compare_document(const CompareResult& r);
std::string format_compare_text(const CompareResult& r);
std::string format_compare_markdown(const CompareResult& r);

const char* to_string(Verdict v);

}  // namespace gs
