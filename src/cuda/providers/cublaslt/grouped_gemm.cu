#include "cuda/providers/cublaslt/grouped_gemm.hpp"

#include <fmt/format.h>

#include <numeric>
#include <stdexcept>

#include "core/recipes/grouped.hpp"
#include "cuda/common/cuda_check.hpp"

namespace gs::cuda {

namespace {

constexpr size_t kBf16 = 2;

size_t elems(int64_t a, int64_t b) { return static_cast<size_t>(a) * static_cast<size_t>(b); }

}  // namespace

size_t GroupedGemm::quantized_bytes(const Gemm& g, const std::vector<int64_t>& padded, Precision p, Mode mode) {
  if (p == Precision::BF16) return 0;
  // One byte per element (FP8; NVFP4 half of that) per copy, plus scales (well under 10%);
  // training mode keeps a second (transposed) copy of each tensor.
  const double copies = mode == Mode::Training ? 2.2 : 1.1;
  size_t e = 0;
  for (int64_t s : padded) {
    if (s == 0) continue;
    if (g.group_dim == GroupDim::M) e += elems(s, g.k) + elems(g.k, g.n);
    else e += elems(s, g.m) + elems(s, g.n);
  }
  return static_cast<size_t>(static_cast<double>(e) * copies);
}

Gemm GroupedGemm::expert_gemm_of(int e) const { return expert_gemm(src_.gemm, src_.sizes[static_cast<size_t>(e)]); }

GroupedGemm::GroupedGemm(cublasLtHandle_t handle, GroupedSources& src, Precision p, Mode mode,
                         const RecipeOptions& opts, int streams, cudaStream_t main, void* main_workspace,
                         LtAlgoCache* cache, bool with_gemm)
    : src_(src), precision_(p), mode_(mode), streams_(streams), main_(main) {
  if (streams < 0) throw std::invalid_argument("grouped streams must be >= 0");
  try {
    for (int i = 0; i < streams; ++i) {
      side_.push_back(make_stream());
      workspaces_.push_back(make_lt_workspace());
      join_ev_.push_back(make_event(cudaEventDisableTiming));
    }
    if (streams > 0) fork_ev_ = make_event(cudaEventDisableTiming);
    const Gemm& g = src.gemm;
    const int n = experts();
    views_.resize(static_cast<size_t>(n));
    gemms_.resize(static_cast<size_t>(n));
    auto* tl = src.tokens_l.get<__nv_bfloat16>();
    auto* tr = src.tokens_r.get<__nv_bfloat16>();
    auto* out = src.out.get<__nv_bfloat16>();
    for (int e = 0; e < n; ++e) {
      const int64_t size = src.sizes[static_cast<size_t>(e)];
      const int64_t off = src.offsets[static_cast<size_t>(e)];
      const Gemm eg = expert_gemm(g, size);
      GemmSources& v = views_[static_cast<size_t>(e)];
      v.m = eg.m; v.k = eg.k; v.n = eg.n;
      v.l_k_major = eg.a.k_major;
      v.r_k_major = eg.b.k_major;
      if (g.group_dim == GroupDim::M) {
        v.l = DeviceBuffer::view(tl + off * g.k, elems(size, g.k) * kBf16);
        v.c = DeviceBuffer::view(out + off * g.n, elems(size, g.n) * kBf16);
        if (size > 0) v.r = DeviceBuffer::view(src.per_expert[static_cast<size_t>(e)].get(), elems(g.k, g.n) * kBf16);
      } else {
        v.l = DeviceBuffer::view(tl + off * g.m, elems(size, g.m) * kBf16);
        v.r = DeviceBuffer::view(tr + off * g.n, elems(size, g.n) * kBf16);
        v.c = DeviceBuffer::view(src.per_expert[static_cast<size_t>(e)].get(), src.per_expert[static_cast<size_t>(e)].bytes());
        v.c_fp32 = src.fp32_out;
      }
      // K: an empty expert's piece zeroes its BF16 gradient; an FP32 main gradient gets nothing added.
      if (size == 0) {
        if (g.group_dim == GroupDim::K && !src.fp32_out) pieces_.push_back(e);
        continue;
      }
      pieces_.push_back(e);
      const Recipe r = make_recipe(p, eg, opts);
      if (std::string why = shape_constraint(r, eg); !why.empty())
        throw std::invalid_argument(fmt::format("expert {}: {}", e, why));
      void* ws = streams_ == 0 ? main_workspace : workspaces_[static_cast<size_t>(e % streams_)].get();
      gemms_[static_cast<size_t>(e)] = std::make_unique<RecipeGemm>(
          handle, eg, r, v, ws, opts, with_gemm, operand_work(mode, eg, Side::Left, r, opts),
          operand_work(mode, eg, Side::Right, r, opts), cache);
    }
    // All experts' quantization in a few multi-tensor launches (grouped_quant.hpp), when the
    // recipe allows it: one piece before the GEMMs, one after them for delayed scaling.
    const Recipe r = make_recipe(p, expert_gemm(g, std::max<int64_t>(src.offsets.back(), 1)), opts);
    if (opts.grouped_quant_fused && GroupedQuantizer::supports(r)) {
      std::vector<RecipeGemm*> experts;
      for (auto& rg : gemms_) experts.push_back(rg.get());
      quant_ = std::make_unique<GroupedQuantizer>(experts);
      if (quant_->has_quantize()) pieces_.insert(pieces_.begin(), kQuantize);
      if (quant_->has_after()) pieces_.push_back(kAfter);
      if (streams > 0) quant_ev_ = make_event(cudaEventDisableTiming);
    }
  } catch (...) {
    release();  // in release()'s order (the members would go in reverse declaration order)
    throw;
  }
}

GroupedGemm::~GroupedGemm() { release(); }

void GroupedGemm::release() {
  gemms_.clear();
  side_.clear();
  join_ev_.clear();
  fork_ev_.reset();
  quant_ev_.reset();
  quant_.reset();
}

void GroupedGemm::prepare() {
  for (auto& g : gemms_)
    if (g && g->needs_prequantize()) g->prequantize(main_);
  GS_CUDA(cudaStreamSynchronize(main_));
}

void GroupedGemm::fork() {
  if (streams_ == 0) return;
  GS_CUDA(cudaEventRecord(fork_ev_, main_));
  for (const Stream& s : side_) GS_CUDA(cudaStreamWaitEvent(s, fork_ev_, 0));
}

void GroupedGemm::join() {
  if (streams_ == 0) return;
  for (size_t i = 0; i < side_.size(); ++i) {
    GS_CUDA(cudaEventRecord(join_ev_[i], side_[i]));
    GS_CUDA(cudaStreamWaitEvent(main_, join_ev_[i], 0));
  }
}

void GroupedGemm::enqueue(int e) {
  if (e == kQuantize) {  // on the timing stream; the side streams wait for it
    quant_->quantize(main_);
    if (streams_ > 0) {
      GS_CUDA(cudaEventRecord(quant_ev_, main_));
      for (const Stream& s : side_) GS_CUDA(cudaStreamWaitEvent(s, quant_ev_, 0));
    }
    return;
  }
  if (e == kAfter) {  // after every expert's GEMM
    join();
    quant_->after_gemms(main_);
    return;
  }
  const cudaStream_t s = stream_of(e);
  RecipeGemm* g = gemms_[static_cast<size_t>(e)].get();
  if (g) {
    g->step(s);
    return;
  }
  // Wgrad of an empty expert: its weight gradient is zeroed, as Transformer Engine does.
  const DeviceBuffer& c = views_[static_cast<size_t>(e)].c;
  GS_CUDA(cudaMemsetAsync(c.get(), 0, c.bytes(), s));
}

LoopBody GroupedGemm::body() {
  LoopBody b;
  b.pieces = static_cast<int>(pieces_.size());
  b.streams = streams_ == 0 ? 1 : streams_ + 1;
  b.stream_of = [this](int i) { return stream_index(pieces_[static_cast<size_t>(i)]); };
  b.cost = [this](int i) { return cost(pieces_[static_cast<size_t>(i)]); };
  b.enqueue = [this](int i) { enqueue(pieces_[static_cast<size_t>(i)]); };
  if (streams_ > 0) {
    b.fork = [this] { fork(); };
    b.join = [this] { join(); };
    // The timing stream: a record and a wait per side stream; each side stream: a wait and a
    // record, plus a wait for the grouped quantization and a record for its after-GEMM step.
    b.fork_join_cost = streams_ + 1 + (quant_ ? 2 : 0);
  }
  return b;
}

int GroupedGemm::cost(int e) const {
  if (e == kQuantize) return quant_->quantize_ops() + 1;
  if (e == kAfter) return quant_->after_ops() + streams_;
  const RecipeGemm* g = gemms_[static_cast<size_t>(e)].get();
  return g ? g->step_ops() : 1;
}

void GroupedGemm::run_once() {
  fork();
  for (int e : pieces_) enqueue(e);
  join();
  GS_CUDA(cudaStreamSynchronize(main_));
}

}  // namespace gs::cuda
