// A cell's timed loop with what surrounds it, the same for every provider: the loop in chunks
// behind the launch gate with its events (timed_loop.hpp), the SM clock samples (clock_probe.hpp),
// --l2 cold's flush between iterations, the step context's work between iterations (given by the
// engine), --power-hold's GEMMs before each loop and the run's GPU warm-up (power_hold.hpp), and
// --profile's bracket around the loop (kernel_trace.hpp). The engine (engine_cuda.cu) owns one.
#pragma once
#include <cublasLt.h>
#include <cuda_runtime.h>

#include <functional>
#include <memory>
#include <string>

#include "core/results/kernels.hpp"
#include "core/results/results.hpp"
#include "cuda/common/device_buffer.hpp"
#include "cuda/timing/clock_probe.hpp"
#include "cuda/timing/launch_gate.hpp"
#include "cuda/timing/power_hold.hpp"
#include "cuda/timing/timed_loop.hpp"

namespace gs::cuda {

// Work enqueued after each iteration, outside the samples (the step context's share of a
// layer's other work, step_context_runner.hpp); empty: none.
struct LoopGap {
  std::function<void()> run;
  int cost = 0;  // operations it enqueues (an upper bound)
};

class CellTimer {
 public:
  // `handle` and `workspace` (kWorkspaceBytes) serve the power hold's GEMMs; `l2_bytes` sizes
  // --l2 cold's flush. Created after cudaSetDevice; throws CudaError.
  CellTimer(const TimingConfig& timing, const GemmOptions& gemm, int device, cudaStream_t s, cublasLtHandle_t handle,
            void* workspace, size_t workspace_bytes, int64_t l2_bytes);
  ~CellTimer();
  CellTimer(const CellTimer&) = delete;
  CellTimer& operator=(const CellTimer&) = delete;

  // The timed loop of `body` (warm-up, then the timed iterations) as a measured cell: its
  // statistics, clock sample and gate time-outs; `gap` and --l2 cold's flush after every
  // iteration.
  Cell timed(LoopBody body, const LoopGap& gap);
  // --l2 cold: enqueues a write of a buffer twice the L2's size, which evicts the operands (its
  // time is never in the samples); empty with --l2 warm. Tuning enqueues it between its samples.
  std::function<void()> l2_flush();
  // Runs the power hold's GEMMs for `seconds` (the run's GPU warm-up), if they can be made.
  void gpu_warmup(double seconds);
  // Why there is no power hold (said once in the run's notes); empty when there is one or none was needed.
  const std::string& hold_note() const { return hold_note_; }

 private:
  PowerHold* power_hold();

  TimingConfig timing_;
  bool profile_;
  cudaStream_t stream_;
  cublasLtHandle_t handle_;
  void* workspace_;
  size_t workspace_bytes_;
  int64_t l2_bytes_;
  std::unique_ptr<ClockProbe> probe_;
  std::unique_ptr<LaunchGate> gate_;
  EventPool events_;
  DeviceBuffer l2_flush_;             // --l2 cold: written between iterations
  std::unique_ptr<PowerHold> hold_;   // --power-hold and the GPU warm-up (power_hold())
  std::string hold_note_;             // why there is none, once
};

}  // namespace gs::cuda
