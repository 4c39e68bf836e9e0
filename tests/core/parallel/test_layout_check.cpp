// Layout rules (core/parallel/layout_check.hpp): every refusal names the framework and its rule,
// and valid layouts of the published runs pass.
#include <gtest/gtest.h>

#include "core/model/model_config.hpp"
#include "core/parallel/layout_check.hpp"
#include "core/util/error.hpp"

using namespace gs;

namespace {

ParallelLayout L(const std::string& s) {
  ParallelLayout l;
  parse_layout(s, l);
  return l;
}

void expect_refused(const ModelConfig& c, const std::string& layout, const std::string& words, int64_t gpus = 0) {
  const std::string why = layout_problem(c, L(layout), gpus);
  EXPECT_NE(why.find(words), std::string::npos) << layout << ": " << why;
  EXPECT_THROW(check_layout(c, L(layout), gpus), UsageError);
}

}  // namespace

TEST(LayoutCheck, PublishedLayoutsPass) {
  const ModelConfig l70 = find_preset("llama-3-70b").config;
  EXPECT_EQ(layout_problem(l70, L("tp4.pp8.vpp5.dp2.gb128"), 64), "");   // NeMo 25.09 DGX-H100
  EXPECT_EQ(layout_problem(l70, L("tp8.pp4.dp16.gb512"), 512), "");
  const ModelConfig mix = find_preset("mixtral-8x7b").config;
  EXPECT_EQ(layout_problem(mix, L("tp1.ep8.dp64.mb2.gb256"), 64), "");  // NeMo 25.04 Mixtral-8x7B
  const ModelConfig ds = find_preset("deepseek-v3").config;
  ModelConfig ds64 = ds;
  ds64.num_hidden_layers = 64;  // with MTP layers padded as NeMo's recipe does
  EXPECT_EQ(layout_problem(ds64, L("tp2.pp8.vpp4.ep64.etp1.dp64.gb8192"), 1024), "");
}

TEST(LayoutCheck, RefusesWithTheFrameworksRule) {
  const ModelConfig c = find_preset("llama-3-70b").config;
  expect_refused(c, "tp8.pp4.dp16", "world size", 128);
  expect_refused(c, "pp3", "num_layers (80) is not divisible by the pipeline-parallel size (3)");
  expect_refused(c, "pp4.vpp3", "pipeline stages x virtual stages");
  expect_refused(c, "vpp2", "virtual pipeline stages");
  expect_refused(c, "tp3", "TP 3");  // the sequence, and heads 64, over TP 3
  expect_refused(c, "cp3", "context parallelism splits the sequence");
  expect_refused(c, "dp4.mb2.gb12", "global batch (12) is not divisible");
  expect_refused(c, "pp4.vpp2.dp2.gb12", "interleaved schedule");
  expect_refused(c, "ep2", "needs a model with experts");
  const ModelConfig mix = find_preset("mixtral-8x7b").config;
  expect_refused(mix, "ep16.dp16", "num_moe_experts (8) is not divisible");
  expect_refused(mix, "tp2.ep8.dp2", "MoE parallel folding");
}

TEST(LayoutCheck, UlyssesNeedsHeadsDivisibleByCp) {
  ModelConfig c = find_preset("llama-3-8b").config;  // 32 query heads, 8 KV heads
  ParallelLayout l = L("tp2.cp8");
  l.cp_comm = CpComm::AllToAll;
  EXPECT_NE(layout_problem(c, l).find("a2a context parallelism"), std::string::npos);
  l.cp_comm = CpComm::Ring;
  EXPECT_EQ(layout_problem(c, l), "");
}

TEST(LayoutCheck, RankConfigIsTheRanksShare) {
  const ModelConfig c = find_preset("llama-3-70b").config;
  const ModelConfig r = rank_config(c, L("tp8.cp2.mb2"));
  EXPECT_EQ(r.tensor_parallel, 8);
  EXPECT_EQ(r.micro_batch_size, 2);
  EXPECT_EQ(r.sequence_length, c.sequence_length / 2);
  const ModelConfig mix = find_preset("mixtral-8x7b").config;
  const ModelConfig e = expert_rank_config(mix, L("tp2.ep4.etp1.dp4"));
  EXPECT_EQ(e.tensor_parallel, 1);
  EXPECT_EQ(e.tokens(), mix.tokens() / 2);  // the sequence-parallel shard, gathered over ETP 1
}
