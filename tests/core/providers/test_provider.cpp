// The provider axis (core/providers/provider.hpp): --provider parsing, the runner measuring every cell once
// per provider, per-provider and best-available sums, the text block, the JSON round trip (and
// files without providers), compare of multi-provider runs, and the CLI's refusals.
#include <gtest/gtest.h>

#include <algorithm>
#include <fstream>
#include <sstream>
#include <map>
#include <string>

#include "core/analysis/compare.hpp"
#include "core/util/error.hpp"
#include "core/results/kernels.hpp"
#include "core/model/model_config.hpp"
#include "core/providers/provider.hpp"
#include "core/report/report.hpp"
#include "core/run/runner.hpp"
#include "test_util.hpp"

using namespace gs;

namespace {

// Times by provider: cuBLASLt 1 ms per GFLOP; "cutlass" 20% faster on grouped GEMMs and Wgrad,
// 10% slower elsewhere, N/A for FP8 (with a reason); unknown providers: the base class's N/A.
class ProviderEngine : public test::FakeEngineBase {
 public:
  std::map<std::string, int> calls;
  Cell measure(const Gemm& g, Precision p, Mode m, const std::string& provider) override {
    ++calls[provider];
    const double base = g.flops() / 1e9 * (p == Precision::BF16 ? 1.0 : 0.6) * 1e-3;
    if (provider == kProviderCublasLt) return timed(base, "");
    if (provider == kProviderCutlass) {
      if (p != Precision::BF16) return Cell::na("CUTLASS: only BF16 grouped GEMMs are built");
      return timed(base * (g.grouped() || g.pass == Pass::Wgrad ? 0.8 : 1.1), "cutlass config");
    }
    return Cell::na("provider " + provider + " is not available in this engine");
  }

