// First contact (issue 13): what a new user meets on a CPU machine. Defaults that measure
// Transformer Engine's training schedule with a BF16 LM head, a dry run that predicts N/A cells,
// config.json read as Hugging Face means it, errors that help, and the `report` subcommand.
// Runs the built binary (no GPU: dry runs and inputs refused before any device is touched) and
// the core printers directly.
#include <gtest/gtest.h>

#include <algorithm>
#include <sys/wait.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>

#include "core/gpu/arch_policy.hpp"
#include "core/analysis/compare.hpp"
#include "core/util/error.hpp"
#include "core/model/model_config.hpp"
#include "core/plan/plan.hpp"
#include "core/recipes/recipe.hpp"
#include "core/report/report.hpp"
#include "core/run/runner.hpp"
#include "test_util.hpp"

namespace fs = std::filesystem;
using nlohmann::json;

namespace {

using gs::test::Out;
using gs::test::slurp;

fs::path dir() {
  static const fs::path d = gs::test::scratch_dir("first_contact");
  return d;
}

Out run(const std::string& args) { return gs::test::run_gemmscope(args, dir()); }

json dry_json(const std::string& args) {
  const fs::path j = dir() / "dry.json";
  fs::remove(j);
  const Out r = run("--dry-run " + args + " --json " + j.string());
  EXPECT_EQ(r.rc, 0) << args << "\n" << r.err;
  return r.rc == 0 ? json::parse(slurp(j)) : json();
}

fs::path write(const std::string& rel, const std::string& text) {
  const fs::path p = dir() / rel;
  fs::create_directories(p.parent_path());
  std::ofstream(p) << text;
  return p;
}

const char* kGpt2 = R"({"activation_function":"gelu_new","model_type":"gpt2","n_embd":768,"n_head":12,
  "n_inner":null,"n_layer":12,"n_positions":1024,"vocab_size":50257})";

}  // namespace

// ---- 1. Defaults answer "what will training get" --------------------------------------------

TEST(FirstContact, ModelPlansDefaultToTheTrainingScheduleShapesToPerGemm) {
  EXPECT_EQ(dry_json("")["modes"], json({"training"}));
  EXPECT_EQ(dry_json("--model llama-3-8b")["modes"], json({"training"}));
  EXPECT_EQ(dry_json("--shapes 1024")["modes"], json({"per-gemm"}));
  EXPECT_EQ(dry_json("--sweep --sweep-sizes 512")["modes"], json({"per-gemm"}));
  EXPECT_EQ(dry_json("--mode both")["modes"], json({"training", "pre-quantized"}));
  EXPECT_EQ(dry_json("--shapes 1024 --mode both")["modes"], json({"per-gemm", "pre-quantized"}));
  const Out r = run("--dry-run");
  EXPECT_NE(r.out.find("in training mode"), std::string::npos) << r.out;
}

TEST(FirstContact, OldModeNamesAndAnyCaseAreAccepted) {
  EXPECT_EQ(dry_json("--mode autocast")["modes"], json({"per-gemm"}));
  EXPECT_EQ(dry_json("--mode autocast-shared")["modes"], json({"training"}));
  EXPECT_EQ(dry_json("--mode Autocast")["modes"], json({"per-gemm"}));
  EXPECT_EQ(dry_json("--mode TRAINING")["modes"], json({"training"}));
  EXPECT_EQ(dry_json("--mode Per-GEMM")["modes"], json({"per-gemm"}));
  EXPECT_EQ(dry_json("--pre-quantize --mode Pre-Quantized")["modes"], json({"pre-quantized"}));
  const Out r = run("--dry-run --shapes 1024 --mode training");
  EXPECT_EQ(r.rc, 2);
  EXPECT_NE(r.err.find("needs a model plan"), std::string::npos) << r.err;
  EXPECT_EQ(gs::mode_from_string("Autocast-Shared"), gs::Mode::Training);
  EXPECT_STREQ(gs::to_string(gs::Mode::Training), "training");
  EXPECT_STREQ(gs::to_string(gs::Mode::PerGemm), "per-gemm");
}

