// Hostile input (issue 14): one regression test per failure class found by fuzzing, and the
// input-file policy of core/io/input_file.hpp (regular files only, size and depth limits while
// parsing, no trailing content, short quotes in messages, absurd numbers refused by name).
// The binary and the plot script are run under `timeout`, so a FIFO that blocked would fail the
// test instead of hanging it.
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>

#include "core/analysis/compare.hpp"
#include "core/util/error.hpp"
#include "core/io/input_file.hpp"
#include "core/model/model_config.hpp"
#include "core/io/output_paths.hpp"
#include "core/report/report.hpp"
#include "test_util.hpp"

namespace {

namespace fs = std::filesystem;
using nlohmann::json;

const std::string kData = GS_TEST_DATA_DIR;
const std::string kScript = std::string(GS_SOURCE_DIR) + "/tools/gemmscope_plot.py";

fs::path scratch() {
  static const fs::path d = gs::test::scratch_dir("hostile_test");
  return d;
}

class Cleanup : public ::testing::Environment {
 public:
  void TearDown() override {
    std::error_code ec;
    fs::remove_all(fs::temp_directory_path() / ("gs_hostile_test_" + std::to_string(::getpid())), ec);
  }
};
[[maybe_unused]] ::testing::Environment* const kCleanup = ::testing::AddGlobalTestEnvironment(new Cleanup);

using gs::test::Out;
using gs::test::slurp;

fs::path write(const std::string& name, const std::string& bytes) {
  const fs::path p = scratch() / name;
  std::ofstream(p, std::ios::binary) << bytes;
  return p;
}

std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const gs::UsageError& e) {
    return e.what();
  }
  return "(accepted)";
}

// `cmd` (a shell command line the test controls) under a 20 s timeout; rc 124 means it hung.
Out sh(const std::string& cmd) { return gs::test::run_shell("timeout 20 " + cmd, scratch()); }

std::string q(const std::string& s) { return "'" + s + "'"; }

std::string nested(size_t depth, const std::string& inner = "1") {
  return std::string(depth, '[') + inner + std::string(depth, ']');
}

const std::string kConfigBase =
    R"("intermediate_size": 1024, "num_attention_heads": 4, "num_hidden_layers": 2, "model_type": "llama")";

json load(const std::string& name) { return gs::read_json_file(kData + "/" + name, "test data"); }

}  // namespace

// ---- the policy itself ----

TEST(InputFile, DepthLimitHoldsWhileParsing) {
  EXPECT_NO_THROW(gs::parse_json_text(nested(gs::kMaxJsonDepth), "x.json"));
  EXPECT_EQ(error_of([] { gs::parse_json_text(nested(gs::kMaxJsonDepth + 1), "x.json"); }),
            "x.json: nested deeper than 64 levels (the limit for input files)");
  // 10^6 levels: refused after 64 of them; nothing recurses over the rest (no stack overflow).
  const std::string deep = std::string(1000000, '[');
  EXPECT_NE(error_of([&] { gs::parse_json_text(deep, "x.json"); }).find("nested deeper than 64"), std::string::npos);
  const std::string deep_obj = [] {
    std::string s;
    for (int i = 0; i < 100000; ++i) s += "{\"a\":";
    return s;
  }();
  EXPECT_NE(error_of([&] { gs::parse_json_text(deep_obj, "x.json"); }).find("nested deeper"), std::string::npos);
}

TEST(InputFile, TrailingContentAndNulRefused) {
  EXPECT_NO_THROW(gs::parse_json_text("{\"a\": 1}  \n\t", "x.json"));
  EXPECT_NE(error_of([] { gs::parse_json_text("{\"a\": 1} {}", "x.json"); }).find("x.json: not valid JSON"),
            std::string::npos);
  EXPECT_NE(error_of([] { gs::parse_json_text("{\"a\": 1} garbage", "x.json"); }).find("not valid JSON"),
            std::string::npos);
  const std::string nul = std::string("{\"a\": 1}") + '\0' + "garbage";
  EXPECT_EQ(error_of([&] { gs::parse_json_text(nul, "x.json"); }), "x.json: not valid JSON: a NUL byte at offset 8");
  EXPECT_NE(error_of([] { gs::parse_json_text("[1e400]", "x.json"); }).find("x.json: a number is too large"),
            std::string::npos);
  EXPECT_NE(error_of([] { gs::parse_json_text("[NaN]", "x.json"); }).find("not valid JSON"), std::string::npos);
}

