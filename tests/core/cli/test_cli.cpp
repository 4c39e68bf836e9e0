// The gemmscope binary end to end (no GPU needed): bad input exits 2 with one line on stderr and
// writes nothing; --dry-run prints and writes the plan for every preset and flag family.
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "core/run/settings.hpp"
#include "test_util.hpp"

namespace fs = std::filesystem;

namespace {

using gs::test::Out;
using gs::test::slurp;

fs::path tmpdir() {
  static const fs::path d = gs::test::scratch_dir("cli_test");
  return d;
}

Out run(const std::string& args) { return gs::test::run_gemmscope(args, tmpdir()); }

void expect_usage_error(const std::string& args, const std::string& needle) {
  SCOPED_TRACE(args);
  const fs::path j = tmpdir() / "should_not_exist.json";
  fs::remove(j);
  Out r = run(args + " --json " + j.string());
  EXPECT_EQ(r.rc, 2);
  EXPECT_NE(r.err.find(needle), std::string::npos) << r.err;
  EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << "one line on stderr: " << r.err;
  EXPECT_TRUE(r.out.empty()) << r.out;
  EXPECT_FALSE(fs::exists(j)) << "nothing half-written";
}

}  // namespace

TEST(Cli, BadInputClasses) {
  expect_usage_error("--hidden_size 0", "--hidden_size must be > 0");
  expect_usage_error("--hidden_size -8", "must be > 0");
  expect_usage_error("--hidden_size 99999999999999999999", "hidden_size");
  expect_usage_error("--num_attention_heads 30", "does not divide hidden_size");
  expect_usage_error("--num_key_value_heads 5", "does not divide num_attention_heads");
  expect_usage_error("--shapes 1024x0x5", "item 1 '1024x0x5': dimensions must be positive");
  expect_usage_error("--shapes 16,12x5", "item 2 '12x5'");
  expect_usage_error("--model gpt-9", "unknown model preset 'gpt-9'");
  expect_usage_error("--config /nonexistent/config.json", "cannot read config file");
  expect_usage_error("--bogus-flag", "--bogus-flag");
  expect_usage_error("--shapes 1024 --hidden_size 4096", "mutually exclusive");
  expect_usage_error("--model llama-3-8b --config x.json", "mutually exclusive");
  expect_usage_error("--pre-quantize --mode both", "conflicts");
  expect_usage_error("--mode bogus", "--mode must be training, per-gemm, pre-quantized, both or all");
  expect_usage_error("--shapes 1024 --mode autocast-shared", "needs a model plan");
  expect_usage_error("--tensor-parallel 3", "--tensor-parallel 3 does not divide");
  expect_usage_error("--precisions BF16,FP9", "unknown precision 'FP9'");
  expect_usage_error("--num-iters 0", "--num-iters must be between 1 and 100000, got 0");
  expect_usage_error("--repeats 0", "--repeats must be between 1 and 1000, got 0");
  expect_usage_error("--repeats 1001", "--repeats must be between 1 and 1000, got 1001");
  expect_usage_error("--repeats 3 --accuracy-only", "--repeats repeats timed cells: --accuracy-only times nothing");
  expect_usage_error("-o chart.bmp", "must end in .png, .svg or .pdf");
  expect_usage_error("--no-bf16 --no-fp8-current --no-fp8-delayed --no-fp8-block --no-fp8 --no-fp4", "every precision is disabled");
  const fs::path bad = tmpdir() / "bad_config.json";
  std::ofstream(bad) << "{\"hidden_size\": 4096,";
  expect_usage_error("--config " + bad.string(), "not valid JSON");
}

