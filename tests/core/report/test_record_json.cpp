// The result document of schema 3 (docs/json-schema.md): records written and read with one table,
// files of schemas 1 and 2 read into the same records, the reader's rules for records, and record
// kinds beyond the GEMMs (items, ranks) kept through a round trip.
#include <gtest/gtest.h>

#include <filesystem>
#include <string>

#include "core/io/input_file.hpp"
#include "core/report/record_json.hpp"
#include "core/report/report.hpp"
#include "core/util/error.hpp"
#include "test_util.hpp"

using namespace gs;
using nlohmann::json;

namespace {

namespace fs = std::filesystem;

json load(const std::string& path) { return read_json_file(path, "test data"); }

// Every result file the repository holds: the test fixtures and the published results.
std::vector<std::string> committed_results() {
  std::vector<std::string> out;
  for (const char* dir : {GS_TEST_DATA_DIR, GS_SOURCE_DIR "/docs/results"})
    for (const auto& e : fs::directory_iterator(dir))
      if (e.path().extension() == ".json") {
        const json j = load(e.path().string());
        if (j.is_object() && j.value("schema", "").rfind("gemmscope.result/", 0) == 0) out.push_back(e.path().string());
      }
  std::sort(out.begin(), out.end());
  return out;
}

std::string error_of(const json& doc) {
  try {
    (void)from_json(doc, "x.json");
  } catch (const UsageError& e) {
    return e.what();
  } catch (const std::exception& e) {
    return std::string("not a UsageError: ") + e.what();
  }
  return "(accepted)";
}

json v3(const std::string& fixture) {
  return to_json(from_json(load(std::string(GS_TEST_DATA_DIR) + "/" + fixture), fixture));
}

}  // namespace

// Schemas 1 and 2 stay readable: every committed file reads, and written again as schema 3 it
// reads back to the same run (the same report, CSV, cells and document).
TEST(ResultSchema, CommittedFilesOfEverySchemaReadAndRoundTrip) {
  const std::vector<std::string> files = committed_results();
  ASSERT_GE(files.size(), 20u);
  int v1 = 0, v2 = 0;
  for (const std::string& f : files) {
    SCOPED_TRACE(f);
    const json doc = load(f);
    v1 += doc["schema"] == "gemmscope.result/1";
    v2 += doc["schema"] == "gemmscope.result/2";
    const RunResult a = from_json(doc, f);
    const json written = to_json(a);
    ASSERT_EQ(written["schema"], "gemmscope.result/3");
    const RunResult b = from_json(json::parse(written.dump()), f);
    EXPECT_EQ(to_json(b), written);
    EXPECT_EQ(b.records.size(), a.records.size());
    if (a.dry_run) {
      EXPECT_EQ(render_plan_text(b), render_plan_text(a));
      continue;
    }
    EXPECT_EQ(render_text(b), render_text(a));
    EXPECT_EQ(render_csv(b), render_csv(a));
    a.for_each_cell([&](size_t v, size_t m, size_t g, size_t p, const Cell& c) {
      const Cell& d = b.provider_cell(v, m, g, p);
      EXPECT_EQ(d.ok, c.ok);
      EXPECT_EQ(d.stats.mean_ms, c.stats.mean_ms);
      EXPECT_EQ(d.stats.stdev_ms, c.stats.stdev_ms);
      EXPECT_EQ(d.reason, c.reason);
      EXPECT_EQ(d.band.has_value(), c.band.has_value());
    });
  }
  EXPECT_GT(v1, 0);
  EXPECT_GT(v2, 0);
}

// The records of schema 3: a GEMM's cell names its GEMM, mode, precision and provider, and where
// it comes from.
TEST(ResultSchema, RecordsNameTheirKey) {
  const json j = v3("model_5b_both_modes.json");
  const json& r = test::record(j, 2, "pre-quantized", "FP8Current");
  EXPECT_EQ(r["kind"], "gemm");
  EXPECT_EQ(r["pass"], j["gemms"][2]["pass"]);
  EXPECT_EQ(r["provider"], "cublaslt");
  EXPECT_EQ(r["rank"], 0);
  EXPECT_EQ(r["source"], "measured");
  EXPECT_EQ(r["status"], "ok");
  EXPECT_TRUE(r["tflops"].is_number());
  EXPECT_FALSE(j["gemms"][0].contains("results"));
  // MoE: the grouped expert GEMMs are records of their own kind.
  const json moe = v3("moe_mixtral_ep2_synthetic.json");
  for (size_t g = 0; g < moe["gemms"].size(); ++g)
    EXPECT_EQ(test::record(moe, g, "training", "BF16")["kind"], moe["gemms"][g].contains("group") ? "grouped-gemm" : "gemm");
}