TEST(InputFile, MessagesQuoteShortPrefixesOnly) {
  // A parse error whose "last read" token is a megabyte of text.
  const std::string bad = "[\"" + std::string(1 << 20, 'a') + "\x01\"]";
  const std::string msg = error_of([&] { gs::parse_json_text(bad, "x.json"); });
  EXPECT_NE(msg.find("not valid JSON"), std::string::npos);
  EXPECT_LT(msg.size(), 400u) << msg.substr(0, 400);
  EXPECT_EQ(gs::json_value_hint(json(std::string(1000, 'b'))).substr(0, 6), "\"bbbbb");
  EXPECT_LT(gs::json_value_hint(json(std::string(100000, 'b'))).size(), 80u);
  EXPECT_EQ(gs::json_value_hint(json::array({1, 2, 3})), "a list of 3 items");
  EXPECT_EQ(gs::json_value_hint(json{{"k", 1}}), "an object with 1 key");
  EXPECT_EQ(gs::json_value_hint(json(2.5)), "2.5");
  EXPECT_EQ(gs::json_value_hint(json("a\nb")), "\"a?b\"");
}

TEST(InputFile, RegularFilesOnlyAndSizeLimit) {
  // /dev/zero never ends: refused by stat, before a byte is read.
  EXPECT_EQ(error_of([] { gs::read_input_file("/dev/zero", "result file"); }),
            "result file '/dev/zero' is not a regular file");
  EXPECT_EQ(error_of([] { gs::read_input_file(scratch().string(), "config file"); }),
            "config file '" + scratch().string() + "' is a directory");
  EXPECT_NE(error_of([] { gs::read_input_file((scratch() / "missing.json").string(), "result file"); })
                .find("cannot read result file '"),
            std::string::npos);
  // A FIFO without a writer: opening it for reading would block forever.
  const fs::path fifo = scratch() / "fifo.json";
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  const auto t0 = std::chrono::steady_clock::now();
  EXPECT_EQ(error_of([&] { gs::read_json_file(fifo.string(), "result file"); }),
            "result file '" + fifo.string() + "' is not a regular file");
  EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::seconds(5));
  const fs::path big = write("big.json", "[" + std::string(2000, ' ') + "1]");
  EXPECT_NE(error_of([&] { gs::read_input_file(big.string(), "result file", 1000); })
                .find("larger than the 1000 bytes limit"),
            std::string::npos);
  EXPECT_EQ(gs::read_input_file(big.string(), "result file", 2003).size(), 2003u);
}

// ---- class 1: config.json ----

TEST(HostileConfig, DeepNestingIsRefusedNotACrash) {
  // A field holding 10^5 nested lists: the integer check used to dump() it (stack overflow).
  const std::string doc = "{\"hidden_size\": " + nested(100000) + ", " + kConfigBase + "}";
  EXPECT_EQ(error_of([&] { gs::parse_hf_config(doc, "cfg.json"); }),
            "cfg.json: nested deeper than 64 levels (the limit for input files)");
  // Inside text_config (which used to be copied recursively).
  const std::string tc = "{\"text_config\": {\"x\": " + nested(100000) + "}}";
  EXPECT_NE(error_of([&] { gs::parse_hf_config(tc, "cfg.json"); }).find("nested deeper"), std::string::npos);
  // Within the limit, a list where a size belongs is named by its size, not printed.
  EXPECT_EQ(error_of([&] { gs::parse_hf_config("{\"hidden_size\": " + nested(60) + ", " + kConfigBase + "}", "cfg.json"); }),
            "cfg.json: 'hidden_size' must be an integer, got a list of 1 item");
  const std::string long_str = "{\"hidden_size\": \"" + std::string(100000, 'x') + "\", " + kConfigBase + "}";
  EXPECT_LT(error_of([&] { gs::parse_hf_config(long_str, "cfg.json"); }).size(), 200u);
  // text_config still works (moved, not copied).
  const gs::ModelConfig c = gs::parse_hf_config("{\"text_config\": {\"hidden_size\": 512, " + kConfigBase + "}}", "cfg.json");
  EXPECT_EQ(c.hidden_size, 512);
  EXPECT_EQ(c.intermediate_size, 1024);
}