// Integers are plain decimal (CLI11 alone reads 010 as 8 and 0x200 as 512); numbers are finite.
TEST(Cli, NumbersArePlainDecimal) {
  const fs::path j = tmpdir() / "decimal.json";
  Out r = run("--dry-run --num_hidden_layers 010 --sequence_length 0512 --amax-history 016 --json " + j.string());
  ASSERT_EQ(r.rc, 0) << r.err;
  auto doc = nlohmann::json::parse(slurp(j));
  EXPECT_EQ(doc["config"]["num_hidden_layers"], 10);
  EXPECT_EQ(doc["config"]["sequence_length"], 512);
  EXPECT_EQ(doc["recipe_options"]["amax_history_len"], 16);
  const std::string no_prefix = "is not a decimal integer (hex, octal and binary prefixes are not accepted)";
  expect_usage_error("--sequence_length 0x200", "--sequence_length '0x200' " + no_prefix);
  expect_usage_error("--num_hidden_layers 0b11", "--num_hidden_layers '0b11' " + no_prefix);
  expect_usage_error("--vocab_size 0X10", "--vocab_size '0X10' " + no_prefix);
  expect_usage_error("--tp 0x2", "--tensor-parallel '0x2' " + no_prefix);
  expect_usage_error("--hidden_size 4e3", "--hidden_size '4e3' is not a decimal integer");
  expect_usage_error("--hidden_size 4096abc", "--hidden_size '4096abc' is not a decimal integer");
  expect_usage_error("--num-iters 0x10", "--num-iters '0x10' " + no_prefix);
  expect_usage_error("--num-iters 1.5", "--num-iters '1.5' is not a decimal integer");
  expect_usage_error("--num-warmup 0x1", "--num-warmup '0x1' " + no_prefix);
  expect_usage_error("--num-warmup 100001", "--num-warmup must be between 0 and 100000, got 100001");
  expect_usage_error("--num-iters 100001", "--num-iters must be between 1 and 100000, got 100001");
  expect_usage_error("--num-iters 99999999999999999999", "--num-iters '99999999999999999999' is too large");
  expect_usage_error("--device -1", "--device must be >= 0, got -1");
  expect_usage_error("--device 0x1", "--device '0x1' " + no_prefix);
  expect_usage_error("--device 99999999999", "--device 99999999999 is too large");
  expect_usage_error("--seed -1", "--seed must be >= 0, got '-1'");
  expect_usage_error("--seed 18446744073709551616", "--seed '18446744073709551616' is too large");
  expect_usage_error("--seed 0x10", "--seed '0x10' " + no_prefix);
  expect_usage_error("--amax-history 0x10", "--amax-history '0x10' " + no_prefix);
  expect_usage_error("--gpu-warmup nan", "--gpu-warmup 'nan' is not a finite decimal number");
  expect_usage_error("--gpu-warmup inf", "--gpu-warmup 'inf' is not a finite decimal number");
  expect_usage_error("--gpu-warmup 0x5", "--gpu-warmup '0x5' is not a finite decimal number");
  expect_usage_error("--gpu-warmup 1e3", "--gpu-warmup must be between 0 and 600 seconds");
  r = run("--dry-run --shapes 64 --seed 18446744073709551615 --gpu-warmup 2.5 --num-warmup 100000 --device 3 --json " +
          j.string());
  EXPECT_EQ(r.rc, 0) << r.err;
  doc = nlohmann::json::parse(slurp(j));
  EXPECT_EQ(doc["timing"]["seed"].get<uint64_t>(), 18446744073709551615ull);  // the seed is recorded
  EXPECT_EQ(doc["timing"]["warmup"], 100000);
  EXPECT_EQ(doc["timing"]["gpu_warmup_s"], 2.5);
}

// An empty value is an error, not "use the default" (--shapes '' ran the default model).
TEST(Cli, EmptyValuesAreRefused) {
  for (const char* flag : {"--shapes", "--config", "--model", "--precisions", "--csv", "--mode", "--dist", "--timing",
                           "--num-iters", "--seed", "--gpu-warmup", "--l2", "--repeats"})
    expect_usage_error(std::string(flag) + " ''", std::string(flag) + " is empty");
  expect_usage_error("-o ''", "--output is empty");
  expect_usage_error("--sweep --sweep-sizes ''", "--sweep-sizes is empty");
  Out r = run("--shapes 64 --json ''");
  EXPECT_EQ(r.rc, 2);
  EXPECT_EQ(r.err, "gemmscope: --json is empty\n");
  EXPECT_TRUE(r.out.empty()) << r.out;
  r = run("compare " + std::string(GS_TEST_DATA_DIR) + "/compare_a.json " + GS_TEST_DATA_DIR + "/compare_a.json --mode ''");
  EXPECT_EQ(r.rc, 2);
  EXPECT_EQ(r.err, "gemmscope compare: error: --mode is empty\n");
  EXPECT_TRUE(r.out.empty()) << r.out;
  r = run("plot " + std::string(GS_TEST_DATA_DIR) + "/shapes_4.json -o x.svg --baseline ''");
  EXPECT_EQ(r.rc, 2);
  EXPECT_EQ(r.err, "gemmscope plot: error: --baseline is empty\n");
}

