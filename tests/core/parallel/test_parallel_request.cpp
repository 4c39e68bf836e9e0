// From the command line's settings to a layout (core/parallel/parallel_request.hpp).
#include <gtest/gtest.h>

#include "core/model/model_config.hpp"
#include "core/parallel/parallel_request.hpp"
#include "core/util/error.hpp"

using namespace gs;

TEST(ParallelRequest, StringFlagsAndModelAgree) {
  const ModelConfig c = find_preset("llama-3-70b").config;
  ParallelRequest r;
  r.layout = "tp8.pp4";
  r.gpus = 128;
  r.global_batch = 512;
  const ParallelLayout l = resolve_layout(r, c, {});
  EXPECT_EQ(l.dp, 4);  // 128 / (8 x 4)
  EXPECT_EQ(l.global_batch, 512);
  EXPECT_EQ(l.micro_batch, c.micro_batch_size);
  r.pp = 4;  // the same value both ways
  EXPECT_NO_THROW(resolve_layout(r, c, {}));
  r.pp = 2;
  EXPECT_THROW(resolve_layout(r, c, {}), UsageError);
  r.pp = 0;
  EXPECT_THROW(resolve_layout(r, c, ModelGiven{int64_t{4}, std::nullopt, std::nullopt}), UsageError);  // --tensor-parallel 4
  r.gpus = 100;
  EXPECT_THROW(resolve_layout(r, c, {}), UsageError);  // not divisible by TP x PP
}

TEST(ParallelRequest, TensorParallelFromTheModelFlags) {
  ModelConfig c = find_preset("llama-3-8b").config;
  c.tensor_parallel = 2;
  ParallelRequest r;
  r.gpus = 8;
  r.sharding = "fsdp";
  r.tp_comm_overlap = "on";
  const ParallelLayout l = resolve_layout(r, c, ModelGiven{int64_t{2}, std::nullopt, std::nullopt}, Recompute::Full);
  EXPECT_EQ(l.tp, 2);
  EXPECT_EQ(l.dp, 4);
  EXPECT_EQ(l.sharding, DpSharding::FsdpFull);
  EXPECT_EQ(l.recompute, Recompute::Full);
  EXPECT_TRUE(l.tp_comm_overlap);
  r.layout = "zero1";
  EXPECT_THROW(resolve_layout(r, c, {}), UsageError);  // --dp-sharding fsdp vs the string's zero1
}
