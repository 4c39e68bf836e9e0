// Kernel tuning's rules (core/providers/tuning.hpp) on plain numbers: calls per sample, the
// screen of searched candidates, the pick after the rounds, the confirmation, the output check
// of a searched pick, and the re-check in the cell's timed loop.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <vector>

#include "core/providers/tuning.hpp"

namespace t = gs::tuning;

TEST(Tuning, MedianOfOddAndEvenCounts) {
  EXPECT_DOUBLE_EQ(t::median_of({3, 1, 2}), 2.0);
  EXPECT_DOUBLE_EQ(t::median_of({4, 1, 3, 2}), 2.5);
  EXPECT_DOUBLE_EQ(t::median_of({7}), 7.0);
}

TEST(Tuning, CallsPerSampleScreenAndConfirmation) {
  // ~2 ms per sample, 3 to 64 calls.
  EXPECT_EQ(t::sample_reps(100.0), 20);
  EXPECT_EQ(t::sample_reps(1000.0), 3);   // 2 calls would be 2 ms: at least 3
  EXPECT_EQ(t::sample_reps(10.0), 64);    // 200 calls: at most 64
  EXPECT_EQ(t::sample_reps(0.0), 64);     // no division by zero
  EXPECT_EQ(t::screen_reps(20), 5);
  EXPECT_EQ(t::screen_reps(3), 1);
  // ~25 ms per confirmation sample, at least the rounds' calls, at most 1024.
  EXPECT_EQ(t::confirm_reps(100.0, 20), 250);
  EXPECT_EQ(t::confirm_reps(10.0, 64), 1024);
  EXPECT_EQ(t::confirm_reps(20000.0, 3), 3);
}

TEST(Tuning, ScreenSlicesAreLedByTheFirstChoice) {
  const auto s = t::screen_slices(3, 40);  // 37 searched candidates after 3 listed
  ASSERT_EQ(s.size(), 3u);
  EXPECT_EQ(s[0].size(), 17u);
  EXPECT_EQ(s[0][0], 0u);
  EXPECT_EQ(s[0][1], 3u);
  EXPECT_EQ(s[0][16], 18u);
  EXPECT_EQ(s[1][1], 19u);
  EXPECT_EQ(s[2], (std::vector<size_t>{0, 35, 36, 37, 38, 39}));
  EXPECT_TRUE(t::screen_slices(3, 3).empty());
}

TEST(Tuning, ScreenKeepsThoseMoreThanOnePercentFasterBestFirst) {
  // Yardstick 100 us: 98.9 joins, 99.0 does not (not more than 1% faster), 50 does.
  const std::vector<t::Faster> f = t::screen_faster({{5, 98.9}, {0, 100.0}, {6, 99.0}, {7, 50.0}, {8, 120.0}});
  ASSERT_EQ(f.size(), 2u);
  EXPECT_EQ(f[0].index, 5u);
  EXPECT_NEAR(f[0].ratio, 0.989, 1e-12);
  EXPECT_EQ(f[1].index, 7u);
  // Candidate 0 did not run in the slice: no yardstick, nothing joins.
  EXPECT_TRUE(t::screen_faster({{5, 10.0}, {6, 20.0}}).empty());
  // Best ratio first over all slices, equal ratios by index, at most k.
  const std::vector<size_t> j = t::screen_joiners({{0.97, 9}, {0.5, 12}, {0.97, 4}, {0.98, 3}}, 3);
  EXPECT_EQ(j, (std::vector<size_t>{12, 4, 9}));
  EXPECT_EQ(t::screen_joiners({{0.9, 1}}, 8), (std::vector<size_t>{1}));
}

TEST(Tuning, PickReplacesTheFirstChoiceOnlyWhenTwoPercentFaster) {
  const std::vector<bool> all(3, true);
  EXPECT_EQ(t::pick_fastest({100, 99, 98.5}, all), 0u);  // faster, but by less than 2%
  EXPECT_EQ(t::pick_fastest({100, 99, 97.9}, all), 2u);
  EXPECT_EQ(t::pick_fastest({100, 97, 98.5}, all), 1u);  // the fastest of those 2% faster
  EXPECT_EQ(t::pick_fastest({100, 97, 96}, all), 2u);
  EXPECT_EQ(t::pick_fastest({100, 98, 50}, {true, true, false}), 0u);  // 2 did not run; 98 is not below 98
  // Without the first choice any candidate that ran is better than none.
  const double inf = std::numeric_limits<double>::infinity();
  EXPECT_EQ(t::pick_fastest({inf, 99, 99.5}, {false, true, true}), 1u);
  EXPECT_EQ(t::pick_fastest({inf, inf}, {false, false}), t::kNone);
  EXPECT_EQ(t::pick_fastest({}, {}), t::kNone);
}

TEST(Tuning, ConfirmationNeedsTwoPercentInTheLongSamples) {
  const t::Confirmation yes = t::confirm({100, 101, 99}, {97, 97.5, 96}, 100, 95);
  EXPECT_TRUE(yes.confirmed);
  EXPECT_DOUBLE_EQ(yes.first_us, 100);
  EXPECT_DOUBLE_EQ(yes.pick_us, 97);
  const t::Confirmation no = t::confirm({100, 100}, {98, 98}, 100, 95);  // 98 is not below 98
  EXPECT_FALSE(no.confirmed);
  EXPECT_DOUBLE_EQ(no.pick_us, 98);
  // The pick never ran in the confirmation: not confirmed, the rounds' median stands.
  const t::Confirmation none = t::confirm({100}, {}, 100, 90);
  EXPECT_FALSE(none.confirmed);
  EXPECT_DOUBLE_EQ(none.pick_us, 90);
  // The first choice never ran in it: its rounds' median is the yardstick.
  const t::Confirmation alone = t::confirm({}, {90}, 100, 95);
  EXPECT_TRUE(alone.confirmed);
  EXPECT_DOUBLE_EQ(alone.first_us, 100);
}

TEST(Tuning, SearchedPickMustComputeWhatTheFirstChoiceDoes) {
  EXPECT_TRUE(t::output_matches(0.0));
  EXPECT_TRUE(t::output_matches(t::kMaxOutputRelDiff));
  EXPECT_FALSE(t::output_matches(0.0201));
  EXPECT_FALSE(t::output_matches(1.0));
  EXPECT_FALSE(t::output_matches(std::nan("")));
}

TEST(Tuning, TimedLoopKeepsThePickOnlyWhenBothOfItsLoopsWin) {
  EXPECT_TRUE(t::keep_pick_after_loops({true, 0.97}, {true, 1.0}, {true, 0.979}));
  EXPECT_FALSE(t::keep_pick_after_loops({true, 0.97}, {true, 1.0}, {true, 0.98}));  // the second loop by less than 2%
  EXPECT_FALSE(t::keep_pick_after_loops({true, 0.99}, {true, 1.0}, {true, 0.90}));  // the first loop
  EXPECT_FALSE(t::keep_pick_after_loops({false, 0.5}, {true, 1.0}, {true, 0.5}));
  EXPECT_FALSE(t::keep_pick_after_loops({true, 0.5}, {false, 0.0}, {true, 0.5}));
  EXPECT_FALSE(t::keep_pick_after_loops({true, 0.5}, {true, 1.0}, {false, 0.5}));
}
