#include "cuda/providers/tuner.hpp"

#include <algorithm>
#include <limits>
#include <memory>
#include <utility>
#include <vector>

#include "core/providers/tuning.hpp"
#include "core/util/error.hpp"
#include "cuda/common/cuda_check.hpp"
#include "cuda/common/cuda_handles.hpp"

namespace gs::cuda {

void Tunable::none_ran() const { throw Unsupported("no tuning candidate ran"); }

namespace {

// Events for one sample: a pair per call, so that `between` (the L2 flush of --l2 cold, enqueued
// between calls as in the timed loop) stays outside the time.
class SampleEvents {
 public:
  explicit SampleEvents(int n) : capacity_(n) {
    ev_.reserve(2 * static_cast<size_t>(n));
    for (int i = 0; i < 2 * n; ++i) ev_.push_back(make_event());
  }
  int capacity() const { return capacity_; }
  cudaEvent_t start(int i) const { return ev_[2 * static_cast<size_t>(i)]; }
  cudaEvent_t stop(int i) const { return ev_[2 * static_cast<size_t>(i) + 1]; }

 private:
  int capacity_;
  std::vector<Event> ev_;  // released with the sample, also when its constructor throws
};

// One tuning of one Tunable: the steps of run_tuning, each on the candidates still running.
//
// Timing is sustained, as in the timed loop: a round enqueues every candidate's sample back to
// back with no host wait in between (idle gaps let the clock boost, and a kernel that wins a short
// burst can lose under the power cap: on an H100 a 192x192-tile pick that won bursts was 6%
// slower in the timed loop). Each call has its own event pair (an event after every call, as the
// timed loop records one per iteration: back-to-back calls without it can overlap one GEMM's tail
// with the next one's start, which the timed loop never sees).
class TuningRun {
 public:
  TuningRun(Tunable& t, cudaStream_t s, const std::function<void()>& between)
      : t_(t), s_(s), between_(between), ok_(t.size(), true) {}

  // Calls per sample, from one call of the first listed candidate that runs.
  int calibrate() {
    int reps = 0;
    for (size_t i = 0; i < t_.listed() && reps == 0; ++i)
      for (const tuning::Timed& x : round({i}, 1)) reps = tuning::sample_reps(x.us);
    if (reps == 0) t_.none_ran();
    return reps;
  }

  // ~20 ms on the first candidate of `active` that runs.
  void heat_up(const std::vector<size_t>& active, int reps) {
    for (int h = 0; h < tuning::kHeatUpSamples; ++h)
      for (size_t i : active)
        if (ok_[i]) {
          round({i}, reps);
          break;
        }
  }

  // The search's screen: one short sample of every searched candidate, in slices that each begin
  // with candidate 0 (its sample in the same slice is the yardstick, so a clock drift over the
  // screen does not favour a slice). Returns the listed candidates, then the screen's best.
  std::vector<size_t> screen(int reps, size_t k, AutotuneRecord& rec) {
    std::vector<tuning::Faster> faster;
    for (const std::vector<size_t>& slice : tuning::screen_slices(t_.listed(), t_.size()))
      for (const tuning::Faster& f : tuning::screen_faster(round(slice, tuning::screen_reps(reps))))
        faster.push_back(f);
    rec.searched = static_cast<int>(t_.size() - t_.listed());
    rec.screen_faster = static_cast<int>(faster.size());
    std::vector<size_t> active = listed();
    for (size_t i : tuning::screen_joiners(std::move(faster), k)) active.push_back(i);
    return active;
  }

  // Rounds interleave the candidates, so that a clock drift during tuning touches all of them
  // alike; each candidate's figure is the median of its rounds (the minimum would favour a
  // candidate with a noisy lucky round). Per position of `active`; infinity where it did not run.
  std::vector<double> rounds(const std::vector<size_t>& active, int reps) {
    std::vector<std::vector<double>> samples(t_.size());
    for (int r = 0; r < tuning::kRounds; ++r)
      for (const tuning::Timed& x : round(active, reps)) samples[x.index].push_back(x.us);
    std::vector<double> med(active.size(), std::numeric_limits<double>::infinity());
    for (size_t p = 0; p < active.size(); ++p)
      if (ok_[active[p]]) med[p] = tuning::median_of(samples[active[p]]);
    return med;
  }

  // Candidate 0 and the pick alternate in fresh, longer samples (~25 ms each: long enough for the
  // power cap to act, which short samples do not see: on an H100 a cluster-1x2 FP8 block pick that
  // won 2 ms samples by 2% ran 2% slower in the timed loop).
  tuning::Confirmation confirm(size_t first, size_t pick, double first_us, double pick_us, int reps) {
    const int long_reps = tuning::confirm_reps(first_us, reps);
    std::vector<double> h, c;
    for (int r = 0; r < tuning::kConfirmRounds; ++r)
      for (const tuning::Timed& x : round(r % 2 ? std::vector<size_t>{pick, first} : std::vector<size_t>{first, pick},
                                          long_reps))
        (x.index == first ? h : c).push_back(x.us);
    return tuning::confirm(h, c, first_us, pick_us);
  }

  std::vector<size_t> listed() const {
    std::vector<size_t> v(t_.listed());
    for (size_t i = 0; i < v.size(); ++i) v[i] = i;
    return v;
  }
  bool ran(size_t i) const { return ok_[i]; }

