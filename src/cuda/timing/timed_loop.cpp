#include "cuda/timing/timed_loop.hpp"

#include <algorithm>
#include <chrono>
#include <limits>
#include <stdexcept>

#include "cuda/common/cuda_check.hpp"

namespace gs::cuda {

void EventPool::reserve(size_t n) {
  while (events_.size() < n) events_.push_back(make_event());
}

namespace {

// Opens every gate when the loop leaves early (an exception): nothing stays blocked.
struct ReleaseOnExit {
  LaunchGate& g;
  ~ReleaseOnExit() { g.release(); }
};

struct Segment {
  size_t start, end;  // event indices
  int iter;
};

}  // namespace

std::optional<ClockSample> clock_mean(const std::vector<ClockSample>& samples) {
  if (samples.empty()) return std::nullopt;
  ClockSample m = samples.front();
  double sum = 0, temp = 0, power = 0;
  int temps = 0, powers = 0;
  for (const ClockSample& c : samples) {
    sum += c.sm_mhz;
    m.reasons |= c.reasons;
    if (c.temp_c) temp += *c.temp_c, ++temps;
    if (c.power_w) power += *c.power_w, ++powers;
  }
  m.sm_mhz = static_cast<int>(sum / static_cast<double>(samples.size()) + 0.5);
  m.temp_c = temps ? std::optional<int>(static_cast<int>(temp / temps + 0.5)) : std::nullopt;
  m.power_w = powers ? std::optional<double>(power / powers) : std::nullopt;
  return m;
}

LoopResult run_timed_loop(LaunchGate& gate, EventPool& events, cudaStream_t s, const LoopBody& body, int warmup,
                          int iters, const ClockProbe* probe, int chunk_ops,
                          const std::function<void(double)>& before_gate) {
  if (iters < 1 || body.pieces < 1 || body.streams < 1 || !body.enqueue || !body.cost)
    throw std::invalid_argument("run_timed_loop: empty loop");
  const int streams = body.streams;
  auto plain_iteration = [&] {
    if (body.fork) body.fork();
    for (int p = 0; p < body.pieces; ++p) body.enqueue(p);
    if (body.join) body.join();
    if (body.between) body.between();
  };
  const auto warm_start = std::chrono::steady_clock::now();
  for (int i = 0; i < warmup; ++i) plain_iteration();
  const double warm_host_ms =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - warm_start).count();

  // Slack on the timing stream for the gate, the chunk's start and end events and an iteration's
  // end event; the rest of the budget is for the pieces.
  constexpr int kSlack = 4;
  const int budget = std::max(chunk_ops - kSlack, 1);
  int64_t ops = 0;  // per iteration
  for (int p = 0; p < body.pieces; ++p) ops += body.cost(p);
  {
    const int64_t est_chunks = ops * iters / budget + iters / std::max(budget, 1) + 2;
    events.reserve(static_cast<size_t>(iters) + 1 + 2 * static_cast<size_t>(std::min<int64_t>(est_chunks, 1 << 20)));
  }
  if (before_gate) {
    // Host time per operation from the warm-up (5 us without one), times the first chunk's operations.
    const double per_op_ms = warmup > 0 && ops > 0 ? warm_host_ms / static_cast<double>(warmup * ops) : 5e-3;
    before_gate(per_op_ms * static_cast<double>(std::min<int64_t>(budget, ops * iters)));
    plain_iteration();
  }

  LoopResult out;
  std::vector<Segment> segs;
  segs.reserve(static_cast<size_t>(iters));
  size_t next_ev = 0;
  auto record = [&]() {
    const size_t i = next_ev++;
    GS_CUDA(cudaEventRecord(events.at(i), s));
    return i;
  };
  std::vector<int> used(static_cast<size_t>(streams), 0);
  size_t cur_start = 0;
  size_t prev_chunk_end = std::numeric_limits<size_t>::max();
  int chunk_pieces = 0, seg_pieces = 0;
  bool in_run = false;
  const uint32_t first_ticket = gate.next_ticket();
  const ReleaseOnExit guard{gate};