TEST(HostileConfig, FileReaderPolicy) {
  const std::string ok = "{\"hidden_size\": 512, " + kConfigBase + "}";
  EXPECT_EQ(gs::load_hf_config(write("ok_config.json", ok).string()).hidden_size, 512);
  EXPECT_NE(error_of([&] { gs::load_hf_config(write("trail.json", ok + std::string(1, '\0') + "junk").string()); })
                .find("a NUL byte at offset"),
            std::string::npos);
  EXPECT_NE(error_of([&] { gs::load_hf_config(write("trail2.json", ok + "{}").string()); }).find("not valid JSON"),
            std::string::npos);
  EXPECT_NE(error_of([] { gs::load_hf_config("/dev/zero"); }).find("is not a regular file"), std::string::npos);
  EXPECT_NE(error_of([] { gs::load_hf_config(scratch().string()); }).find("is a directory"), std::string::npos);
}

// ---- classes 2, 3, 8: result files ----

TEST(HostileResult, DeepNestingAnywhereIsRefused) {
  json doc = load("shapes_4.json");
  std::string text = doc.dump();
  const std::string schema = "\"schema\":\"gemmscope.result/1\"";
  const auto at = text.find(schema);
  ASSERT_NE(at, std::string::npos);
  text.replace(at, schema.size(), "\"schema\":" + nested(100000));
  const fs::path p = write("deep_schema.json", text);
  EXPECT_EQ(error_of([&] { gs::load_result_json(p.string()); }),
            p.string() + ": nested deeper than 64 levels (the limit for input files)");
  // A document built in memory (no parser involved) with a deep value where a string or an
  // integer belongs: the message describes it instead of serialising it.
  // Built by moves only (a copy would itself recurse 10^5 deep).
  const auto deep = [] {
    json v = 1;
    for (int i = 0; i < 100000; ++i) {
      json outer = json::array();
      outer.push_back(std::move(v));
      v = std::move(outer);
    }
    return v;
  };
  json a = doc, b = doc;
  a["schema"] = deep();
  EXPECT_EQ(error_of([&] { gs::from_json(a, "a.json"); }),
            "a.json has schema a list of 1 item, expected \"gemmscope.result/3\" (or \"gemmscope.result/2\", "
            "\"gemmscope.result/1\")");
  b["timing"]["iters"] = deep();
  EXPECT_EQ(error_of([&] { gs::from_json(b, "b.json"); }),
            "b.json: timing.iters must be an integer from -2147483648 to 2147483647, got a list of 1 item");
}

TEST(HostileResult, VersionStringsAreParsedStrictly) {
  json doc = load("shapes_4.json");
  doc["device"]["driver_version"] = "12.8";
  doc["device"]["runtime_version"] = "999999.99";
  gs::RunResult r = gs::from_json(doc, "x.json");
  ASSERT_TRUE(r.device);
  EXPECT_EQ(r.device->driver_version, 12080);
  EXPECT_EQ(r.device->runtime_version, 999999 * 1000 + 990);
  // Used to overflow an int (UBSan): 3000000 * 1000.
  for (const char* bad : {"3000000.0", "99999999999.0", "12", "12.", ".8", "-1.0", "12.8x", "1.100", " 12.8"}) {
    json d = doc;
    d["device"]["driver_version"] = bad;
    EXPECT_NE(error_of([&] { gs::from_json(d, "x.json"); }).find("x.json: device.driver_version must be \"X.Y\""),
              std::string::npos)
        << bad;
  }
  json cc = doc;
  cc["device"]["compute_capability"] = "99999999999.0";
  EXPECT_NE(error_of([&] { gs::from_json(cc, "x.json"); }).find("device.compute_capability must be \"X.Y\""),
            std::string::npos);
}

