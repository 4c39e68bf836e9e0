// The record table (core/results/records.hpp): keys, the index, one value per key, and the grid
// views of RunResult over it.
#include <gtest/gtest.h>

#include <stdexcept>

#include "core/results/results.hpp"

using namespace gs;

namespace {

RecordKey gemm_key(uint32_t item, Mode m, Precision p, uint32_t provider = 0) {
  RecordKey k;
  k.item = item;
  k.pass = Pass::Fprop;
  k.mode = m;
  k.precision = p;
  k.provider = provider;
  return k;
}

RunResult small_run() {
  RunResult r;
  r.plan.gemms = {linear_gemm(Pass::Fprop, Op::Qkv, Scope::Layer, 1024, 512, 1536),
                  linear_gemm(Pass::Dgrad, Op::Qkv, Scope::Layer, 1024, 1536, 512)};
  r.modes = {Mode::PerGemm, Mode::PreQuantized};
  r.precisions = {Precision::BF16, Precision::FP8Current};
  r.providers = {"cublaslt", "cutlass"};
  r.allocate_cells();
  return r;
}

}  // namespace

TEST(Records, OneValuePerKeyFoundByItsKey) {
  RecordTable t;
  t.add(gemm_key(0, Mode::PerGemm, Precision::BF16), Cell::measured(summarize({1.0})));
  t.add(gemm_key(0, Mode::PerGemm, Precision::FP8Current), Cell::na("why"));
  EXPECT_THROW(t.add(gemm_key(0, Mode::PerGemm, Precision::BF16), Cell{}), std::logic_error);
  ASSERT_EQ(t.size(), 2u);
  EXPECT_DOUBLE_EQ(t.at(gemm_key(0, Mode::PerGemm, Precision::BF16)).stats.mean_ms, 1.0);
  EXPECT_EQ(t.at(gemm_key(0, Mode::PerGemm, Precision::FP8Current)).reason, "why");
  // Every field of the key tells records apart: item, mode, precision, provider, rank, source, kind.
  EXPECT_EQ(t.find(gemm_key(1, Mode::PerGemm, Precision::BF16)), nullptr);
  EXPECT_EQ(t.find(gemm_key(0, Mode::Training, Precision::BF16)), nullptr);
  EXPECT_EQ(t.find(gemm_key(0, Mode::PerGemm, Precision::BF16, 1)), nullptr);
  RecordKey k = gemm_key(0, Mode::PerGemm, Precision::BF16);
  k.rank = 3;
  EXPECT_EQ(t.find(k), nullptr);
  k = gemm_key(0, Mode::PerGemm, Precision::BF16);
  k.source = Source::Predicted;
  EXPECT_EQ(t.find(k), nullptr);
  k = gemm_key(0, Mode::PerGemm, Precision::BF16);
  k.kind = RecordKind::GroupedGemm;
  EXPECT_EQ(t.find(k), nullptr);
  EXPECT_THROW((void)t.at(k), std::out_of_range);
  // put replaces the value of a key, or adds it.
  t.put(gemm_key(0, Mode::PerGemm, Precision::FP8Current), Cell::measured(summarize({0.5})));
  EXPECT_EQ(t.size(), 2u);
  EXPECT_TRUE(t.at(gemm_key(0, Mode::PerGemm, Precision::FP8Current)).ok);
}

TEST(Records, KeysOutsideTheirBitsAreRefused) {
  RecordKey k;
  k.item = kMaxRecordItems;
  EXPECT_THROW((void)k.packed(), std::out_of_range);
  k.item = kMaxRecordItems - 1;
  k.rank = kMaxRecordRanks - 1;
  k.provider = kMaxRecordProviders - 1;
  EXPECT_NO_THROW((void)k.packed());
  k.provider = kMaxRecordProviders + 1;
  EXPECT_THROW((void)k.packed(), std::out_of_range);
  // Distinct keys pack to distinct numbers.
  RecordKey a, b;
  b.pass = Pass::Fprop;
  EXPECT_NE(a.packed(), b.packed());
  b = a;
  b.precision = Precision::BF16;  // value 0, but set: not "none"
  EXPECT_NE(a.packed(), b.packed());
}

