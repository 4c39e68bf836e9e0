// Comparison of two gemmscope result files (docs/json-schema.md): A is the reference, B the
// candidate. Both are read with from_json into a RunResult. GEMMs are matched by (pass, op, m, k,
// n); for every mode and precision present in both files the ratio B/A of the mean times is
// computed, per GEMM and, for model runs, for the per-layer and full-model totals, which are each
// file's summarize_mode sums (what its text report prints).
//
// Flags, with threshold t (default 0.05):
//   regression   B is slower than A by more than t:  B/A > 1 + t
//   improvement  A is slower than B by more than t:  A/B > 1 + t   (the mirror image)
// A per-GEMM difference no larger than the two cells' own spread (stdev A + stdev B) is not flagged
// (CompareCell::within_spread). A cell that is ok in A and n/a in B counts as a regression (B lost the GEMM); n/a in A and ok
// in B as an improvement.
#pragma once

#include <nlohmann/json.hpp>

#include <optional>
#include <string>
#include <vector>

#include "core/results.hpp"

namespace gs {

enum class Verdict { Same, Regression, Improvement, BothNA };

struct CompareOptions {
  double threshold = 0.05;  // relative, 0.05 = 5 %
  std::string mode;         // empty: every mode present in both files
};

struct CompareCell {
  std::string precision;
  std::optional<double> a_ms, b_ms;  // nullopt: n/a in that file
  std::optional<double> ratio;       // b_ms / a_ms when both are ok
  Verdict verdict = Verdict::Same;
  // Beyond the threshold, but |B - A| is within the cells' own spread (stdev A + stdev B): not
  // flagged, since the two measurements do not tell apart a change that small.
  bool within_spread = false;
};

// One matched GEMM in one mode.
struct CompareGemmRow {
  std::string pass, op, label;
  long long m = 0, k = 0, n = 0;
  std::vector<CompareCell> cells;  // one per common precision, in A's order
};

// Per-layer or full-model totals of one mode (model runs with a summary in both files).
struct CompareTotalRow {
  std::string what;  // "per-layer total" or "full model"
  std::vector<CompareCell> cells;
};

struct CompareMode {
  std::string mode;
  std::vector<CompareGemmRow> gemms;
  std::vector<CompareTotalRow> totals;
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
  bool different_gpus = false;  // both files name a device, and not the same one: a printed warning
  int regressions = 0;   // flagged cells, GEMMs and totals together
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

// Both start with a "note: A and B differ in ..." line per difference; strings from the files
// (device names, dates) have control characters replaced by '?'.
std::string format_compare_text(const CompareResult& r);
std::string format_compare_markdown(const CompareResult& r);

const char* to_string(Verdict v);

}  // namespace gs