TEST(HostileResult, AbsurdAndNonFiniteNumbersAreRefusedByName) {
  const json doc = load("model_5b_autocast.json");
  const auto with = [&](const std::function<void(json&)>& edit) {
    json d = doc;
    edit(d);
    return error_of([&] { gs::from_json(d, "x.json"); });
  };
  EXPECT_NE(with([](json& j) { j["gemms"][0]["results"]["autocast"]["BF16"]["mean_ms"] = 5e-324; })
                .find("x.json: gemms[0].results.autocast.BF16.mean_ms must be from 1e-09 to 1e+09 ms"),
            std::string::npos);
  EXPECT_NE(with([](json& j) { j["gemms"][0]["results"]["autocast"]["BF16"]["mean_ms"] = 1e308; })
                .find("mean_ms must be from 1e-09 to 1e+09 ms"),
            std::string::npos);
  EXPECT_NE(with([](json& j) { j["gemms"][1]["results"]["autocast"]["BF16"]["max_ms"] = 1e300; })
                .find("gemms[1].results.autocast.BF16.max_ms must be from"),
            std::string::npos);
  EXPECT_NE(with([](json& j) { j["gemms"][1]["results"]["autocast"]["BF16"]["stdev_ms"] = -1.0; })
                .find("stdev_ms must be from 0 to"),
            std::string::npos);
  // NaN in a document built in memory (JSON text cannot hold one).
  EXPECT_NE(with([](json& j) { j["gemms"][0]["results"]["autocast"]["BF16"]["median_ms"] = std::nan(""); })
                .find("median_ms must be a finite number"),
            std::string::npos);
  EXPECT_NE(with([](json& j) { j["timing"]["gpu_warmup_s"] = 1e300; }).find("timing.gpu_warmup_s must be from 0 to"),
            std::string::npos);
  // Dimensions beyond the plan builders' 2^24: byte counts would overflow int64 (UBSan).
  EXPECT_NE(with([](json& j) { j["gemms"][0]["m"] = int64_t{1} << 40; }).find("gemms[0]: \"m\" must be at most 16777216"),
            std::string::npos);
  EXPECT_EQ(with([](json&) {}), "(accepted)");
}

TEST(HostileResult, CompareNeverJudgesInfOrNanSame) {
  // Values from_json would refuse, put into RunResults directly (the in-memory API): compare
  // refuses them instead of printing "+inf%" or judging nan "same".
  const json doc = load("model_5b_autocast.json");
  const gs::RunResult a = gs::from_json(doc, "a.json");
  for (double v : {std::numeric_limits<double>::infinity(), std::nan(""), 5e-324 * 0, -1.0}) {
    gs::RunResult b = a;
    b.cell(0, 0, 0).stats.mean_ms = v;
    EXPECT_NE(error_of([&] { gs::compare_results(a, b); }).find("is not a positive finite number"), std::string::npos)
        << v;
  }
  gs::RunResult tiny = a;
  for (size_t g = 0; g < tiny.plan.gemms.size(); ++g)
    for (size_t p = 0; p < tiny.precisions.size(); ++p) tiny.cell(0, g, p).stats.mean_ms = 5e-324;
  EXPECT_NE(error_of([&] { gs::compare_results(a, tiny); }).find("is not a finite number"), std::string::npos);
  EXPECT_NO_THROW(gs::compare_results(a, a));
}

TEST(HostileResult, TrailingBytesAndNonRegularFilesInCompare) {
  const std::string good = slurp(kData + "/compare_a.json");
  const fs::path nul = write("nul_trail.json", good + std::string(1, '\0') + "garbage");
  EXPECT_NE(error_of([&] { gs::compare_files(nul.string(), kData + "/compare_b.json", {}); }).find("a NUL byte"),
            std::string::npos);
  const fs::path two = write("two_values.json", good + "\n{}");
  EXPECT_NE(error_of([&] { gs::compare_files(kData + "/compare_a.json", two.string(), {}); }).find("not valid JSON"),
            std::string::npos);
  EXPECT_NE(error_of([] { gs::compare_files("/dev/zero", "/dev/zero", {}); }).find("is not a regular file"),
            std::string::npos);
}

// ---- class 4 (binary), class 5: outputs proved before any work ----

TEST(HostileCli, CompareOnFifoAndDevZeroExitsTwoAtOnce) {
  const fs::path fifo = scratch() / "cmp.fifo";
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  for (const std::string& f : {fifo.string(), std::string("/dev/zero")}) {
    const Out r = sh(std::string(GS_BINARY) + " compare " + q(f) + " " + q(kData + "/compare_b.json"));
    EXPECT_EQ(r.rc, 2) << f << ": " << r.err;
    EXPECT_NE(r.err.find("is not a regular file"), std::string::npos) << r.err;
    EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
  }
}

TEST(HostileOutput, ExactNamesAreProvedCreatable) {
  const fs::path d = scratch() / "out";
  fs::create_directories(d);
  const auto check = [](const std::string& path) { return error_of([&] { gs::check_output_path(path, "--json"); }); };
  // 255 bytes is the longest name most file systems take: the name fits, its ".tmp" does not.
  const std::string fits = (d / (std::string(250, 'a') + ".json")).string();
  EXPECT_NE(check(fits).find("cannot create its temporary file"), std::string::npos) << check(fits);
  const std::string too_long = (d / (std::string(300, 'b') + ".json")).string();
  EXPECT_NE(check(too_long).find("File name too long"), std::string::npos) << check(too_long);
  EXPECT_EQ(check((d / "fine.json").string()), "(accepted)");
  for (const auto& e : fs::directory_iterator(d)) ADD_FAILURE() << "left behind: " << e.path();
  // Temporary files are new each time (issue 28: mkstemp in the target's directory), so what an
  // interrupted run left under the old fixed name "PATH.tmp" no longer matters.
  fs::create_directory(d / "r.json.tmp");
  EXPECT_EQ(check((d / "r.json").string()), "(accepted)");
  EXPECT_EQ(gs::temp_output_path("x.json"), "x.json.tmp-XXXXXX");
}

