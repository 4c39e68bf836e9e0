// Multi-tensor launches of the FP8 quantization bodies (quantize_multi.cuh). A block finds its
// tensor in a per-block table (one load: a binary search over the tensors' first blocks cost a few
// microseconds of dependent loads per block, a large share of a small expert's tile), then runs
// the single-tensor body on its block index within that tensor's slice of the grid.
#include "cuda/quant/quantize_multi.cuh"

#include <algorithm>
#include <cmath>
#include <stdexcept>
#include <string>

#include "cuda/common/cuda_check.hpp"
#include "cuda/quant/quantize_kernels.cuh"

namespace gs::cuda {
namespace {

using namespace qc;
using namespace qk;

// A tensor as the kernels read it (device table).
struct MqTask {
  const __nv_bfloat16* x;
  int rows, cols;
  uint8_t* q;
  float* scale_inv;
  uint8_t* q_row;
  float* scale_row;
  const float* src;  // current: the amax; delayed: the scale
  float* history;
  int* pos;
  int hist_len;
  float* scale;       // delayed update: the scale it writes
  uint32_t* partial;  // amax: partial maxima
  float* amax;
  int np;             // amax: partial count
  unsigned begin, blocks;
};

__device__ __forceinline__ MqTask task_of(const MqTask* tasks, const int* block_task, unsigned b) {
  return tasks[__ldg(block_task + b)];
}

__global__ void __launch_bounds__(kAmaxThreads) multi_amax_partial_kernel(const MqTask* tasks, const int* bt) {
  const MqTask t = task_of(tasks, bt, blockIdx.x);
  amax_partial_body(t.x, size_t(t.rows) * size_t(t.cols), t.partial, blockIdx.x - t.begin, t.blocks);
}

__global__ void __launch_bounds__(kFinalThreads) multi_amax_final_kernel(const MqTask* tasks) {
  const MqTask t = tasks[blockIdx.x];
  amax_final_body(t.partial, t.np, t.amax, 0, 1);
}

// The same two passes with the tensors in a kernel parameter (the constant bank) instead of the
// global table: a block's first data load no longer waits on two dependent loads of a table that
// the previous sweep has evicted from L2 (about 1.5 us at the start of a 40 us pass; the amax over
// Qwen3-30B-A3B's 16 expert weights read 0.85 of copy bandwidth with the table, where one tensor over
// the same bytes read 0.88). Up to kAmaxParamTensors tensors; more take the global table.
__global__ void __launch_bounds__(kAmaxThreads) multi_amax_partial_param_kernel(const __grid_constant__ AmaxParams p) {
  int lo = 0, hi = p.count - 1;  // the tensor whose blocks hold blockIdx.x: the last begin <= it
  while (lo < hi) {
    const int mid = (lo + hi + 1) / 2;
    if (p.begin[mid] <= blockIdx.x) lo = mid;
    else hi = mid - 1;
  }
  amax_partial_body(p.x[lo], p.n[lo], p.partial[lo], blockIdx.x - p.begin[lo], p.begin[lo + 1] - p.begin[lo]);
}

__global__ void __launch_bounds__(kFinalThreads) multi_amax_final_param_kernel(const __grid_constant__ AmaxParams p) {
  const int t = static_cast<int>(blockIdx.x);
  amax_final_body(p.partial[t], static_cast<int>(p.begin[t + 1] - p.begin[t]), p.amax[t], 0, 1);
}

template <Fp8Kind K, bool kDelayed>
__global__ void __launch_bounds__(kThreads) multi_cast_rowwise_kernel(const MqTask* tasks, const int* bt) {
  const MqTask t = task_of(tasks, bt, blockIdx.x);
  cast_rowwise_body<K, kDelayed>(reinterpret_cast<const uint4*>(t.x), size_t(t.rows) * size_t(t.cols) / 8, t.src, t.q,
                                 t.scale_inv, t.history, t.pos, blockIdx.x - t.begin, t.blocks);
}

template <Fp8Kind K, int kMode, int kH, bool kVec, bool kDual>
__global__ void __launch_bounds__(kThreads) multi_transpose_kernel(const MqTask* tasks, const int* bt, bool pow2) {
  const MqTask t = task_of(tasks, bt, blockIdx.x);
  transpose_body<K, kMode, kH, kVec, kDual>(t.x, t.rows, t.cols, t.src, t.q, t.scale_inv, t.history, t.pos, t.q_row,
                                            t.scale_row, pow2, blockIdx.x - t.begin, t.blocks);
}

template <Fp8Kind K, int kU>
__global__ void __launch_bounds__(kThreads) multi_block1x128_rowwise_kernel(const MqTask* tasks, const int* bt, bool pow2) {
  const MqTask t = task_of(tasks, bt, blockIdx.x);
  block1x128_rowwise_body<K, kU>(t.x, t.rows, t.cols, t.q, t.scale_inv, pow2, blockIdx.x - t.begin, t.blocks);
}

template <Fp8Kind K>
__global__ void __launch_bounds__(kThreads) multi_block128_rowwise_kernel(const MqTask* tasks, const int* bt, bool pow2) {
  const MqTask t = task_of(tasks, bt, blockIdx.x);
  block128_rowwise_body<K>(t.x, t.rows, t.cols, t.q, t.scale_inv, pow2, blockIdx.x - t.begin, t.blocks);
}

__global__ void __launch_bounds__(kFinalThreads) multi_delayed_update_kernel(const MqTask* tasks, float fmax) {
  const MqTask t = tasks[blockIdx.x];
  delayed_update_body(t.history, t.hist_len, t.pos, fmax, t.scale, 0, 1);
}

// The final pass with programmatic dependent launch, as the single-tensor amax runs it: its launch
// overlaps the partial pass (its blocks wait in griddepcontrol.wait), so no launch gap between them.
template <class Arg>
void launch_amax_final(void (*kernel)(Arg), const Arg& arg, int count, cudaStream_t s) {
  cudaLaunchConfig_t cfg{};
  cfg.gridDim = dim3(static_cast<unsigned>(count));
  cfg.blockDim = dim3(kFinalThreads);
  cfg.stream = s;
  cudaLaunchAttribute attr[1];
  attr[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
  attr[0].val.programmaticStreamSerializationAllowed = 1;
  cfg.attrs = attr;
  cfg.numAttrs = 1;
  if (cudaLaunchKernelEx(&cfg, kernel, arg) != cudaSuccess) {
    (void)cudaGetLastError();  // e.g. no programmatic launch on this stream: a plain launch
    kernel<<<count, kFinalThreads, 0, s>>>(arg);
  }
}

constexpr int kB1Units = 4;  // units per half-warp of the 1x128 rowwise body, as quantize.cu launches it

void require(bool ok, const std::string& what) {
  if (!ok) throw std::invalid_argument("multi-tensor quantization: " + what);
}

bool aligned16(const void* p) { return (reinterpret_cast<uintptr_t>(p) & 15u) == 0; }

// The transposed kernels' tile width (source columns) for an op.
int tile_halves(MultiQuantOp op, bool dual) {
  if (op == MultiQuantOp::Block128x128) return 2;
  if (dual && op == MultiQuantOp::Block1x128) return 2;
  return 1;
}

// Does the op run the transposed (tiled) kernel for this tensor?
bool tiled(MultiQuantOp op, bool dual, const QuantTensor& t) {
  if (op == MultiQuantOp::Amax || op == MultiQuantOp::DelayedUpdate) return false;
  return dual || t.transpose;
}

// The amax pass over all tensors: one wave of resident blocks shared by element count (a grid of
// many small per-tensor grids leaves each thread one or two loads and a tail of partial waves:
// 0.5-0.8 of copy bandwidth on 16-128 experts of 2048 columns), within each tensor's workspace.
std::vector<long long> amax_blocks(const std::vector<QuantTensor>& ts) {
  double total = 0;
  for (const QuantTensor& t : ts) total += double(t.rows) * double(t.cols);
  const double wave = device_blocks(reinterpret_cast<const void*>(multi_amax_partial_kernel), kAmaxThreads);
  std::vector<long long> out;
  for (const QuantTensor& t : ts) {
    const size_t n = size_t(t.rows) * size_t(t.cols);
    const long long share = std::llround(wave * double(n) / std::max(total, 1.0));
    out.push_back(std::max<long long>(1, std::min<long long>(share, (long long)amax_blocks_needed(n))));
  }
  return out;
}

long long blocks_for(MultiQuantOp op, bool dual, const QuantTensor& t) {
  const long long rows = t.rows, cols = t.cols;
  switch (op) {
    case MultiQuantOp::Amax: return 1;  // sized over all tensors: amax_blocks in the constructor
    case MultiQuantOp::DelayedUpdate: return 1;
    default: break;
  }
  if (tiled(op, dual, t)) {
    const int w = 64 * tile_halves(op, dual);
    return ((rows + 127) / 128) * ((cols + w - 1) / w);
  }
  switch (op) {
    case MultiQuantOp::CastCurrent:
    case MultiQuantOp::CastDelayed: {
      const long long nchunks = rows * cols / 8;
      const long long work = (nchunks / 64 * 32 + kThreads - 1) / kThreads + 1;
      const long long cap = device_blocks(reinterpret_cast<const void*>(multi_cast_rowwise_kernel<Fp8Kind::E4M3, false>),
                                          kThreads);
      return std::max<long long>(1, std::min(work, cap));
    }
    case MultiQuantOp::Block1x128: {
      const long long units = rows * ((cols + 127) / 128);
      const long long groups = (units + 2 * kB1Units - 1) / (2 * kB1Units);
      return std::max<long long>(1, (groups + kThreads / 32 - 1) / (kThreads / 32));
    }
    case MultiQuantOp::Block128x128: return std::max<long long>(1, ((rows + 127) / 128) * ((cols + 127) / 128));
    default: return 1;
  }
}

template <Fp8Kind K, int kMode, int kH, bool kDual>
void launch_tiled(unsigned grid, const MqTask* tab, const int* bt, bool vec, bool pow2, cudaStream_t s) {
  if (vec) multi_transpose_kernel<K, kMode, kH, true, kDual><<<grid, kThreads, 0, s>>>(tab, bt, pow2);
  else multi_transpose_kernel<K, kMode, kH, false, kDual><<<grid, kThreads, 0, s>>>(tab, bt, pow2);
}

// Transposed-kernel modes of quantize_kernels.cuh.
constexpr int kCur = 0, kDel = 1, kB1 = 2, kB128 = 3;

template <Fp8Kind K>
void launch_group(MultiQuantOp op, bool dual, bool pow2, bool transpose, bool vec, unsigned grid, const MqTask* tab,
                  const int* bt, cudaStream_t s) {
  const bool tile = dual || transpose;
  switch (op) {
    case MultiQuantOp::CastCurrent:
      if (dual) launch_tiled<K, kCur, 1, true>(grid, tab, bt, vec, pow2, s);
      else if (tile) launch_tiled<K, kCur, 1, false>(grid, tab, bt, vec, pow2, s);
      else multi_cast_rowwise_kernel<K, false><<<grid, kThreads, 0, s>>>(tab, bt);
      break;
    case MultiQuantOp::CastDelayed:
      if (dual) launch_tiled<K, kDel, 1, true>(grid, tab, bt, vec, pow2, s);
      else if (tile) launch_tiled<K, kDel, 1, false>(grid, tab, bt, vec, pow2, s);
      else multi_cast_rowwise_kernel<K, true><<<grid, kThreads, 0, s>>>(tab, bt);
      break;
    case MultiQuantOp::Block1x128:
      if (dual) launch_tiled<K, kB1, 2, true>(grid, tab, bt, vec, pow2, s);
      else if (tile) launch_tiled<K, kB1, 1, false>(grid, tab, bt, vec, pow2, s);
      else multi_block1x128_rowwise_kernel<K, kB1Units><<<grid, kThreads, 0, s>>>(tab, bt, pow2);
      break;
    case MultiQuantOp::Block128x128:
      if (dual) launch_tiled<K, kB128, 2, true>(grid, tab, bt, vec, pow2, s);
      else if (tile) launch_tiled<K, kB128, 2, false>(grid, tab, bt, vec, pow2, s);
      else multi_block128_rowwise_kernel<K><<<grid, kThreads, 0, s>>>(tab, bt, pow2);
      break;
    default: throw std::logic_error("launch_group: not a cast");
  }
}

}  // namespace

const char* to_string(MultiQuantOp op) {
  switch (op) {
    case MultiQuantOp::Amax: return "amax";
    case MultiQuantOp::CastCurrent: return "cast (current scaling)";
    case MultiQuantOp::CastDelayed: return "cast (delayed scaling)";
    case MultiQuantOp::Block1x128: return "1x128 block cast";
    case MultiQuantOp::Block128x128: return "128x128 block cast";
    case MultiQuantOp::DelayedUpdate: return "delayed-scaling update";
  }
  return "?";
}

MultiQuant::MultiQuant(MultiQuantOp op, Fp8Kind kind, bool dual, bool pow2, std::vector<QuantTensor> tensors)
    : op_(op), kind_(kind), dual_(dual), pow2_(pow2) {
  const bool casts = op != MultiQuantOp::Amax && op != MultiQuantOp::DelayedUpdate;
  std::vector<QuantTensor> keep;
  for (const QuantTensor& t : tensors) {
    require(t.rows >= 0 && t.cols >= 0, "negative dimension");
    if (size_t(t.rows) * size_t(t.cols) == 0) continue;
    if (op == MultiQuantOp::DelayedUpdate) {
      require(t.history && t.pos && t.scale && t.hist_len >= 1, "delayed update needs history, position and scale");
      keep.push_back(t);
      continue;
    }
    require(t.x != nullptr && aligned16(t.x), "source must be non-null and 16-byte aligned");
    require(t.cols % 8 == 0, "cols must be a multiple of 8, got " + std::to_string(t.cols));
    if (op == MultiQuantOp::Amax) {
      require(t.amax && t.amax_ws, "amax needs an output and a workspace");
    } else {
      require(t.q && aligned16(t.q) && t.scale_inv, "cast needs a 16-byte aligned output and scales");
      if (dual) require(t.q_row && aligned16(t.q_row) && t.scale_row, "dual cast needs the source-layout copy");
      if (op == MultiQuantOp::CastCurrent) require(t.amax != nullptr, "current scaling needs the amax");
      if (op == MultiQuantOp::CastDelayed) require(t.scale && t.history && t.pos, "delayed scaling needs its state");
    }
    keep.push_back(t);
  }
  count_ = static_cast<int>(keep.size());
  const std::vector<long long> amax_share = op == MultiQuantOp::Amax ? amax_blocks(keep) : std::vector<long long>{};
  // One launch per kernel instantiation: (tiled, rows 16-aligned) for casts, one for the rest.
  for (int key = 0; key < 4; ++key) {
    const bool transpose = key & 1, vec = !(key & 2);
    std::vector<MqTask> tab;
    std::vector<int> block_task;
    unsigned next = 0;
    for (const QuantTensor& t : keep) {
      if (casts && (tiled(op, dual, t) != transpose || (transpose && (t.rows % 16 == 0) != vec))) continue;
      if (!casts && key != 0) continue;
      const long long b = op == MultiQuantOp::Amax ? amax_share[static_cast<size_t>(&t - keep.data())]
                                                   : blocks_for(op, dual, t);
      require((long long)next + b < (1ll << 31), "too many blocks");
      MqTask m{};
      m.x = t.x;
      m.rows = t.rows;
      m.cols = t.cols;
      m.q = t.q;
      m.scale_inv = t.scale_inv;
      m.q_row = t.q_row;
      m.scale_row = t.scale_row;
      m.src = op == MultiQuantOp::CastDelayed ? t.scale : t.amax;
      m.history = t.history;
      m.pos = t.pos;
      m.hist_len = t.hist_len;
      m.scale = t.scale;
      m.partial = static_cast<uint32_t*>(t.amax_ws);
      m.amax = t.amax;
      m.np = static_cast<int>(b);
      m.begin = next;
      m.blocks = static_cast<unsigned>(b);
      next += static_cast<unsigned>(b);
      block_task.insert(block_task.end(), static_cast<size_t>(b), static_cast<int>(tab.size()));
      tab.push_back(m);
    }
    if (tab.empty()) continue;
    Group g;
    g.count = static_cast<int>(tab.size());
    g.blocks = next;
    g.transpose = transpose;
    g.vec = vec;
    if (op == MultiQuantOp::Amax && tab.size() <= static_cast<size_t>(kAmaxParamTensors)) {
      auto p = std::make_shared<AmaxParams>();
      p->count = static_cast<int>(tab.size());
      for (size_t i = 0; i < tab.size(); ++i) {
        p->begin[i] = tab[i].begin;
        p->x[i] = tab[i].x;
        p->n[i] = static_cast<unsigned long long>(tab[i].rows) * static_cast<unsigned long long>(tab[i].cols);
        p->partial[i] = tab[i].partial;
        p->amax[i] = tab[i].amax;
      }
      p->begin[tab.size()] = next;
      g.amax_params = std::move(p);
    }
    g.table = DeviceBuffer(tab.size() * sizeof(MqTask));
    GS_CUDA(cudaMemcpy(g.table.get(), tab.data(), g.table.bytes(), cudaMemcpyHostToDevice));
    g.block_task = DeviceBuffer(block_task.size() * sizeof(int));
    GS_CUDA(cudaMemcpy(g.block_task.get(), block_task.data(), g.block_task.bytes(), cudaMemcpyHostToDevice));
    groups_.push_back(std::move(g));
  }
}

int MultiQuant::launches() const {
  const int per = op_ == MultiQuantOp::Amax ? 2 : 1;
  return per * static_cast<int>(groups_.size());
}

void MultiQuant::launch(cudaStream_t s) const {
  for (const Group& g : groups_) {
    const auto* tab = g.table.get<MqTask>();
    const auto* bt = g.block_task.get<int>();
    switch (op_) {
      case MultiQuantOp::Amax:
        if (g.amax_params) {
          multi_amax_partial_param_kernel<<<g.blocks, kAmaxThreads, 0, s>>>(*g.amax_params);
          GS_CUDA_LAUNCH();
          launch_amax_final(multi_amax_final_param_kernel, *g.amax_params, g.count, s);
        } else {
          multi_amax_partial_kernel<<<g.blocks, kAmaxThreads, 0, s>>>(tab, bt);
          GS_CUDA_LAUNCH();
          launch_amax_final(multi_amax_final_kernel, tab, g.count, s);
        }
        break;
      case MultiQuantOp::DelayedUpdate:
        multi_delayed_update_kernel<<<g.count, kFinalThreads, 0, s>>>(tab, fp8_max(kind_));
        break;
      default:
        if (kind_ == Fp8Kind::E4M3)
          launch_group<Fp8Kind::E4M3>(op_, dual_, pow2_, g.transpose, g.vec, g.blocks, tab, bt, s);
        else
          launch_group<Fp8Kind::E5M2>(op_, dual_, pow2_, g.transpose, g.vec, g.blocks, tab, bt, s);
        break;
    }
    GS_CUDA_LAUNCH();
  }
}

}  // namespace gs::cuda