TEST(Records, KindAndSourceNames) {
  EXPECT_STREQ(to_string(RecordKind::GroupedGemm), "grouped-gemm");
  EXPECT_STREQ(to_string(RecordKind::StepWork), "step-work");
  EXPECT_EQ(record_kind_names().find("COLLECTIVE"), RecordKind::Collective);
  EXPECT_FALSE(record_kind_names().find("gemms").has_value());
  EXPECT_EQ(source_names().find("modeled"), Source::Modelled);
  EXPECT_STREQ(to_string(Source::Emulated), "emulated");
  EXPECT_TRUE(items_are_gemms(RecordKind::Accuracy));
  EXPECT_FALSE(is_gemm_kind(RecordKind::Accuracy));
}

TEST(Records, GridViewsAreTheRecords) {
  RunResult r = small_run();
  EXPECT_TRUE(r.has_cells());
  EXPECT_EQ(r.records.size(), 2u * 2u * 2u * 2u);  // providers x modes x GEMMs x precisions
  EXPECT_EQ(r.cell(1, 1, 1).reason, "not run");
  r.provider_cell(1, 0, 1, 0) = Cell::measured(summarize({2.0}));
  const Record* rec = r.records.find(r.gemm_key(1, 0, 1, 0));
  ASSERT_NE(rec, nullptr);
  EXPECT_DOUBLE_EQ(rec->value.stats.mean_ms, 2.0);
  EXPECT_EQ(rec->key.kind, RecordKind::Gemm);
  EXPECT_EQ(rec->key.pass, Pass::Dgrad);
  EXPECT_EQ(rec->key.mode, Mode::PerGemm);
  EXPECT_EQ(rec->key.provider, 1u);
  EXPECT_EQ(rec->key.source, Source::Measured);
  EXPECT_FALSE(r.cell(0, 1, 0).ok);  // providers[0]'s cell is another record
  // allocate_cells keeps what is there.
  r.allocate_cells();
  EXPECT_TRUE(r.provider_cell(1, 0, 1, 0).ok);
  // A prediction's grid reads the predicted records.
  RunResult p = small_run();
  p.records.clear();
  p.timing.method = "predicted";
  p.allocate_cells();
  EXPECT_EQ(p.records.find(p.gemm_key(0, 0, 0, 0))->key.source, Source::Predicted);
  // No modes: no grid.
  RunResult none = small_run();
  none.modes.clear();
  EXPECT_FALSE(none.has_cells());
  int n = 0;
  r.for_each_cell([&](size_t, size_t, size_t, size_t, const Cell&) { ++n; });
  EXPECT_EQ(n, 16);
}

TEST(Records, AccuracyIsARecordMeasuredOrEmulated) {
  RunResult r = small_run();
  r.has_accuracy = true;
  r.accuracy_precisions = {Precision::FP8Current, Precision::NVFP4};
  AccuracyCell a;
  a.ok = true;
  a.rel_error = 0.03;
  r.set_accuracy(0, 0, a);
  a.emulated = true;
  a.rel_error = 0.09;
  r.set_accuracy(0, 1, a);
  r.set_accuracy(1, 0, AccuracyCell::na("no"));
  EXPECT_DOUBLE_EQ(r.accuracy_cell(0, 0).rel_error, 0.03);
  EXPECT_FALSE(r.accuracy_cell(0, 0).emulated);
  EXPECT_TRUE(r.accuracy_cell(0, 1).emulated);
  EXPECT_EQ(r.accuracy_record(0, 1)->key.source, Source::Emulated);
  EXPECT_EQ(r.accuracy_cell(1, 0).reason, "no");
  EXPECT_EQ(r.accuracy_cell(1, 1).reason, "not run");
  // A record's source does not change underneath it.
  a.emulated = false;
  EXPECT_THROW(r.set_accuracy(0, 1, a), std::logic_error);
}

TEST(Records, NamedValues) {
  Cell c = Cell::measured(summarize({1.0}));
  c.set("kernel_ms", 0.8);
  c.set("basis", std::string("FP8Current pre-quantized"));
  c.set("kernel_ms", 0.7);
  ASSERT_EQ(c.values.size(), 2u);
  EXPECT_EQ(c.number("kernel_ms"), 0.7);
  EXPECT_FALSE(c.number("basis").has_value());  // text, not a number
  EXPECT_EQ(std::get<std::string>(*c.value("basis")), "FP8Current pre-quantized");
  EXPECT_EQ(c.value("none"), nullptr);
}
