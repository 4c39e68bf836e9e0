#include "cuda/timing/cell_timer.hpp"

#include <fmt/format.h>

#include <algorithm>

#include "cuda/common/cuda_check.hpp"
#include "cuda/timing/kernel_trace.hpp"

namespace gs::cuda {

CellTimer::CellTimer(const TimingConfig& timing, const GemmOptions& gemm, int device, cudaStream_t s,
                     cublasLtHandle_t handle, void* workspace, size_t workspace_bytes, int64_t l2_bytes)
    : timing_(timing),
      profile_(gemm.profile),
      stream_(s),
      handle_(handle),
      workspace_(workspace),
      workspace_bytes_(workspace_bytes),
      l2_bytes_(l2_bytes),
      probe_(std::make_unique<ClockProbe>(device)),
      gate_(std::make_unique<LaunchGate>()) {
  events_.reserve(static_cast<size_t>(timing.iters) + 16);
}

CellTimer::~CellTimer() = default;

std::function<void()> CellTimer::l2_flush() {
  if (!timing_.l2_cold()) return {};
  if (!l2_flush_.get()) {
    const int64_t l2 = std::max<int64_t>(l2_bytes_, int64_t{16} << 20);
    l2_flush_ = DeviceBuffer(static_cast<size_t>(2 * l2));
  }
  return [this] { GS_CUDA(cudaMemsetAsync(l2_flush_.get(), 0, l2_flush_.bytes(), stream_)); };
}

void CellTimer::gpu_warmup(double seconds) {
  if (PowerHold* h = power_hold()) h->run_for(stream_, seconds);
}

// The GEMMs that bring the GPU to its loaded power state (power_hold.hpp), made on first use;
// null when neither the GPU warm-up nor --power-hold on needs them, or when they cannot be made
// here (said once in the notes, naming what goes without them).
PowerHold* CellTimer::power_hold() {
  if (!timing_.power_hold && timing_.gpu_warmup_s <= 0) return nullptr;
  if (!hold_ && hold_note_.empty()) {
    // What goes without it: the GPU warm-up always, and the hold before each loop when asked for.
    const auto without = [this](const std::string& why) {
      return fmt::format("power hold: {}; the GPU warm-up was skipped{}", why,
                         timing_.power_hold ? " and timed loops start from whatever power state the gap "
                                              "before them left (--power-hold on has no effect)"
                                            : "");
    };
    try {
      hold_ = std::make_unique<PowerHold>(handle_, workspace_, workspace_bytes_, stream_);
    } catch (const CudaError& e) {
      cudaGetLastError();
      throw_if_context_lost(e.what(), "the power hold");
      hold_note_ = without(fmt::format("its GEMM could not be set up ({})", e.what()));
    } catch (const CublasError& e) {
      cudaStreamSynchronize(stream_);
      hold_note_ = without(fmt::format("cuBLASLt ran no BF16 GEMM for it ({})", e.what()));
    }
  }
  return hold_.get();
}

Cell CellTimer::timed(LoopBody body, const LoopGap& step) {
  auto flush = l2_flush();
  auto gap = step.run;
  if (flush || gap) {
    body.between = [flush, gap] {
      if (gap) gap();
      if (flush) flush();
    };
    body.between_cost = (flush ? 1 : 0) + (gap ? step.cost : 0);
  }
  ProfileBracket profiled(profile_);  // --profile: the timed loop (and its warm-up) only
  std::function<void(double)> hold;
  if (timing_.power_hold)
    if (PowerHold* h = power_hold()) hold = [this, h](double host_ms) { h->enqueue(stream_, PowerHold::hold_ms(host_ms)); };
  const LoopResult lr = run_timed_loop(*gate_, events_, stream_, body, timing_.warmup, timing_.iters, probe_.get(),
                                       kChunkOps, hold);
  profiled.stop();
  Cell cell = Cell::measured(summarize(lr.samples_ms));
  cell.clock = lr.clock;
  cell.gate_timed_out = lr.gate_timed_out;
  return cell;
}

}  // namespace gs::cuda
