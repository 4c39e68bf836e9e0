// The pipeline schedule (core/parallel/pipeline.hpp): Megatron's orders, and the simulated bubble
// against the closed forms with equal pass times and free sends.
#include <gtest/gtest.h>

#include <set>
#include <tuple>

#include <fmt/format.h>

#include "core/parallel/pipeline.hpp"

using namespace gs;

namespace {

PipelineSpec uniform(int64_t p, int64_t v, int64_t m, double f, double b) {
  PipelineSpec s;
  s.stages = p;
  s.chunks = v;
  s.microbatches = m;
  s.fwd_ms.assign(static_cast<size_t>(p), std::vector<double>(static_cast<size_t>(v), f));
  s.bwd_ms.assign(static_cast<size_t>(p), std::vector<double>(static_cast<size_t>(v), b));
  return s;
}

// The bubble as the closed forms define it: the idle share of the schedule's span.
double simulated_bubble(int64_t p, int64_t v, int64_t m, double f, double b) {
  const PipelineSchedule s = simulate_pipeline(uniform(p, v, m, f, b));
  return s.bubble_fraction();
}

}  // namespace

TEST(Pipeline, OneFOneBOrderIsWarmupSteadyCooldown) {
  // Stage 1 of 4 with 6 micro-batches: 2 warm-up forwards, 4 F/B pairs, 2 cool-down backwards.
  const std::vector<PipelinePass> o = schedule_order(1, 4, 1, 6);
  ASSERT_EQ(o.size(), 12u);
  std::string seq;
  for (const PipelinePass& x : o) seq += fmt::format("{}{} ", x.backward ? "B" : "F", x.microbatch);
  EXPECT_EQ(seq, "F0 F1 F2 B0 F3 B1 F4 B2 F5 B3 B4 B5 ");
}

TEST(Pipeline, InterleavedOrderVisitsEveryChunkOfEveryMicrobatchOnce) {
  for (int64_t s = 0; s < 4; ++s) {
    const std::vector<PipelinePass> o = schedule_order(s, 4, 2, 8);
    ASSERT_EQ(o.size(), 2u * 2 * 8);
    std::set<std::tuple<int64_t, int64_t, bool>> seen;
    for (const PipelinePass& x : o) EXPECT_TRUE(seen.insert({x.chunk, x.microbatch, x.backward}).second);
    // Megatron: the first forwards are chunk 0 of micro-batches 0..p-1, then chunk 1.
    EXPECT_EQ(o[0].chunk, 0);
    EXPECT_EQ(o[4].chunk, 1);
    EXPECT_EQ(o[4].microbatch, 0);
  }
}

TEST(Pipeline, OneFOneBBubbleMatchesTheClosedForm) {
  for (int64_t p : {2, 4, 8})
    for (int64_t m : {1, 3, 8, 32}) {
      SCOPED_TRACE(fmt::format("p {} m {}", p, m));
      EXPECT_NEAR(simulated_bubble(p, 1, m, 1.0, 2.0), bubble_1f1b(p, m), 1e-9);
      EXPECT_NEAR(simulated_bubble(p, 1, m, 1.5, 1.5), bubble_1f1b(p, m), 1e-9);
    }
  EXPECT_DOUBLE_EQ(bubble_1f1b(4, 8), 3.0 / 11.0);
}

TEST(Pipeline, InterleavedBubbleMatchesTheClosedForm) {
  for (int64_t p : {2, 4})
    for (int64_t v : {2, 3, 5})
      for (int64_t m : {p, 2 * p, 8 * p}) {
        SCOPED_TRACE(fmt::format("p {} v {} m {}", p, v, m));
        EXPECT_NEAR(simulated_bubble(p, v, m, 1.0, 2.0), bubble_interleaved(p, v, m), 1e-9);
      }
  EXPECT_DOUBLE_EQ(bubble_interleaved(4, 2, 8), 3.0 / 19.0);
}

TEST(Pipeline, SpanOfOneStageIsItsWork) {
  const PipelineSchedule s = simulate_pipeline(uniform(1, 1, 5, 1.0, 2.0));
  EXPECT_DOUBLE_EQ(s.span_ms, 15.0);
  EXPECT_DOUBLE_EQ(s.bubble_fraction(), 0.0);
}

TEST(Pipeline, SendsLengthenTheSchedule) {
  PipelineSpec a = uniform(4, 1, 8, 1.0, 2.0);
  const double free = simulate_pipeline(a).span_ms;
  a.send_fwd_ms = a.send_bwd_ms = 0.25;
  const double paid = simulate_pipeline(a).span_ms;
  // At least the fill and the drain, each across p - 1 stage boundaries; the steady state's
  // forward-backward cycles wait for sends too.
  EXPECT_GE(paid - free, 2 * 3 * 0.25 - 1e-9);
  EXPECT_LT(paid - free, 8 * 2 * 3 * 0.25);
}

TEST(Pipeline, RefusesMismatchedSpecs) {
  PipelineSpec s = uniform(2, 1, 4, 1, 1);
  s.fwd_ms.pop_back();
  EXPECT_THROW(simulate_pipeline(s), std::invalid_argument);
  EXPECT_THROW(simulate_pipeline(uniform(4, 2, 6, 1, 1)), std::invalid_argument);  // m not a multiple of p
}
