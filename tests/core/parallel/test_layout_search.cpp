// The layout search (core/parallel/layout_search.hpp) on a small space: every candidate valid or
// refused with a rule, the ranking by step time, fitting layouts only, and why the others lose.
#include <gtest/gtest.h>

#include <set>

#include "core/model/model_config.hpp"
#include "core/parallel/cluster.hpp"
#include "core/parallel/layout_check.hpp"
#include "core/parallel/layout_search.hpp"

using namespace gs;

namespace {

const GpuSpec& gpu(double memory) {
  static GpuSpec g;
  g.key = "H100";
  g.tflops[static_cast<int>(PeakFormat::BF16)] = Sourced{989.4, "test"};
  g.memory_bytes = Sourced{memory, "test"};
  return g;
}

// Compute that shrinks with TP (1/tp of the GEMMs) and grows with the micro-batch.
StepCosts costs_for(const ParallelLayout& l) {
  StepCosts s;
  s.basis = "synthetic";
  const double ms = 1.0 * static_cast<double>(l.micro_batch) / static_cast<double>(l.tp * l.cp);
  for (LayerCost* lc : {&s.dense, &s.moe}) lc->gemms[Op::Qkv] = {ms, ms, ms};
  s.optimizer_ms_per_param = 1e-9;
  return s;
}

SearchSpace space(int64_t gpus, int64_t gb) {
  SearchSpace sp;
  sp.model = find_preset("llama-3-8b").config;
  sp.gpus = gpus;
  sp.global_batch = gb;
  sp.micro_batches = {1, 2};
  sp.max_vpp = 4;
  return sp;
}

}  // namespace

TEST(LayoutSearch, EnumeratesTheSpaceAndRefusesWithRules) {
  const SearchSpace sp = space(16, 24);  // 24 sequences: not divisible over 16 replicas
  const std::vector<ParallelLayout> all = enumerate_layouts(sp, 8);
  std::set<std::string> seen;
  for (const ParallelLayout& l : all) {
    EXPECT_EQ(l.world(), 16) << to_string(l);
    EXPECT_LE(l.tp, 8);  // TP within the NVLink domain
    EXPECT_TRUE(seen.insert(to_string(l)).second) << "twice: " << to_string(l);
  }
  ParallelJob job;
  const CollectiveModel net(cluster_presets().find("dgx-h100"));
  const SearchResult r = search_layouts(sp, job, net, gpu(80e9), costs_for);
  EXPECT_EQ(r.candidates, static_cast<int64_t>(all.size()));
  int64_t refused = 0;
  for (const auto& [rule, n] : r.refused) {
    EXPECT_FALSE(rule.empty());
    refused += n;
  }
  EXPECT_EQ(refused + static_cast<int64_t>(r.ranked.size() + r.not_fitting.size()), r.candidates);
  EXPECT_GT(refused, 0);  // e.g. 24 sequences over 16 data-parallel replicas
}

TEST(LayoutSearch, RanksFittingLayoutsByStepTime) {
  ParallelJob job;
  const CollectiveModel net(cluster_presets().find("dgx-h100"));
  const SearchResult r = search_layouts(space(16, 32), job, net, gpu(80e9), costs_for);
  ASSERT_GT(r.ranked.size(), 3u);
  for (size_t i = 1; i < r.ranked.size(); ++i) {
    EXPECT_LE(r.ranked[i - 1].result.step_ms, r.ranked[i].result.step_ms);
    EXPECT_NE(r.ranked[i].why.find("step time"), std::string::npos);
    EXPECT_TRUE(r.ranked[i].result.fits);
    EXPECT_EQ(layout_problem(space(16, 32).model, r.ranked[i].layout, 16), "");
  }
}

TEST(LayoutSearch, TooLittleMemoryFitsNothingAndSaysWhy) {
  ParallelJob job;
  const CollectiveModel net(cluster_presets().find("dgx-h100"));
  // 8 GB usable: an 8B model does not fit anywhere on 8 GPUs.
  const SearchResult r = search_layouts(space(8, 8), job, net, gpu(11e9), costs_for);
  EXPECT_TRUE(r.ranked.empty());
  ASSERT_FALSE(r.not_fitting.empty());
  EXPECT_NE(r.not_fitting.front().why.find("needs"), std::string::npos);
  for (size_t i = 1; i < r.not_fitting.size(); ++i)
    EXPECT_LE(r.not_fitting[i - 1].result.peak_memory_bytes, r.not_fitting[i].result.peak_memory_bytes);
}