TEST(ResultSchema, ReaderRulesForRecords) {
  const json good = v3("model_5b_both_modes.json");
  ASSERT_EQ(error_of(good), "(accepted)");
  const int first = test::record_index(good, 0, "per-gemm", "BF16");
  ASSERT_GE(first, 0);
  struct Case {
    const char* what;
    std::function<void(json&)> edit;
    std::string message;
  };
  const std::string at = "x.json: records[" + std::to_string(first) + "]";
  const auto rec = [first](json& j) -> json& { return j["records"][static_cast<size_t>(first)]; };
  const std::vector<Case> cases = {
      {"not a list", [](json& j) { j["records"] = json::object(); }, "x.json: \"records\" must be a list"},
      {"no records", [](json& j) { j.erase("records"); }, "x.json: \"records\" must be a list"},
      {"not an object", [&](json& j) { rec(j) = 5; }, at + " is not an object"},
      {"unknown kind", [&](json& j) { rec(j)["kind"] = "gemmm"; }, at + ".kind: unknown kind 'gemmm'"},
      {"unknown source", [&](json& j) { rec(j)["source"] = "guessed"; }, at + ".source: unknown source 'guessed'"},
      {"item out of range", [&](json& j) { rec(j)["item"] = 999; }, at + ".item must be below"},
      {"item negative", [&](json& j) { rec(j)["item"] = -1; }, at + ".item must be an integer"},
      {"wrong pass", [&](json& j) { rec(j)["pass"] = "wgrad"; }, at + ".pass must be fprop (gemms[0]'s)"},
      {"wrong kind", [&](json& j) { rec(j)["kind"] = "grouped-gemm"; }, at + ".kind must be gemm for gemms[0]"},
      {"mode not listed", [&](json& j) { rec(j)["mode"] = "training"; }, at + ".mode training is not in the file's \"modes\""},
      {"precision not listed", [&](json& j) { rec(j)["precision"] = "NVFP4"; },
       at + ".precision NVFP4 is not in the file's \"precisions\""},
      {"provider not listed", [&](json& j) { rec(j)["provider"] = "cutlass"; },
       at + ".provider 'cutlass' is not in the file's \"providers\""},
      {"no mode", [&](json& j) { rec(j).erase("mode"); }, at + " needs a mode and a provider"},
      {"rank out of range", [&](json& j) { rec(j)["rank"] = 1; }, at + ".rank must be below 1, got 1"},
      {"ok without mean", [&](json& j) { rec(j).erase("mean_ms"); }, at + ": status \"ok\" needs a positive number mean_ms"},
      {"bad status", [&](json& j) { rec(j)["status"] = "done"; }, at + ": a cell must be an object with status"},
      {"denormal time", [&](json& j) { rec(j)["median_ms"] = 5e-324; }, at + ".median_ms must be from 1e-09 to 1e+09 ms"},
      {"a band on a measured record", [&](json& j) { rec(j)["predicted"] = true; },
       at + ": a band (\"predicted\": true, low_ms, high_ms) belongs to a predicted record only"},
      {"a predicted GEMM without its band", [&](json& j) { rec(j)["source"] = "predicted"; },
       at + ": a predicted GEMM record holds its band"},
      {"values not an object", [&](json& j) { rec(j)["values"] = 3; }, at + ".values must be an object of at most 64"},
      {"value of a bad type", [&](json& j) { rec(j)["values"] = {{"x", json::array()}}; }, at + ".values.x must be a number"},
      {"value name", [&](json& j) { rec(j)["values"] = {{"a\x1b", 1}}; }, "a value's name must be 1 to 64 printable characters"},
      {"duplicate", [&](json& j) { j["records"].push_back(rec(j)); }, "repeats the key of an earlier record"},
      {"missing cell", [&](json& j) { j["records"].erase(static_cast<size_t>(first)); },
       "x.json: \"records\" hold no per-gemm BF16 cublaslt cell of gemms[0] (fprop QKV Proj)"},
      {"repeats", [&](json& j) { rec(j)["repeat_ms"] = {1.0, 2.0}; }, at + ".repeat_ms has 2 times but timing.repeats is 1"},
      {"items of a GEMM kind", [](json& j) { j["items"] = {{"gemm", {"x"}}}; }, "x.json: items.gemm: not a record kind"},
      {"items not names", [](json& j) { j["items"] = {{"optimizer", 3}}; }, "x.json: items: \"optimizer\" must be a list of strings"},
      {"ranks empty", [](json& j) { j["ranks"] = json::array(); }, "x.json: \"ranks\" must be a list of 1 to"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.what);
    json doc = good;
    c.edit(doc);
    EXPECT_NE(error_of(doc).find(c.message), std::string::npos) << error_of(doc);
  }
}

