// The provider-neutral tuning driver (cuda/providers/tuner.hpp) on fake candidates: spin kernels of known
// lengths stand for a provider's kernels, so the pick, the skipped candidates, the screen of
// searched ones and the output check are known in advance. The timed loop's re-check
// (recheck_in_timed_loop) runs on given cells and needs no GPU.
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <deque>
#include <vector>

#include "core/providers/tuning.hpp"
#include "core/util/error.hpp"
#include "cuda/providers/tuner.hpp"
#include "gpu_test_util.hpp"

namespace {

__global__ void spin(long long cycles) {
  const long long t0 = clock64();
  while (clock64() - t0 < cycles) {
  }
}

// Candidate i spins for us[i] microseconds at the SM clock's nominal rate (every candidate on the
// same clock, so their ratios hold whatever the clock does); us[i] < 0: the "library" refuses it.
class Spins final : public gs::cuda::Tunable {
 public:
  Spins(std::vector<double> us, size_t listed) : us_(std::move(us)), listed_(listed) {
    calls.assign(us_.size(), 0);
    int khz = 0;
    cudaDeviceGetAttribute(&khz, cudaDevAttrClockRate, 0);
    cycles_per_us_ = khz / 1000.0;
  }
  size_t listed() const override { return listed_; }
  size_t size() const override { return us_.size(); }
  void enqueue(size_t i, cudaStream_t s) override {
    if (us_[i] < 0) throw gs::Unsupported("refused");
    spin<<<1, 1, 0, s>>>(static_cast<long long>(us_[i] * cycles_per_us_));
    EXPECT_EQ(cudaGetLastError(), cudaSuccess);
    ++calls[i];
  }
  double output_difference(size_t i, cudaStream_t) override {
    checked.push_back(i);
    return diff;
  }

  double diff = 0;              // what output_difference answers
  std::vector<size_t> checked;  // the candidates it was asked about
  std::vector<int> calls;

 private:
  std::vector<double> us_;
  size_t listed_;
  double cycles_per_us_ = 0;
};

struct StreamFixture {
  cudaStream_t s = nullptr;
  StreamFixture() { cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking); }
  ~StreamFixture() { cudaStreamDestroy(s); }
};

}  // namespace

TEST(Tuner, PicksAClearlyFasterCandidateAndSkipsRefusedOnes) {
  GS_REQUIRE_GPU();
  StreamFixture f;
  Spins t({100, 120, 70, -1}, 4);
  const gs::cuda::TuningOutcome o = gs::cuda::run_tuning(t, f.s, 8);
  EXPECT_EQ(o.pick, 2u);
  EXPECT_EQ(o.record.k, 8);
  EXPECT_EQ(o.record.tried, 3);  // the refused one is skipped
  EXPECT_TRUE(o.record.confirmed);
  EXPECT_NEAR(o.record.chosen_us / o.record.heuristic_us, 0.7, 0.05);
  EXPECT_EQ(o.record.searched, 0);
  EXPECT_LT(o.record.output_rel_diff, 0);  // a listed pick: no output check
  EXPECT_TRUE(t.checked.empty());
  EXPECT_EQ(t.calls[3], 0);
}

TEST(Tuner, KeepsTheFirstChoiceWithinNoise) {
  GS_REQUIRE_GPU();
  StreamFixture f;
  Spins t({100, 99.5, 130}, 3);
  const gs::cuda::TuningOutcome o = gs::cuda::run_tuning(t, f.s, 8);
  EXPECT_EQ(o.pick, 0u);
  EXPECT_FALSE(o.record.confirmed);
  EXPECT_EQ(o.record.tried, 3);
  EXPECT_DOUBLE_EQ(o.record.chosen_us, o.record.heuristic_us);
}

