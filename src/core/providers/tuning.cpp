#include "core/providers/tuning.hpp"

#include <algorithm>

namespace gs::tuning {

double median_of(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

int sample_reps(double first_call_us) {
  return std::clamp(static_cast<int>(kSampleUs / std::max(first_call_us, 1e-3)), kMinReps, kMaxReps);
}

int screen_reps(int reps) { return std::max(1, reps / 4); }

int confirm_reps(double first_choice_us, int reps) {
  return std::clamp(static_cast<int>(kConfirmUs / std::max(first_choice_us, 1e-3)), reps, kMaxConfirmReps);
}

std::vector<std::vector<size_t>> screen_slices(size_t first, size_t end) {
  std::vector<std::vector<size_t>> out;
  for (size_t s = first; s < end; s += kScreenSlice) {
    std::vector<size_t> slice{0};
    for (size_t i = s; i < std::min(end, s + kScreenSlice); ++i) slice.push_back(i);
    out.push_back(std::move(slice));
  }
  return out;
}

std::vector<Faster> screen_faster(const std::vector<Timed>& slice) {
  double yard = 0;
  for (const Timed& t : slice)
    if (t.index == 0) yard = t.us;
  std::vector<Faster> out;
  for (const Timed& t : slice)
    if (t.index != 0 && yard > 0 && t.us < kScreenRatio * yard) out.push_back({t.us / yard, t.index});
  return out;
}

std::vector<size_t> screen_joiners(std::vector<Faster> faster, size_t k) {
  std::sort(faster.begin(), faster.end(),
            [](const Faster& a, const Faster& b) { return a.ratio != b.ratio ? a.ratio < b.ratio : a.index < b.index; });
  if (faster.size() > k) faster.resize(k);
  std::vector<size_t> out;
  for (const Faster& f : faster) out.push_back(f.index);
  return out;
}

size_t pick_fastest(const std::vector<double>& median_us, const std::vector<bool>& ran) {
  if (median_us.empty()) return kNone;
  size_t pick = 0;
  for (size_t i = 1; i < median_us.size(); ++i)
    if (ran[i] && median_us[i] < median_us[pick] && (!ran[0] || median_us[i] < kSwitchRatio * median_us[0])) pick = i;
  return ran[pick] ? pick : kNone;
}

Confirmation confirm(const std::vector<double>& first_samples, const std::vector<double>& pick_samples,
                     double first_median_us, double pick_median_us) {
  Confirmation c;
  c.first_us = first_samples.empty() ? first_median_us : median_of(first_samples);
  c.pick_us = pick_samples.empty() ? pick_median_us : median_of(pick_samples);
  c.confirmed = !pick_samples.empty() && c.pick_us < kSwitchRatio * c.first_us;
  return c;
}

bool output_matches(double rel_diff) { return rel_diff <= kMaxOutputRelDiff; }

bool keep_pick_after_loops(LoopTime pick, LoopTime first_choice, LoopTime pick_again) {
  return pick.ok && first_choice.ok && pick_again.ok && pick.mean_ms < kSwitchRatio * first_choice.mean_ms &&
         pick_again.mean_ms < kSwitchRatio * first_choice.mean_ms;
}

}  // namespace gs::tuning
