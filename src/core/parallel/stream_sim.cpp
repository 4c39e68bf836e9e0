#include "core/parallel/stream_sim.hpp"

#include <algorithm>
#include <limits>
#include <stdexcept>

namespace gs {

SimTiming simulate_streams(const std::vector<SimOp>& ops, double compute_slowdown, double comm_slowdown,
                           int categories) {
  SimTiming t;
  const size_t n = ops.size();
  t.start_ms.assign(n, -1.0);
  t.end_ms.assign(n, -1.0);
  t.compute_ms_by_category.assign(static_cast<size_t>(std::max(1, categories)), 0.0);
  for (size_t i = 0; i < n; ++i) {
    for (size_t d : ops[i].deps)
      if (d >= i) throw std::invalid_argument("simulate_streams: an operation depends on a later one");
    if (!(ops[i].work_ms >= 0)) throw std::invalid_argument("simulate_streams: negative work");
    if (ops[i].category < 0 || ops[i].category >= static_cast<int>(t.compute_ms_by_category.size()))
      throw std::invalid_argument("simulate_streams: category out of range");
  }
  // Each stream's operations in order.
  std::vector<size_t> queue[2];
  for (size_t i = 0; i < n; ++i) queue[static_cast<int>(ops[i].stream)].push_back(i);
  size_t head[2] = {0, 0};
  long running[2] = {-1, -1};
  double left[2] = {0, 0};
  double now = 0;
  const double slow[2] = {1.0 + compute_slowdown, 1.0 + comm_slowdown};
  size_t finished = 0;
  while (finished < n) {
    // Start whatever can start now.
    for (int s = 0; s < 2; ++s) {
      while (running[s] < 0 && head[s] < queue[s].size()) {
        const size_t i = queue[s][head[s]];
        bool ok = true;
        for (size_t d : ops[i].deps) ok = ok && t.end_ms[d] >= 0 && t.end_ms[d] <= now;
        if (!ok) break;
        running[s] = static_cast<long>(i);
        t.start_ms[i] = now;
        left[s] = ops[i].work_ms;
        ++head[s];
        if (left[s] <= 0) {  // an empty operation ends where it starts
          t.end_ms[i] = now;
          running[s] = -1;
          ++finished;
        }
      }
    }
    if (finished >= n) break;
    const bool both = running[0] >= 0 && running[1] >= 0;
    // The next event: a running operation ends.
    double step = std::numeric_limits<double>::infinity();
    for (int s = 0; s < 2; ++s)
      if (running[s] >= 0) step = std::min(step, left[s] * (both ? slow[s] : 1.0));
    if (!(step < std::numeric_limits<double>::infinity()))
      throw std::logic_error("simulate_streams: nothing can run (a dependency never ends)");
    for (int s = 0; s < 2; ++s) {
      if (running[s] < 0) continue;
      const double rate = both ? 1.0 / slow[s] : 1.0;
      left[s] -= step * rate;
      if (s == 0) t.compute_ms_by_category[static_cast<size_t>(ops[static_cast<size_t>(running[s])].category)] += step;
    }
    now += step;
    for (int s = 0; s < 2; ++s) {
      if (running[s] >= 0 && left[s] <= 1e-12 * std::max(1.0, ops[static_cast<size_t>(running[s])].work_ms)) {
        t.end_ms[static_cast<size_t>(running[s])] = now;
        running[s] = -1;
        ++finished;
      }
    }
  }
  for (size_t i = 0; i < n; ++i) {
    t.makespan_ms = std::max(t.makespan_ms, t.end_ms[i]);
    if (ops[i].stream == SimStream::Compute) t.compute_end_ms = std::max(t.compute_end_ms, t.end_ms[i]);
  }
  return t;
}

}  // namespace gs