 private:
  // Enqueues one sample of each candidate in `which`, back to back, then waits: the mean time
  // per call of each candidate that ran (one that fails to enqueue is marked and skipped).
  std::vector<tuning::Timed> round(const std::vector<size_t>& which, int reps) {
    // Events first: nothing on the host between the samples but enqueuing.
    if (slots_.size() < which.size()) slots_.resize(which.size());
    for (size_t slot = 0; slot < which.size(); ++slot)
      if (!slots_[slot] || slots_[slot]->capacity() < reps)
        slots_[slot] = std::make_unique<SampleEvents>(std::max(reps, tuning::kMaxReps));
    std::vector<std::pair<size_t, const SampleEvents*>> ran;
    for (size_t slot = 0; slot < which.size(); ++slot) {
      const size_t i = which[slot];
      if (!ok_[i]) continue;
      try {
        sample(i, *slots_[slot], reps);
        ran.emplace_back(i, slots_[slot].get());
      } catch (const CublasError&) {
        ok_[i] = false;  // this candidate does not run here (e.g. a workspace or alignment limit)
      } catch (const Unsupported&) {
        ok_[i] = false;
      }
    }
    GS_CUDA(cudaStreamSynchronize(s_));
    std::vector<tuning::Timed> out;
    for (const auto& [i, ev] : ran) out.push_back({i, mean_us(*ev, reps)});
    return out;
  }

  // A first untimed call, then `reps` timed ones.
  void sample(size_t i, const SampleEvents& ev, int reps) {
    t_.enqueue(i, s_);
    for (int r = 0; r < reps; ++r) {
      if (between_) between_();
      GS_CUDA(cudaEventRecord(ev.start(r), s_));
      t_.enqueue(i, s_);
      GS_CUDA(cudaEventRecord(ev.stop(r), s_));
    }
  }

  static double mean_us(const SampleEvents& ev, int reps) {
    double us = 0;
    for (int r = 0; r < reps; ++r) {
      float ms = 0;
      GS_CUDA(cudaEventElapsedTime(&ms, ev.start(r), ev.stop(r)));
      us += static_cast<double>(ms) * 1000.0;
    }
    return us / reps;
  }

  Tunable& t_;
  cudaStream_t s_;
  const std::function<void()>& between_;
  std::vector<bool> ok_;  // per candidate: false once it failed to enqueue
  std::vector<std::unique_ptr<SampleEvents>> slots_;  // a round's samples, by position
};

}  // namespace

TuningOutcome run_tuning(Tunable& t, cudaStream_t s, int k, const std::function<void()>& between) {
  TuningOutcome out;
  AutotuneRecord& rec = out.record;
  rec.k = k;
  if (t.listed() == 0) t.none_ran();
  TuningRun run(t, s, between);
  const int reps = run.calibrate();
  std::vector<size_t> active = run.listed();
  run.heat_up(active, reps);
  if (t.size() > t.listed()) {
    active = run.screen(reps, static_cast<size_t>(std::max(k, 0)), rec);
    run.heat_up(active, reps);
  }
  std::vector<double> med = run.rounds(active, reps);
  std::vector<bool> ran(active.size());
  for (size_t p = 0; p < active.size(); ++p) ran[p] = run.ran(active[p]);
  // Candidate 0 is replaced only by a candidate at least 2% faster ...
  size_t pick = tuning::pick_fastest(med, ran);
  if (pick == tuning::kNone) t.none_ran();
  // ... that also wins the confirmation by 2%.
  if (pick != 0 && run.ran(active[0])) {
    const tuning::Confirmation c = run.confirm(active[0], active[pick], med[0], med[pick], reps);
    rec.confirmed = c.confirmed;
    if (!c.confirmed) pick = 0;
    med[0] = c.first_us;
    if (pick != 0) med[pick] = c.pick_us;
  }
  // A searched pick is kept only if its output is candidate 0's (same inputs; a different tiling
  // sums in another order, so a few BF16 ulps apart at most).
  if (pick != 0 && active[pick] >= t.listed()) {
    rec.output_rel_diff = t.output_difference(active[pick], s);
    if (!tuning::output_matches(rec.output_rel_diff)) {
      pick = 0;
      rec.confirmed = false;
    }
  }
  for (size_t i : active) rec.tried += run.ran(i) ? 1 : 0;
  rec.heuristic_us = run.ran(active[0]) ? med[0] : 0;
  rec.chosen_us = med[pick];
  out.pick = active[pick];
  return out;
}

Cell recheck_in_timed_loop(Cell cell, bool differs, AutotuneRecord& rec, const std::function<void(bool tuned)>& select,
                           const std::function<Cell()>& timed) {
  if (!differs) return cell;
  select(false);
  Cell first = timed();
  select(true);
  Cell again = timed();
  if (tuning::keep_pick_after_loops({cell.ok, cell.stats.mean_ms}, {first.ok, first.stats.mean_ms},
                                    {again.ok, again.stats.mean_ms}))
    return again;
  select(false);
  rec.confirmed = false;
  rec.chosen_us = rec.heuristic_us;
  return first;
}

}  // namespace gs::cuda