// The recipe layer decides the LM head's precision; the report says so.
TEST(FirstContact, LmHeadRunsInBf16ByDefault) {
  gs::ModelConfig c = gs::find_preset("llama-3-8b").config;
  const gs::Plan p = gs::build_model_plan(c);
  gs::RecipeOptions o;
  int lm = 0;
  for (const gs::Gemm& g : p.gemms) {
    const gs::Recipe r = gs::make_recipe(gs::Precision::FP8Current, g, o);
    if (g.op == gs::Op::LmHead) {
      ++lm;
      EXPECT_EQ(r.precision, gs::Precision::BF16);
      EXPECT_EQ(r.a.format, gs::ElemFormat::BF16);
    } else {
      EXPECT_EQ(r.precision, gs::Precision::FP8Current);
    }
  }
  EXPECT_EQ(lm, 3);
  o.lm_head_bf16 = false;
  for (const gs::Gemm& g : p.gemms)
    EXPECT_EQ(gs::make_recipe(gs::Precision::FP8Current, g, o).precision, gs::Precision::FP8Current);

  EXPECT_EQ(dry_json("--model llama-3-8b")["recipe_options"]["lm_head_precision"], "bf16");
  EXPECT_EQ(dry_json("--model llama-3-8b --lm-head-precision SAME")["recipe_options"]["lm_head_precision"], "same");
  const Out bad = run("--dry-run --lm-head-precision fp8");
  EXPECT_EQ(bad.rc, 2);
  EXPECT_NE(bad.err.find("--lm-head-precision must be bf16 or same"), std::string::npos) << bad.err;
  const Out r = run("--dry-run --model llama-3-8b");
  EXPECT_NE(r.out.find("LM Head: BF16 in every column"), std::string::npos) << r.out;
}

// A result written before the option existed ran the LM head in each column's precision.
TEST(FirstContact, OldResultsReadTheLmHeadAsSame) {
  json doc = json::parse(slurp(std::string(GS_TEST_DATA_DIR) + "/model_lmhead_b200.json"));
  if (doc["recipe_options"].is_object()) doc["recipe_options"].erase("lm_head_precision");
  else doc["recipe_options"] = json::object();
  EXPECT_FALSE(gs::from_json(doc).recipe_options.lm_head_bf16);
  doc["recipe_options"]["lm_head_precision"] = "bf16";
  EXPECT_TRUE(gs::from_json(doc).recipe_options.lm_head_bf16);
  doc["recipe_options"]["lm_head_precision"] = "fp8";
  EXPECT_THROW(gs::from_json(doc), gs::UsageError);
}

// ---- 2. Dry run predicts N/A cells; Megatron vocabulary padding --------------------------------