  auto open_chunk = [&] {
    gate.close(s);
    ++out.chunks;
    cur_start = record();
    std::fill(used.begin(), used.end(), 0);
    chunk_pieces = seg_pieces = 0;
  };
  // The clock is sampled at a quarter, half and three quarters of the timed iterations (a single
  // mid-loop sample can catch a transient) and averaged (clock_mean).
  const std::vector<int> sample_at = iters >= 4 ? std::vector<int>{iters / 4, iters / 2, 3 * iters / 4}
                                                : std::vector<int>{iters / 2};
  std::vector<ClockSample> samples;
  auto sample_clock = [&] {
    if (!probe) return;
    if (auto c = probe->sample()) samples.push_back(*c);
  };
  open_chunk();
  std::vector<int> seg_count(static_cast<size_t>(iters), 0);
  for (int it = 0; it < iters; ++it) {
    // The GPU is busy with an earlier, released chunk (one-chunk loops sample below).
    if (out.chunks >= 2 && std::find(sample_at.begin(), sample_at.end(), it) != sample_at.end()) sample_clock();
    for (int p = 0; p < body.pieces; ++p) {
      const int st = body.stream_of(p);
      const int c = body.cost(p);
      const int fj = in_run ? 0 : body.fork_join_cost;
      bool fits = used[static_cast<size_t>(st)] + c + fj <= budget;
      for (int k = 0; k < streams && fits; ++k)
        if (used[static_cast<size_t>(k)] + fj > budget) fits = false;
      if (!fits && chunk_pieces > 0) {
        // Chunk boundary: end the current run and segment, release this chunk, make sure the
        // one before it has finished (at most two chunks pending), open the next one.
        if (in_run) {
          if (body.join) body.join();
          in_run = false;
        }
        const size_t e = record();
        if (seg_pieces > 0) {
          segs.push_back({cur_start, e, it});
          ++seg_count[static_cast<size_t>(it)];
        }
        gate.release();
        if (prev_chunk_end != std::numeric_limits<size_t>::max())
          GS_CUDA(cudaEventSynchronize(events.at(prev_chunk_end)));
        prev_chunk_end = e;
        open_chunk();
      }
      if (!in_run) {
        if (body.fork) body.fork();
        for (int& u : used) u += body.fork_join_cost;
        in_run = true;
      }
      body.enqueue(p);
      used[static_cast<size_t>(st)] += c;
      ++chunk_pieces;
      ++seg_pieces;
    }
    if (in_run) {
      if (body.join) body.join();
      in_run = false;
    }
    const size_t e = record();
    ++used[0];
    segs.push_back({cur_start, e, it});
    ++seg_count[static_cast<size_t>(it)];
    cur_start = e;
    seg_pieces = 0;
    if (body.between) {  // outside the samples: the next one starts after it
      body.between();
      used[0] += body.between_cost + 1;
      cur_start = record();
    }
  }
  gate.release();
  if (samples.empty() && probe) {
    // One chunk: the whole loop is queued; sample as it passes each point.
    for (int at : sample_at)
      for (const Segment& g : segs)
        if (g.iter == at) {
          GS_CUDA(cudaEventSynchronize(events.at(g.start)));
          sample_clock();
          break;
        }
  }
  out.clock = clock_mean(samples);
  GS_CUDA(cudaEventSynchronize(events.at(segs.back().end)));
  out.samples_ms.assign(static_cast<size_t>(iters), 0.0);
  for (const Segment& g : segs) {
    float ms = 0;
    GS_CUDA(cudaEventElapsedTime(&ms, events.at(g.start), events.at(g.end)));
    out.samples_ms[static_cast<size_t>(g.iter)] += ms;
  }
  out.segments_per_iteration_max = *std::max_element(seg_count.begin(), seg_count.end());
  out.gate_timed_out = gate.timed_out_since(first_ticket);
  return out;
}

}  // namespace gs::cuda