TEST(HostileOutput, LongNamesFailBeforeTheReport) {
  const fs::path d = scratch() / "cli_out";
  fs::create_directories(d);
  const std::string name = (d / (std::string(251, 'c') + ".csv")).string();  // 255 bytes; ".tmp" is too long
  for (const std::string flag : {"--json", "--csv"}) {
    const Out r = sh(std::string(GS_BINARY) + " --shapes 64x64x64 --dry-run " + flag + " " + q(name));
    EXPECT_EQ(r.rc, 2) << flag << ": " << r.err;
    EXPECT_TRUE(r.out.empty()) << "nothing printed before the refusal: " << r.out.substr(0, 200);
    EXPECT_NE(r.err.find("temporary file"), std::string::npos) << r.err;
  }
}

// ---- classes 4, 6, 7: the plot script ----

namespace {

// The script on its own, or (binary) `gemmscope plot`.
Out plot(const std::string& input, bool binary) {
  return sh((binary ? std::string(GS_BINARY) + " plot" : "python3 " + q(kScript)) + " " + q(input) + " -o " +
            q((scratch() / "plot_out.svg").string()));
}

void expect_plot_bad_input(const std::string& input, const std::string& needle, bool binary = false) {
  SCOPED_TRACE(input);
  const Out r = plot(input, binary);
  EXPECT_EQ(r.rc, 2) << r.err;
  EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << "one line, no traceback or warnings: " << r.err.substr(0, 2000);
  EXPECT_EQ(r.err.find("Traceback"), std::string::npos);
  EXPECT_EQ(r.err.find("Warning"), std::string::npos);
  EXPECT_NE(r.err.find(needle), std::string::npos) << r.err.substr(0, 2000);
}

}  // namespace

TEST(HostilePlot, EveryInputProblemIsExitTwoOnOneLine) {
  if (std::system("python3 -c '' >/dev/null 2>&1") != 0) GTEST_SKIP() << "no python3";
  const json doc = load("shapes_4.json");
  std::string text = doc.dump();
  const std::string schema = "\"schema\":\"gemmscope.result/1\"";
  text.replace(text.find(schema), schema.size(), "\"schema\":" + nested(100000));
  expect_plot_bad_input(write("p_deep.json", text).string(), "nested deeper than 64 levels");
  json big_int = doc;
  big_int["gemms"][0]["m"] = 1;
  std::string bi = big_int.dump();
  bi.replace(bi.find("\"m\":1"), 5, "\"m\":" + std::string(400, '9'));
  expect_plot_bad_input(write("p_bigint.json", bi).string(), "an integer is too large");
  // Values out of range are the result reader's to refuse: `gemmscope plot` checks them before the script runs.
  json huge = doc;
  for (auto& g : huge["gemms"])
    for (auto& [prec, c] : g["results"]["autocast"].items())
      if (c["status"] == "ok") c["mean_ms"] = 1e308;
  expect_plot_bad_input(write("p_huge.json", huge.dump()).string(), "mean_ms must be from", true);
  json m = doc;
  m["gemms"][0]["m"] = int64_t{1} << 40;
  expect_plot_bad_input(write("p_bigm.json", m.dump()).string(), "\"m\" must be at most", true);
  expect_plot_bad_input(write("p_inf.json", "{\"schema\": 1e400}").string(), "too large for a double");
  expect_plot_bad_input(write("p_nan.json", "{\"schema\": NaN}").string(), "NaN is not a JSON number");
  expect_plot_bad_input(write("p_nul.json", doc.dump() + std::string(1, '\0') + "x").string(), "a NUL byte");
  expect_plot_bad_input(write("p_trail.json", doc.dump() + "{}").string(), "is not JSON");
  expect_plot_bad_input("/dev/zero", "is not a regular file");
  expect_plot_bad_input(scratch().string(), "is a directory");
  const fs::path fifo = scratch() / "plot.fifo";
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  expect_plot_bad_input(fifo.string(), "is not a regular file");
}