// GPT-2's vocabulary (50257) with the LM head in each column's precision: Megatron-LM (the default
// step context, te) pads it to 50304 at TP 1 too, which FP8 and NVFP4 can run; Hugging Face /
// PyTorch (eager) pads nothing, so the FP8 and NVFP4 LM head cells are predicted N/A, with the rule.
TEST(FirstContact, DryRunPredictsNaCellsWithTheReason) {
  const fs::path cfg = write("gpt2/config.json", kGpt2);
  Out r = run("--dry-run --config " + cfg.string() + " --lm-head-precision same");
  ASSERT_EQ(r.rc, 0) << r.err;
  EXPECT_NE(r.out.find("vocab=50257 (padded to 50304 = a multiple of 128 x TP 1, Megatron-LM's"), std::string::npos)
      << r.out;
  EXPECT_NE(r.out.find("Predicted N/A cells: none"), std::string::npos) << r.out;
  r = run("--dry-run --config " + cfg.string() + " --lm-head-precision same --step-context eager");
  ASSERT_EQ(r.rc, 0) << r.err;
  EXPECT_NE(r.out.find(", vocab=50257\n"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("Predicted N/A: FP8Current, FP8Delayed, FP8Block, MXFP8: 3 of 15 GEMMs, FP8 GEMMs need M, K and "
                       "N multiples of 16: Fprop LM Head 1024x768x50257, Dgrad LM Head 1024x50257x768, Wgrad LM Head "
                       "50257x1024x768"),
            std::string::npos)
      << r.out;
  EXPECT_NE(r.out.find("Predicted N/A: NVFP4: 3 of 15 GEMMs, NVFP4 GEMMs need M, K and N multiples of 32"),
            std::string::npos)
      << r.out;
  // With the default BF16 LM head nothing is N/A.
  r = run("--dry-run --config " + cfg.string());
  EXPECT_NE(r.out.find("Predicted N/A cells: none"), std::string::npos) << r.out;
  // Only the selected precisions are predicted.
  r = run("--dry-run --config " + cfg.string() + " --lm-head-precision same --step-context eager --precisions BF16,NVFP4");
  EXPECT_EQ(r.out.find("Predicted N/A: FP8Current"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("Predicted N/A: NVFP4"), std::string::npos) << r.out;
}

TEST(FirstContact, VocabularyPaddedUnderTensorParallelism) {
  const fs::path cfg = write("gpt2/config.json", kGpt2);
  const json doc = dry_json("--config " + cfg.string() + " --tp 2");
  EXPECT_EQ(doc["config"]["vocab_size"], 50257);
  EXPECT_EQ(doc["config"]["vocab_size_padded"], 50432);
  bool lm = false;
  for (const json& g : doc["gemms"])
    if (g["op"] == "lm_head" && g["pass"] == "fprop") {
      lm = true;
      EXPECT_EQ(g["n"], 25216);  // 50432 / 2
    }
  EXPECT_TRUE(lm);
  const Out r = run("--dry-run --config " + cfg.string() + " --tp 2");
  EXPECT_NE(r.out.find("vocab=50257 (padded to 50432 = a multiple of 128 x TP 2, Megatron-LM's make_vocab_size_divisible_by)"),
            std::string::npos)
      << r.out;
  EXPECT_EQ(dry_json("--config " + cfg.string() + " --tp 2 --make-vocab-size-divisible-by 64")["config"]
                    ["vocab_size_padded"],
            50304);
  // A padded plan reads back from its JSON with the same shapes.
  const gs::RunResult back = gs::from_json(doc);
  EXPECT_EQ(gs::padded_vocab(*back.plan.config), 50432);
}

// ---- 3. config.json as Hugging Face means it ----------------------------------------------

TEST(FirstContact, ConfigRecordsItsFileNameAndBatchOrigins) {
  const fs::path cfg = write("Llama-3.1-8B/config.json", R"({"model_type":"llama","hidden_size":4096,
    "intermediate_size":14336,"num_attention_heads":32,"num_key_value_heads":8,"num_hidden_layers":32,
    "vocab_size":128256,"max_position_embeddings":131072,"hidden_act":"silu"})");
  json doc = dry_json("--config " + cfg.string() + " --micro_batch_size 2");
  EXPECT_EQ(doc["config"]["name"], "Llama-3.1-8B [llama, hidden 4096, 32 layers]");
  EXPECT_EQ(doc["config"]["source"], cfg.string());
  EXPECT_EQ(doc["config"]["micro_batch_from"], "--micro_batch_size");
  EXPECT_EQ(doc["config"]["sequence_from"], "gemmscope default");
  const Out r = run("--dry-run --config " + cfg.string() + " --micro_batch_size 2");
  EXPECT_NE(r.out.find("Tokens per step: M = 2 x 4096 = 8,192 (micro-batch: --micro_batch_size; sequence: gemmscope "
                       "default)"),
            std::string::npos)
      << r.out;
  EXPECT_NE(r.out.find("Config file: " + cfg.string()), std::string::npos) << r.out;
}

TEST(FirstContact, CustomModelSaysWhereItsBatchCameFrom) {
  json doc = dry_json("--hidden_size 2048 --num_attention_heads 16");
  EXPECT_EQ(doc["config"]["name"], "custom");
  EXPECT_EQ(doc["config"]["micro_batch_size"], 31);
  EXPECT_EQ(doc["config"]["micro_batch_from"], "default of codonfm-5b, the default config");
  const Out r = run("--dry-run --hidden_size 2048 --num_attention_heads 16 --sequence_length 1024");
  EXPECT_NE(r.out.find("(micro-batch: default of codonfm-5b, the default config; sequence: --sequence_length)"),
            std::string::npos)
      << r.out;
}

TEST(FirstContact, MultimodalConfigWithoutHeadsIsPlannedWithNotes) {
  const fs::path cfg = write("gemma-3-4b-it/config.json", R"({"architectures":["Gemma3ForConditionalGeneration"],
    "model_type":"gemma3","text_config":{"hidden_size":2560,"intermediate_size":10240,"model_type":"gemma3_text",
    "num_hidden_layers":34,"sliding_window":1024}})");
  const json doc = dry_json("--config " + cfg.string());
  EXPECT_EQ(doc["config"]["num_attention_heads"], 8);
  EXPECT_EQ(doc["config"]["num_key_value_heads"], 4);
  EXPECT_EQ(doc["config"]["head_dim"], 256);
  // Four class defaults, and the sliding window (attention rows planned as full causal attention).
  EXPECT_EQ(doc["config"]["notes"].size(), 5u);
  const gs::RunResult back = gs::from_json(doc);
  ASSERT_EQ(back.plan.config->notes.size(), 5u);
  EXPECT_EQ(std::count_if(back.plan.config->notes.begin(), back.plan.config->notes.end(),
                          [](const std::string& n) {
                            return n.find("'sliding_window' = 1024 in the layers its family applies it to") !=
                                   std::string::npos;
                          }),
            1);
  const Out r = run("--dry-run --config " + cfg.string());
  EXPECT_NE(r.out.find("Config note: " + cfg.string() + " has no 'num_attention_heads': Gemma3TextConfig's default 8 used"),
            std::string::npos)
      << r.out;
}

