// Helpers shared by the CPU tests: reading a file whole, a per-process scratch folder, running the
// gemmscope binary (or any shell command) without a GPU, a base for the fake engines that
// stand in for the CUDA backend (and the step context they report), the check that a document's
// markdown has its text's rows, finding a record in a result document and a group of a step.
#pragma once
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstddef>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>
#include <stdexcept>
#include <string>
#include <utility>

#include "core/run/engine.hpp"
#include "core/util/error.hpp"

namespace gs::test {

namespace fs = std::filesystem;

inline std::string slurp(const fs::path& p) {
  std::ifstream f(p, std::ios::binary);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

// <temp>/gs_<tag>_<pid>, created on first use.
inline fs::path scratch_dir(const std::string& tag) {
  fs::path p = fs::temp_directory_path() / ("gs_" + tag + "_" + std::to_string(::getpid()));
  fs::create_directories(p);
  return p;
}

// scratch_dir(tag), removed when the test program ends.
inline fs::path scratch_dir_removed_at_exit(const std::string& tag) {
  struct Remove : ::testing::Environment {
    fs::path dir;
    explicit Remove(fs::path d) : dir(std::move(d)) {}
    void TearDown() override {
      std::error_code ec;
      fs::remove_all(dir, ec);
    }
  };
  const fs::path d = scratch_dir(tag);
  ::testing::AddGlobalTestEnvironment(new Remove(d));
  return d;
}

// How much slower the ASan+UBSan build (CI's build-asan) runs: time bounds of the Release build
// are multiplied by it.
#if defined(__SANITIZE_ADDRESS__)
inline constexpr double kSanitizerSlowdown = 6.0;
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
inline constexpr double kSanitizerSlowdown = 6.0;
#else
inline constexpr double kSanitizerSlowdown = 1.0;
#endif
#else
inline constexpr double kSanitizerSlowdown = 1.0;
#endif

// The message of the UsageError `f` throws, or "(accepted)".
inline std::string usage_error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const UsageError& e) {
    return e.what();
  }
  return "(accepted)";
}

