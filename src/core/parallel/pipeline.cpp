#include "core/parallel/pipeline.hpp"

#include <algorithm>
#include <stdexcept>

namespace gs {

double PipelineSchedule::bubble_fraction() const {
  if (span_ms <= 0 || busy_ms.empty()) return 0;
  return 1.0 - *std::max_element(busy_ms.begin(), busy_ms.end()) / span_ms;
}

double bubble_1f1b(int64_t p, int64_t m) { return static_cast<double>(p - 1) / static_cast<double>(m + p - 1); }
double bubble_interleaved(int64_t p, int64_t v, int64_t m) {
  return static_cast<double>(p - 1) / static_cast<double>(v * m + p - 1);
}

std::vector<PipelinePass> schedule_order(int64_t s, int64_t p, int64_t v, int64_t m) {
  std::vector<PipelinePass> out;
  auto pass = [&](int64_t chunk, int64_t mb, bool bwd) {
    PipelinePass x;
    x.stage = s;
    x.chunk = chunk;
    x.microbatch = mb;
    x.backward = bwd;
    out.push_back(x);
  };
  if (v == 1) {
    const int64_t warmup = std::min(p - s - 1, m);
    for (int64_t i = 0; i < warmup; ++i) pass(0, i, false);
    for (int64_t i = 0; i < m - warmup; ++i) {
      pass(0, warmup + i, false);
      pass(0, i, true);
    }
    for (int64_t i = m - warmup; i < m; ++i) pass(0, i, true);
    return out;
  }
  // Megatron's interleaved schedule over m * v virtual micro-batches.
  const int64_t total = m * v;
  int64_t warmup = m == p ? total : std::min(total, (p - s - 1) * 2 + (v - 1) * p);
  auto chunk_of = [&](int64_t k, bool forward) {
    const int64_t c = (k % (p * v)) / p;
    return forward ? c : v - 1 - c;
  };
  auto mb_of = [&](int64_t k) { return (k / (p * v)) * p + (k % (p * v)) % p; };
  for (int64_t k = 0; k < warmup; ++k) pass(chunk_of(k, true), mb_of(k), false);
  const int64_t remaining = total - warmup;
  for (int64_t k = 0; k < remaining; ++k) {
    pass(chunk_of(k + warmup, true), mb_of(k + warmup), false);
    pass(chunk_of(k, false), mb_of(k), true);
  }
  for (int64_t k = remaining; k < total; ++k) pass(chunk_of(k, false), mb_of(k), true);
  return out;
}

PipelineSchedule simulate_pipeline(const PipelineSpec& spec) {
  const int64_t p = spec.stages, v = spec.chunks, m = spec.microbatches;
  if (p < 1 || v < 1 || m < 1) throw std::invalid_argument("simulate_pipeline: sizes must be positive");
  if (static_cast<int64_t>(spec.fwd_ms.size()) != p || static_cast<int64_t>(spec.bwd_ms.size()) != p)
    throw std::invalid_argument("simulate_pipeline: one row of pass times per stage");
  for (int64_t s = 0; s < p; ++s)
    if (static_cast<int64_t>(spec.fwd_ms[s].size()) != v || static_cast<int64_t>(spec.bwd_ms[s].size()) != v)
      throw std::invalid_argument("simulate_pipeline: one pass time per model chunk");
  if (v > 1 && m % p != 0) throw std::invalid_argument("simulate_pipeline: interleaving needs micro-batches divisible by stages");

  // End time of each pass, [((s * v + c) * m + mb) * 2 + backward]; < 0: not run yet.
  std::vector<double> done(static_cast<size_t>(p * v * m * 2), -1.0);
  auto at = [&](int64_t s, int64_t c, int64_t mb, bool bwd) -> double& {
    return done[static_cast<size_t>(((s * v + c) * m + mb) * 2 + (bwd ? 1 : 0))];
  };
  // When the input of a pass is ready (<0: not yet): the neighbour's pass plus the send.
  auto ready = [&](const PipelinePass& x) -> double {
    if (!x.backward) {
      if (x.stage > 0) {
        const double e = at(x.stage - 1, x.chunk, x.microbatch, false);
        return e < 0 ? -1 : e + spec.send_fwd_ms;
      }
      if (x.chunk > 0) {
        const double e = at(p - 1, x.chunk - 1, x.microbatch, false);
        return e < 0 ? -1 : e + (p > 1 ? spec.send_fwd_ms : 0);
      }
      return 0;
    }
    if (x.stage < p - 1) {
      const double e = at(x.stage + 1, x.chunk, x.microbatch, true);
      return e < 0 ? -1 : e + spec.send_bwd_ms;
    }
    if (x.chunk < v - 1) {
      const double e = at(0, x.chunk + 1, x.microbatch, true);
      return e < 0 ? -1 : e + (p > 1 ? spec.send_bwd_ms : 0);
    }
    return at(p - 1, v - 1, x.microbatch, false);  // the loss: same stage, no send
  };

  PipelineSchedule out;
  out.stages.resize(static_cast<size_t>(p));
  std::vector<size_t> next(static_cast<size_t>(p), 0);
  std::vector<double> free_at(static_cast<size_t>(p), 0.0);
  for (int64_t s = 0; s < p; ++s) out.stages[static_cast<size_t>(s)] = schedule_order(s, p, v, m);
  out.busy_ms.assign(static_cast<size_t>(p), 0.0);
  size_t left = static_cast<size_t>(p * v * m * 2);
  while (left > 0) {
    bool progressed = false;
    for (int64_t s = 0; s < p; ++s) {
      auto& list = out.stages[static_cast<size_t>(s)];
      size_t& i = next[static_cast<size_t>(s)];
      while (i < list.size()) {
        PipelinePass& x = list[i];
        const double r = ready(x);
        if (r < 0) break;
        const double dur = x.backward ? spec.bwd_ms[static_cast<size_t>(s)][static_cast<size_t>(x.chunk)]
                                      : spec.fwd_ms[static_cast<size_t>(s)][static_cast<size_t>(x.chunk)];
        x.start_ms = std::max(r, free_at[static_cast<size_t>(s)]);
        x.end_ms = x.start_ms + dur;
        free_at[static_cast<size_t>(s)] = x.end_ms;
        out.busy_ms[static_cast<size_t>(s)] += dur;
        at(s, x.chunk, x.microbatch, x.backward) = x.end_ms;
        ++i;
        --left;
        progressed = true;
      }
    }
    if (!progressed) throw std::logic_error("simulate_pipeline: the schedule deadlocked");
  }
  out.end_ms = free_at;
  out.span_ms = *std::max_element(free_at.begin(), free_at.end());
  return out;
}

}  // namespace gs
