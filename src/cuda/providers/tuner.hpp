// Kernel tuning in the backend, provider-neutral: candidates -> timed rounds -> pick -> record.
// A provider lists its candidate kernels for one problem as a Tunable; run_tuning times them on
// the cell's operands and keeps one under the rules of core/providers/tuning.hpp; after the
// cell's timed loop, recheck_in_timed_loop gives that loop the last word. A provider's run offers
// its tuning to the engine as a RunTuner (provider.hpp ProviderRun::tuner): cuBLASLt's
// (providers/cublaslt/lt_tuner.hpp) is one; a provider with kernel variants of its own (CUTLASS's
// tiles) would be another, over its own Tunable (docs/architecture.md, "Tuning").
#pragma once
#include <cuda_runtime.h>

#include <cstddef>
#include <functional>

#include "core/results/kernels.hpp"
#include "core/results/results.hpp"

namespace gs::cuda {

class Tunable {
 public:
  virtual ~Tunable() = default;
  // Candidates 0 .. listed()-1 are the provider's own list, its first choice first (candidate 0,
  // kept unless beaten). Candidates listed() .. size()-1 were searched: each is screened first
  // with one short sample beside candidate 0, and only those that beat it join the rounds.
  virtual size_t listed() const = 0;
  virtual size_t size() const = 0;
  // Enqueues one call of candidate i on `s`, no host wait. Throws CublasError or Unsupported
  // where the library refuses the candidate here: it is skipped from then on.
  virtual void enqueue(size_t i, cudaStream_t s) = 0;
  // Runs candidate 0, then candidate i, on the same inputs: the relative Frobenius difference of
  // their outputs. Asked only for a searched pick.
  virtual double output_difference(size_t i, cudaStream_t s) = 0;
  // Throws what the engine turns into the cell's N/A text when no candidate runs at all
  // (default: Unsupported "no tuning candidate ran").
  [[noreturn]] virtual void none_ran() const;
};

// What a provider's run offers the engine for --algo autotune / search: the engine tunes before
// the cell's timed loop and gives that loop the last word after it (recheck_in_timed_loop), the
// same for every provider (engine_cuda.cu).
class RunTuner {
 public:
  virtual ~RunTuner() = default;
  // Times the candidates on the operands as they are now, `between` enqueued before each timed
  // call (--l2 cold's flush), and leaves the pick in use. Synchronizes the stream. Throws what
  // the engine turns into the cell's N/A text when no candidate runs.
  virtual AutotuneRecord tune(cudaStream_t s, const std::function<void()>& between) = 0;
  // After tune(): the pick is another kernel than candidate 0.
  virtual bool differs() const = 0;
  // After tune(): run the pick (true) or candidate 0 (false) from now on.
  virtual void select(bool tuned) = 0;
};

struct TuningOutcome {
  size_t pick = 0;  // the candidate kept
  // k, tried, heuristic_us (candidate 0's), chosen_us, confirmed, searched, screen_faster and
  // output_rel_diff; the provider adds the description of candidate 0 (`heuristic`).
  AutotuneRecord record;
};

// Times the candidates of `t` on stream `s` as the timed loop runs them: sustained (each round
// enqueues every candidate's sample back to back, an event pair around each call, `between`
// before each call outside the time, as --l2 cold's flush), a heat-up, the screen of searched
// candidates (up to k join), five interleaved rounds (medians), the pick, the confirmation of a
// pick against candidate 0 in longer alternating samples, and the output check of a searched
// pick. Synchronizes the stream. Calls t.none_ran() when no candidate runs.
TuningOutcome run_tuning(Tunable& t, cudaStream_t s, int k, const std::function<void()>& between = {});

// The cell's timed loop has the last word. `cell` was timed with the pick; when the pick differs
// from candidate 0 (`differs`), the loop runs again with candidate 0 (select(false)) and with the
// pick (select(true)), and the pick stays only if both of its loops beat candidate 0's by 2%
// (tuning::keep_pick_after_loops). Otherwise candidate 0 stays selected, its loop is the cell,
// and the record says so (confirmed false, chosen_us = heuristic_us). `timed` runs one loop.
Cell recheck_in_timed_loop(Cell cell, bool differs, AutotuneRecord& rec, const std::function<void(bool tuned)>& select,
                           const std::function<Cell()>& timed);

}  // namespace gs::cuda