// ---- 6. Errors that help ---------------------------------------------------------------------

TEST(FirstContact, UnknownFlagsGetSuggestionsInTheOrderTyped) {
  Out r = run("--dry-run --hidden-szie 4096 --batch-size 2");
  EXPECT_EQ(r.rc, 2);
  EXPECT_EQ(r.err,
            "gemmscope: unknown options --hidden-szie (did you mean --hidden-size?), --batch-size (did you mean "
            "--micro_batch_size?)\n");
  r = run("--dry-run --batch-size 2 --hidden_szie 4096");
  EXPECT_EQ(r.err,
            "gemmscope: unknown options --batch-size (did you mean --micro_batch_size?), --hidden_szie (did you mean "
            "--hidden_size?)\n");
  r = run("--dry-run --presicions BF16");
  EXPECT_NE(r.err.find("unknown option --presicions (did you mean --precisions?)"), std::string::npos) << r.err;
  r = run("--dry-run --zzzzzz");
  EXPECT_EQ(r.err, "gemmscope: unknown option --zzzzzz\n");
  r = run("--dry-run stray");
  EXPECT_EQ(r.err, "gemmscope: unexpected argument 'stray'\n");
  EXPECT_TRUE(r.out.empty());
}

TEST(FirstContact, UnreadableConfigSaysWhy) {
  Out r = run("--dry-run --config " + (dir() / "nope" / "config.json").string());
  EXPECT_EQ(r.rc, 2);
  EXPECT_NE(r.err.find("no such file"), std::string::npos) << r.err;
  if (::geteuid() != 0) {
    const fs::path p = write("locked/config.json", kGpt2);
    fs::permissions(p, fs::perms::none);
    r = run("--dry-run --config " + p.string());
    EXPECT_EQ(r.rc, 2);
    EXPECT_NE(r.err.find("permission denied"), std::string::npos) << r.err;
    fs::permissions(p, fs::perms::owner_read | fs::perms::owner_write);
  }
}

