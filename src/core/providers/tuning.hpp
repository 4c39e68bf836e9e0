// Kernel tuning, provider-neutral: the rules by which a provider's candidate kernels for one
// problem are timed and one of them kept (candidates -> timed rounds -> pick -> record). Pure
// C++ on plain numbers: the backend's driver (src/cuda/providers/tuner.hpp) enqueues the samples and reads
// their times, and every decision it takes on those times is a function here, tested on the CPU.
//
// Candidate 0 is the provider's own first choice (cuBLASLt's heuristic). It stays unless another
// candidate beats it clearly at every stage: the rounds, the confirmation, and both of the
// cell's own timed loops (a pick that wins short samples can lose under the power cap).
#pragma once
#include <cstddef>
#include <vector>

namespace gs::tuning {

// A sample: ~2 ms of calls back to back (3 to 64 calls), the count set by one call of the first
// candidate that runs.
inline constexpr double kSampleUs = 2000.0;
inline constexpr int kMinReps = 3;
inline constexpr int kMaxReps = 64;
// The heat-up before the rounds (and again after a screen): samples of the first candidate that runs.
inline constexpr int kHeatUpSamples = 10;
// Rounds interleaving every candidate; a candidate's figure is the median of its rounds.
inline constexpr int kRounds = 5;
// A candidate replaces candidate 0 only where it is at least 2% faster (run-to-run noise on an
// H100 is about that): in the rounds, in the confirmation and in the cell's timed loops.
inline constexpr double kSwitchRatio = 0.98;
// The confirmation: candidate 0 and the pick alternate in longer samples (~25 ms, long enough for
// the power cap to act), at least the rounds' calls and at most 1024.
inline constexpr int kConfirmRounds = 6;
inline constexpr double kConfirmUs = 25000.0;
inline constexpr int kMaxConfirmReps = 1024;
// The screen of searched candidates: slices of 16, each led by candidate 0 as the yardstick, a
// quarter of a sample's calls each; a searched candidate joins when more than 1% faster.
inline constexpr size_t kScreenSlice = 16;
inline constexpr double kScreenRatio = 0.99;
// A searched pick computes what candidate 0 does: the relative Frobenius difference of their
// outputs (BF16 outputs of two summation orders differ by a few ulps; a wrong kernel by O(1)).
inline constexpr double kMaxOutputRelDiff = 2e-2;

inline constexpr size_t kNone = static_cast<size_t>(-1);

// The median (the mean of the middle two for an even count); the list must not be empty.
double median_of(std::vector<double> v);

// Calls per sample from one call's time (us).
int sample_reps(double first_call_us);
// Calls per screen sample: a quarter of a sample's, at least one.
int screen_reps(int reps);
// Calls per confirmation sample from candidate 0's median (us): ~kConfirmUs, at least `reps`.
int confirm_reps(double first_choice_us, int reps);

// The screen's slices of the searched candidates [first, end): each led by candidate 0.
std::vector<std::vector<size_t>> screen_slices(size_t first, size_t end);

// A candidate's mean time (us) in one sample.
struct Timed {
  size_t index = 0;
  double us = 0;
};
// A screened candidate that beat its slice's yardstick: its time over the yardstick's.
struct Faster {
  double ratio = 0;
  size_t index = 0;
};
// The candidates of one screened slice faster than candidate 0's sample in it by more than 1%
// (none where candidate 0 did not run in the slice).
std::vector<Faster> screen_faster(const std::vector<Timed>& slice);
// The screened candidates that join the rounds: best ratio first (equal ratios: lower index), up to k.
std::vector<size_t> screen_joiners(std::vector<Faster> faster, size_t k);

// The pick after the rounds, over positions of `median_us` (a candidate that did not run has
// ran = false): the fastest, but candidate 0 is replaced only by one at least 2% faster (any that
// ran, where candidate 0 did not). kNone when none ran.
size_t pick_fastest(const std::vector<double>& median_us, const std::vector<bool>& ran);

// The confirmation's verdict over its samples of candidate 0 and of the pick; an empty list
// keeps the rounds' median. The pick is confirmed when it has samples and their median is at
// least 2% below candidate 0's.
struct Confirmation {
  double first_us = 0, pick_us = 0;  // the medians that stand after the confirmation
  bool confirmed = false;
};
Confirmation confirm(const std::vector<double>& first_samples, const std::vector<double>& pick_samples,
                     double first_median_us, double pick_median_us);

// A searched pick is kept only when its output matches candidate 0's (NaN does not).
bool output_matches(double rel_diff);

// The last word, the cell's timed loop: timed with the pick, with candidate 0, with the pick
// again. The pick stays only if every loop ran and both of its loops beat candidate 0's by 2%.
struct LoopTime {
  bool ok = false;
  double mean_ms = 0;
};
bool keep_pick_after_loops(LoopTime pick, LoopTime first_choice, LoopTime pick_again);

}  // namespace gs::tuning
