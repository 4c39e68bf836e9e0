// `gemmscope compare A.json B.json`: per-GEMM and total time ratios B/A, regression flags.
#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include <cstdio>

#include "cli/cli_util.hpp"
#include "cli/commands.hpp"
#include "core/compare.hpp"
#include "core/error.hpp"
#include "core/modes.hpp"
#include "core/text_util.hpp"

namespace gs::cli {

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
  app.add_option("--mode", mode, "compare only this mode (training, per-gemm or pre-quantized; any case, old names too)");
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    if (e.get_exit_code() == 0) return app.exit(e);  // --help
    print_parse_error("gemmscope compare", e);
    return 2;
  }
  try {
    reject_empty_values(app);
    CompareOptions opt;
    opt.threshold = parse_threshold(threshold);
    if (!mode.empty()) opt.mode = to_string(mode_from_string(mode));  // case-insensitive, old names too
    const CompareResult r = compare_files(a, b, opt);
    const std::string text = markdown ? format_compare_markdown(r) : format_compare_text(r);
    std::fwrite(text.data(), 1, text.size(), stdout);
    std::fflush(stdout);
    return r.has_regressions() ? 1 : 0;
  } catch (const UsageError& e) {
    fmt::print(stderr, "gemmscope compare: error: {}\n", clip_text(e.what(), 1000));  // may quote the files
    return 2;
  }
}

}  // namespace gs::cli
