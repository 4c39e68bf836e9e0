// Multi-tensor apply, as the frameworks run their optimizers: PyTorch's fused AdamW and
// _foreach_norm, apex's and Transformer Engine's multi_tensor_adam and multi_tensor_l2norm. The
// parameter tensors are cut into chunks of kChunk values; one thread block works on one chunk, and
// one launch takes up to kBlocksPerLaunch chunks of up to max_tensors(depth) tensors, whose
// addresses travel in the kernel's parameter block (no table in device memory). A model with
// 8e9 parameters is ~122k chunks: ~382 launches per optimizer step.
//
// `Depth` is the number of lists (AdamW: parameter, gradient, first and second moment, and the
// BF16 copy when FP32 master parameters are kept). All lists of a tensor have the same length.
// Included by the stepwork .cu files only.
#pragma once
#include <cuda_runtime.h>

#include <array>
#include <cstdint>
#include <stdexcept>
#include <vector>

namespace gs::cuda::stepwork {

constexpr int kChunk = 65536;          // values per block (PyTorch's kChunkSize, apex's 2048 * 32)
constexpr int kBlocksPerLaunch = 320;  // chunks per launch (PyTorch's and apex's depth_to_max_blocks)
constexpr int kThreads = 512;          // threads per block (PyTorch's kBlockSize)
constexpr int kILP = 4;                // values per thread per step (PyTorch's kILP)

// Tensors per launch, as PyTorch and apex size them so that the parameter block stays under 4 KB.
constexpr int max_tensors(int depth) {
  return depth == 1 ? 110 : depth == 2 ? 64 : depth == 3 ? 48 : depth == 4 ? 36 : 30;
}

// One launch's work, passed by value as the kernel's parameter.
template <int Depth>
struct TensorBatch {
  static constexpr int kTensors = max_tensors(Depth);
  void* addr[Depth][kTensors];
  int64_t numel[kTensors];
  uint8_t block_tensor[kBlocksPerLaunch];  // the batch's tensor of each block
  int32_t block_chunk[kBlocksPerLaunch];   // the chunk of that tensor
};
static_assert(sizeof(TensorBatch<1>) < 4000 && sizeof(TensorBatch<4>) < 4000 && sizeof(TensorBatch<5>) < 4000,
              "a batch must fit the 4 KB kernel parameter block with room for the hyperparameters");

template <int Depth>
struct BatchLaunch {
  TensorBatch<Depth> batch{};
  int blocks = 0;
};

// The launches of one pass over `tensors` (each: one address per list) of `numel` values: tensors
// are taken in order, their chunks in order; a launch is cut when its blocks are full or when its
// tensor slots are full at the end of a tensor (a tensor cut by full blocks continues as the first
// tensor of the next launch), as PyTorch's multi_tensor_apply does. Every address must be 16-byte
// aligned (the kernels load kILP values at once).
template <int Depth>
std::vector<BatchLaunch<Depth>> plan_batches(const std::vector<std::array<void*, Depth>>& tensors,
                                             const std::vector<int64_t>& numel) {
  if (tensors.size() != numel.size()) throw std::invalid_argument("plan_batches: one size per tensor");
  std::vector<BatchLaunch<Depth>> out;
  BatchLaunch<Depth> cur;
  int slots = 0;  // tensors in `cur`
  for (size_t t = 0; t < tensors.size(); ++t) {
    if (numel[t] <= 0) continue;
    for (int d = 0; d < Depth; ++d)
      if (reinterpret_cast<uintptr_t>(tensors[t][static_cast<size_t>(d)]) % 16 != 0)
        throw std::invalid_argument("plan_batches: tensor addresses must be 16-byte aligned");
    auto take_slot = [&] {
      for (int d = 0; d < Depth; ++d) cur.batch.addr[d][slots] = tensors[t][static_cast<size_t>(d)];
      cur.batch.numel[slots] = numel[t];
      ++slots;
    };
    take_slot();
    const int64_t chunks = (numel[t] + kChunk - 1) / kChunk;
    for (int64_t c = 0; c < chunks; ++c) {
      cur.batch.block_tensor[cur.blocks] = static_cast<uint8_t>(slots - 1);
      cur.batch.block_chunk[cur.blocks] = static_cast<int32_t>(c);
      ++cur.blocks;
      const bool tensor_done = c == chunks - 1;
      const bool blocks_full = cur.blocks == kBlocksPerLaunch;
      const bool slots_full = slots == TensorBatch<Depth>::kTensors && tensor_done;
      if (blocks_full || slots_full) {
        out.push_back(cur);
        cur.blocks = 0;
        slots = 0;
        if (!tensor_done) take_slot();  // the rest of this tensor leads the next launch
      }
    }
  }
  if (cur.blocks > 0) out.push_back(cur);
  return out;
}

#ifdef __CUDACC__
// The block's share of its launch: tensor slot, first value, and how many values (<= kChunk).
template <int Depth>
__device__ __forceinline__ void block_chunk(const TensorBatch<Depth>& b, int& slot, int64_t& first, int64_t& n) {
  slot = b.block_tensor[blockIdx.x];
  first = static_cast<int64_t>(b.block_chunk[blockIdx.x]) * kChunk;
  n = b.numel[slot] - first;
  if (n > kChunk) n = kChunk;
}
#endif

}  // namespace gs::cuda::stepwork