// Output paths are refused before anything runs: directories, '/'-terminated paths, places where
// no file can be created, two outputs on one file.
TEST(Cli, OutputPathsAreCheckedFirst) {
  const fs::path d = tmpdir() / "outputs";
  fs::create_directories(d / "sub");
  const std::string dir = d.string();
  expect_usage_error("--csv " + dir, "--csv " + dir + ": is a directory");
  expect_usage_error("--csv " + dir + "/", "ends in '/'");
  expect_usage_error("-o " + dir + "/sub/", "-o " + dir + "/sub/: ends in '/'");
  expect_usage_error("-o " + dir + "/sub", "-o " + dir + "/sub: the chart file must end in .png, .svg or .pdf");
  Out r = run("--shapes 64 --json " + dir + "/sub");
  EXPECT_EQ(r.rc, 2);
  EXPECT_EQ(r.err, "gemmscope: --json " + dir + "/sub: is a directory\n");
  expect_usage_error("--csv /proc/x.csv", "--csv /proc/x.csv: cannot create files in '/proc'");
  expect_usage_error("--csv " + dir + "/missing/x.csv", "cannot create files in '" + dir + "/missing'");
  // the same file twice
  r = run("--shapes 64 --json " + dir + "/x --csv " + dir + "/./x");
  EXPECT_EQ(r.rc, 2);
  EXPECT_NE(r.err.find("--json " + dir + "/x and --csv " + dir + "/./x are the same file"), std::string::npos) << r.err;
  EXPECT_FALSE(fs::exists(d / "x"));
  expect_usage_error("-o " + dir + "/j.png --csv " + dir + "/sub/../j.png", "are the same file");
  r = run("--shapes 64 --json " + dir + "/j.png -o " + dir + "/j.png");
  EXPECT_EQ(r.rc, 2);
  EXPECT_NE(r.err.find("--json " + dir + "/j.png and -o " + dir + "/j.png are the same file"), std::string::npos) << r.err;
  // without --json, -o X writes X.json
  r = run("--shapes 64 -o " + dir + "/c.svg --csv " + dir + "/c.svg.json");
  EXPECT_EQ(r.rc, 2);
  EXPECT_NE(r.err.find("--csv " + dir + "/c.svg.json and the results JSON of -o " + dir + "/c.svg " + dir +
                       "/c.svg.json are the same file"),
            std::string::npos)
      << r.err;
  fs::create_directories(d / "c2.svg.json");
  r = run("--shapes 64 -o " + dir + "/c2.svg");
  EXPECT_EQ(r.rc, 2);
  EXPECT_NE(r.err.find("the results JSON of -o " + dir + "/c2.svg " + dir + "/c2.svg.json: is a directory"),
            std::string::npos)
      << r.err;
  EXPECT_TRUE(r.out.empty());
  for (const auto& e : fs::directory_iterator(d))
    EXPECT_EQ(e.path().filename().string().find(".gemmscope-probe"), std::string::npos) << e.path();
}

// One rule for chart names in `gemmscope -o` and `gemmscope plot -o`: .png/.svg/.pdf in any case,
// after a non-empty name.
TEST(Cli, ChartNamesOneRule) {
  const std::string fixture = std::string(GS_TEST_DATA_DIR) + "/shapes_4.json";
  const fs::path d = tmpdir();
  for (const std::string name : {".png", "x.bmp", "chart", "..svg"}) {
    SCOPED_TRACE(name);
    const std::string path = (d / name).string();
    expect_usage_error("-o " + path, "-o " + path + ": ");
    Out r = run("plot " + fixture + " -o " + path);
    EXPECT_EQ(r.rc, 2);
    EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
    EXPECT_NE(r.err.find("gemmscope plot: error: -o " + path + ": "), std::string::npos) << r.err;
  }
  // upper case is accepted by both (a dry run skips the chart)
  Out r = run("--dry-run --shapes 64 -o " + (d / "UPPER.PNG").string());
  EXPECT_EQ(r.rc, 0) << r.err;
}

// plot and compare report parse errors on one line, like the main command.
TEST(Cli, SubcommandParseErrorsAreOneLine) {
  const std::string a = std::string(GS_TEST_DATA_DIR) + "/compare_a.json";
  struct Case {
    std::string args, message;
  };
  for (const Case& c : std::vector<Case>{
           {"compare", "gemmscope compare: error: A is required (see --help)"},
           {"compare " + a + " " + a + " --bogus", "gemmscope compare: error: unknown option --bogus"},
           {"compare " + a + " " + a + " --threshhold 5%",
            "gemmscope compare: error: unknown option --threshhold (did you mean --threshold?)"},
           {"predict " + a + " --gpus H100", "gemmscope predict: error: unknown option --gpus (did you mean --gpu"},
           {"report " + a + " --jsn x", "gemmscope report: error: unknown option --jsn"},
           {"compare " + a + " " + a + " --threshold", "gemmscope compare: error: --threshold"},
           {"plot", "gemmscope plot: error: "},
           {"plot " + a + " -o x.svg --kind pie", "gemmscope plot: error: --kind must be auto, model, shapes, sweep, "
                                                  "modes, roofline, experts, step or fleet, got 'pie'"},
           {"plot " + a + " -o x.svg --kind modle", "got 'modle' (did you mean model?)"},
           {"plot " + a + " -o x.svg --kynd model", "gemmscope plot: error: unknown option --kynd (did you mean --kind?)"},
           {"plot " + a + " -o x.svg --mode sideways", "gemmscope plot: error: unknown mode 'sideways'"}}) {
    SCOPED_TRACE(c.args);
    Out r = run(c.args);
    EXPECT_EQ(r.rc, 2);
    EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
    EXPECT_NE(r.err.find(c.message), std::string::npos) << r.err;
    EXPECT_TRUE(r.out.empty()) << r.out;
  }
  // --help still prints help and exits 0; compare's lists every mode
  Out r = run("compare --help");
  EXPECT_EQ(r.rc, 0);
  EXPECT_NE(r.out.find("training, per-gemm or pre-quantized"), std::string::npos) << r.out;
  r = run("plot --help");
  EXPECT_EQ(r.rc, 0);
  EXPECT_NE(r.out.find("autocast-shared"), std::string::npos) << r.out;
}

