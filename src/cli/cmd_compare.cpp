// `gemmscope compare A.json B.json`: per-GEMM and total time ratios B/A, regression flags.
#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include <cstdio>

#include "cli/cli_util.hpp"
#include "cli/commands.hpp"
#include "core/analysis/compare.hpp"
#include "core/util/error.hpp"
#include "core/node/fleet.hpp"
#include "core/io/input_file.hpp"
#include "core/recipes/modes.hpp"
#include "core/util/text_util.hpp"

namespace gs::cli {

namespace {

// A fleet file (--all-gpus) on either side: each GPU's run compared on its own, against the other
// side's single run (node vs one GPU) or the GPU of the same index (node vs node).
int compare_fleet(const nlohmann::json& ja, const std::string& a, const nlohmann::json& jb, const std::string& b,
                  const CompareOptions& opt, bool markdown) {
  auto runs_of = [](const nlohmann::json& j, const std::string& path) {
    std::vector<FleetRun> out;
    if (is_fleet_json(j)) return fleet_from_json(j, path);
    out.push_back({"", comparable_result(j, path)});
    return out;
  };
  const std::vector<FleetRun> ra = runs_of(ja, a), rb = runs_of(jb, b);
  if (ra.size() > 1 && rb.size() > 1 && ra.size() != rb.size())
    throw UsageError(fmt::format("{} holds {} GPUs and {} holds {}: node files are compared GPU by GPU", a, ra.size(),
                                 b, rb.size()));
  const size_t n = std::max(ra.size(), rb.size());
  bool regressions = false;
  std::string text;
  for (size_t i = 0; i < n; ++i) {
    const FleetRun& x = ra[ra.size() > 1 ? i : 0];
    const FleetRun& y = rb[rb.size() > 1 ? i : 0];
    const CompareResult r = compare_results(x.run, y.run, opt);
    regressions |= r.has_regressions();
    text += fmt::format("{}A: {}  B: {}\n", markdown ? "### " : "== ", x.label.empty() ? a : x.label,
                        y.label.empty() ? b : y.label);
    text += (markdown ? format_compare_markdown(r) : format_compare_text(r)) + "\n";
  }
  print_stdout(text);
  std::fflush(stdout);
  return regressions ? 1 : 0;
}

}  // namespace

int run_compare(int argc, char** argv) {
  CLI::App app{"Compare two gemmscope result JSONs (A = reference, B = candidate).\n"
               "GEMMs are matched by (pass, op, m, k, n); cells show B/A of the mean time.\n"
               "Exit status: 0 no regression, 1 regressions found (B slower than A by more than the\n"
               "threshold, or a GEMM n/a in B only), 2 bad input, 70 internal error, 74 stdout not writable.",
               "gemmscope compare"};
  std::string a, b, threshold = "5%", mode;
  bool markdown = false;
  app.add_option("A", a, "reference result JSON")->required();
  app.add_option("B", b, "candidate result JSON")->required();
  app.add_option("--threshold", threshold, "relative change that is flagged: 5% (percent) or 0.05 (fraction); a bare 5 is refused")->capture_default_str();
  app.add_flag("--markdown", markdown, "print markdown tables instead of text");
  add_mode_option(app, mode, "compare only this mode: training, per-gemm or pre-quantized");
  app.allow_extras();  // unknown options: reject_extras() names them with a suggestion
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    if (e.get_exit_code() == 0) return app.exit(e);  // --help
    print_parse_error("gemmscope compare", e);
    return 2;
  }
  try {
    reject_extras(app);
    reject_empty_values(app);
    CompareOptions opt;
    opt.threshold = parse_threshold(threshold);
    if (!mode.empty()) opt.mode = to_string(mode_from_string(mode));  // case-insensitive, old names too
    {  // fleet files first; anything else (and any unreadable file) takes the one-run path and its messages
      nlohmann::json ja, jb;
      bool fleet = false;
      try {
        ja = read_json_file(a, "result JSON");
        jb = read_json_file(b, "result JSON");
        fleet = is_fleet_json(ja) || is_fleet_json(jb);
      } catch (const UsageError&) {
      }
      if (fleet) return compare_fleet(ja, a, jb, b, opt, markdown);
    }
    const CompareResult r = compare_files(a, b, opt);
    const std::string text = markdown ? format_compare_markdown(r) : format_compare_text(r);
    print_stdout(text);
    std::fflush(stdout);
    return r.has_regressions() ? 1 : 0;
  } catch (const UsageError& e) {
    print_error("gemmscope compare: error: ", e.what());  // may quote the files
    return 2;
  }
}

}  // namespace gs::cli