// A record kind beyond the GEMMs needs no change to the writer or the reader: its items are named
// in "items", its records carry their values.
TEST(ResultSchema, OtherKindsAndRanksRoundTrip) {
  RunResult r = from_json(load(std::string(GS_TEST_DATA_DIR) + "/model_5b_both_modes.json"), "f.json");
  r.item_names[RecordKind::Optimizer] = {"adam"};
  RecordKey k;
  k.kind = RecordKind::Optimizer;
  k.item = 0;
  k.precision = Precision::BF16;
  k.source = Source::Modelled;
  Cell c = Cell::measured(summarize({4.0}));
  c.set("bytes", 1.5e9);
  r.records.add(k, c);
  const json j = to_json(r);
  EXPECT_EQ(j["items"]["optimizer"], json::array({"adam"}));
  const RunResult b = from_json(json::parse(j.dump()), "f.json");
  const Record* got = b.records.find(k);
  ASSERT_NE(got, nullptr);
  EXPECT_DOUBLE_EQ(got->value.stats.mean_ms, 4.0);
  EXPECT_EQ(got->value.number("bytes"), 1.5e9);
  EXPECT_EQ(to_json(b), j);
  // The report lists it without knowing the kind; GEMM records have blocks of their own.
  const std::string text = render_text(b);
  EXPECT_NE(text.find("Other records:"), std::string::npos) << text;
  EXPECT_NE(text.find("optimizer  adam"), std::string::npos) << text;
  EXPECT_NE(text.find("modelled"), std::string::npos) << text;
  EXPECT_NE(text.find("bytes 1.5e+09"), std::string::npos) << text;
  EXPECT_EQ(render_text(from_json(load(std::string(GS_TEST_DATA_DIR) + "/model_5b_both_modes.json"), "f.json"))
                .find("Other records:"),
            std::string::npos);
  // An item the file does not name is refused.
  json bad = j;
  bad["items"]["optimizer"] = json::array();
  EXPECT_NE(error_of(bad).find(".item must be below 0"), std::string::npos) << error_of(bad);
}

// A legacy (schema 2) predicted cell and a schema-3 predicted record read to the same band.
TEST(ResultSchema, PredictedBandsOfBothLayouts) {
  const json j = v3("model_5b_both_modes.json");
  json p = j;
  p["timing"]["method"] = "predicted";
  for (json& r : p["records"]) {
    r["source"] = "predicted";
    if (r["status"] != "ok") continue;
    r["predicted"] = true;
    r["low_ms"] = r["mean_ms"].get<double>() * 0.9;
    r["high_ms"] = r["mean_ms"].get<double>() * 1.2;
  }
  const RunResult a = from_json(p, "p.json");
  const RunResult b = from_json(test::legacy_layout(p), "p2.json");
  ASSERT_TRUE(a.predicted() && b.predicted());
  ASSERT_TRUE(a.cell(0, 0, 0).band && b.cell(0, 0, 0).band);
  EXPECT_EQ(a.cell(0, 0, 0).band->low_ms, b.cell(0, 0, 0).band->low_ms);
  EXPECT_EQ(a.cell(0, 0, 0).band->high_ms, b.cell(0, 0, 0).band->high_ms);
}
