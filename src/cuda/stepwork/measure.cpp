#include "cuda/stepwork/measure.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <memory>
#include <new>
#include <stdexcept>
#include <string>

#include "cuda/common/cuda_check.hpp"
#include "cuda/stepwork/launch_cost.hpp"
#include "cuda/stepwork/runs.hpp"

namespace gs::cuda::stepwork {
namespace {

constexpr size_t kReserve = size_t{512} << 20;  // left free: events, the engine's own, fragmentation
constexpr double kMinL2Multiple = 16;          // a scaled size moves at least this many L2s of bytes

double gib(size_t b) { return static_cast<double>(b) / (1 << 30); }

// The spec to measure: the real one, or the largest that fits, with the factor its times are
// scaled by and the words that say so; `why` set when nothing representative fits.
struct Fit {
  StepKernelSpec spec;
  double scale = 1;
  std::string note, why;
};

Fit fit_in_memory(const StepKernelSpec& real) {
  Fit fit{real, 1, {}, {}};
  size_t free_b = 0, total_b = 0;
  GS_CUDA(cudaMemGetInfo(&free_b, &total_b));
  const size_t budget = free_b > kReserve ? free_b - kReserve : 0;
  const size_t need = run_bytes(real);
  if (need <= budget) return fit;
  // Bytes grow with the size variable (plus a fixed table for the embedding): shrink until it fits.
  double f = static_cast<double>(budget) / static_cast<double>(need);
  for (int tries = 0; tries < 8 && run_bytes(fit.spec) > budget; ++tries) {
    fit.spec = scaled_spec(real, f * 0.97);
    f *= 0.9;
  }
  int device = 0, l2 = 0;
  GS_CUDA(cudaGetDevice(&device));
  GS_CUDA(cudaDeviceGetAttribute(&l2, cudaDevAttrL2CacheSize, device));
  const double moved = step_kernel_bytes(fit.spec);
  if (run_bytes(fit.spec) > budget || moved < kMinL2Multiple * l2)
    fit.why = fmt::format("{}: its buffers need {:.1f} GiB of GPU memory ({:.1f} GiB free), and no size that fits "
                          "moves enough bytes to stand for it", real.describe(), gib(need), gib(free_b));
  fit.scale = step_kernel_bytes(real) / moved;
  fit.note = fmt::format("; measured on {} ({:.1f} GiB of buffers; the real size needs {:.1f} GiB, {:.1f} GiB free): "
                         "{}{:.4g}", fit.spec.describe(), gib(run_bytes(fit.spec)), gib(need), gib(free_b), kScaledNote,
                         fit.scale);
  return fit;
}

void scale_stats(Stats& s, double f) {
  s.mean_ms *= f, s.median_ms *= f, s.min_ms *= f, s.max_ms *= f, s.stdev_ms *= f;
}

Cell measure_run(const StepKernelSpec& spec, const Timing& t) {
  if (spec.kind == StepKernelKind::LaunchLatency) {
    Cell cell = Cell::measured(summarize(launch_cost_ms(t.stream, t.warmup, std::max(t.iters, 1))));
    cell.kernels.config = fmt::format("launch cost: the host time of launching an empty kernel, {} launches back to "
                                      "back per sample, ms per launch",
                                      kLaunchBatch);
    return cell;
  }
  if (std::string why = cannot_run(spec); !why.empty()) return Cell::na(why);
  const Fit fit = fit_in_memory(spec);
  if (!fit.why.empty()) return Cell::na(fit.why);
  std::unique_ptr<StepRun> run = make_run(fit.spec, t.stream, t.seed);
  LoopBody body;
  body.pieces = run->pieces();
  body.cost = [](int) { return 1; };  // one launch or memset each
  body.enqueue = [&](int i) { run->enqueue(i, t.stream); };
  Cell cell = t.timed(body);
  if (fit.scale != 1) scale_stats(cell.stats, fit.scale);
  if (t.trace) cell.kernels = t.trace([&] { run->enqueue_all(t.stream); });
  cell.kernels.config = run->describe() + fit.note;
  return cell;
}

}  // namespace

Cell measure(const StepKernelSpec& spec, const Timing& t) {
  try {
    return measure_run(spec, t);
  } catch (const CudaError& e) {
    cudaGetLastError();  // a non-sticky error
    if (const cudaError_t lost = cudaDeviceSynchronize(); lost != cudaSuccess)
      throw std::runtime_error(fmt::format("the GPU reported an unrecoverable error while timing {} ({}; then {}); "
                                           "no further measurement is possible in this process",
                                           spec.describe(), e.what(), cudaGetErrorString(lost)));
    if (e.oom()) {
      size_t free_b = 0, total_b = 0;
      cudaMemGetInfo(&free_b, &total_b);
      return Cell::na(fmt::format("out of GPU memory for {} ({:.1f} GiB free)", spec.describe(), gib(free_b)));
    }
    return Cell::na(fmt::format("CUDA error while timing {}: {}", spec.describe(), e.what()));
  } catch (const std::bad_alloc&) {
    return Cell::na(fmt::format("out of host memory for {}", spec.describe()));
  }
}

}  // namespace gs::cuda::stepwork
