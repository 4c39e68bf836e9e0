// The layout string (core/step/parallel_layout.hpp): parsing, canonical forms, refusals.
#include <gtest/gtest.h>

#include "core/step/parallel_layout.hpp"
#include "core/util/error.hpp"

using namespace gs;

TEST(ParallelLayout, ParsesEveryToken) {
  ParallelLayout l;
  const LayoutTokens t = parse_layout("tp2.pp4.vpp2.cp1.ep8.etp1.dp16.mb2.gb512.fsdp", l);
  EXPECT_EQ(l.tp, 2);
  EXPECT_EQ(l.pp, 4);
  EXPECT_EQ(l.vpp, 2);
  EXPECT_EQ(l.ep, 8);
  EXPECT_EQ(l.expert_tp(), 1);
  EXPECT_EQ(l.dp, 16);
  EXPECT_EQ(l.micro_batch, 2);
  EXPECT_EQ(l.global_batch, 512);
  EXPECT_EQ(l.sharding, DpSharding::FsdpFull);
  EXPECT_TRUE(t.tp && t.gb && t.sharding && t.dp);
  EXPECT_EQ(l.world(), 2 * 4 * 1 * 16);
  EXPECT_EQ(l.micro_batches(), 512 / (2 * 16));
  EXPECT_EQ(l.expert_dp(), 2 * 16 / 8);
}

TEST(ParallelLayout, CanonicalAndShortStrings) {
  ParallelLayout l;
  parse_layout("TP8.pp4.DP16", l);
  EXPECT_EQ(short_string(l), "tp8.pp4.dp16.mb1.gb16");
  EXPECT_EQ(to_string(l), "tp8.pp4.vpp1.cp1.ep1.etp8.dp16.mb1.gb16.zero1");
  ParallelLayout back;
  parse_layout(to_string(l), back);
  EXPECT_EQ(to_string(back), to_string(l));
}

TEST(ParallelLayout, Refusals) {
  ParallelLayout l;
  EXPECT_THROW(parse_layout("", l), UsageError);
  EXPECT_THROW(parse_layout("tp2.tp4", l), UsageError);
  EXPECT_THROW(parse_layout("tp0", l), UsageError);
  EXPECT_THROW(parse_layout("tp", l), UsageError);
  EXPECT_THROW(parse_layout("tpx", l), UsageError);
  EXPECT_THROW(parse_layout("qq4", l), UsageError);
  EXPECT_THROW(parse_layout("tp2..pp2", l), UsageError);
  EXPECT_THROW(parse_layout("tp99999999999", l), UsageError);
  EXPECT_THROW(parse_layout("zero1.fsdp", l), UsageError);
}

TEST(ParallelLayout, EnumNames) {
  EXPECT_EQ(dp_sharding_names().find("full-shard"), DpSharding::FsdpFull);
  EXPECT_EQ(dp_sharding_names().find("zero0"), DpSharding::Ddp);
  EXPECT_TRUE(shards_parameters(DpSharding::Zero3));
  EXPECT_FALSE(shards_parameters(DpSharding::Zero2));
  EXPECT_EQ(cp_comm_names().find("ulysses"), CpComm::AllToAll);
  EXPECT_EQ(recompute_names().find("FULL"), Recompute::Full);
}