 private:
  static Cell timed(double ms, const std::string& config) {
    Stats s;
    s.mean_ms = s.median_ms = s.min_ms = s.max_ms = ms;
    s.stdev_ms = ms * 1e-3;
    s.iters = 10;
    Cell c = Cell::measured(s);
    c.kernels.config = config;
    return c;
  }
};

RunRequest small_request(std::vector<std::string> providers) {
  RunRequest req;
  ModelConfig c = default_config();
  c.num_hidden_layers = 2;
  req.plan = build_model_plan(c);
  req.precisions = {Precision::BF16, Precision::FP8Current};
  req.modes = {Mode::PerGemm};
  req.options.timing.gpu_warmup_s = 0;
  req.providers = std::move(providers);
  return req;
}

TEST(ProviderOption, ParsesNamesAllAndLists) {
  EXPECT_EQ(parse_provider_option("cublaslt"), (std::vector<std::string>{"cublaslt"}));
  EXPECT_EQ(parse_provider_option("CUTLASS"), (std::vector<std::string>{"cutlass"}));
  EXPECT_EQ(parse_provider_option("all"), known_providers());
  EXPECT_EQ(known_providers().front(), "cublaslt") << "the default comes first";
  EXPECT_EQ(parse_provider_option("cutlass, cublaslt"), (std::vector<std::string>{"cutlass", "cublaslt"}));
  EXPECT_EQ(provider_option_string({"cublaslt", "cutlass"}), "cublaslt,cutlass");
}

TEST(ProviderOption, RefusesUnknownEmptyAndRepeatedNames) {
  for (const char* bad : {"", "cublas", "cutlass,", ",cutlass", "cutlass,cutlass", "all,cutlass", "deepgemmx"}) {
    SCOPED_TRACE(bad);
    try {
      parse_provider_option(bad);
      ADD_FAILURE() << "accepted";
    } catch (const UsageError& e) {
      EXPECT_NE(std::string(e.what()).find("--provider"), std::string::npos) << e.what();
    }
  }
}

TEST(ProviderKernels, CutlassKernelNamesTellTheirInputType) {
  EXPECT_EQ(gemm_kernel_inputs("void cutlass::device_kernel<cutlass::gemm::kernel::GemmUniversal<cute::tuple<int, int, "
                               "int>, cutlass::gemm::collective::CollectiveMma<..., cutlass::bfloat16_t, ...>>>"),
            KernelInputs::BF16);
  EXPECT_EQ(gemm_kernel_inputs("cutlass::device_kernel<...cutlass::float_e4m3_t...>"), KernelInputs::FP8);
}

TEST(ProviderRunner, MeasuresEveryCellOncePerProvider) {
  ProviderEngine e;
  const RunRequest req = small_request({"cublaslt", "cutlass"});
  const RunResult r = run(e, req);
  const size_t cells = req.plan.gemms.size() * req.precisions.size();
  EXPECT_EQ(e.calls["cublaslt"], static_cast<int>(cells));
  EXPECT_EQ(e.calls["cutlass"], static_cast<int>(cells));
  ASSERT_EQ(r.providers, req.providers);
  ASSERT_TRUE(r.records.find(r.gemm_key(1, 0, 0, 0)));  // the second provider's grid
  for (size_t g = 0; g < r.plan.gemms.size(); ++g) {
    EXPECT_EQ(r.provider_cell(0, 0, g, 0).kernels.provider, "cublaslt");
    const Cell& c = r.provider_cell(1, 0, g, 0);
    ASSERT_TRUE(c.ok);
    EXPECT_EQ(c.kernels.provider, "cutlass");
    EXPECT_EQ(c.kernels.config, "cutlass config");
    EXPECT_FALSE(r.provider_cell(1, 0, g, 1).ok) << "FP8 through CUTLASS: N/A";
  }
}

TEST(ProviderRunner, BestAvailableTakesTheFastestMeasuredProviderPerGemm) {
  ProviderEngine e;
  const RunResult r = run(e, small_request({"cublaslt", "cutlass"}));
  const ProviderSums s = summarize_providers(r, 0);
  ASSERT_EQ(s.per_provider.size(), 2u);
  // BF16: per GEMM min(1.0, cutlass 0.8 on Wgrad / 1.1 elsewhere) -> Wgrad from CUTLASS.
  double expect = 0, lt = 0, cut = 0;
  for (size_t g = 0; g < r.plan.gemms.size(); ++g) {
    const Gemm& x = r.plan.gemms[g];
    if (x.scope != Scope::Layer) continue;
    const double base = x.flops() / 1e9 * 1e-3;
    lt += base;
    cut += base * (x.pass == Pass::Wgrad ? 0.8 : 1.1);
    expect += x.pass == Pass::Wgrad ? 0.8 * base : base;
  }
  ASSERT_TRUE(s.per_provider[0][0].total && s.per_provider[1][0].total && s.best[0].total);
  EXPECT_NEAR(*s.per_provider[0][0].total, lt, 1e-9);
  EXPECT_NEAR(*s.per_provider[1][0].total, cut, 1e-9);
  EXPECT_NEAR(*s.best[0].total, expect, 1e-9);
  EXPECT_LT(*s.best[0].total, std::min(lt, cut));
  // FP8: CUTLASS N/A everywhere -> its total N/A, the best is cuBLASLt's.
  EXPECT_FALSE(s.per_provider[1][1].total);
  ASSERT_TRUE(s.best[1].total);
  EXPECT_DOUBLE_EQ(*s.best[1].total, *s.per_provider[0][1].total);
  size_t who = 9;
  const size_t wgrad = [&] {
    for (size_t g = 0; g < r.plan.gemms.size(); ++g)
      if (r.plan.gemms[g].pass == Pass::Wgrad) return g;
    return size_t{0};
  }();
  ASSERT_TRUE(best_provider_ms(r, 0, wgrad, 0, &who));
  EXPECT_EQ(who, 1u);
}

TEST(ProviderRunner, AnEngineWithoutTheProviderGivesNaCellsWithTheReason) {
  class Plain : public test::FakeEngineBase {
   public:
    Cell measure(const Gemm&, Precision, Mode, const std::string& provider) override {
      if (provider != kProviderCublasLt) return Cell::na("provider " + provider + " is not available in this engine");
      Stats s;
      s.mean_ms = s.median_ms = s.min_ms = s.max_ms = 1;
      s.iters = 1;
      return Cell::measured(s);
    }
  } e;
  const RunResult r = run(e, small_request({"cutlass"}));
  ASSERT_EQ(r.providers, std::vector<std::string>{"cutlass"});
  size_t gemm_records = 0;  // beside the step kernels' records
  for (const Record& rec : r.records) gemm_records += is_gemm_kind(rec.key.kind) ? 1 : 0;
  EXPECT_EQ(gemm_records, r.modes.size() * r.plan.gemms.size() * r.precisions.size());  // one provider's grid
  EXPECT_FALSE(r.cell(0, 0, 0).ok);
  EXPECT_NE(r.cell(0, 0, 0).reason.find("not available"), std::string::npos) << r.cell(0, 0, 0).reason;
}

TEST(ProviderReport, TextShowsEveryProviderAndTheBestAvailable) {
  ProviderEngine e;
  const RunResult r = run(e, small_request({"cublaslt", "cutlass"}));
  const std::string t = render_text(r);
  EXPECT_NE(t.find("Kernel providers: cublaslt,cutlass"), std::string::npos) << t;
  EXPECT_NE(t.find(std::string("Providers (") + to_string(Mode::PerGemm) + ")"), std::string::npos) << t;
  EXPECT_NE(t.find("best available"), std::string::npos) << t;
  EXPECT_NE(t.find("CUTLASS: only BF16 grouped GEMMs are built"), std::string::npos) << "the N/A reason is printed";
  // A single cuBLASLt run prints none of it (the golden reports stay as they are).
  const RunResult one = run(e, small_request({"cublaslt"}));
  const std::string t1 = render_text(one);
  EXPECT_EQ(t1.find("Kernel providers"), std::string::npos);
  EXPECT_EQ(t1.find("best available"), std::string::npos);
}

TEST(ProviderJson, RoundTripsEveryProvidersCells) {
  ProviderEngine e;
  const RunResult r = run(e, small_request({"cublaslt", "cutlass"}));
  const nlohmann::json j = to_json(r);
  ASSERT_EQ(j["providers"], (nlohmann::json{"cublaslt", "cutlass"}));
  ASSERT_EQ(test::record(j, 0, to_string(r.modes[0]), to_string(r.precisions[0]), "cutlass")["status"], "ok");
  const RunResult back = from_json(j, "t.json");
  ASSERT_EQ(back.providers, r.providers);
  for (size_t v = 0; v < 2; ++v)
    for (size_t g = 0; g < r.plan.gemms.size(); ++g)
      for (size_t p = 0; p < r.precisions.size(); ++p) {
        const Cell& a = r.provider_cell(v, 0, g, p);
        const Cell& b = back.provider_cell(v, 0, g, p);
        ASSERT_EQ(a.ok, b.ok);
        if (!a.ok) {
          EXPECT_EQ(a.reason, b.reason);
          continue;
        }
        EXPECT_DOUBLE_EQ(a.stats.mean_ms, b.stats.mean_ms);
        EXPECT_EQ(a.kernels.provider, b.kernels.provider);
        EXPECT_EQ(a.kernels.config, b.kernels.config);
      }
  EXPECT_EQ(to_json(back).dump(), j.dump()) << "a second round trip changes nothing";
}

TEST(ProviderJson, FilesWithoutProvidersAreCublasLtAndBadListsAreRefused) {
  ProviderEngine e;
  // Files of schema 2 (the cells inside each GEMM), as written before the record table.
  nlohmann::json j = test::legacy_layout(to_json(run(e, small_request({"cublaslt", "cutlass"}))));
  nlohmann::json old = j;
  old.erase("providers");
  for (auto& g : old["gemms"]) g.erase("provider_results");
  EXPECT_EQ(from_json(old, "old.json").providers, std::vector<std::string>{"cublaslt"});
  auto refused = [](nlohmann::json doc, const std::string& needle) {
    try {
      from_json(doc, "x.json");
      ADD_FAILURE() << "accepted; wanted " << needle;
    } catch (const UsageError& e) {
      EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
    }
  };
  nlohmann::json bad = j;
  bad["providers"] = {"cublaslt", "nope"};
  refused(bad, "unknown provider");
  bad["providers"] = {"cutlass", "cutlass"};
  refused(bad, "twice");
  bad["providers"] = nlohmann::json::array();
  refused(bad, "must not be empty");
  bad = j;
  bad["gemms"][1].erase("provider_results");
  refused(bad, "provider_results");
  bad = j;
  bad["gemms"][0]["provider_results"]["cutlass"].erase(to_string(Mode::PerGemm));
  refused(bad, std::string("no object for mode \"") + to_string(Mode::PerGemm));
}

TEST(ProviderCompare, ComparesTheProvidersBothFilesMeasured) {
  ProviderEngine e;
  const RunResult a = run(e, small_request({"cublaslt", "cutlass"}));
  RunResult b = from_json(to_json(a), "b.json");
  // B's CUTLASS cells 30% slower: flagged in the @cutlass columns only.
  for (size_t m = 0; m < b.modes.size(); ++m)
    for (size_t g = 0; g < b.plan.gemms.size(); ++g)
      for (size_t p = 0; p < b.precisions.size(); ++p)
        if (Cell& c = b.provider_cell(1, m, g, p); c.ok) c.stats.mean_ms *= 1.3;
  const CompareResult cr = compare_results(a, b);
  EXPECT_EQ(cr.precisions, (std::vector<std::string>{"BF16", "FP8Current", "BF16@cutlass", "FP8Current@cutlass"}));
  ASSERT_FALSE(cr.modes.empty());
  int flagged_main = 0, flagged_cutlass = 0;
  for (const auto& g : cr.modes[0].gemms)
    for (const auto& c : g.cells) {
      if (c.verdict != Verdict::Regression) continue;
      (c.precision.find("@cutlass") != std::string::npos ? flagged_cutlass : flagged_main)++;
    }
  EXPECT_EQ(flagged_main, 0);
  EXPECT_EQ(flagged_cutlass, static_cast<int>(a.plan.gemms.size()));
  EXPECT_NE(format_compare_text(cr).find("BF16@cutlass"), std::string::npos);
  // Files whose main cells come from different providers say so.
  const RunResult c = run(e, small_request({"cutlass"}));
  const CompareResult cr2 = compare_results(a, c);
  bool noted = false;
  for (const auto& d : cr2.differences) noted |= d.find("providers: cublaslt,cutlass vs cutlass") != std::string::npos;
  EXPECT_TRUE(noted);
}

// The chart script charts any provider of the file (its cells become the chart's), refusing a
// provider the file does not hold before any drawing (so without matplotlib too).
TEST(ProviderPlot, ChartsAChosenProviderAndRefusesOthers) {
  const auto dir = test::scratch_dir("provider_plot");
  if (test::run_shell("python3 -c pass", dir).rc != 0) GTEST_SKIP() << "no python3";
  ProviderEngine e;
  nlohmann::json j = to_json(run(e, small_request({"cublaslt", "cutlass"})));
  // Each provider's sums for the charts: "totals" the first's, "provider_totals" the others'.
  ASSERT_TRUE(j["provider_totals"]["cutlass"].is_object());
  EXPECT_FALSE(j["provider_totals"].contains("cublaslt"));
  int checked = 0;
  for (const auto& [mode, precs] : j["provider_totals"]["cutlass"].items()) {
    if (!precs.is_object()) continue;
    for (const auto& [prec, t] : precs.items()) {
      double sum = 0;
      bool na = false;
      for (size_t i = 0; i < j["gemms"].size(); ++i) {
        if (j["gemms"][i]["scope"] != "layer") continue;
        const auto& c = test::record(j, i, mode, prec, "cutlass");
        if (c["status"] == "ok") sum += c["mean_ms"].get<double>(); else na = true;
      }
      if (na) {
        EXPECT_TRUE(t["layer"]["ms"].is_null()) << mode << " " << prec;
      } else {
        EXPECT_NEAR(t["layer"]["ms"].get<double>(), sum, 1e-9 * sum) << mode << " " << prec;
        ++checked;
      }
    }
  }
  EXPECT_GT(checked, 0);
  const auto file = dir / "two.json";
  std::ofstream(file) << j.dump();
  const std::string script = std::string(GS_SOURCE_DIR) + "/tools/gemmscope_plot.py";
  auto plot = [&](const std::string& args) {
    return test::run_shell("python3 " + script + " " + file.string() + " -o " + (dir / "c.svg").string() + " " + args, dir);
  };
  const test::Out bad = plot("--provider nope");
  EXPECT_EQ(bad.rc, 2);
  EXPECT_NE(bad.err.find("provider nope is not in two.json (providers: cublaslt, cutlass)"), std::string::npos) << bad.err;
  const test::Out ok = plot("--provider cutlass");
  EXPECT_TRUE(ok.rc == 0 || ok.rc == 3) << "charted, or matplotlib missing (3): " << ok.rc << " " << ok.err;
  nlohmann::json& records = j["records"];
  for (auto it = records.begin(); it != records.end();)
    it = (*it)["item"] == 0 && (*it)["provider"] == "cutlass" ? records.erase(it) : it + 1;
  std::ofstream(file) << j.dump();
  const test::Out missing = plot("--provider cutlass");
  EXPECT_EQ(missing.rc, 2);
  EXPECT_NE(missing.err.find("gemms[0] has no records of provider cutlass"), std::string::npos) << missing.err;
  // a file of schema 2 (the cells inside each GEMM) says which object is missing
  nlohmann::json legacy = test::legacy_layout(to_json(run(e, small_request({"cublaslt", "cutlass"}))));
  legacy["gemms"][0].erase("provider_results");
  std::ofstream(file) << legacy.dump();
  const test::Out old = plot("--provider cutlass");
  EXPECT_EQ(old.rc, 2);
  EXPECT_NE(old.err.find("gemms[0] has no provider_results.cutlass"), std::string::npos) << old.err;
}

// CSV: one row per cell and provider, the provider in the last column.
TEST(ProviderCsv, OneRowPerProviderWithItsName) {
  ProviderEngine e;
  const RunResult r = run(e, small_request({kProviderCublasLt, kProviderCutlass}));
  const std::string csv = render_csv(r);
  const size_t cells = r.plan.gemms.size() * r.precisions.size() * r.modes.size();
  EXPECT_EQ(static_cast<size_t>(std::count(csv.begin(), csv.end(), '\n')), 1 + 2 * cells);
  EXPECT_EQ(csv.substr(0, csv.find('\n')).substr(csv.find('\n') - 9), ",provider");
  size_t lt = 0, cl = 0, cl_na = 0;
  std::istringstream in(csv);
  std::string line;
  std::getline(in, line);
  while (std::getline(in, line)) {
    const std::string last = line.substr(line.rfind(',') + 1);
    if (last == "cublaslt") ++lt;
    if (last == "cutlass") {
      ++cl;
      if (line.find("CUTLASS: only BF16") != std::string::npos) ++cl_na;
    }
  }
  EXPECT_EQ(lt, cells);
  EXPECT_EQ(cl, cells);
  EXPECT_EQ(cl_na, cells / 2) << "the fake CUTLASS's FP8 column is N/A with its reason";
  // A single-provider run: the same rows as before the column existed, each naming cuBLASLt.
  const std::string one = render_csv(run(e, small_request({kProviderCublasLt})));
  EXPECT_EQ(static_cast<size_t>(std::count(one.begin(), one.end(), '\n')), 1 + cells);
}

#ifdef GS_BINARY
TEST(ProviderCli, FlagIsParsedAndCheckedBeforeAnyWork) {
  const auto dir = test::scratch_dir("provider_cli");
  const test::Out bad = test::run_gemmscope("--dry-run --provider cublas", dir);
  EXPECT_EQ(bad.rc, 2);
  EXPECT_NE(bad.err.find("--provider: unknown provider 'cublas'"), std::string::npos) << bad.err;
  EXPECT_EQ(std::count(bad.err.begin(), bad.err.end(), '\n'), 1) << bad.err;
  const test::Out ok = test::run_gemmscope("--dry-run --provider all", dir);
  EXPECT_EQ(ok.rc, 0) << ok.err;
}
#endif

}  // namespace
