// Grouped GEMMs (MoE experts) as Transformer Engine's GroupedLinear runs them on Hopper with
// cuBLAS 13.1, which has no grouped cuBLASLt matmul: one cuBLASLt GEMM per expert, dealt
// round-robin over `streams` compute streams with event fork/join and one workspace per stream
// (TE's multi_stream_cublas_gemm), or all on one stream (streams = 0, serial).
//
// Operands, as a training framework holds them:
//   GroupDim::M (Fprop, Dgrad): the left operand (X or dY) is one token-major buffer [sum(rows), k]
//     sliced per expert; each expert has its own right operand (weight) and writes its rows of one
//     output buffer [sum(rows), n]. Experts with no rows do nothing.
//   GroupDim::K (Wgrad): both operands are token-major buffers [sum(tokens), m] and [sum(tokens), n]
//     sliced per expert along the contraction; each expert writes its own weight gradient [m, n].
//     An expert with no tokens has its gradient zeroed (a memset, as TE does), inside the group.
// Per-expert sizes are the recipe's padded sizes (core/recipes/grouped.hpp). Every precision works per
// expert with its own quantized copies and scales (FP8 delayed scaling: its own amax history).
// Quantization, in the timed region as the mode says (core/recipes/modes.hpp, applied to each expert's
// GEMM): by default all experts' operands in a few multi-tensor launches before the GEMMs
// (grouped_quant.hpp, RecipeOptions::grouped_quant_fused), else per expert (one amax/cast per
// expert tensor, on the expert's stream). Wgrad (GroupDim::K) writes each expert's gradient in
// FP32 with beta = 1 by default (RecipeOptions::wgrad_fp32_accumulate): an empty expert then adds
// nothing and runs nothing.
#pragma once
#include <cublasLt.h>
#include <cuda_runtime.h>

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "core/recipes/modes.hpp"
#include "core/plan/plan.hpp"
#include "core/recipes/recipe.hpp"
#include "cuda/common/cuda_handles.hpp"
#include "cuda/common/device_buffer.hpp"
#include "cuda/providers/cublaslt/gemm_lt.hpp"
#include "cuda/quant/grouped_quant.hpp"
#include "cuda/providers/cublaslt/recipe_gemm.hpp"
#include "cuda/timing/timed_loop.hpp"

namespace gs::cuda {

class GroupedGemm {
 public:
  // streams: 0 = serial on `main`; else round-robin over that many side streams (owned here).
  // with_gemm=false: the experts' quantization only (RecipeGemm with_gemm=false, no cuBLASLt: the
  // handle and workspace may be null), for a provider whose single launch replaces the per-expert
  // GEMMs; it uses quantizer(), expert() and prepare(), never body() or run_once().
  GroupedGemm(cublasLtHandle_t handle, GroupedSources& src, Precision p, Mode mode, const RecipeOptions& opts,
              int streams, cudaStream_t main, void* main_workspace, LtAlgoCache* cache, bool with_gemm = true);
  ~GroupedGemm();
  GroupedGemm(const GroupedGemm&) = delete;
  GroupedGemm& operator=(const GroupedGemm&) = delete;

  // Prepares operands the timed region does not quantize (pre-quantized mode, training mode's
  // reused copies, delayed scaling's history). Synchronizes.
  void prepare();
  LoopBody body();             // one iteration: every expert's work, as pieces
  void run_once();             // one iteration on `main`, synchronized (tests, kernel records)
  int experts() const { return static_cast<int>(src_.sizes.size()); }
  // Per-expert access for tests: null for an expert with no GEMM (empty).
  const RecipeGemm* expert(int e) const { return gemms_[static_cast<size_t>(e)].get(); }
  // Expert e's operands and output as its GEMM sees them (views into the shared buffers).
  const GemmSources& expert_sources(int e) const { return views_[static_cast<size_t>(e)]; }
  Gemm expert_gemm_of(int e) const;
  int streams() const { return streams_; }
  // The multi-tensor quantizer (null: per-expert quantization, or nothing to quantize).
  const GroupedQuantizer* quantizer() const { return quant_.get(); }
  // Upper bound of the bytes quantized copies take beyond the sources (for the memory check).
  static size_t quantized_bytes(const Gemm& g, const std::vector<int64_t>& padded, Precision p, Mode mode);

 private:
  void release();
  // Pieces: expert indices, plus the grouped quantization before the GEMMs and its delayed-scaling
  // step after them (on the timing stream, ordered against the side streams by events).
  static constexpr int kQuantize = -1, kAfter = -2;
  void enqueue(int e);
  int cost(int e) const;
  int stream_index(int e) const { return streams_ == 0 || e < 0 ? 0 : 1 + e % streams_; }
  cudaStream_t stream_of(int e) const {
    return streams_ == 0 || e < 0 ? main_ : side_[static_cast<size_t>(e % streams_)];
  }
  void fork();
  void join();

  GroupedSources& src_;
  Precision precision_;
  Mode mode_;
  int streams_;
  cudaStream_t main_;
  std::vector<Stream> side_;
  std::vector<DeviceBuffer> workspaces_;
  Event fork_ev_, quant_ev_;
  std::vector<Event> join_ev_;
  std::vector<GemmSources> views_;  // non-owning
  std::vector<std::unique_ptr<RecipeGemm>> gemms_;
  std::unique_ptr<GroupedQuantizer> quant_;
  std::vector<int> pieces_;  // [kQuantize], experts with work in order, [kAfter]
};

}  // namespace gs::cuda
