// Charts: renders every chart kind from the fixtures in tests/data to SVG and counts the artists
// by the gids that tools/gemmscope_plot.py puts on them (they become id="..." in SVG). Runs the
// script with the interpreter the CLI would pick ($GEMMSCOPE_PYTHON, python3, /usr/bin/python3:
// the first that imports matplotlib), and the `gemmscope plot` subcommand of the built binary.
// Without any Python that has matplotlib the rendering tests are skipped; the bad-input and
// missing-matplotlib tests still run wherever some python3 exists.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <nlohmann/json.hpp>
#include <optional>
#include <regex>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

extern char** environ;

namespace {

namespace fs = std::filesystem;
using nlohmann::json;

const std::string kData = GS_TEST_DATA_DIR;
const std::string kScript = std::string(GS_SOURCE_DIR) + "/tools/gemmscope_plot.py";
const std::string kBinary = GS_BINARY;
constexpr const char* kMatplotlibMissing =
    "matplotlib is not installed: apt-get install python3-matplotlib (or pip install matplotlib)";

struct Proc {
  int rc = -1;
  std::string out;  // stdout and stderr together
};

fs::path work_dir() {
  static const fs::path dir = [] {
    fs::path d = fs::temp_directory_path() / ("gs_plot_test_" + std::to_string(getpid()));
    fs::create_directories(d);
    return d;
  }();
  return dir;
}

// Removes the scratch directory after the last test (before static destructors run).
class ScratchCleanup : public ::testing::Environment {
 public:
  void TearDown() override {
    std::error_code ec;
    fs::remove_all(fs::temp_directory_path() / ("gs_plot_test_" + std::to_string(getpid())), ec);
  }
};
[[maybe_unused]] ::testing::Environment* const kCleanup = ::testing::AddGlobalTestEnvironment(new ScratchCleanup);

std::string slurp(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// Runs a program (PATH lookup for names without '/') with an argv array; no shell.
Proc run(const std::vector<std::string>& args) {
  static int counter = 0;
  const fs::path log = work_dir() / ("proc_" + std::to_string(counter++) + ".log");
  std::vector<char*> argv;
  for (const auto& a : args) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_addopen(&fa, STDOUT_FILENO, log.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  posix_spawn_file_actions_adddup2(&fa, STDOUT_FILENO, STDERR_FILENO);
  pid_t pid = 0;
  Proc p;
  const int err = posix_spawnp(&pid, argv[0], &fa, nullptr, argv.data(), environ);
  posix_spawn_file_actions_destroy(&fa);
  if (err != 0) return p;
  int status = 0;
  while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  p.rc = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  p.out = slurp(log);
  return p;
}

// The CLI's interpreter choice, redone here (the test binary does not link the CLI).
std::optional<std::string> chart_python() {
  static const std::optional<std::string> py = []() -> std::optional<std::string> {
    std::vector<std::string> cands;
    if (const char* e = std::getenv("GEMMSCOPE_PYTHON"); e && *e) cands.emplace_back(e);
    cands.emplace_back("python3");
    cands.emplace_back("/usr/bin/python3");
    for (const auto& c : cands)
      if (run({c, "-c", "import matplotlib; matplotlib.use('Agg'); import matplotlib.pyplot"}).rc == 0) return c;
    return std::nullopt;
  }();
  return py;
}

// Any python3 at all (for tests that must not need matplotlib).
std::optional<std::string> any_python() {
  for (const char* c : {"python3", "/usr/bin/python3"})
    if (run({c, "-c", "pass"}).rc == 0) return std::string(c);
  return std::nullopt;
}

bool binary_has_plot() {
  static const bool has = [] {
    if (!fs::exists(kBinary)) return false;
    const Proc p = run({kBinary, "plot", "--help"});
    return p.rc == 0 && p.out.find("gemmscope plot") != std::string::npos;
  }();
  return has;
}

#define REQUIRE_MATPLOTLIB()                                                                              \
  do {                                                                                                    \
    if (!chart_python())                                                                                  \
      GTEST_SKIP() << "no Python interpreter with matplotlib ($GEMMSCOPE_PYTHON, python3, /usr/bin/python3)" \
                      ": apt-get install python3-matplotlib";                                            \
  } while (0)

// Renders with `gemmscope plot` (which validates the file and hands the script the numbers it
// draws, also for the fixtures written before they existed); returns the SVG text ("" on failure,
// with the output in the failure).
std::string render(const std::string& fixture, const std::string& out_name, std::vector<std::string> extra = {}) {
  const fs::path out = work_dir() / out_name;
  const std::string in = fixture.front() == '/' ? fixture : kData + "/" + fixture;  // absolute: a generated doc
  std::vector<std::string> args = {kBinary, "plot", in, "-o", out.string()};
  args.insert(args.end(), extra.begin(), extra.end());
  const Proc p = run(args);
  EXPECT_EQ(p.rc, 0) << p.out;
  EXPECT_TRUE(fs::exists(out)) << out;
  return p.rc == 0 ? slurp(out) : std::string();
}

// Number of SVG ids that match the regex.
int count_ids(const std::string& svg, const std::string& id_regex) {
  const std::regex re("id=\"" + id_regex + "\"");
  return static_cast<int>(std::distance(std::sregex_iterator(svg.begin(), svg.end(), re), std::sregex_iterator()));
}

bool has_text(const std::string& svg, const std::string& text) {
  return svg.find(">" + text + "<") != std::string::npos;
}

json load(const std::string& name) {
  std::ifstream in(kData + "/" + name);
  return json::parse(in);
}

double mean_ms(const json& doc, const std::string& pass, const std::string& op, const std::string& prec,
               const std::string& mode = "autocast") {
  for (const auto& g : doc["gemms"])
    if (g["pass"] == pass && g["op"] == op) return g["results"][mode][prec]["mean_ms"].get<double>();
  return NAN;
}

std::string two_decimals(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.2f", v);
  return buf;
}

// ------------------------------------------------------------------------------------------------

TEST(Plot, ModelChart) {
  REQUIRE_MATPLOTLIB();
  const std::string svg = render("model_5b_autocast.json", "model.svg");
  // 3 precisions with results x 4 ops x (fprop+dgrad, wgrad); FP8Block has an n/a cell
  EXPECT_EQ(count_ids(svg, "bar:[A-Za-z0-9]+:(QKV|AttnOut|MLPUp|MLPDown):(fpropdgrad|wgrad)"), 24);
  EXPECT_EQ(count_ids(svg, "bar:BF16:QKV:fpropdgrad"), 1);
  EXPECT_EQ(count_ids(svg, "bar:FP8Block:[^\"]*"), 0);
  EXPECT_EQ(count_ids(svg, "na:FP8Block"), 1);
  EXPECT_EQ(count_ids(svg, "speedup:[A-Za-z0-9]+"), 3);
  EXPECT_EQ(count_ids(svg, "bar:[^\"]*:LMHead:all"), 0);  // no LM head in this config
  EXPECT_TRUE(has_text(svg, "N/A"));

  // speedups: BF16 per-layer total / precision's per-layer total, from the fixture's summary
  const json doc = load("model_5b_autocast.json");
  const auto& total = doc["summary"]["autocast"]["per_layer"]["total"];
  for (const char* p : {"FP8Current", "FP8Delayed"}) {
    const std::string want = two_decimals(total["BF16"].get<double>() / total[p].get<double>()) + "x";
    EXPECT_TRUE(has_text(svg, want)) << p << " speedup label " << want;
  }
  // the Fprop+Dgrad segment is the measured sum, not twice the fprop time
  const double fprop = mean_ms(doc, "fprop", "qkv", "FP8Current"), dgrad = mean_ms(doc, "dgrad", "qkv", "FP8Current");
  ASSERT_NE(two_decimals(fprop + dgrad), two_decimals(2 * fprop)) << "fixture cannot tell them apart";
  EXPECT_TRUE(has_text(svg, two_decimals(fprop + dgrad)));
  // title names the GPU and the config
  EXPECT_NE(svg.find("NVIDIA H200 NVL"), std::string::npos);
  EXPECT_NE(svg.find("hidden 4,096, intermediate 16,384, heads 32, layers 24, tokens 15,872"), std::string::npos);
}

TEST(Plot, ModelChartWithLmHeadAndEmulatedMarker) {
  REQUIRE_MATPLOTLIB();
  const std::string svg = render("model_lmhead_b200.json", "model_lm.svg");
  EXPECT_EQ(count_ids(svg, "bar:[A-Za-z0-9]+:(QKV|AttnOut|MLPUp|MLPDown):(fpropdgrad|wgrad)"), 40);
  EXPECT_EQ(count_ids(svg, "bar:[A-Za-z0-9]+:LMHead:all"), 5);
  EXPECT_EQ(count_ids(svg, "speedup:[A-Za-z0-9]+"), 5);
  EXPECT_EQ(count_ids(svg, "na:[^\"]*"), 0);
  EXPECT_NE(svg.find("(emulated, unverified on hardware)"), std::string::npos);
  // with the LM head, the label is the full-model speedup (layers * per layer + LM head)
  const json doc = load("model_lmhead_b200.json");
  const auto& full = doc["summary"]["autocast"]["full_model"];
  EXPECT_TRUE(has_text(svg, two_decimals(full["BF16"].get<double>() / full["NVFP4"].get<double>()) + "x"));
}

TEST(Plot, ModelChartPicksTheMode) {
  REQUIRE_MATPLOTLIB();
  // both modes, no --kind: the model chart of autocast
  std::string svg = render("model_5b_both_modes.json", "both_default.svg");
  EXPECT_EQ(count_ids(svg, "bar:[A-Za-z0-9]+:(QKV|AttnOut|MLPUp|MLPDown):(fpropdgrad|wgrad)"), 32);
  EXPECT_EQ(count_ids(svg, "bar:autocast:[^\"]*"), 0);
  // pre-quantized: FP8Block has no results at all there
  svg = render("model_5b_both_modes.json", "both_pq.svg", {"--mode", "pre-quantized"});
  EXPECT_EQ(count_ids(svg, "bar:[A-Za-z0-9]+:(QKV|AttnOut|MLPUp|MLPDown):(fpropdgrad|wgrad)"), 24);
  EXPECT_EQ(count_ids(svg, "na:FP8Block"), 1);
  EXPECT_NE(svg.find("pre-quantized"), std::string::npos);
  const json doc = load("model_5b_both_modes.json");
  const auto& total = doc["summary"]["pre-quantized"]["per_layer"]["total"];
  EXPECT_TRUE(has_text(svg, two_decimals(total["BF16"].get<double>() / total["FP8Current"].get<double>()) + "x"));
}

TEST(Plot, ModesChart) {
  REQUIRE_MATPLOTLIB();
  const std::string svg = render("model_5b_both_modes.json", "modes.svg", {"--kind", "modes"});
  // The fixture says "autocast" (written before the rename): charted as per-gemm.
  EXPECT_EQ(count_ids(svg, "bar:per-gemm:[A-Za-z0-9]+"), 3);       // FP8Current, FP8Delayed, FP8Block
  EXPECT_EQ(count_ids(svg, "bar:pre-quantized:[A-Za-z0-9]+"), 2);  // FP8Block is n/a pre-quantized
  EXPECT_EQ(count_ids(svg, "na:pre-quantized:FP8Block"), 1);
  EXPECT_EQ(count_ids(svg, "bar:[a-z-]+:BF16"), 0);  // the baseline is the 1.00x line
  const json doc = load("model_5b_both_modes.json");
  for (const char* mode : {"autocast", "pre-quantized"}) {
    const auto& full = doc["summary"][mode]["full_model"];
    EXPECT_TRUE(has_text(svg, two_decimals(full["BF16"].get<double>() / full["FP8Current"].get<double>()) + "x"))
        << mode;
  }
}

// Three modes: autocast-shared sits between autocast and pre-quantized. The document is the
// two-mode fixture plus an autocast-shared copy of autocast at 0.9x the time.
TEST(Plot, ModesChartThreeModes) {
  REQUIRE_MATPLOTLIB();
  json doc = load("model_5b_both_modes.json");
  doc["modes"] = {"autocast", "autocast-shared", "pre-quantized"};
  for (auto& g : doc["gemms"]) {
    json shared = g["results"]["autocast"];
    for (auto& [prec, c] : shared.items())
      if (c["status"] == "ok") c["mean_ms"] = c["mean_ms"].get<double>() * 0.9;
    g["results"]["autocast-shared"] = shared;
  }
  json sum = doc["summary"]["autocast"];
  for (auto& [prec, v] : sum["full_model"].items())
    if (v.is_number()) v = v.get<double>() * 0.9;
  doc["summary"]["autocast-shared"] = sum;
  const fs::path path = work_dir() / "three_modes.json";
  std::ofstream(path) << doc.dump();
  const std::string svg = render(path.string(), "modes3.svg", {"--kind", "modes"});
  EXPECT_EQ(count_ids(svg, "bar:per-gemm:[A-Za-z0-9]+"), 3);
  EXPECT_EQ(count_ids(svg, "bar:training:[A-Za-z0-9]+"), 3);
  EXPECT_EQ(count_ids(svg, "bar:pre-quantized:[A-Za-z0-9]+"), 2);
  // BF16 scaled like FP8Current: the shared speedup equals the autocast one
  const auto& full = doc["summary"]["autocast"]["full_model"];
  EXPECT_TRUE(has_text(svg, two_decimals(full["BF16"].get<double>() / full["FP8Current"].get<double>()) + "x"));
  EXPECT_NE(svg.find("Per-gemm vs training vs pre-quantized"), std::string::npos);
}

TEST(Plot, ShapesChart) {
  REQUIRE_MATPLOTLIB();
  const std::string svg = render("shapes_4.json", "shapes.svg");
  EXPECT_EQ(count_ids(svg, "bar:[A-Za-z0-9]+:[0-9]+"), 15);  // 4 shapes x 4 precisions, one n/a
  EXPECT_EQ(count_ids(svg, "na:FP8Block:1"), 1);
  EXPECT_EQ(count_ids(svg, "bar:BF16:[0-9]+"), 4);
  EXPECT_EQ(count_ids(svg, "line:[^\"]*"), 0);
  EXPECT_TRUE(has_text(svg, "15872x4096x12288"));
}

TEST(Plot, SweepChart) {
  REQUIRE_MATPLOTLIB();
  const std::string svg = render("sweep_square.json", "sweep.svg");  // auto: 7 square shapes
  EXPECT_EQ(count_ids(svg, "line:latency:[A-Za-z0-9]+"), 5);
  EXPECT_EQ(count_ids(svg, "line:tflops:[A-Za-z0-9]+"), 5);
  EXPECT_EQ(count_ids(svg, "line:speedup:[A-Za-z0-9]+"), 4);  // every precision but the baseline
  EXPECT_EQ(count_ids(svg, "line:speedup:BF16"), 0);
  EXPECT_EQ(count_ids(svg, "bar:[^\"]*"), 0);
  // --baseline moves the reference
  const std::string svg2 = render("sweep_square.json", "sweep_fp8.svg", {"--baseline", "FP8Current"});
  EXPECT_EQ(count_ids(svg2, "line:speedup:BF16"), 1);
  EXPECT_EQ(count_ids(svg2, "line:speedup:FP8Current"), 0);
  // the square sweep drawn as grouped bars on request
  const std::string svg3 = render("sweep_square.json", "sweep_bars.svg", {"--kind", "shapes"});
  EXPECT_EQ(count_ids(svg3, "bar:[A-Za-z0-9]+:[0-9]+"), 7 * 5 - 1);
}

// tests/data/moe_mixtral_ep2_synthetic.json: Mixtral-8x7B, 8 experts top-2, expert parallel 2, times
// from a fake engine (test_plot_fixtures.cpp), 3 repeats, training + pre-quantized.
constexpr const char* kMoe = "moe_mixtral_ep2_synthetic.json";
std::string kMoeAbs() { return kData + "/" + kMoe; }

// Error bars on the sweep and modes charts: ±1 stdev from the cells' stdev_ms (root-sum-square),
// or, for the speedups of a run with >= 3 repeats, the 95% interval from summary.<mode>.intervals.
TEST(Plot, SweepChartErrorBars) {
  REQUIRE_MATPLOTLIB();
  std::string svg = render("sweep_square.json", "sweep_err.svg");
  EXPECT_EQ(count_ids(svg, "err:latency:[A-Za-z0-9]+"), 5);
  EXPECT_EQ(count_ids(svg, "err:tflops:[A-Za-z0-9]+"), 5);
  EXPECT_EQ(count_ids(svg, "err:speedup:[A-Za-z0-9]+"), 4);
  EXPECT_EQ(count_ids(svg, "err:speedup:BF16"), 0);
  EXPECT_NE(svg.find("error bar: ±1 stdev per cell (speedup: both cells, root-sum-square)"), std::string::npos);
  // no spread in the file: no error bars and no legend entry for them
  json doc = load("sweep_square.json");
  for (auto& g : doc["gemms"])
    for (auto& [mode, cells] : g["results"].items())
      for (auto& [prec, c] : cells.items()) c.erase("stdev_ms");
  const fs::path path = work_dir() / "sweep_no_sd.json";
  std::ofstream(path) << doc.dump();
  svg = render(path.string(), "sweep_no_sd.svg");
  EXPECT_EQ(count_ids(svg, "err:[^\"]*"), 0);
  EXPECT_EQ(svg.find("error bar"), std::string::npos);
  EXPECT_EQ(count_ids(svg, "line:latency:[A-Za-z0-9]+"), 5);
}

TEST(Plot, ModesChartErrorBars) {
  REQUIRE_MATPLOTLIB();
  // no repeats: ±1 stdev of the full-model time, root-sum-square over the cells
  std::string svg = render("model_5b_both_modes.json", "modes_err.svg", {"--kind", "modes"});
  EXPECT_EQ(count_ids(svg, "err:(per-gemm|pre-quantized):[A-Za-z0-9]+"), 5);  // one per bar
  EXPECT_EQ(count_ids(svg, "err:pre-quantized:FP8Block"), 0);                // N/A there
  EXPECT_NE(svg.find("error bar: ±1 stdev of the speedup"), std::string::npos);
  EXPECT_NE(svg.find("(cells' stdevs over the full-model time,"), std::string::npos);
  EXPECT_NE(svg.find("and pass measured)"), std::string::npos);
  EXPECT_EQ(svg.find("95% interval"), std::string::npos);
  // 3 repeats: the 95% interval of the median speedup, from the file
  svg = render(kMoe, "modes_moe_err.svg", {"--kind", "modes"});
  EXPECT_EQ(count_ids(svg, "err:(training|pre-quantized):(FP8Current|FP8Block)"), 4);
  EXPECT_NE(svg.find("error bar: 95% interval of the"), std::string::npos);
  EXPECT_NE(svg.find("median speedup over 3 repeats"), std::string::npos);
  EXPECT_EQ(svg.find("±1 stdev"), std::string::npos);
  // the file has intervals of speedups vs BF16 only: another baseline falls back to ±1 stdev
  svg = render(kMoe, "modes_moe_err_fp8.svg", {"--kind", "modes", "--baseline", "FP8Current"});
  EXPECT_EQ(count_ids(svg, "err:(training|pre-quantized):(BF16|FP8Block)"), 4);
  EXPECT_NE(svg.find("over the full-model time"), std::string::npos);
  EXPECT_EQ(svg.find("95% interval"), std::string::npos);
  // shapes run: the sum of all GEMM times
  json doc = load("shapes_4.json");
  doc["modes"] = {"per-gemm", "pre-quantized"};
  for (auto& g : doc["gemms"]) {
    g["results"]["per-gemm"] = g["results"]["autocast"];  // the file says "autocast": its name before the rename
    g["results"].erase("autocast");
    json pq = g["results"]["per-gemm"];
    for (auto& [prec, c] : pq.items())
      if (c["status"] == "ok") c["mean_ms"] = c["mean_ms"].get<double>() * 0.8;
    g["results"]["pre-quantized"] = pq;
  }
  const fs::path path = work_dir() / "shapes_modes.json";
  std::ofstream(path) << doc.dump();
  svg = render(path.string(), "shapes_modes_err.svg", {"--kind", "modes"});
  EXPECT_GT(count_ids(svg, "err:(per-gemm|pre-quantized):[A-Za-z0-9]+"), 0);
  EXPECT_NE(svg.find("over the summed time"), std::string::npos);
}

// ---- experts (MoE) ------------------------------------------------------------------------------

// The fill colour of the first path inside the element with this id ("" when none).
std::string fill_of(const std::string& svg, const std::string& id) {
  const std::regex re("id=\"" + id + "\">\\s*<path[^>]*style=\"fill: (#[0-9a-f]{6})");
  std::smatch m;
  return std::regex_search(svg, m, re) ? m[1].str() : std::string();
}

// Sum of the grouped (expert) GEMMs' mean times of one precision.
double grouped_ms(const json& doc, const std::string& prec, const std::string& mode = "training") {
  double t = 0;
  for (const auto& g : doc["gemms"])
    if (g.contains("group")) t += g["results"][mode][prec]["mean_ms"].get<double>();
  return t;
}

TEST(Plot, ExpertsChart) {
  REQUIRE_MATPLOTLIB();
  const std::string svg = render(kMoe, "experts.svg", {"--kind", "experts"});
  ASSERT_FALSE(svg.empty());
  EXPECT_EQ(count_ids(svg, "bar:rows:[0-9]+"), 8);  // every expert of the EP group
  EXPECT_EQ(count_ids(svg, "line:mean"), 1);
  EXPECT_EQ(count_ids(svg, "line:capacity"), 0);   // no capacity factor
  // the busiest rank (1: experts 4..7) highlighted and labelled
  EXPECT_EQ(count_ids(svg, "busiest:1"), 1);
  EXPECT_TRUE(has_text(svg, "busiest EP rank — sets the step time"));
  const std::string hot = fill_of(svg, "bar:rows:7"), cold = fill_of(svg, "bar:rows:0");
  ASSERT_FALSE(hot.empty());
  EXPECT_NE(hot, cold);
  for (int e = 4; e < 8; ++e) EXPECT_EQ(fill_of(svg, "bar:rows:" + std::to_string(e)), hot) << e;
  for (int e = 0; e < 4; ++e) EXPECT_EQ(fill_of(svg, "bar:rows:" + std::to_string(e)), cold) << e;
  // bottom: 3 precisions x 3 passes, an error bar and a total/speedup label each
  EXPECT_EQ(count_ids(svg, "bar:[A-Za-z0-9]+:grouped:(fprop|dgrad|wgrad)"), 9);
  EXPECT_EQ(count_ids(svg, "err:[A-Za-z0-9]+"), 3);
  EXPECT_EQ(count_ids(svg, "speedup:[A-Za-z0-9]+"), 3);
  EXPECT_EQ(count_ids(svg, "na:[^\"]*"), 0);
  const json doc = load(kMoe);
  EXPECT_TRUE(has_text(svg, two_decimals(grouped_ms(doc, "BF16") / grouped_ms(doc, "FP8Current")) + "x"));
  // honest title: the device from the JSON, and the fixture's times are not called measured
  EXPECT_NE(svg.find("Fake GPU (synthetic times, not a measurement)"), std::string::npos);
  EXPECT_NE(svg.find("SYNTHETIC times (not measured)"), std::string::npos);
  EXPECT_EQ(svg.find("(measured)"), std::string::npos);
  // the same file called measured: "measured" everywhere
  json measured = doc;
  measured["timing"]["method"] = "cuda-events";
  const fs::path path = work_dir() / "moe_measured.json";
  std::ofstream(path) << measured.dump();
  const std::string svg2 = render(path.string(), "experts_measured.svg", {"--kind", "experts", "--mode", "pre-quantized"});
  EXPECT_NE(svg2.find("MoE experts of one MoE layer, measured on Fake GPU"), std::string::npos);
  EXPECT_TRUE(has_text(svg2, "Fprop (measured)"));
  EXPECT_NE(svg2.find("mode: pre-quantized"), std::string::npos);
  EXPECT_TRUE(has_text(svg2, two_decimals(grouped_ms(doc, "BF16", "pre-quantized") /
                                          grouped_ms(doc, "FP8Current", "pre-quantized")) + "x"));
}

TEST(Plot, ExpertsChartIsAutoForMoeAndModelChartSaysWhatItLeavesOut) {
  REQUIRE_MATPLOTLIB();
  const std::string svg = render(kMoe, "experts_auto.svg");
  EXPECT_EQ(count_ids(svg, "bar:rows:[0-9]+"), 8);
  EXPECT_EQ(count_ids(svg, "bar:[A-Za-z0-9]+:grouped:(fprop|dgrad|wgrad)"), 9);
  // forced model chart of an MoE run: its bars hold the dense per-layer ops only, and it says so
  const std::string model = render(kMoe, "experts_as_model.svg", {"--kind", "model"});
  EXPECT_NE(model.find("This model has experts"), std::string::npos);
  // dense fixtures keep their kind
  EXPECT_EQ(count_ids(render("model_5b_autocast.json", "auto_dense.svg"), "bar:[^\"]*:QKV:fpropdgrad"), 3);
}

TEST(Plot, ExpertsChartWithoutExpertParallelOrRouting) {
  REQUIRE_MATPLOTLIB();
  json doc = load(kMoe);
  doc["plan"]["routing"]["expert_parallel"] = 1;  // one rank routes the whole batch
  doc["plan"]["routing"]["tokens"] = doc["plan"]["routing"]["tokens"].get<int64_t>() * 2;
  fs::path path = work_dir() / "moe_ep1.json";
  std::ofstream(path) << doc.dump();
  std::string svg = render(path.string(), "experts_ep1.svg", {"--kind", "experts"});
  EXPECT_EQ(count_ids(svg, "bar:rows:[0-9]+"), 8);
  EXPECT_EQ(count_ids(svg, "busiest:[0-9]+"), 0);
  EXPECT_EQ(svg.find("busiest EP rank"), std::string::npos);
  EXPECT_EQ(fill_of(svg, "bar:rows:7"), fill_of(svg, "bar:rows:0"));
  // no plan.routing: the rows per expert of the grouped GEMMs themselves (the 4 local experts)
  doc = load(kMoe);
  doc["plan"].erase("routing");
  path = work_dir() / "moe_no_routing.json";
  std::ofstream(path) << doc.dump();
  svg = render(path.string(), "experts_no_routing.svg", {"--kind", "experts"});
  EXPECT_EQ(count_ids(svg, "bar:rows:[0-9]+"), 4);
  EXPECT_EQ(count_ids(svg, "bar:[A-Za-z0-9]+:grouped:(fprop|dgrad|wgrad)"), 9);
  // an n/a grouped cell: that precision is N/A with its reason
  doc = load(kMoe);
  for (auto& g : doc["gemms"])
    if (g.contains("group") && g["pass"] == "wgrad") {
      g["results"]["training"]["FP8Block"] = {{"status", "n/a"}, {"reason", "cuBLASLt: NOT_SUPPORTED"}};
      break;
    }
  path = work_dir() / "moe_na.json";
  std::ofstream(path) << doc.dump();
  svg = render(path.string(), "experts_na.svg", {"--kind", "experts"});
  EXPECT_EQ(count_ids(svg, "na:FP8Block"), 1);
  EXPECT_EQ(count_ids(svg, "bar:FP8Block:grouped:[a-z]+"), 0);
  EXPECT_NE(svg.find("cuBLASLt: NOT_SUPPORTED"), std::string::npos);
}

// --kind experts needs MoE data; broken MoE data is bad input too (gemmscope's reader says what is
// broken, before the script runs). Exit 2, one line, no chart.
TEST(Plot, ExpertsBadInputExitsTwo) {
  ASSERT_TRUE(binary_has_plot()) << "gemmscope (" << kBinary << ") must have the plot subcommand";
  const fs::path d = work_dir();
  const auto write_edit = [&](const std::string& file, const std::function<void(json&)>& edit) {
    json doc = load(kMoe);
    edit(doc);
    std::ofstream(d / file) << doc.dump();
    return (d / file).string();
  };
  const auto first_grouped = [](json& doc) -> json& {
    for (auto& g : doc["gemms"])
      if (g.contains("group")) return g;
    throw std::runtime_error("fixture without grouped GEMMs");
  };
  const std::string bad_sum = write_edit("moe_bad_sum.json", [&](json& j) {
    json& g = first_grouped(j);
    g["group"][0] = g["group"][0].get<int64_t>() + 1;
  });
  const std::string bad_dim = write_edit("moe_bad_dim.json", [&](json& j) { first_grouped(j)["group_dim"] = "x"; });
  const std::string neg = write_edit("moe_neg.json", [&](json& j) { first_grouped(j)["group"][0] = -1; });
  const std::string counts = write_edit("moe_counts.json", [](json& j) { j["plan"]["routing"]["counts"].erase(0); });
  const std::string ep = write_edit("moe_ep.json", [](json& j) { j["plan"]["routing"]["expert_parallel"] = 3; });
  const std::string routing = write_edit("moe_routing.json", [](json& j) { j["plan"]["routing"] = "lognormal"; });
  const std::string many = write_edit("moe_many.json", [](json& j) {
    j["plan"]["routing"]["counts"] = std::vector<int>(5000, 1);
    j["plan"]["routing"]["experts"] = 5000;
    j["plan"]["routing"]["expert_parallel"] = 1;
  });
  const std::string out = (d / "bad_experts.svg").string();
  const std::vector<std::pair<std::vector<std::string>, std::string>> cases = {
      {{kData + "/model_5b_autocast.json", "-o", out, "--kind", "experts"},
       "model_5b_autocast.json has no MoE data to chart: no grouped expert GEMMs"},
      {{kData + "/shapes_4.json", "-o", out, "--kind", "experts"}, "shapes_4.json has no MoE data to chart"},
      {{bad_sum, "-o", out, "--kind", "experts"}, "moe_bad_sum.json: gemms[3]: \"group\" sums to"},
      {{bad_dim, "-o", out}, "moe_bad_dim.json: gemms[3]"},
      {{neg, "-o", out, "--kind", "experts"}, "group[0] must be >= 0"},
      {{counts, "-o", out, "--kind", "experts"}, "moe_counts.json: plan.routing"},
      {{ep, "-o", out, "--kind", "experts"}, "moe_ep.json: plan.routing"},
      {{routing, "-o", out, "--kind", "experts"}, "moe_routing.json: plan.routing must be an object"},
      {{many, "-o", out, "--kind", "experts"}, "moe_many.json: plan.routing"},
  };
  for (const auto& [a, message] : cases) {
    std::vector<std::string> args = {kBinary, "plot"};
    args.insert(args.end(), a.begin(), a.end());
    const Proc p = run(args);
    EXPECT_EQ(p.rc, 2) << message << "\n" << p.out;
    EXPECT_NE(p.out.find(message), std::string::npos) << p.out;
    EXPECT_EQ(std::count(p.out.begin(), p.out.end(), '\n'), 1) << p.out;
  }
  // The chart's own limit, checked by the script (also run on its own): one bar per expert.
  const auto py = chart_python() ? chart_python() : any_python();
  if (py) {
    const Proc p = run({*py, kScript, many, "-o", out, "--kind", "experts"});
    EXPECT_EQ(p.rc, 2) << p.out;
    EXPECT_NE(p.out.find("moe_many.json: plan.routing: 5000 experts, more than the experts chart draws (4096)"),
              std::string::npos) << p.out;
  }
  EXPECT_FALSE(fs::exists(out));
}

TEST(Plot, PngAndPdfOutputs) {
  REQUIRE_MATPLOTLIB();
  for (const char* name : {"model.png", "model.pdf"}) {
    const fs::path out = work_dir() / name;
    const Proc p = run({kBinary, "plot", kData + "/model_5b_autocast.json", "-o", out.string()});
    EXPECT_EQ(p.rc, 0) << p.out;
    ASSERT_TRUE(fs::exists(out));
    const std::string head = slurp(out).substr(0, 4);
    EXPECT_EQ(head, std::string(name).ends_with(".png") ? std::string("\x89PNG") : std::string("%PDF"));
  }
}

// Bad input: exit 2 and one line on stderr, before matplotlib is needed. The script on its own
// checks what keeps it from crashing: the file policy, a gemmscope result with times, the numbers
// it reads (a file from an older gemmscope lacks them), the types of the fields it reads.
TEST(Plot, BadInputExitsTwo) {
  const auto py = chart_python() ? chart_python() : any_python();
  if (!py) GTEST_SKIP() << "no python3 interpreter";
  const fs::path d = work_dir();
  std::ofstream(d / "not_json.json") << "this is not json\n";
  json wrong = load("shapes_4.json");
  wrong["schema"] = "something/else";
  std::ofstream(d / "wrong_schema.json") << wrong.dump();
  json dry = load("shapes_4.json");
  dry["dry_run"] = true;
  for (auto& g : dry["gemms"]) g.erase("results");
  std::ofstream(d / "dry.json") << dry.dump();
  const auto write_edit = [&](const std::string& file, const std::function<void(json&)>& edit) {
    json doc = load(kMoe);  // written by this version: it has the numbers the charts read
    edit(doc);
    std::ofstream(d / file) << doc.dump();
    return (d / file).string();
  };
  const std::string device_text = write_edit("s_device_text.json", [](json& j) { j["device"] = "H100"; });
  const std::string notes_num = write_edit("s_notes_num.json", [](json& j) { j["notes"] = {"ok", 5}; });
  const std::string cell_text = write_edit("s_cell_text.json", [](json& j) { j["gemms"][0]["results"]["training"]["BF16"]["mean_ms"] = "1"; });
  const std::string no_totals = write_edit("s_no_totals.json", [](json& j) { j.erase("totals"); });
  const std::string out = (d / "bad.svg").string();
  struct Case {
    std::vector<std::string> args;
    std::string message;
  };
  const std::vector<Case> cases = {
      {{(d / "missing.json").string(), "-o", out}, "cannot read"},
      {{(d / "not_json.json").string(), "-o", out}, "is not JSON"},
      {{(d / "wrong_schema.json").string(), "-o", out}, "expected \"gemmscope.result/3\" (or \"gemmscope.result/2\", \"gemmscope.result/1\")"},
      {{(d / "dry.json").string(), "-o", out}, "is a dry run"},
      {{kData + "/model_5b_autocast.json", "-o", (d / "chart.jpg").string()}, "unsupported type"},
      {{kData + "/model_5b_autocast.json", "-o", out},
       "model_5b_autocast.json has no totals.autocast.BF16: it was written by an older gemmscope (or edited); chart it "
       "with `gemmscope plot`"},
      {{no_totals, "-o", out}, "s_no_totals.json has no totals.training.BF16"},
      {{device_text, "-o", out}, "s_device_text.json: device must be an object or null"},
      {{notes_num, "-o", out}, "s_notes_num.json: notes must be a list of strings"},
      {{cell_text, "-o", out}, "s_cell_text.json: gemms[0]: \"results\" must hold one object of cells per mode"},
      {{kMoeAbs(), "-o", out, "--mode", "per-gemm"}, "mode per-gemm is not in moe_mixtral_ep2_synthetic.json"},
  };
  for (const auto& c : cases) {
    std::vector<std::string> args = {*py, kScript};
    args.insert(args.end(), c.args.begin(), c.args.end());
    const Proc p = run(args);
    EXPECT_EQ(p.rc, 2) << c.message << "\n" << p.out;
    EXPECT_NE(p.out.find(c.message), std::string::npos) << p.out;
    EXPECT_EQ(std::count(p.out.begin(), p.out.end(), '\n'), 1) << p.out;
  }
  EXPECT_FALSE(fs::exists(out));
}

// The same through `gemmscope plot`: what the result reader refuses, with its message naming the
// file and the field, and what the chart refuses, naming the file the user gave (not the copy
// the script reads).
TEST(PlotBinary, BadContentExitsTwo) {
  ASSERT_TRUE(binary_has_plot()) << "gemmscope (" << kBinary << ") must have the plot subcommand";
  const fs::path d = work_dir();
  const auto write_edit = [&](const std::string& file, const std::function<void(json&)>& edit) {
    json doc = load("model_5b_autocast.json");
    edit(doc);
    std::ofstream(d / file) << doc.dump();
    return (d / file).string();
  };
  const std::string dup_modes = write_edit("dup_modes.json", [](json& j) { j["modes"] = {"autocast", "autocast"}; });
  const std::string device_text = write_edit("device_text.json", [](json& j) { j["device"] = "H100"; });
  const std::string timing_list = write_edit("timing_list.json", [](json& j) { j["timing"] = {1, 2}; });
  const std::string notes_num = write_edit("notes_num.json", [](json& j) { j["notes"] = {"ok", 5}; });
  const std::string escape = write_edit("escape.json", [](json& j) { j["modes"] = {"auto\x1b[2J\ncast"}; });
  const std::string out = (d / "bad_bin.svg").string();
  const std::vector<std::pair<std::vector<std::string>, std::string>> cases = {
      {{kData + "/model_5b_autocast.json", "-o", out, "--mode", "pre-quantized"},
       "mode pre-quantized is not in model_5b_autocast.json"},
      {{kData + "/model_5b_autocast.json", "-o", out, "--kind", "modes"}, "needs pre-quantized and a quantizing mode"},
      {{kData + "/model_5b_autocast.json", "-o", out, "--baseline", "NVFP4"}, "baseline NVFP4 is not in model_5b_autocast.json"},
      {{kData + "/shapes_4.json", "-o", out, "--kind", "model"}, "needs a model-config result"},
      {{dup_modes, "-o", out}, "dup_modes.json: \"modes\" lists per-gemm twice"},
      {{device_text, "-o", out}, "device_text.json: device must be an object or null"},
      {{timing_list, "-o", out}, "timing_list.json: timing"},
      {{notes_num, "-o", out}, "notes_num.json: notes[1] must be a string"},
      // strings from the file cannot move the cursor or add a line
      {{escape, "-o", out}, "auto?[2J?cast"},
  };
  for (const auto& [a, message] : cases) {
    std::vector<std::string> args = {kBinary, "plot"};
    args.insert(args.end(), a.begin(), a.end());
    const Proc p = run(args);
    EXPECT_EQ(p.rc, 2) << message << "\n" << p.out;
    EXPECT_NE(p.out.find(message), std::string::npos) << p.out;
    EXPECT_EQ(p.out.find('\x1b'), std::string::npos) << p.out;
    EXPECT_EQ(std::count(p.out.begin(), p.out.end(), '\n'), 1) << p.out;
  }
  EXPECT_FALSE(fs::exists(out));
}

// The script on its own charts a file this version wrote, reading the numbers gemmscope computed:
// the speedup label is totals' ratio, whatever the cells would sum to.
TEST(Plot, ScriptAloneDrawsTheWrittenTotals) {
  REQUIRE_MATPLOTLIB();
  json doc = load(kMoe);
  json& t = doc["totals"]["training"];
  const json& fp8 = t["FP8Current"]["experts"];
  const double fp8_bar = fp8["fprop_ms"].get<double>() + fp8["dgrad_ms"].get<double>() + fp8["wgrad_ms"].get<double>();
  t["BF16"]["experts"]["ms"] = fp8_bar * 3.25;  // edited: the baseline's total makes FP8Current 3.25x
  const fs::path in = work_dir() / "moe_edited_totals.json", out = work_dir() / "alone.svg";
  std::ofstream(in) << doc.dump();
  const Proc p = run({*chart_python(), kScript, in.string(), "-o", out.string(), "--kind", "experts"});
  ASSERT_EQ(p.rc, 0) << p.out;
  const std::string svg = slurp(out);
  EXPECT_EQ(count_ids(svg, "bar:[A-Za-z0-9]+:grouped:(fprop|dgrad|wgrad)"), 9);
  EXPECT_NE(svg.find("3.25x"), std::string::npos);
  // through gemmscope plot the totals are written again from the cells: no 3.25x
  const Proc b = run({kBinary, "plot", in.string(), "-o", out.string(), "--kind", "experts"});
  ASSERT_EQ(b.rc, 0) << b.out;
  EXPECT_EQ(slurp(out).find("3.25x"), std::string::npos);
}

// A Python whose `import matplotlib` fails (a stub package first on PYTHONPATH): exit 3 and the
// install hint, from the script and from the binary.
class NoMatplotlib : public ::testing::Test {
 protected:
  void SetUp() override {
    const fs::path stub = work_dir() / "stub" / "matplotlib";
    fs::create_directories(stub);
    std::ofstream(stub / "__init__.py") << "raise ImportError('stubbed out by gemmscope tests')\n";
    const char* old = std::getenv("PYTHONPATH");
    if (old) saved_ = old;
    had_ = old != nullptr;
    setenv("PYTHONPATH", (work_dir() / "stub").c_str(), 1);
  }
  void TearDown() override {
    if (had_)
      setenv("PYTHONPATH", saved_.c_str(), 1);
    else
      unsetenv("PYTHONPATH");
  }
  std::string saved_;
  bool had_ = false;
};

TEST_F(NoMatplotlib, ScriptExitsThree) {
  const auto py = any_python();
  if (!py) GTEST_SKIP() << "no python3 interpreter";
  const fs::path out = work_dir() / "nompl.svg";
  const Proc p = run({*py, kScript, kMoeAbs(), "-o", out.string()});
  EXPECT_EQ(p.rc, 3) << p.out;
  EXPECT_NE(p.out.find(kMatplotlibMissing), std::string::npos) << p.out;
  EXPECT_FALSE(fs::exists(out));
}

TEST_F(NoMatplotlib, BinaryExitsThree) {
  ASSERT_TRUE(binary_has_plot()) << "gemmscope (" << kBinary << ") must have the plot subcommand";
  const fs::path out = work_dir() / "nompl_bin.svg";
  const Proc p = run({kBinary, "plot", kData + "/model_5b_autocast.json", "-o", out.string()});
  EXPECT_EQ(p.rc, 3) << p.out;
  EXPECT_NE(p.out.find(kMatplotlibMissing), std::string::npos) << p.out;
}

// GEMMSCOPE_PLOT_SCRIPT naming a missing file: say so, not "not found next to the binary".
TEST(PlotBinary, PlotScriptVariableNamesAMissingFile) {
  ASSERT_TRUE(binary_has_plot()) << "gemmscope (" << kBinary << ") must have the plot subcommand";
  const char* old = std::getenv("GEMMSCOPE_PLOT_SCRIPT");
  const std::string saved = old ? old : "";
  setenv("GEMMSCOPE_PLOT_SCRIPT", "/nonexistent/gemmscope_plot.py", 1);
  const Proc p = run({kBinary, "plot", kData + "/shapes_4.json", "-o", (work_dir() / "env.svg").string()});
  if (old) setenv("GEMMSCOPE_PLOT_SCRIPT", saved.c_str(), 1); else unsetenv("GEMMSCOPE_PLOT_SCRIPT");
  EXPECT_EQ(p.rc, 3) << p.out;
  EXPECT_NE(p.out.find("GEMMSCOPE_PLOT_SCRIPT names /nonexistent/gemmscope_plot.py, which does not exist"), std::string::npos)
      << p.out;
  EXPECT_EQ(p.out.find("next to the gemmscope binary"), std::string::npos) << p.out;
  EXPECT_EQ(std::count(p.out.begin(), p.out.end(), '\n'), 1) << p.out;
}

// The script's "wrote ..." line cannot reach stdout: 74 from the script and the binary.
TEST(PlotBinary, StdoutWriteErrorExits74) {
  ASSERT_TRUE(binary_has_plot()) << "gemmscope (" << kBinary << ") must have the plot subcommand";
  REQUIRE_MATPLOTLIB();
  if (!fs::exists("/dev/full")) GTEST_SKIP() << "no /dev/full";
  const fs::path out = work_dir() / "full.svg", err = work_dir() / "full.err";
  const std::string cmd = kBinary + " plot " + kData + "/shapes_4.json -o " + out.string() + " >/dev/full 2>" + err.string();
  const int st = std::system(cmd.c_str());
  ASSERT_TRUE(WIFEXITED(st));
  EXPECT_EQ(WEXITSTATUS(st), 74) << slurp(err);
  EXPECT_EQ(slurp(err), "gemmscope plot: error writing to stdout: No space left on device\n");
  EXPECT_TRUE(fs::exists(out));  // the chart itself was written
}

// The subcommand of the built binary: interpreter choice, argument passing, exit codes.
TEST(PlotBinary, RendersEachKind) {
  ASSERT_TRUE(binary_has_plot()) << "gemmscope (" << kBinary << ") must have the plot subcommand";
  REQUIRE_MATPLOTLIB();
  struct Case {
    std::string fixture, out;
    std::vector<std::string> extra;
    std::string id_regex;
    int count;
  };
  const std::vector<Case> cases = {
      {"model_5b_autocast.json", "bin_model.svg", {}, "bar:[A-Za-z0-9]+:[A-Za-z]+:(fpropdgrad|wgrad)", 24},
      {"model_5b_both_modes.json", "bin_modes.svg", {"--kind", "modes"}, "bar:(per-gemm|pre-quantized):[A-Za-z0-9]+", 5},
      {"shapes_4.json", "bin_shapes.svg", {}, "bar:[A-Za-z0-9]+:[0-9]+", 15},
      {"sweep_square.json", "bin_sweep.svg", {"--baseline", "BF16"}, "line:(latency|tflops|speedup):[A-Za-z0-9]+", 14},
      {kMoe, "bin_experts.svg", {"--kind", "experts"}, "bar:[A-Za-z0-9]+:grouped:(fprop|dgrad|wgrad)", 9},
      {kMoe, "bin_experts_case.svg", {"--kind", "Experts"}, "bar:rows:[0-9]+", 8},
  };
  for (const auto& c : cases) {
    const fs::path out = work_dir() / c.out;
    std::vector<std::string> args = {kBinary, "plot", kData + "/" + c.fixture, "-o", out.string()};
    args.insert(args.end(), c.extra.begin(), c.extra.end());
    const Proc p = run(args);
    ASSERT_EQ(p.rc, 0) << c.fixture << "\n" << p.out;
    EXPECT_EQ(count_ids(slurp(out), c.id_regex), c.count) << c.fixture;
  }
}

// --mode autocast-shared reaches the script (CLI11 refused it while the script charts it).
TEST(PlotBinary, ModeTrainingUnderItsOldName) {
  ASSERT_TRUE(binary_has_plot()) << "gemmscope (" << kBinary << ") must have the plot subcommand";
  json doc = load("model_5b_both_modes.json");
  doc["modes"] = {"autocast", "autocast-shared", "pre-quantized"};
  for (auto& g : doc["gemms"]) g["results"]["autocast-shared"] = g["results"]["autocast"];
  doc["summary"]["autocast-shared"] = doc["summary"]["autocast"];
  const fs::path in = work_dir() / "shared_mode.json", out = work_dir() / "shared_mode.svg";
  std::ofstream(in) << doc.dump();
  const Proc p = run({kBinary, "plot", in.string(), "-o", out.string(), "--mode", "autocast-shared"});
  EXPECT_EQ(p.out.find("not in {"), std::string::npos) << p.out;
  if (chart_python()) {
    EXPECT_EQ(p.rc, 0) << p.out;
    EXPECT_NE(slurp(out).find("training (each tensor quantized once per step"), std::string::npos);
  } else {
    EXPECT_EQ(p.rc, 3) << p.out;  // past the option check: only matplotlib is missing
    EXPECT_NE(p.out.find(kMatplotlibMissing), std::string::npos) << p.out;
  }
}

TEST(PlotBinary, BadInputExitsTwo) {
  ASSERT_TRUE(binary_has_plot()) << "gemmscope (" << kBinary << ") must have the plot subcommand";
  REQUIRE_MATPLOTLIB();
  const fs::path d = work_dir();
  std::ofstream(d / "bin_not_json.json") << "[1, 2";
  Proc p = run({kBinary, "plot", (d / "bin_not_json.json").string(), "-o", (d / "x.svg").string()});
  EXPECT_EQ(p.rc, 2) << p.out;
  EXPECT_NE(p.out.find("is not JSON"), std::string::npos) << p.out;
  p = run({kBinary, "plot", kData + "/shapes_4.json"});  // -o missing: CLI11 error
  EXPECT_EQ(p.rc, 2) << p.out;
  p = run({kBinary, "plot", kData + "/shapes_4.json", "-o", (d / "x.svg").string(), "--kind", "pie"});
  EXPECT_EQ(p.rc, 2) << p.out;
}

// `gemmscope compare` exit codes: 0 clean, 1 regressions, 2 bad input.
TEST(CompareBinary, ExitCodes) {
  ASSERT_TRUE(fs::exists(kBinary)) << "no gemmscope binary at " << kBinary << " (a build dependency of this test)";
  ASSERT_EQ(run({kBinary, "compare", "--help"}).rc, 0) << "gemmscope must have the compare subcommand";
  const std::string a = kData + "/compare_a.json", b = kData + "/compare_b.json";
  Proc p = run({kBinary, "compare", a, a});
  EXPECT_EQ(p.rc, 0) << p.out;
  p = run({kBinary, "compare", a, b});
  EXPECT_EQ(p.rc, 1) << p.out;
  EXPECT_NE(p.out.find("Regressions (15)"), std::string::npos);
  p = run({kBinary, "compare", a, b, "--threshold", "12%"});
  EXPECT_EQ(p.rc, 0) << p.out;
  p = run({kBinary, "compare", a, b, "--markdown", "--threshold", "0.05"});
  EXPECT_EQ(p.rc, 1);
  EXPECT_NE(p.out.find("**1.100 slower**"), std::string::npos) << p.out;
  p = run({kBinary, "compare", a, kData + "/shapes_4.json"});
  EXPECT_EQ(p.rc, 2) << p.out;
  p = run({kBinary, "compare", a, kData + "/no_such.json"});
  EXPECT_EQ(p.rc, 2) << p.out;
  p = run({kBinary, "compare", a, b, "--threshold", "lots"});
  EXPECT_EQ(p.rc, 2) << p.out;
  p = run({kBinary, "compare", a, b, "--mode", "pre-quantized"});
  EXPECT_EQ(p.rc, 2) << p.out;
}

// Error messages quote file contents: still one line, no control characters.
TEST(CompareBinary, ErrorsArePrintable) {
  ASSERT_TRUE(fs::exists(kBinary)) << "no gemmscope binary at " << kBinary << " (a build dependency of this test)";
  json doc = load("compare_a.json");
  doc["modes"] = {"auto\x1b[2J\ncast"};
  const fs::path bad = work_dir() / "ctrl_mode.json";
  std::ofstream(bad) << doc.dump();
  const Proc p = run({kBinary, "compare", kData + "/compare_a.json", bad.string()});
  EXPECT_EQ(p.rc, 2) << p.out;
  EXPECT_EQ(p.out.find('\x1b'), std::string::npos) << p.out;
  EXPECT_EQ(std::count(p.out.begin(), p.out.end(), '\n'), 1) << p.out;
  EXPECT_NE(p.out.find("unknown mode 'auto?[2J?cast'"), std::string::npos) << p.out;
}

// Any problem in an input file is bad input (2), never 1, which means "regressions found".
TEST(CompareBinary, MalformedFilesExitTwo) {
  ASSERT_TRUE(fs::exists(kBinary)) << "no gemmscope binary at " << kBinary << " (a build dependency of this test)";
  const std::string a = kData + "/compare_a.json";
  std::string text = slurp(a);
  const size_t at = text.find("\"mean_ms\":");
  ASSERT_NE(at, std::string::npos);
  text.insert(at, "\"overflow\": 1e400, ");
  const fs::path overflow = work_dir() / "overflow.json";
  std::ofstream(overflow) << text;
  json doc = load("compare_a.json");
  doc["timing"]["iters"] = "abc";
  const fs::path type = work_dir() / "type_error.json";
  std::ofstream(type) << doc.dump();
  doc = load("compare_a.json");
  doc["config"]["num_hidden_layers"] = -3;
  const fs::path layers = work_dir() / "no_layers.json";
  std::ofstream(layers) << doc.dump();
  doc = load("compare_a.json");
  doc["modes"] = {"autocast", "autocast"};
  const fs::path dup = work_dir() / "dup_modes.json";
  std::ofstream(dup) << doc.dump();
  for (const auto& [path, message] : std::vector<std::pair<fs::path, std::string>>{
           {overflow, "number overflow parsing '1e400'"},
           {type, "timing.iters must be an integer"},
           {layers, "config.num_hidden_layers must be from 1"},
           {dup, "\"modes\" lists per-gemm twice"}}) {
    for (const auto& args : {std::vector<std::string>{kBinary, "compare", a, path.string()},
                             std::vector<std::string>{kBinary, "compare", path.string(), a}}) {
      const Proc p = run(args);
      EXPECT_EQ(p.rc, 2) << p.out;
      EXPECT_NE(p.out.find(path.string()), std::string::npos) << p.out;
      EXPECT_NE(p.out.find(message), std::string::npos) << p.out;
      EXPECT_EQ(std::count(p.out.begin(), p.out.end(), '\n'), 1) << p.out;
    }
  }
}

}  // namespace