TEST(Tuner, ScreensSearchedCandidatesAndKeepsOnlyAMatchingOutput) {
  GS_REQUIRE_GPU();
  StreamFixture f;
  // Listed: 0 and 1. Searched: 2 (slower), 3 (much faster), 4 (5% faster), 5 (slower).
  const std::vector<double> us = {100, 110, 150, 60, 95, 140};
  {
    Spins t(us, 2);
    const gs::cuda::TuningOutcome o = gs::cuda::run_tuning(t, f.s, 1);  // K 1: only the best joins
    EXPECT_EQ(o.record.searched, 4);
    EXPECT_EQ(o.record.screen_faster, 2);
    EXPECT_EQ(o.record.tried, 3);  // 0, 1 and the one that joined
    EXPECT_EQ(o.pick, 3u);
    EXPECT_TRUE(o.record.confirmed);
    EXPECT_EQ(t.checked, std::vector<size_t>{3});
    EXPECT_DOUBLE_EQ(o.record.output_rel_diff, 0.0);
    EXPECT_LT(t.calls[4], t.calls[3] / 4) << "screened only, never in the rounds";
  }
  {
    Spins t(us, 2);
    t.diff = 0.5;  // the searched pick computes something else: the first choice stays
    const gs::cuda::TuningOutcome o = gs::cuda::run_tuning(t, f.s, 1);
    EXPECT_EQ(o.pick, 0u);
    EXPECT_FALSE(o.record.confirmed);
    EXPECT_DOUBLE_EQ(o.record.output_rel_diff, 0.5);
    EXPECT_DOUBLE_EQ(o.record.chosen_us, o.record.heuristic_us);
  }
}

TEST(Tuner, NoCandidateRunsIsTheProvidersRefusal) {
  GS_REQUIRE_GPU();
  StreamFixture f;
  Spins t({-1, -1}, 2);
  EXPECT_THROW(gs::cuda::run_tuning(t, f.s, 8), gs::Unsupported);
}

namespace {

gs::Cell loop(bool ok, double ms) {
  gs::Cell c;
  c.ok = ok;
  c.stats.mean_ms = ms;
  return c;
}

// recheck_in_timed_loop with the loops after the first given: the cell it keeps (its mean) and
// the selections it made.
struct Recheck {
  double kept_ms = 0;
  std::vector<bool> selected;
  gs::AutotuneRecord rec;
};
Recheck recheck(bool differs, gs::Cell first, std::deque<gs::Cell> later) {
  Recheck r;
  r.rec.confirmed = true;
  r.rec.heuristic_us = 100;
  r.rec.chosen_us = 90;
  const gs::Cell kept = gs::cuda::recheck_in_timed_loop(
      std::move(first), differs, r.rec, [&](bool tuned) { r.selected.push_back(tuned); },
      [&] {
        gs::Cell c = later.front();
        later.pop_front();
        return c;
      });
  r.kept_ms = kept.stats.mean_ms;
  return r;
}

}  // namespace

TEST(Tuner, TheTimedLoopHasTheLastWord) {
  // The pick is the first choice: nothing to re-check.
  Recheck same = recheck(false, loop(true, 1.0), {});
  EXPECT_DOUBLE_EQ(same.kept_ms, 1.0);
  EXPECT_TRUE(same.selected.empty());
  EXPECT_TRUE(same.rec.confirmed);
  // Both loops of the pick beat the first choice's by 2%: the second pick loop is the cell.
  Recheck wins = recheck(true, loop(true, 0.95), {loop(true, 1.0), loop(true, 0.96)});
  EXPECT_DOUBLE_EQ(wins.kept_ms, 0.96);
  EXPECT_EQ(wins.selected, (std::vector<bool>{false, true}));
  EXPECT_TRUE(wins.rec.confirmed);
  EXPECT_DOUBLE_EQ(wins.rec.chosen_us, 90);
  // One loop by less than 2%: the first choice is selected again, its loop is the cell.
  Recheck loses = recheck(true, loop(true, 0.95), {loop(true, 1.0), loop(true, 0.99)});
  EXPECT_DOUBLE_EQ(loses.kept_ms, 1.0);
  EXPECT_EQ(loses.selected, (std::vector<bool>{false, true, false}));
  EXPECT_FALSE(loses.rec.confirmed);
  EXPECT_DOUBLE_EQ(loses.rec.chosen_us, 100);
}
