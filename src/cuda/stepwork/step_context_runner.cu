#include "cuda/stepwork/step_context_runner.hpp"

#include <fmt/format.h>

#include <algorithm>

#include "core/gpu/gpu_spec.hpp"
#include "cuda/common/cuda_check.hpp"
#include "cuda/timing/event_timer.hpp"

namespace gs::cuda {
namespace {

// Mean time of `n` back-to-back calls of `f` on `s` (ms), after `warm` untimed ones.
template <class F>
double mean_ms(cudaStream_t s, F&& f, int warm, int n) {
  for (int i = 0; i < warm; ++i) f();
  EventTimer timer;
  return timer.time_ms(s, [&] { for (int i = 0; i < n; ++i) f(); }) / n;
}

}  // namespace

StepContextRunner::StepContextRunner(const StepWorkModel& model, double user_other_ms, const DeviceInfo& device,
                                     int clock_khz, cudaStream_t stream)
    : model_(model), stream_(stream) {
  work_ = std::make_unique<StepWork>(device.l2_bytes, stream);
  info_.kind = model.kind;
  info_.stream_gb_per_s = work_->bytes_per_ms() * 1e-6;
  info_.efficiency = model.efficiency;
  info_.move_gb_per_s = work_->gather_bytes_per_ms() * 1e-6;
  info_.other_from_user = user_other_ms > 0;
  const StepOtherSplit memory =
      info_.other_from_user
          ? split_step_other_ms(model, user_other_ms, work_->bytes_per_ms(), work_->gather_bytes_per_ms())
          : modelled_memory_ms(model, work_->bytes_per_ms(), work_->gather_bytes_per_ms());
  info_.other_ms = memory.other_ms;
  info_.move_ms = memory.move_ms;
  info_.cast_ms = info_.other_from_user ? 0.0 : modelled_cast_ms(model, work_->bytes_per_ms());
  const AttentionShape& a = model.attention;
  info_.attention_shape = describe(a);
  if (model.kind == StepContextKind::None || !check_attention_shape(a).empty()) return;
  std::string why;
  attention_ = make_attention_kernels(a, stream, why);
  if (attention_) {
    info_.attention_fwd_ms = mean_ms(stream, [&] { attention_->enqueue_forward(stream); }, 3, 10);
    info_.attention_bwd_ms = mean_ms(stream, [&] { attention_->enqueue_backward(stream); }, 3, 10);
    info_.attention_measured = true;
    info_.attention_source = attention_->source() + ", measured on this GPU";
    return;
  }
  // Modelled: FLOPs at a fraction of the dense BF16 peak at the GPU's maximum clock.
  const double peak_flops_per_ms = static_cast<double>(device.sm_count) * clock_khz *
                                   device.arch_policy().bf16_dense_flops_per_sm_clock();
  if (peak_flops_per_ms > 0) {
    info_.attention_fwd_ms = attention_fwd_flops(a) / (kAttentionPeakFraction * peak_flops_per_ms);
    info_.attention_bwd_ms = attention_bwd_flops(a) / (kAttentionPeakFraction * peak_flops_per_ms);
  }
  info_.attention_source = fmt::format(
      "modelled: its FLOPs at {:.0f}% of the dense BF16 peak, run as memory-bound work ({})",
      kAttentionPeakFraction * 100, why);
}

StepContextRunner::~StepContextRunner() = default;

std::function<void()> StepContextRunner::between(const Gemm& g, bool casts) {
  if (model_.kind == StepContextKind::None && !info_.other_from_user) return {};
  const double x = share(g);
  double memory_ms = (info_.other_ms + (casts ? info_.cast_ms : 0.0)) * x;
  if (!attention_) memory_ms += info_.attention_ms() * x;  // modelled attention as memory-bound work
  const double move_ms = info_.move_ms * x;
  const double attention_ms = attention_ ? info_.attention_ms() * x : 0.0;
  return [this, memory_ms, move_ms, attention_ms] {
    work_->enqueue(memory_ms, stream_);
    work_->enqueue_gather(move_ms, stream_);
    if (attention_ms <= 0) return;
    owed_ms_ += attention_ms;
    // Whole forward or backward passes, alternating, once their time is owed; at most
    // kMaxPasses per call (between_cost() bounds what a call enqueues; the rest carries over).
    for (int i = 0; i < kMaxPasses; ++i) {
      const double next = next_forward_ ? info_.attention_fwd_ms : info_.attention_bwd_ms;
      if (owed_ms_ < next) break;
      if (next_forward_) attention_->enqueue_forward(stream_);
      else attention_->enqueue_backward(stream_);
      owed_ms_ -= next;
      next_forward_ = !next_forward_;
    }
  };
}

}  // namespace gs::cuda