// --sweep-sizes errors name --sweep-sizes; the flag needs --sweep and takes square sizes only.
TEST(Cli, SweepSizes) {
  expect_usage_error("--sweep --sweep-sizes 512,abc", "--sweep-sizes item 2 'abc': 'abc' is not an integer");
  expect_usage_error("--sweep --sweep-sizes 512,,1024", "--sweep-sizes item 2 is empty");
  expect_usage_error("--sweep --sweep-sizes 0", "--sweep-sizes item 1 '0': dimensions must be positive");
  expect_usage_error("--sweep --sweep-sizes 512x512x512", "--sweep-sizes takes square sizes N (e.g. 512,1024), got item 1 '512x512x512'");
  expect_usage_error("--sweep --sweep-sizes 256,512X512X1024", "--sweep-sizes takes square sizes N");
  expect_usage_error("--sweep-sizes 512,1024", "--sweep-sizes needs --sweep");
  expect_usage_error("--shapes 16,abc", "--shapes item 2 'abc'");  // --shapes keeps its name
  const fs::path j = tmpdir() / "sweep.json";
  Out r = run("--dry-run --sweep --sweep-sizes 512,01024 --json " + j.string());
  ASSERT_EQ(r.rc, 0) << r.err;
  auto doc = nlohmann::json::parse(slurp(j));
  ASSERT_EQ(doc["gemms"].size(), 2u);
  EXPECT_EQ(doc["gemms"][1]["m"], 1024);
}

// --pre-quantize with an explicit other --mode was silently pre-quantized; --accuracy-only times nothing.
TEST(Cli, ModeFlagConflicts) {
  expect_usage_error("--pre-quantize --mode autocast", "--pre-quantize conflicts with --mode autocast");
  expect_usage_error("--pre-quantize --mode autocast-shared", "--pre-quantize conflicts with --mode autocast-shared");
  expect_usage_error("--pre-quantize --mode all", "--pre-quantize conflicts with --mode all");
  expect_usage_error("--accuracy-only --mode autocast", "--accuracy-only times nothing: --mode does not apply");
  expect_usage_error("--accuracy-only --mode pre-quantized", "--accuracy-only times nothing: --mode does not apply");
  expect_usage_error("--accuracy-only --pre-quantize", "--accuracy-only times nothing: --pre-quantize does not apply");
  const fs::path j = tmpdir() / "pq.json";
  for (const char* ok : {"--pre-quantize", "--pre-quantize --mode pre-quantized"}) {
    SCOPED_TRACE(ok);
    Out r = run(std::string("--dry-run --shapes 64 ") + ok + " --json " + j.string());
    ASSERT_EQ(r.rc, 0) << r.err;
    EXPECT_EQ(nlohmann::json::parse(slurp(j))["modes"], nlohmann::json({"pre-quantized"}));
  }
  Out r = run("--dry-run --shapes 64 --accuracy-only");
  EXPECT_EQ(r.rc, 0) << r.err;
}