TEST(FirstContact, NamesAreCaseInsensitiveEverywhere) {
  EXPECT_EQ(dry_json("--model Llama-3-8B")["config"]["name"], "llama-3-8b");
  EXPECT_EQ(dry_json("--fp8-format E4M3")["recipe_options"]["fp8_format"], "e4m3");
  EXPECT_EQ(dry_json("--fp8-accum Split")["recipe_options"]["fp8_accumulation"], "split");
  EXPECT_EQ(dry_json("--precisions bf16,Fp8Current")["precisions"], json({"BF16", "FP8Current"}));
  const Out r = run("--dry-run --accuracy --dist Outliers");
  EXPECT_EQ(r.rc, 0) << r.err;
}

TEST(FirstContact, NoFp8KeepsTheSeedMeaningAndBf16OnlyExists) {
  const json no_fp8 = dry_json("--no-fp8");
  EXPECT_EQ(no_fp8["precisions"], json({"BF16", "FP8Current", "FP8Delayed", "FP8Block", "NVFP4"}));
  EXPECT_EQ(dry_json("--bf16-only")["precisions"], json({"BF16"}));
  Out r = run("--dry-run --bf16-only --precisions FP8Current");
  EXPECT_EQ(r.rc, 2);
  EXPECT_NE(r.err.find("--bf16-only and --precisions are mutually exclusive"), std::string::npos) << r.err;
  r = run("--help");
  const size_t no_fp8_help = r.out.find("--no-fp8");
  ASSERT_NE(no_fp8_help, std::string::npos);
  EXPECT_NE(r.out.find("the seed tool's meaning of --no-fp8"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("--bf16-only"), std::string::npos) << r.out;
}

TEST(FirstContact, CompareWarnsAboutDifferentGpusAndSpread) {
  const std::string a_path = std::string(GS_TEST_DATA_DIR) + "/compare_a.json";
  json a = gs::read_json_file(a_path);
  json b = a;
  b["device"]["name"] = "Another GPU";
  gs::CompareResult r = gs::compare_results(a, b);
  EXPECT_TRUE(r.different_gpus);
  EXPECT_NE(gs::format_compare_text(r).find("warning: A and B ran on different GPUs"), std::string::npos);
  EXPECT_NE(gs::format_compare_markdown(r).find("**warning:** A and B ran on different GPUs"), std::string::npos);
  EXPECT_FALSE(gs::compare_results(a, a).different_gpus);
  // One GEMM 10% slower: a regression at 5%, unless the cells' own spread covers the change.
  const std::string mode = a["modes"][0];
  json& ca = a["gemms"][0]["results"][mode]["BF16"];
  json& cb = b["gemms"][0]["results"][mode]["BF16"];
  cb["mean_ms"] = ca["mean_ms"].get<double>() * 1.10;
  ca["stdev_ms"] = cb["stdev_ms"] = ca["mean_ms"].get<double>() * 0.001;
  r = gs::compare_results(a, b);
  EXPECT_EQ(r.modes[0].gemms[0].cells[0].verdict, gs::Verdict::Regression);
  ca["stdev_ms"] = cb["stdev_ms"] = ca["mean_ms"].get<double>() * 0.06;  // 0.12 together > 0.10
  r = gs::compare_results(a, b);
  EXPECT_EQ(r.modes[0].gemms[0].cells[0].verdict, gs::Verdict::Same);
  EXPECT_TRUE(r.modes[0].gemms[0].cells[0].within_noise);
  EXPECT_NE(gs::format_compare_text(r).find("1.100 ~"), std::string::npos) << gs::format_compare_text(r);
  // --threshold: one meaning each
  const Out t = run("compare " + a_path + " " + a_path + " --threshold 5");
  EXPECT_EQ(t.rc, 2);
  EXPECT_NE(t.err.find("did you mean 5%?"), std::string::npos) << t.err;
  EXPECT_EQ(run("compare " + a_path + " " + a_path + " --threshold 0.05").rc, 0);
  EXPECT_EQ(run("compare " + a_path + " " + a_path + " --mode Per-Gemm").rc, 0);
}

// ---- 5. Reports for people -----------------------------------------------------------------

// `gemmscope report` re-renders the text a run printed, from its JSON.
TEST(FirstContact, ReportSubcommandRerendersTheText) {
  const fs::path cfg = write("gpt2/config.json", kGpt2);
  const fs::path j = dir() / "plan_for_report.json";
  const Out dry = run("--dry-run --config " + cfg.string() + " --tp 2 --lm-head-precision same --json " + j.string());
  ASSERT_EQ(dry.rc, 0) << dry.err;
  const Out rep = run("report " + j.string());
  EXPECT_EQ(rep.rc, 0) << rep.err;
  EXPECT_EQ(rep.out, dry.out);
  // A measured run: the same text as the printer gives for the parsed file.
  const std::string fixture = std::string(GS_TEST_DATA_DIR) + "/model_5b_both_modes.json";
  const Out m = run("report " + fixture);
  EXPECT_EQ(m.rc, 0) << m.err;
  EXPECT_EQ(m.out, gs::render_text(gs::from_json(gs::read_json_file(fixture), fixture)));
  EXPECT_NE(m.out.find("Throughput per GEMM (TFLOP/s):"), std::string::npos);
  // --markdown: the same report document as markdown; a dry run's plan has no markdown form.
  const Out md = run("report " + fixture + " --markdown");
  EXPECT_EQ(md.rc, 0) << md.err;
  EXPECT_EQ(md.out, gs::render_markdown(gs::from_json(gs::read_json_file(fixture), fixture)));
  EXPECT_EQ(md.out.rfind("## GEMM Benchmark (Model Config Mode) on ", 0), 0u) << md.out;
  EXPECT_NE(md.out.find("### Throughput per GEMM (TFLOP/s):"), std::string::npos) << md.out;
  const Out dry_md = run("report " + j.string() + " --markdown");
  EXPECT_EQ(dry_md.rc, 2);
  EXPECT_NE(dry_md.err.find("--markdown: " + j.string() + " is a dry run"), std::string::npos) << dry_md.err;
  EXPECT_TRUE(dry_md.out.empty()) << dry_md.out;
  const Out bad = run("report " + (dir() / "missing.json").string());
  EXPECT_EQ(bad.rc, 2);
  EXPECT_NE(bad.err.find("gemmscope report: error: cannot read"), std::string::npos) << bad.err;
}

// Summary before detail, measured (not estimated) speedups, every table inside its separators.
TEST(FirstContact, TextReportSummaryFirstAndTablesFitTheirRules) {
  const std::string fixture = std::string(GS_TEST_DATA_DIR) + "/model_5b_both_modes.json";
  const std::string text = gs::render_text(gs::from_json(gs::read_json_file(fixture), fixture));
  EXPECT_EQ(text.find("Estimated"), std::string::npos);
  const size_t modes = text.find("Per-gemm vs Pre-quantized (full model: every GEMM of one training step, 24 layers):");
  const size_t per_layer = text.find("GEMM Time of One Training Step (per-gemm mode): the full model, then per layer:");
  const size_t speedups =
      text.find("Measured GEMM Speedups (full model: every GEMM of one training step, per-gemm mode):");
  const size_t fprop = text.find("Fprop Shapes:");
  ASSERT_NE(modes, std::string::npos) << text;
  ASSERT_NE(per_layer, std::string::npos);
  ASSERT_NE(speedups, std::string::npos) << text;
  EXPECT_LT(modes, per_layer);
  EXPECT_LT(per_layer, speedups);
  EXPECT_LT(speedups, fprop);
  // Every line between two rules is no wider than the rules around it.
  std::istringstream in(text);
  std::string line;
  size_t rule = 0;
  int checked = 0;
  while (std::getline(in, line)) {
    if (line == "Notes:") break;  // the notes list is wrapped text, not a table
    const bool is_rule = !line.empty() && line.find_first_not_of(line[0]) == std::string::npos &&
                         (line[0] == '-' || line[0] == '=');
    if (is_rule) {
      rule = line.size();
      continue;
    }
    if (rule && !line.empty() && line.rfind("Mode:", 0) != 0 && line.rfind("Model Config", 0) != 0 &&
        line.rfind("Tokens", 0) != 0 && line.rfind("Timing", 0) != 0 && line.rfind("BF16 quantizes", 0) != 0 &&
        line.rfind("Spd =", 0) != 0 && line.find("GEMM Benchmark") == std::string::npos) {
      EXPECT_LE(line.size(), rule) << line;
      ++checked;
    }
  }
  EXPECT_GT(checked, 20);
}

TEST(FirstContact, PlotOnAccuracyOnlyOrDryRunSaysNothingToChart) {
  const fs::path j = dir() / "dry_for_plot.json";
  ASSERT_EQ(run("--dry-run --json " + j.string()).rc, 0);
  Out r = run("plot " + j.string() + " -o " + (dir() / "x.svg").string());
  EXPECT_EQ(r.rc, 2);
  EXPECT_NE(r.err.find("is a dry run: it holds no results to plot"), std::string::npos) << r.err;
  json acc = gs::read_json_file(std::string(GS_SOURCE_DIR) + "/docs/results/h100_acc_normal.json");
  ASSERT_TRUE(acc["modes"].empty());
  const fs::path a = dir() / "acc_only.json";
  std::ofstream(a) << acc.dump();
  r = run("plot " + a.string() + " -o " + (dir() / "x.svg").string());
  if (r.rc == 3) GTEST_SKIP() << "no Python for the chart script: " << r.err;
  EXPECT_EQ(r.rc, 2);
  EXPECT_NE(r.err.find("is an --accuracy-only run: it holds errors, no times, so there is nothing to chart"),
            std::string::npos)
      << r.err;
}

// ---- 8. The golden first screen of a dry run for a config file --------------------------------

TEST(FirstContact, GoldenDryRunFirstScreenForAConfigFile) {
  const fs::path d = dir() / "golden";
  fs::create_directories(d / "Qwen2.5-7B");
  std::ofstream(d / "Qwen2.5-7B" / "config.json") << R"({"architectures":["Qwen2ForCausalLM"],"hidden_act":"silu",
    "hidden_size":3584,"intermediate_size":18944,"max_position_embeddings":131072,"model_type":"qwen2",
    "num_attention_heads":28,"num_hidden_layers":28,"num_key_value_heads":4,"vocab_size":152064})";
  // Run from the directory so the printed path does not depend on where the tests run.
  const fs::path o = dir() / "golden_stdout";
  const std::string cmd = "cd " + d.string() + " && CUDA_VISIBLE_DEVICES= " + GS_BINARY +
                          " --dry-run --config Qwen2.5-7B/config.json --micro_batch_size 2 --tp 2 > " + o.string();
  ASSERT_EQ(std::system(cmd.c_str()), 0);
  std::istringstream in(slurp(o));
  std::string got, line;
  for (int i = 0; i < 24 && std::getline(in, line); ++i) got += line + "\n";
  const std::string path = std::string(GS_TEST_DATA_DIR) + "/golden_dry_run_config.txt";
  if (std::getenv("GS_UPDATE_GOLDEN")) {
    std::ofstream(path) << got;
    FAIL() << "rewrote " << path << ": review the diff, then run again without GS_UPDATE_GOLDEN";
  }
  const std::string want = slurp(path);
  ASSERT_FALSE(want.empty()) << "missing " << path << " (run with GS_UPDATE_GOLDEN=1 once and review it)";
  EXPECT_EQ(got, want);
}

