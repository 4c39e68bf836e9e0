// `gemmscope report RESULT.json`: the text report of any run, re-rendered from its JSON (the same
// printer a measurement uses), so a result file is readable without the GPU it was measured on;
// --markdown prints the same report document as markdown.
#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include <cstdio>

#include "cli/cli_util.hpp"
#include "cli/commands.hpp"
#include "core/util/error.hpp"
#include "core/node/fleet.hpp"
#include "core/parallel/parallel_records.hpp"
#include "core/report/report.hpp"
#include "core/util/text_util.hpp"

namespace gs::cli {

namespace {

// The parallel step's or the layout search's block, from the document's records, as the run printed it.
std::string parallel_text(const RunResult& r, bool markdown) {
  if (!r.parallel) return "";
  const print::Format f = markdown ? print::Format::Markdown : print::Format::Text;
  if (const std::optional<LayoutSearchInfo>& s = r.parallel->search)
    return print::render(layouts_document(search_from(r), r.parallel->job, s->gpus, s->global_batch, s->precision,
                                          static_cast<int>(s->top)),
                         f);
  return "\n" + print::render(parallel_document(parallel_report_from(r)), f);
}

}  // namespace

int run_report(int argc, char** argv) {
  CLI::App app{"Print the text report of a gemmscope result JSON (a measurement, an --accuracy-only run or a dry "
               "run), as the run printed it.\n"
               "Exit status: 0 printed, 2 bad input (missing file, not JSON, not a gemmscope result), 74 stdout not "
               "writable.",
               "gemmscope report"};
  std::string path;
  bool markdown = false;
  app.add_option("result", path, "result JSON written by gemmscope --json")->required();
  app.add_flag("--markdown", markdown, "print the report of a measured run as markdown (headings, tables) instead of text");
  app.allow_extras();  // unknown options: reject_extras() names them with a suggestion
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    if (e.get_exit_code() == 0) return app.exit(e);  // --help
    print_parse_error("gemmscope report", e);
    return 2;
  }
  try {
    reject_extras(app);
    reject_empty_values(app);
    const nlohmann::json j = read_json_file(path, "result JSON");
    std::string text;
    if (markdown && is_fleet_json(j))
      throw UsageError(fmt::format("--markdown: {} is a fleet file (--all-gpus); its summary prints as text only", path));
    if (is_fleet_json(j)) {  // a fleet file (--all-gpus): the fleet summary, at the run's threshold
      text = render_fleet_text(summarize_fleet(fleet_from_json(j, path), fleet_threshold(j)));
    } else {
      const RunResult r = from_json(j, path);
      if (r.parallel && r.parallel->search) {  // gemmscope layouts --json: the ranking alone
        print_stdout(parallel_text(r, markdown));
        std::fflush(stdout);
        return 0;
      }
      if (markdown && r.dry_run)
        throw UsageError(fmt::format("--markdown: {} is a dry run; its plan prints as text only", path));
      text = r.dry_run ? render_plan_text(r) : markdown ? render_markdown(r) : render_text(r);
      text += parallel_text(r, markdown);
    }
    print_stdout(text);
    std::fflush(stdout);
    return 0;
  } catch (const UsageError& e) {
    print_error("gemmscope report: error: ", e.what());
    return 2;
  }
}

}  // namespace gs::cli
