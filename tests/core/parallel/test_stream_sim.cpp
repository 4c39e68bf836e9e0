// The two-stream simulation (core/parallel/stream_sim.hpp): ordering, dependencies, and the
// contention slowdown against hand computations.
#include <gtest/gtest.h>

#include "core/parallel/stream_sim.hpp"

using namespace gs;

namespace {

SimOp op(SimStream s, double ms, std::vector<size_t> deps = {}, int cat = 0) {
  SimOp o;
  o.stream = s;
  o.work_ms = ms;
  o.deps = std::move(deps);
  o.category = cat;
  return o;
}

}  // namespace

TEST(StreamSim, OneStreamRunsInOrder) {
  const SimTiming t = simulate_streams({op(SimStream::Compute, 1), op(SimStream::Compute, 2)}, 0.5, 0.5);
  EXPECT_DOUBLE_EQ(t.start_ms[1], 1.0);
  EXPECT_DOUBLE_EQ(t.makespan_ms, 3.0);
}

TEST(StreamSim, OverlapWithoutContentionHidesTheShorterStream) {
  const SimTiming t = simulate_streams({op(SimStream::Compute, 4), op(SimStream::Comm, 3)}, 0, 0);
  EXPECT_DOUBLE_EQ(t.makespan_ms, 4.0);
  EXPECT_DOUBLE_EQ(t.end_ms[1], 3.0);
}

TEST(StreamSim, ContentionSlowsBothSides) {
  // Compute 4 ms and a 2 ms collective from 0, compute +50%, communication +100% while both run:
  // the collective needs 4 ms of overlap (2 / 0.5); compute progresses 4 / 1.5 = 2.667 ms of work
  // meanwhile and finishes its 1.333 ms alone: ends at 5.333.
  const SimTiming t = simulate_streams({op(SimStream::Compute, 4), op(SimStream::Comm, 2)}, 0.5, 1.0);
  EXPECT_NEAR(t.end_ms[1], 4.0, 1e-9);
  EXPECT_NEAR(t.end_ms[0], 4.0 + (4.0 - 4.0 / 1.5), 1e-9);
  EXPECT_NEAR(t.compute_ms_by_category[0], t.end_ms[0], 1e-9);
}

TEST(StreamSim, DependenciesWaitAcrossStreams) {
  // compute A (2), then a collective of A's output (3), then compute B (1) that needs it.
  const SimTiming t = simulate_streams(
      {op(SimStream::Compute, 2), op(SimStream::Comm, 3, {0}), op(SimStream::Compute, 1, {1})}, 0.1, 0.1);
  EXPECT_DOUBLE_EQ(t.start_ms[1], 2.0);
  EXPECT_DOUBLE_EQ(t.start_ms[2], 5.0);
  EXPECT_DOUBLE_EQ(t.makespan_ms, 6.0);
}

TEST(StreamSim, RefusesBadGraphs) {
  EXPECT_THROW(simulate_streams({op(SimStream::Compute, 1, {0})}, 0, 0), std::invalid_argument);
  EXPECT_THROW(simulate_streams({op(SimStream::Compute, -1)}, 0, 0), std::invalid_argument);
  EXPECT_THROW(simulate_streams({op(SimStream::Compute, 1, {}, 3)}, 0, 0, 2), std::invalid_argument);
}