// Charts show the spread (error bars of ±1 stdev, gid err:...) and a legend that does not suggest
// Wgrad is unmeasured; old mode names in a file still chart.
TEST(FirstContact, ChartsShowTheSpread) {
  const std::string fixture = std::string(GS_TEST_DATA_DIR) + "/model_5b_autocast.json";
  const fs::path svg = dir() / "spread.svg";
  Out r = run("plot " + fixture + " -o " + svg.string());
  if (r.rc == 3) GTEST_SKIP() << "no Python with matplotlib: " << r.err;
  ASSERT_EQ(r.rc, 0) << r.err;
  const std::string s = slurp(svg);
  EXPECT_NE(s.find("id=\"err:BF16\""), std::string::npos);
  EXPECT_NE(s.find("all passes measured"), std::string::npos);
  EXPECT_EQ(s.find("(solid, measured)"), std::string::npos);
  const fs::path shapes = dir() / "spread_shapes.svg";
  r = run("plot " + std::string(GS_TEST_DATA_DIR) + "/shapes_4.json -o " + shapes.string() + " --mode AUTOCAST");
  ASSERT_EQ(r.rc, 0) << r.err;
  EXPECT_NE(slurp(shapes).find("id=\"err:BF16:0\""), std::string::npos);
}

// Older GPUs: BF16 runs from Ampere (8.0), FP8 per-tensor from Ada (8.9), FP8 block scaling from
// Hopper (9.0), MXFP8/NVFP4 from Blackwell (10.0); a precision below its floor is skipped with a note.
TEST(FirstContact, PrecisionFloorsByComputeCapability) {
  EXPECT_EQ(gs::ArchPolicy::min_cc(gs::Precision::BF16), 80);
  EXPECT_EQ(gs::ArchPolicy::min_cc(gs::Precision::FP8Current), 89);
  EXPECT_EQ(gs::ArchPolicy::min_cc(gs::Precision::FP8Delayed), 89);
  EXPECT_EQ(gs::ArchPolicy::min_cc(gs::Precision::FP8Block), 90);
  EXPECT_EQ(gs::ArchPolicy::min_cc(gs::Precision::MXFP8), 100);
  EXPECT_EQ(gs::ArchPolicy::min_cc(gs::Precision::NVFP4), 100);
  // The default build carries sm_80 and sm_89 machine code.
  std::ifstream cm(std::string(GS_SOURCE_DIR) + "/CMakeLists.txt");
  std::stringstream ss;
  ss << cm.rdbuf();
  EXPECT_NE(ss.str().find("\"80-real;89-real;90-real;100-real;90-virtual\""), std::string::npos);
}

// Without an NVIDIA driver the CUDA runtime says "CUDA driver version is insufficient for CUDA
// runtime version"; a CUDA build asks the loader for libcuda.so.1 first and says what is missing
// (make_engine in src/cuda/engine_cuda.cu calls this; the CLI prints "no GPU measurement: ...").
TEST(FirstContact, NoDriverIsNamedNotAnInsufficientVersion) {
  const std::string runtime = "CUDA driver version is insufficient for CUDA runtime version";
  const std::string none = gs::cuda_unavailable_reason(false, runtime);
  EXPECT_EQ(none, "no NVIDIA driver found (libcuda.so.1 cannot be loaded)");
  EXPECT_EQ(none.find("insufficient"), std::string::npos);
  // with a driver library, the runtime's own words
  EXPECT_EQ(gs::cuda_unavailable_reason(true, runtime), "no usable CUDA driver/device (" + runtime + ")");
}