// --gated-mlp and --no-gated-mlp are two flags with their own help lines.
TEST(Cli, GatedMlpFlags) {
  Out r = run("--help");
  ASSERT_EQ(r.rc, 0);
  const std::string help = r.out;
  EXPECT_EQ(help.find("Excludes"), std::string::npos) << help;
  EXPECT_EQ(r.out.find("{false}"), std::string::npos) << r.out;
  EXPECT_EQ(r.out.find(",--no-gated-mlp"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("--gated-mlp,--gated_mlp"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("--no-gated-mlp,--no_gated_mlp"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("Plain MLP: overrides a preset or config.json that gates"), std::string::npos) << r.out;
  const fs::path j = tmpdir() / "gated.json";
  for (const auto& [args, gated] : std::vector<std::pair<std::string, bool>>{{"--model llama-3-8b", true},
                                                                              {"--model llama-3-8b --no-gated-mlp", false},
                                                                              {"--model llama-3-8b --no_gated_mlp", false},
                                                                              {"--gated_mlp", true},
                                                                              {"", false}}) {
    SCOPED_TRACE(args);
    r = run("--dry-run " + args + " --json " + j.string());
    ASSERT_EQ(r.rc, 0) << r.err;
    EXPECT_EQ(nlohmann::json::parse(slurp(j))["config"]["gated_mlp"].get<bool>(), gated);
  }
  expect_usage_error("--gated-mlp --no-gated-mlp", "--gated-mlp and --no-gated-mlp are mutually exclusive");
  expect_usage_error("--no_gated_mlp --gated_mlp", "--gated-mlp and --no-gated-mlp are mutually exclusive");
}

// Every flag of the registry's collectives section is a flag of the CLI (the front end binds them
// by walking the section), and --fp8-param-gather reaches the layout the report prints.
TEST(Cli, EveryCollectivesSettingIsAFlag) {
  const Out help = run("--help");
  ASSERT_EQ(help.rc, 0) << help.err;
  int flags = 0;
  for (const gs::Setting& s : gs::run_settings()) {
    if (s.section != "comm") continue;
    std::vector<std::string> names;
    if (!s.flags.empty()) names.push_back(s.first_flag());
    for (const gs::SettingFlag& f : s.shortcuts) names.push_back(f.flags.substr(0, f.flags.find(',')));
    for (const std::string& n : names) {
      const size_t at = help.out.find("\n  " + n);
      const size_t after = at + 3 + n.size();
      EXPECT_TRUE(at != std::string::npos && after < help.out.size() && (help.out[after] == ' ' || help.out[after] == ','))
          << n << " is not in --help";
      ++flags;
    }
  }
  EXPECT_GE(flags, 8);  // --comm, --comm-only, five of the layout, --comm-iters
  const Out r = run("--model llama-3-8b --comm-only --data-parallel 2 --fp8-param-gather");
  ASSERT_EQ(r.rc, 0) << r.err;
  EXPECT_NE(r.out.find("FP8 weight gathers (--fp8-param-gather)"), std::string::npos) << r.out;
  const Out plain = run("--model llama-3-8b --comm-only --data-parallel 2");
  ASSERT_EQ(plain.rc, 0) << plain.err;
  EXPECT_EQ(plain.out.find("FP8 weight gathers"), std::string::npos) << plain.out;
}

// A report that cannot be written to stdout is an I/O error (74), not success.
TEST(Cli, StdoutWriteErrorsExit74) {
  if (!fs::exists("/dev/full")) GTEST_SKIP() << "no /dev/full";
  const std::string data = GS_TEST_DATA_DIR;
  for (const std::string& args : std::vector<std::string>{"--dry-run", "--dry-run --shapes 64", "--list-models", "--help",
                                 "compare " + data + "/compare_a.json " + data + "/compare_a.json",
                                 "compare " + data + "/compare_a.json " + data + "/compare_b.json"}) {
    SCOPED_TRACE(args);
    const fs::path e = tmpdir() / "stderr_full";
    const std::string cmd = std::string("CUDA_VISIBLE_DEVICES= ") + GS_BINARY + " " + args + " >/dev/full 2>" + e.string();
    const int st = std::system(cmd.c_str());
    ASSERT_TRUE(WIFEXITED(st));
    EXPECT_EQ(WEXITSTATUS(st), 74);
    const std::string err = slurp(e);
    EXPECT_EQ(err.rfind("gemmscope: error writing to stdout", 0), 0u) << err;
    EXPECT_EQ(std::count(err.begin(), err.end(), '\n'), 1) << err;
  }
  // bad input stays 2 (nothing was written to stdout)
  const int st = std::system((std::string(GS_BINARY) + " --bogus >/dev/full 2>/dev/null").c_str());
  EXPECT_EQ(WEXITSTATUS(st), 2);
}

TEST(Cli, NoGpuPrintsThePlanInsteadOfCrashing) {
  const fs::path j = tmpdir() / "no_gpu.json";
  Out r = run("--shapes 1024 --gpu-warmup 0 --json " + j.string());
  EXPECT_EQ(r.rc, 0);
  EXPECT_NE(r.out.find("1024x1024x1024"), std::string::npos);
  EXPECT_NE(r.err.find("measuring needs"), std::string::npos) << r.err;
  // not dressed up as a dry run: the header and the JSON say nothing could be measured
  EXPECT_EQ(r.out.find("dry run, no GPU touched"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("-- NOT a measurement: nothing could be measured ("), std::string::npos) << r.out;
  auto doc = nlohmann::json::parse(slurp(j));
  EXPECT_TRUE(doc["dry_run"].get<bool>());  // no results inside, as the schema says
  EXPECT_FALSE(doc["dry_run_requested"].get<bool>());
  ASSERT_TRUE(doc["why_not_measured"].is_string());
  EXPECT_NE(doc["why_not_measured"].get<std::string>(), "--dry-run");
  EXPECT_FALSE(doc["why_not_measured"].get<std::string>().empty());
  // compare and plot say why the file holds no results
  r = run("compare " + j.string() + " " + j.string());
  EXPECT_EQ(r.rc, 2);
  EXPECT_NE(r.err.find("holds no results to compare: nothing could be measured ("), std::string::npos) << r.err;
  r = run("plot " + j.string() + " -o " + (tmpdir() / "no_gpu.svg").string());
  EXPECT_NE(r.err.find("holds no results to plot: nothing could be measured ("), std::string::npos) << r.err;
  // a requested dry run says so
  r = run("--shapes 1024 --dry-run --json " + j.string());
  EXPECT_EQ(r.rc, 0);
  EXPECT_NE(r.out.find("-- dry run, no GPU touched"), std::string::npos) << r.out;
  doc = nlohmann::json::parse(slurp(j));
  EXPECT_TRUE(doc["dry_run_requested"].get<bool>());
  EXPECT_EQ(doc["why_not_measured"], "--dry-run");
}

TEST(Cli, DryRunDefaultIsTheSeedPlan) {
  const fs::path j = tmpdir() / "plan.json";
  Out r = run("--dry-run --json " + j.string());
  ASSERT_EQ(r.rc, 0) << r.err;
  EXPECT_NE(r.out.find("Fprop 6.39T + Dgrad 6.39T + Wgrad 6.39T = 19.17T"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("Tokens per step: M = 31 x 512 = 15,872"), std::string::npos);
  auto doc = nlohmann::json::parse(slurp(j));
  EXPECT_EQ(doc["schema"], "gemmscope.result/3");
  EXPECT_TRUE(doc["dry_run"].get<bool>());
  EXPECT_EQ(doc["gemms"].size(), 12u);
  EXPECT_EQ(doc["gemms"][8]["pass"], "wgrad");
  EXPECT_FALSE(doc["gemms"][8]["a"]["k_major"].get<bool>());
  EXPECT_GT(doc["gemms"][0]["bytes"]["FP8Current"]["quantize"].get<double>(), 0);
  EXPECT_NEAR(doc["plan"]["flops_full_model"].get<double>() / 1e12, 460.15, 0.01);
}

TEST(Cli, DryRunEveryPresetAndFlagFamily) {
  for (const char* args : {"--model codonfm-5b", "--model llama-3-8b", "--model llama-3-70b", "--model mistral-7b",
                           "--model qwen2.5-7b", "--model llama-3-70b --tensor-parallel 8",
                           "--hidden-size 2048 --intermediate-size 8192 --num-attention-heads 16 --num_key_value_heads 4 --gated-mlp",
                           "--head_dim 256 --num_attention_heads 16", "--vocab_size 32000", "--shapes 8192x8192x8192,1024",
                           "--sweep", "--model llama-3-8b --no-gated-mlp --micro_batch_size 1"}) {
    SCOPED_TRACE(args);
    const fs::path j = tmpdir() / "p.json";
    fs::remove(j);
    Out r = run(std::string("--dry-run ") + args + " --json " + j.string());
    EXPECT_EQ(r.rc, 0) << r.err;
    EXPECT_TRUE(fs::exists(j));
    EXPECT_TRUE(nlohmann::json::accept(slurp(j)));
  }
}

TEST(Cli, ModeAllDependsOnThePlan) {
  const fs::path j = tmpdir() / "modes.json";
  Out r = run("--dry-run --mode all --json " + j.string());
  ASSERT_EQ(r.rc, 0) << r.err;
  auto doc = nlohmann::json::parse(slurp(j));
  EXPECT_EQ(doc["modes"], nlohmann::json({"per-gemm", "training", "pre-quantized"}));
  // Shared: 6 B per element of every tensor once, less the 1.30 GB of amax reads the norm and
  // activation kernels fuse (X of QKV, MLP-up, MLP-down; dY of MLP-up).
  EXPECT_NE(r.out.find("FP8Current  training 6.15 GB, per-gemm 12.42 GB"), std::string::npos) << r.out;
  EXPECT_GT(doc["gemms"][0]["bytes"]["FP8Current"]["quantize_shared"].get<double>(), 0);
  EXPECT_EQ(doc["gemms"][8]["bytes"]["FP8Current"]["quantize_shared"].get<double>(), 0);  // Wgrad reuses copies
  r = run("--dry-run --mode all --no-producer-amax --json " + j.string());
  ASSERT_EQ(r.rc, 0) << r.err;
  EXPECT_NE(r.out.find("FP8Current  training 7.45 GB, per-gemm 12.42 GB"), std::string::npos) << r.out;
  EXPECT_FALSE(nlohmann::json::parse(slurp(j))["recipe_options"]["producer_amax"].get<bool>());
  r = run("--dry-run --shapes 1024 --mode all --json " + j.string());
  ASSERT_EQ(r.rc, 0) << r.err;
  EXPECT_EQ(nlohmann::json::parse(slurp(j))["modes"], nlohmann::json({"per-gemm", "pre-quantized"}));
}

TEST(Cli, ConfigJsonWithOverrides) {
  const fs::path cfg = tmpdir() / "config.json";
  std::ofstream(cfg) << R"({"model_type":"mistral","hidden_size":4096,"intermediate_size":14336,"num_attention_heads":32,
    "num_key_value_heads":8,"num_hidden_layers":32,"vocab_size":32000,"hidden_act":"silu"})";
  const fs::path j = tmpdir() / "cfg_plan.json";
  Out r = run("--dry-run --config " + cfg.string() + " --num_hidden_layers 4 --micro_batch_size 2 --sequence_length 1024 --json " + j.string());
  ASSERT_EQ(r.rc, 0) << r.err;
  auto doc = nlohmann::json::parse(slurp(j));
  EXPECT_EQ(doc["config"]["num_hidden_layers"], 4);
  EXPECT_EQ(doc["config"]["tokens"], 2048);
  EXPECT_TRUE(doc["config"]["gated_mlp"].get<bool>());
  EXPECT_EQ(doc["gemms"].size(), 15u);       // 12 + LM head in 3 passes
  EXPECT_EQ(doc["gemms"][0]["n"], 6144);     // (32 + 2*8) * 128
  EXPECT_EQ(doc["gemms"][2]["n"], 28672);    // 2 * 14336
}

TEST(Cli, ListModels) {
  Out r = run("--list-models");
  EXPECT_EQ(r.rc, 0);
  for (const char* m : {"codonfm-5b", "llama-3-8b", "llama-3-70b", "mistral-7b", "qwen2.5-7b"})
    EXPECT_NE(r.out.find(m), std::string::npos) << m;
}

// --precisions is split by split_list: items are trimmed, an empty item is an unknown precision
// (the message it always had) and a repeated one is named as written.
TEST(Cli, PrecisionListItems) {
  const fs::path j = tmpdir() / "precisions.json";
  Out r = run("--dry-run --shapes 1024 --precisions ' BF16 , fp8current' --json " + j.string());
  ASSERT_EQ(r.rc, 0) << r.err;
  EXPECT_EQ(nlohmann::json::parse(slurp(j))["precisions"], nlohmann::json({"BF16", "FP8Current"}));
  expect_usage_error("--precisions BF16,,FP8Current", "unknown precision ''");
  expect_usage_error("--precisions BF16,", "unknown precision ''");
  expect_usage_error("--precisions 'BF16, bf16'", "--precisions lists bf16 twice");
}

// The dry run says what a measurement would time, and models quantization traffic only for the
// selected precisions (and says when the selected mode would not time it).
TEST(Cli, DryRunFollowsTheSelection) {
  Out r = run("--dry-run --precisions BF16,FP8Block --mode pre-quantized");
  ASSERT_EQ(r.rc, 0) << r.err;
  EXPECT_NE(r.out.find("A measurement would time: BF16, FP8Block in pre-quantized mode\n"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("not timed in pre-quantized mode"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("  FP8Block    training "), std::string::npos) << r.out;
  EXPECT_EQ(r.out.find("  FP8Current  training "), std::string::npos) << r.out;
  Out b = run("--dry-run --precisions BF16,NVFP4 --mode all");
  ASSERT_EQ(b.rc, 0) << b.err;
  EXPECT_NE(b.out.find("BF16, NVFP4 in per-gemm, training, pre-quantized modes (MXFP8/NVFP4 only on compute"),
            std::string::npos) << b.out;
  EXPECT_NE(b.out.find("modelled for FP8Current, FP8Delayed and FP8Block; none selected"), std::string::npos) << b.out;
}

// Plan-table edge cases: a tiny GEMM is not "0.0 GFLOP", a huge one's columns stay apart.
TEST(Cli, DryRunTableHandlesTinyAndHugeShapes) {
  Out r = run("--dry-run --shapes 64x64x64,16777216x16777216x16777216");
  ASSERT_EQ(r.rc, 0) << r.err;
  EXPECT_NE(r.out.find("64x64x64    0.000524"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("16777216x16777216x16777216 9444732965739.3 "), std::string::npos) << r.out;
  EXPECT_EQ(r.out.find("Total FLOPs: 0.000T"), std::string::npos) << r.out;
}

// The seed's early --verify-dgrad (measure Dgrad instead of 2 x Fprop) is accepted: gemmscope
// always measures Dgrad, so the plan is the same with and without it.
TEST(Cli, VerifyDgradIsAcceptedAndChangesNothing) {
  Out a = run("--dry-run --verify-dgrad");
  Out b = run("--dry-run");
  ASSERT_EQ(a.rc, 0) << a.err;
  EXPECT_EQ(a.out, b.out);
  EXPECT_NE(a.out.find("Dgrad  QKV Proj"), std::string::npos) << a.out;
}

// --l2: cold by default for standalone shapes, warm for model plans, either on request; the choice
// is recorded in the JSON (timing.l2) and a bad value is refused.
TEST(Cli, L2DefaultsPerPlanKindAndIsRecorded) {
  expect_usage_error("--shapes 64 --l2 lukewarm", "--l2 must be warm or cold, got 'lukewarm'");
  const auto l2_of = [](const std::string& args) {
    const fs::path j = tmpdir() / "l2.json";
    fs::remove(j);
    const Out r = run(args + " --dry-run -q --json " + j.string());
    EXPECT_EQ(r.rc, 0) << r.err;
    return nlohmann::json::parse(slurp(j))["timing"]["l2"].get<std::string>();
  };
  EXPECT_EQ(l2_of("--shapes 1024"), "cold");
  EXPECT_EQ(l2_of("--sweep --sweep-sizes 512"), "cold");
  EXPECT_EQ(l2_of("--shapes 1024 --l2 warm"), "warm");
  EXPECT_EQ(l2_of("--model llama-3-8b"), "warm");
  EXPECT_EQ(l2_of("--model llama-3-8b --l2 cold"), "cold");
}

// --step-other-ms: model plans only, a plain non-negative number of ms, recorded in the JSON with
// the rate it gives every GEMM, and named in the text report's header.
TEST(Cli, StepOtherMsIsCheckedAndRecorded) {
  expect_usage_error("--shapes 1024 --step-other-ms 1", "--step-other-ms needs a model plan");
  expect_usage_error("--step-other-ms -1", "--step-other-ms");
  expect_usage_error("--step-other-ms 1e9", "--step-other-ms must be between 0 and 10000 ms per layer");
  expect_usage_error("--step-other-ms ''", "--step-other-ms is empty");
  const fs::path j = tmpdir() / "step.json";
  fs::remove(j);
  Out r = run("--dry-run -q --step-other-ms 2.5 --json " + j.string());
  ASSERT_EQ(r.rc, 0) << r.err;
  const auto doc = nlohmann::json::parse(slurp(j));
  EXPECT_EQ(doc["timing"]["step_other_ms"], 2.5);
  EXPECT_GT(doc["timing"]["step_gap_ms_per_gflop"].get<double>(), 0);
  fs::remove(j);
  r = run("--dry-run -q --json " + j.string());
  ASSERT_EQ(r.rc, 0) << r.err;
  EXPECT_FALSE(nlohmann::json::parse(slurp(j))["timing"].contains("step_other_ms"));
  r = run("--dry-run --step-other-ms 2.5");
  ASSERT_EQ(r.rc, 0) << r.err;
  EXPECT_NE(r.out.find("memory-bound kernels for 2.5 ms (--step-other-ms)"), std::string::npos) << r.out;
  r = run("--dry-run --step-other-ms 2.5 --step-context none");
  ASSERT_EQ(r.rc, 0) << r.err;
  EXPECT_NE(r.out.find("Step context: 2.5 ms of memory-bound work per layer"), std::string::npos) << r.out;
}

// Every enumerated flag value is accepted in any case (the README promises it) and lands in the
// result as its canonical name.
TEST(Cli, EnumValuesInAnyCase) {
  const auto dir = gs::test::scratch_dir("cli_case");
  const std::string f = (dir / "r.json").string();
  const Out r = gs::test::run_gemmscope(
      "--dry-run --block-fp8-format HYBRID --l2 COLD --fp8-block-scales FP32 --algo AUTOTUNE:4 --grouped STREAMS:2 "
      "--fp8-format E4M3 --fp8-accum SPLIT --lm-head-precision SAME --grouped-quant Per-Expert --wgrad-output BF16 "
      "--mode Pre-Quantized --json " + f,
      dir);
  ASSERT_EQ(r.rc, 0) << r.err;
  const nlohmann::json j = nlohmann::json::parse(slurp(f));
  EXPECT_EQ(j["recipe_options"]["block_fp8_format"], "hybrid");
  EXPECT_EQ(j["recipe_options"]["fp8_block_pow2_scales"], false);
  EXPECT_EQ(j["recipe_options"]["fp8_format"], "e4m3");
  EXPECT_EQ(j["recipe_options"]["fp8_accumulation"], "split");
  EXPECT_EQ(j["recipe_options"]["lm_head_precision"], "same");
  EXPECT_EQ(j["recipe_options"]["grouped_quant"], "per-expert");
  EXPECT_EQ(j["recipe_options"]["wgrad_output"], "bf16");
  EXPECT_EQ(j["timing"]["l2"], "cold");
  EXPECT_EQ(j["gemm_options"]["algo"], "autotune:4");
  EXPECT_EQ(j["modes"][0], "pre-quantized");
}