// How long `f` takes, in seconds.
inline double seconds_of(const std::function<void()>& f) {
  const auto t0 = std::chrono::steady_clock::now();
  f();
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

struct Out {
  int rc;
  std::string out, err;
};

// `cmd` (a shell command line the test controls) with no GPU visible; its stdout and stderr go
// through files in `dir`. rc is the exit status, -1 when it did not exit normally.
inline Out run_shell(const std::string& cmd, const fs::path& dir) {
  const fs::path o = dir / "stdout", e = dir / "stderr";
  const std::string full = "CUDA_VISIBLE_DEVICES= " + cmd + " >" + o.string() + " 2>" + e.string();
  const int st = std::system(full.c_str());
  return {WIFEXITED(st) ? WEXITSTATUS(st) : -1, slurp(o), slurp(e)};
}

#ifdef GS_BINARY
// The gemmscope binary with `args` (shell-quoted by the test), no GPU: the tests use --dry-run or
// inputs refused before any device is touched.
inline Out run_gemmscope(const std::string& args, const fs::path& dir) {
  return run_shell(std::string(GS_BINARY) + " " + args, dir);
}
#endif

// A Hopper-class device that warms up instantly and measures no accuracy; subclasses supply
// measure() and override the rest where a test needs it.
class FakeEngineBase : public Engine {
 public:
  explicit FakeEngineBase(std::string name = "Fake GPU", int sm_count = 0) : name_(std::move(name)), sms_(sm_count) {}
  DeviceInfo device_info() const override {
    DeviceInfo d;
    d.name = name_;
    d.cc_major = 9;
    d.cc_minor = 0;
    d.sm_count = sms_;
    return d;
  }
  void gpu_warmup(double) override {}
  AccuracyCell accuracy(const Gemm&, Precision, Dist) override { return AccuracyCell::na("fake engine"); }

 private:
  std::string name_;
  int sms_;
};

// The step context every fake engine of the tests reports (Engine::step_context): Transformer
// Engine's, attention measured (0.5 ms forward, 1.2 ms backward per layer), 1 ms of memory-bound
// work per layer, the stand-in kernel calibrated at 2500 GB/s and the framework's kernels at 1.15x
// its rate. Tests derive their expected times from its fields, not from the numbers.
inline StepContextInfo fake_step_context() {
  StepContextInfo c;
  c.kind = StepContextKind::TransformerEngine;
  c.stream_gb_per_s = 2500;
  c.efficiency = 1.15;
  c.other_ms = 1.0;
  c.attention_fwd_ms = 0.5;
  c.attention_bwd_ms = 1.2;
  c.attention_measured = true;
  c.attention_source = "fake cuDNN, measured";
  return c;
}

// A fake engine of a whole step: every GEMM at 600 TFLOP/s in BF16 and 1000 TFLOP/s in the FP8
// formats, fake_step_context() between the cells; step kernels as the Engine default (N/A) unless
// a subclass measures them.
class FakeStepEngine : public FakeEngineBase {
 public:
  Cell measure(const Gemm& g, Precision p, Mode, const std::string&) override {
    return Cell::measured(summarize({g.flops() / (p == Precision::BF16 ? 600e12 : 1000e12) * 1e3}));
  }
  std::optional<StepContextInfo> step_context() const override { return fake_step_context(); }
};

// The group called `name` of a step plan or of a timed step; std::logic_error (failing the test)
// when there is none.
inline const StepGroup& step_group(const StepPlan& sp, const std::string& name) {
  if (const StepGroup* g = sp.find(name)) return *g;
  throw std::logic_error("no step group " + name);
}
inline const StepGroupResult& step_group(const StepBreakdown& b, const std::string& name) {
  for (const StepGroupResult& g : b.groups)
    if (g.group.name == name) return g;
  throw std::logic_error("no step group " + name);
}
// A group of a temporary would dangle at the end of the statement: bind the plan or step first.
const StepGroup& step_group(StepPlan&&, const std::string&) = delete;
const StepGroupResult& step_group(StepBreakdown&&, const std::string&) = delete;

// What a document's markdown must hold at least: pipe-table rows, and numbers in them (counted
// by their decimal points).
struct MarkdownRowsAtLeast {
  size_t rows = 0;
  size_t numbers = 0;
};

// One document printed twice: every row of a pipe table in `md` must be a line of `text`, the
// same cells in the same order (spacing aside). A row is a line that starts with "| "; a header
// whose first column has no label ("|  |") is skipped, since the text leaves it blank. Then the
// rows, and the numbers in them, must reach `at_least`.
inline void expect_markdown_rows_in_text(const std::string& md, const std::string& text, MarkdownRowsAtLeast at_least) {
  const auto words = [](const std::string& s) {
    std::istringstream in(s);
    std::string w, out;
    while (in >> w) out += (out.empty() ? "" : " ") + w;
    return out;
  };
  std::set<std::string> lines;
  std::istringstream in(text);
  for (std::string l; std::getline(in, l);) lines.insert(words(l));
  size_t rows = 0, numbers = 0;
  std::istringstream mds(md);
  for (std::string l; std::getline(mds, l);) {
    if (l.rfind("| ", 0) != 0 || l.rfind("|  |", 0) == 0) continue;  // not a row, or a header without a label
    std::string cells = l.substr(1);
    for (size_t at; (at = cells.find(" |")) != std::string::npos;) cells.replace(at, 2, " ");
    EXPECT_EQ(lines.count(words(cells)), 1u) << l;
    ++rows;
    numbers += static_cast<size_t>(std::count(l.begin(), l.end(), '.'));
  }
  EXPECT_GE(rows, at_least.rows);
  EXPECT_GE(numbers, at_least.numbers);
}

// The record of a result document written by this gemmscope (schema 3, "records"): the cell of
// GEMM `gemm` in `mode` and `precision` of `provider` (empty: the file's first provider), or with
// an empty `mode` the GEMM's accuracy record. record_index: its position in "records" (-1: none);
// record: the record, where a missing one fails the test and reads as null.
inline int record_index(const nlohmann::json& doc, size_t gemm, const std::string& mode, const std::string& precision,
                        const std::string& provider = "") {
  const std::string want_provider =
      !provider.empty() ? provider : doc.contains("providers") ? doc["providers"][0].get<std::string>() : "cublaslt";
  if (!doc.contains("records")) return -1;
  for (size_t i = 0; i < doc["records"].size(); ++i) {
    const nlohmann::json& r = doc["records"][i];
    const std::string kind = r.value("kind", "");
    const bool accuracy = mode.empty();
    if (accuracy ? kind != "accuracy" : (kind != "gemm" && kind != "grouped-gemm")) continue;
    if (r.value("item", -1) != static_cast<int>(gemm) || r.value("precision", "") != precision) continue;
    if (!accuracy && (r.value("mode", "") != mode || r.value("provider", "") != want_provider)) continue;
    return static_cast<int>(i);
  }
  return -1;
}
template <class Json>
Json& record(Json& doc, size_t gemm, const std::string& mode, const std::string& precision,
             const std::string& provider = "") {
  static nlohmann::json none;
  const int i = record_index(doc, gemm, mode, precision, provider);
  if (i >= 0) return doc["records"][static_cast<size_t>(i)];
  ADD_FAILURE() << "no record of gemms[" << gemm << "] " << mode << " " << precision << " " << provider;
  none = nullptr;
  return none;
}

// A step context record of a schema-3 document (kind attention or step-work) as the fields of
// the "step_context" object that files written before the step context was records held
// (top level for rank 0, each rank's in a fleet document): `sc` gets its fields.
inline void legacy_step_context_fields(const nlohmann::json& doc, const nlohmann::json& r, nlohmann::json& sc) {
  if (sc.is_null())  // what the writer wrote for the figures no record holds
    sc = {{"other_ms", 0.0},         {"move_ms", 0.0},           {"cast_ms", 0.0},           {"other_from_user", false},
          {"attention_fwd_ms", 0.0}, {"attention_bwd_ms", 0.0}, {"attention_measured", false}, {"attention_source", ""},
          {"attention_shape", ""}};
  const std::string item = doc["items"][r["kind"].get<std::string>()][r["item"].get<size_t>()];
  const double ms = r["status"] == "ok" ? r["mean_ms"].get<double>() : 0.0;
  if (r["kind"] == "attention") {
    const bool fwd = r["pass"] == "fprop";
    sc[fwd ? "attention_fwd_ms" : "attention_bwd_ms"] = ms;
    sc["attention_measured"] = r["source"] == "measured";
    if (fwd && r.contains("values")) {
      if (r["values"].contains("source")) sc["attention_source"] = r["values"]["source"];
      if (r["values"].contains("shape")) sc["attention_shape"] = r["values"]["shape"];
    }
    return;
  }
  sc[item + "_ms"] = ms;  // other_ms, move_ms, cast_ms
  if (item != "other") return;
  sc["other_from_user"] = r["source"] == "given";
  for (const auto& [name, v] : r["values"].items()) sc[name] = v;  // kind, framework, the rates
}

// A schema-3 document in the layout of schema 2 (the cells inside each GEMM: "results" for the first
// provider, "provider_results" for the others, "accuracy"; the step kernels in the step's
// "kernels" list; the step context in "step_context" objects): what files written before the
// record table look like, for the tests of the reader's schema-2 path and its messages.
inline nlohmann::json legacy_layout(nlohmann::json doc) {
  const std::string first = doc.contains("providers") ? doc["providers"][0].get<std::string>() : "cublaslt";
  for (const auto& r : doc["records"]) {
    if (r["kind"] == "attention" || r["kind"] == "step-work") {  // the step context's object
      const size_t rank = r.value("rank", size_t{0});
      nlohmann::json& sc = doc.contains("ranks") ? doc["ranks"][rank]["step_context"] : doc["step_context"];
      legacy_step_context_fields(doc, r, sc);
      if (!doc.contains("ranks") && doc.contains("step_estimate_per_layer"))
        sc["step_estimate_per_layer"] = doc["step_estimate_per_layer"];
      continue;
    }
    if (r.contains("values") && r["values"].contains("kind")) {  // a step kernel: the step's "kernels" list
      nlohmann::json k = r["values"];
      for (auto& [name, v] : k.items())
        if (v.is_number_float() && v.get<double>() == static_cast<double>(v.get<int64_t>())) v = v.get<int64_t>();
      k["describe"] = doc["items"][r["kind"].get<std::string>()][r["item"].get<size_t>()];
      k["status"] = r["status"];
      k["mean_ms"] = r["status"] == "ok" ? r["mean_ms"] : nlohmann::json();
      if (r["status"] != "ok") k["reason"] = r["reason"];
      doc["step"]["kernels"].push_back(k);
      continue;
    }
    nlohmann::json c = r;
    for (const char* k : {"kind", "item", "pass", "mode", "precision", "rank", "source", "values"}) c.erase(k);
    nlohmann::json& g = doc["gemms"][r["item"].get<size_t>()];
    if (r["kind"] == "accuracy") {
      if (c["status"] == "ok") {
        c["rel_error"] = r["values"]["rel_error"];
        c["emulated"] = r["source"] == "emulated";
      }
      g["accuracy"][r["precision"].get<std::string>()] = c;
    } else if (r["provider"] == first) {
      g["results"][r["mode"].get<std::string>()][r["precision"].get<std::string>()] = c;
    } else {
      g["provider_results"][r["provider"].get<std::string>()][r["mode"].get<std::string>()][r["precision"].get<std::string>()] = c;
    }
  }
  doc.erase("records");
  doc.erase("step_estimate_per_layer");  // in the step context's object (above)
  if (doc.contains("items")) {  // the step kernels' and the step context's items (above)
    for (const char* k : {"optimizer", "loss", "embedding", "host", "attention", "step-work"}) doc["items"].erase(k);
    if (doc["items"].empty()) doc.erase("items");
  }
  doc["schema"] = "gemmscope.result/2";
  return doc;
}

}  // namespace gs::test
