#include <stdexcept>

#include "cuda/quant/quantize.cuh"
#include "cuda/quant/quantize_mx.cuh"
#include "cuda/providers/cublaslt/recipe_gemm.hpp"

namespace gs::cuda {

cudaDataType_t cuda_type(ElemFormat f) {
  switch (f) {
    case ElemFormat::BF16: return CUDA_R_16BF;
    case ElemFormat::E4M3: return CUDA_R_8F_E4M3;
    case ElemFormat::E5M2: return CUDA_R_8F_E5M2;
    case ElemFormat::E2M1: return CUDA_R_4F_E2M1;
  }
  return CUDA_R_16BF;
}

cublasLtMatmulMatrixScale_t lt_scale_mode(Scaling s) {
  switch (s) {
    case Scaling::Block1x128: return CUBLASLT_MATMUL_MATRIX_SCALE_VEC128_32F;
    case Scaling::Block128x128: return CUBLASLT_MATMUL_MATRIX_SCALE_BLK128x128_32F;
    case Scaling::Mx32: return CUBLASLT_MATMUL_MATRIX_SCALE_VEC32_UE8M0;
    case Scaling::Nv16:
    case Scaling::Nv16x16: return CUBLASLT_MATMUL_MATRIX_SCALE_VEC16_UE4M3;
    default: return CUBLASLT_MATMUL_MATRIX_SCALE_SCALAR_32F;
  }
}

Fp8Kind fp8_kind(ElemFormat f) {
  if (f == ElemFormat::E4M3) return Fp8Kind::E4M3;
  if (f == ElemFormat::E5M2) return Fp8Kind::E5M2;
  throw std::invalid_argument("not an FP8 format");
}

namespace {

int to_int(int64_t v) {
  if (v > 0x7fffffff) throw std::invalid_argument("dimension exceeds int32");
  return static_cast<int>(v);
}

}  // namespace

QuantizedOperand::QuantizedOperand(const OperandRecipe& recipe, const __nv_bfloat16* src, int64_t outer, int64_t k,
                                   bool src_k_major, const RecipeOptions& opts)
    : recipe_(recipe), src_(src), outer_(outer), k_(k), transpose_(!src_k_major) {
  const size_t elems = static_cast<size_t>(outer) * static_cast<size_t>(k);
  switch (recipe.scaling) {
    case Scaling::TensorCurrent:
      q_ = DeviceBuffer(elems);
      scale_ = DeviceBuffer(sizeof(float));
      amax_ = DeviceBuffer(sizeof(float));
      ws_ = DeviceBuffer(amax_workspace_bytes(elems));
      break;
    case Scaling::TensorDelayed: {
      q_ = DeviceBuffer(elems);
      scale_ = DeviceBuffer(sizeof(float));
      history_len_ = opts.amax_history_len;
      history_ = DeviceBuffer(sizeof(float) * static_cast<size_t>(history_len_));
      pos_ = DeviceBuffer(sizeof(int));
      delayed_scale_ = DeviceBuffer(sizeof(float));
      GS_CUDA(cudaMemset(history_.get(), 0, history_.bytes()));
      GS_CUDA(cudaMemset(pos_.get(), 0, sizeof(int)));
      const float one = 1.f;  // TE starts from scale 1 and an empty history
      GS_CUDA(cudaMemcpy(delayed_scale_.get(), &one, sizeof one, cudaMemcpyHostToDevice));
      // These run on the legacy default stream, which the engine's non-blocking stream does not
      // wait for: finish them before any kernel on another stream reads the history or scale.
      GS_CUDA(cudaStreamSynchronize(cudaStreamLegacy));
      break;
    }
    case Scaling::Block1x128:
      q_ = DeviceBuffer(elems);
      scale_ = DeviceBuffer(sizeof(float) * static_cast<size_t>(block_scale_count_1x128(to_int(outer), to_int(k))));
      break;
    case Scaling::Block128x128:
      q_ = DeviceBuffer(elems);
      scale_ = DeviceBuffer(sizeof(float) * static_cast<size_t>(block_scale_count_128x128(to_int(outer), to_int(k))));
      GS_CUDA(cudaMemset(scale_.get(), 0, scale_.bytes()));  // padding columns stay defined
      GS_CUDA(cudaStreamSynchronize(cudaStreamLegacy));       // see TensorDelayed
      break;
    case Scaling::None:
      break;
    case Scaling::Mx32:
      q_ = DeviceBuffer(mxfp8_data_bytes(to_int(outer), to_int(k)));
      scale_ = DeviceBuffer(mxfp8_scale_bytes(to_int(outer), to_int(k)));
      break;
    case Scaling::Nv16:
    case Scaling::Nv16x16:
      q_ = DeviceBuffer(nvfp4_data_bytes(to_int(outer), to_int(k)));
      scale_ = DeviceBuffer(nvfp4_scale_bytes(to_int(outer), to_int(k)));
      amax_ = DeviceBuffer(sizeof(float));
      ws_ = DeviceBuffer(amax_workspace_bytes(elems));
      gscale_inv_ = DeviceBuffer(sizeof(float));
      break;
  }
}

namespace {

// NVFP4's per-tensor scales have no cuBLASLt attribute: alpha = product of both operands'.
__global__ void alpha_from_global_scales(const float* a, const float* b, float* alpha_beta, float beta) {
  alpha_beta[0] = *a * *b;
  alpha_beta[1] = beta;
}

}  // namespace

void QuantizedOperand::quantize(cudaStream_t s, bool amax_given) {
  // The source is [rows, cols]: [outer, K] when K-major, else [K, outer] (transposed on the way).
  const int rows = to_int(transpose_ ? k_ : outer_);
  const int cols = to_int(transpose_ ? outer_ : k_);
  auto* q = q_.get<uint8_t>();
  auto* sc = scale_.get<float>();
  switch (recipe_.scaling) {
    case Scaling::TensorCurrent:
      if (!amax_given)
        amax_bf16(src_, static_cast<size_t>(rows) * static_cast<size_t>(cols), amax_.get<float>(), ws_.get(), s);
      cast_fp8_current(src_, rows, cols, transpose_, fp8_kind(recipe_.format), amax_.get<float>(), q, sc, s);
      break;
    case Scaling::TensorDelayed:
      cast_fp8_delayed(src_, rows, cols, transpose_, fp8_kind(recipe_.format), delayed_scale_.get<float>(), q, sc,
                       history_.get<float>(), pos_.get<int>(), s);
      break;
    case Scaling::Block1x128:
      quantize_block_1x128(src_, rows, cols, transpose_, fp8_kind(recipe_.format), q, sc, s, recipe_.pow2_scales);
      break;
    case Scaling::Block128x128:
      quantize_block_128x128(src_, rows, cols, transpose_, fp8_kind(recipe_.format), q, sc, s, recipe_.pow2_scales);
      break;
    case Scaling::Mx32:
      quantize_mxfp8(src_, rows, cols, transpose_, fp8_kind(recipe_.format), q, scale_.get<uint8_t>(), s);
      break;
    case Scaling::Nv16:
    case Scaling::Nv16x16: {
      Nvfp4Options o;
      o.two_d = recipe_.scaling == Scaling::Nv16x16;
      o.rht = recipe_.hadamard;
      o.stochastic = recipe_.stochastic_rounding;
      o.sr_seed = 0x5eed;
      o.sr_offset = sr_calls_++;  // fresh rounding bits every call, as in training
      // The per-tensor amax pass (of the transformed tensor when the RHT is on), then the cast.
      if (o.rht) amax_rht_bf16(src_, rows, cols, transpose_, o.rht_sign_mask, amax_.get<float>(), s);
      else amax_bf16(src_, static_cast<size_t>(rows) * static_cast<size_t>(cols), amax_.get<float>(), ws_.get(), s);
      quantize_nvfp4(src_, rows, cols, transpose_, amax_.get<float>(), o, q, scale_.get<uint8_t>(),
                     gscale_inv_.get<float>(), s);
      break;
    }
    case Scaling::None:
      break;
  }
}

void QuantizedOperand::quantize_dual(QuantizedOperand& o, cudaStream_t s, bool amax_given) {
  if (o.src_ != src_ || o.transpose_ == transpose_ || o.outer_ != k_ || o.k_ != outer_)
    throw std::invalid_argument("quantize_dual: the other operand is not this source in the other layout");
  const bool fused = dual_is_fused(recipe_) && recipe_.scaling == o.recipe_.scaling && recipe_.format == o.recipe_.format;
  if (!fused) {
    quantize(s, amax_given);
    o.quantize(s);
    return;
  }
  QuantizedOperand& row = transpose_ ? o : *this;  // [rows, cols]: the source layout
  QuantizedOperand& tr = transpose_ ? *this : o;   // [cols, rows]
  const int rows = to_int(row.outer_), cols = to_int(row.k_);
  const Fp8Kind kind = fp8_kind(recipe_.format);
  auto* rq = row.q_.get<uint8_t>();
  auto* tq = tr.q_.get<uint8_t>();
  auto* rs = row.scale_.get<float>();
  auto* ts = tr.scale_.get<float>();
  switch (recipe_.scaling) {
    case Scaling::TensorCurrent:
      if (!amax_given)
        amax_bf16(src_, static_cast<size_t>(rows) * static_cast<size_t>(cols), amax_.get<float>(), ws_.get(), s);
      cast_fp8_current_dual(src_, rows, cols, kind, amax_.get<float>(), rq, rs, tq, ts, s);
      break;
    case Scaling::TensorDelayed:
      cast_fp8_delayed_dual(src_, rows, cols, kind, delayed_scale_.get<float>(), rq, rs, tq, ts, history_.get<float>(),
                            pos_.get<int>(), s);
      break;
    case Scaling::Block1x128:
      quantize_block_1x128_dual(src_, rows, cols, kind, rq, rs, tq, ts, s, recipe_.pow2_scales);
      break;
    case Scaling::Block128x128:
      quantize_block_128x128_dual(src_, rows, cols, kind, rq, rs, tq, ts, s, recipe_.pow2_scales);
      break;
    default: throw std::logic_error("quantize_dual: no fused dual pass for this scaling");
  }
}

QuantTensor QuantizedOperand::tensor() const {
  QuantTensor t;
  t.x = src_;
  t.rows = to_int(transpose_ ? k_ : outer_);
  t.cols = to_int(transpose_ ? outer_ : k_);
  t.transpose = transpose_;
  t.q = q_.get<uint8_t>();
  t.scale_inv = scale_.get<float>();
  t.amax = amax_ ? amax_.get<float>() : nullptr;
  t.amax_ws = ws_ ? ws_.get() : nullptr;
  t.scale = delayed_scale_ ? delayed_scale_.get<float>() : nullptr;
  t.history = history_ ? history_.get<float>() : nullptr;
  t.pos = pos_ ? pos_.get<int>() : nullptr;
  t.hist_len = history_len_;
  return t;
}

QuantTensor QuantizedOperand::dual_tensor(const QuantizedOperand& o) const {
  if (o.src_ != src_ || o.transpose_ == transpose_ || o.outer_ != k_ || o.k_ != outer_)
    throw std::invalid_argument("dual_tensor: the other operand is not this source in the other layout");
  const QuantizedOperand& row = transpose_ ? o : *this;  // [rows, cols]: the source layout
  const QuantizedOperand& tr = transpose_ ? *this : o;   // [cols, rows]
  QuantTensor t = tensor();  // amax, workspace and delayed state are this operand's, as in quantize_dual
  t.rows = to_int(row.outer_);
  t.cols = to_int(row.k_);
  t.transpose = true;
  t.q = tr.q_.get<uint8_t>();
  t.scale_inv = tr.scale_.get<float>();
  t.q_row = row.q_.get<uint8_t>();
  t.scale_row = row.scale_.get<float>();
  return t;
}

void QuantizedOperand::dequantize_to(__nv_bfloat16* out, cudaStream_t s) const {
  const int outer = to_int(outer_), k = to_int(k_);
  switch (recipe_.scaling) {
    case Scaling::Mx32:
      dequantize_mxfp8(q_.get<uint8_t>(), scale_.get<uint8_t>(), outer, k, fp8_kind(recipe_.format), out, s);
      break;
    case Scaling::Nv16:
    case Scaling::Nv16x16:
      dequantize_nvfp4(q_.get<uint8_t>(), scale_.get<uint8_t>(), outer, k, out, s);
      break;
    default:
      throw std::invalid_argument("dequantize_to: only MXFP8/NVFP4 operands are emulated");
  }
}

int QuantizedOperand::quantize_ops(bool amax_given) const {
  switch (recipe_.scaling) {
    case Scaling::TensorCurrent: return amax_given ? 1 : 3;  // amax: partial + final kernels; cast
    case Scaling::TensorDelayed:
    case Scaling::Block1x128:
    case Scaling::Block128x128: return 1;
    case Scaling::Mx32: return 2;  // scale-padding memset + kernel
    case Scaling::Nv16:
    case Scaling::Nv16x16: return 4;  // amax (2) + scale-padding memset + kernel
    case Scaling::None: return 0;
  }
  return 4;
}

void QuantizedOperand::after_gemm(cudaStream_t s) {
  if (recipe_.scaling == Scaling::TensorDelayed)
    delayed_scale_update(history_.get<float>(), history_len_, pos_.get<int>(), fp8_kind(recipe_.format),
                         delayed_scale_.get<float>(), s);
}

LtOperand lt_operand(const OperandRecipe& r, const void* data, const void* scale) {
  LtOperand o;
  o.data = data;
  o.type = cuda_type(r.format);
  o.k_major = true;
  o.scale = scale;
  o.scale_mode = lt_scale_mode(r.scaling);
  return o;
}

LtOperand QuantizedOperand::lt() const { return lt_operand(recipe_, q_.get(), scale_.get()); }

std::vector<uint8_t> QuantizedOperand::data_host() const {
  std::vector<uint8_t> h(q_.bytes());
  GS_CUDA(cudaMemcpy(h.data(), q_.get(), h.size(), cudaMemcpyDeviceToHost));
  return h;
}

std::vector<float> QuantizedOperand::scales_host() const {
  std::vector<float> h(scale_.bytes() / sizeof(float));
  GS_CUDA(cudaMemcpy(h.data(), scale_.get(), h.size() * sizeof(float), cudaMemcpyDeviceToHost));
  return h;
}

RecipeGemm::RecipeGemm(cublasLtHandle_t handle, const Gemm& g, const Recipe& r, GemmSources& src, void* workspace,
                       const RecipeOptions& opts, bool with_gemm, OperandWork wl, OperandWork wr,
                       LtAlgoCache* cache, int sm_count, int heuristic_count)
    : recipe_(r), wl_(wl), wr_(wr) {
  LtProblem p;
  p.sm_count = sm_count;
  p.m = g.m; p.n = g.n; p.k = g.k;
  p.c = src.c.get();
  if (r.fp32_accumulate != src.c_fp32)
    throw std::invalid_argument(r.fp32_accumulate ? "RecipeGemm: the recipe accumulates into FP32 but the output is BF16"
                                                  : "RecipeGemm: the output is FP32 but the recipe writes BF16");
  if (src.c_fp32) {  // accumulate into the FP32 main gradient
    p.c_type = CUDA_R_32F;
    p.beta = 1.f;
  }
  p.fast_accum = r.fast_accum;
  if (r.precision == Precision::BF16) {
    p.l = {src.l.get(), CUDA_R_16BF, src.l_k_major, nullptr, CUBLASLT_MATMUL_MATRIX_SCALE_SCALAR_32F};
    p.r = {src.r.get(), CUDA_R_16BF, src.r_k_major, nullptr, CUBLASLT_MATMUL_MATRIX_SCALE_SCALAR_32F};
  } else {
    l_ = std::make_unique<QuantizedOperand>(r.a, src.l.get<__nv_bfloat16>(), g.m, g.k, src.l_k_major, opts);
    r_ = std::make_unique<QuantizedOperand>(r.b, src.r.get<__nv_bfloat16>(), g.n, g.k, src.r_k_major, opts);
    // The sibling of a Dual operand: the same source in the other layout, with the recipe of the
    // GEMM that reads it (e.g. NVFP4's Wgrad copies carry the Hadamard transform).
    auto sibling = [&](Side side, const QuantizedOperand& own, const __nv_bfloat16* source, bool src_k_major) {
      const DualConsumer dc = dual_consumer(g, side);
      const Recipe cr = make_recipe(r.precision, dc.gemm, opts);
      return std::make_unique<QuantizedOperand>(dc.side == Side::Left ? cr.a : cr.b, source, own.k(), own.outer(),
                                                !src_k_major, opts);
    };
    if (wl.work == QuantWork::Dual) l_sib_ = sibling(Side::Left, *l_, src.l.get<__nv_bfloat16>(), src.l_k_major);
    if (wr.work == QuantWork::Dual) r_sib_ = sibling(Side::Right, *r_, src.r.get<__nv_bfloat16>(), src.r_k_major);
    p.l = l_->lt();
    p.r = r_->lt();
    if (l_->global_scale_inv() && r_->global_scale_inv()) {
      alpha_ = DeviceBuffer(2 * sizeof(float));
      p.alpha_device = alpha_.get<float>();
    }
  }
  beta_ = p.beta;
  if (with_gemm) mm_ = std::make_unique<LtMatmul>(handle, p, workspace, kWorkspaceBytes, cache, heuristic_count);
}

void RecipeGemm::update_alpha(cudaStream_t s) {
  if (!alpha_) return;
  alpha_from_global_scales<<<1, 1, 0, s>>>(l_->global_scale_inv(), r_->global_scale_inv(), alpha_.get<float>(),
                                           beta_);
  GS_CUDA_LAUNCH();
}

void RecipeGemm::per_gemm_step(cudaStream_t s) {
  if (l_) l_->quantize(s);
  if (r_) r_->quantize(s);
  update_alpha(s);
  run_gemm(s);
  if (l_) l_->after_gemm(s);
  if (r_) r_->after_gemm(s);
}

void RecipeGemm::gemm_only(cudaStream_t s) { run_gemm(s); }  // built with_gemm, or use_kernel()

void RecipeGemm::step(cudaStream_t s) {
  if (external_quant_) {
    run_gemm(s);
    return;
  }
  step_quantize(s);
  run_gemm(s);
  step_after(s);
}

void RecipeGemm::step_quantize(cudaStream_t s) {
  if (external_quant_) return;
  auto work = [&](QuantizedOperand* q, QuantizedOperand* sib, const OperandWork& w) {
    if (!q || w.work == QuantWork::None) return;
    if (w.work == QuantWork::Dual) q->quantize_dual(*sib, s, w.producer_amax);
    else q->quantize(s, w.producer_amax);
  };
  work(l_.get(), l_sib_.get(), wl_);
  work(r_.get(), r_sib_.get(), wr_);
  if (wl_.work != QuantWork::None || wr_.work != QuantWork::None) update_alpha(s);
}

void RecipeGemm::step_after(cudaStream_t s) {
  if (external_quant_) return;
  if (l_ && wl_.work != QuantWork::None) l_->after_gemm(s);
  if (r_ && wr_.work != QuantWork::None) r_->after_gemm(s);
}

int RecipeGemm::step_quantize_ops() const {
  if (external_quant_) return 0;
  auto work = [&](const QuantizedOperand* q, const QuantizedOperand* sib, const OperandWork& w) {
    if (!q || w.work == QuantWork::None) return 0;
    int n = q->quantize_ops(w.producer_amax) + q->after_gemm_ops();
    if (w.work == QuantWork::Dual && sib) n += sib->quantize_ops();  // fused passes launch fewer
    return n;
  };
  return work(l_.get(), l_sib_.get(), wl_) + work(r_.get(), r_sib_.get(), wr_) + (alpha_ ? 1 : 0);
}

int RecipeGemm::step_ops() const {
  const int matmul = kernel_ ? kernel_ops_ : 2;  // cuBLASLt may add a split-K reduction kernel
  return step_quantize_ops() + matmul;
}

void RecipeGemm::prequantize(cudaStream_t s) {
  // Delayed scaling needs history: three rounds make the scale that of this data's amax.
  const int rounds = recipe_.a.scaling == Scaling::TensorDelayed ? 3 : 1;
  for (int i = 0; i < rounds; ++i) {
    if (l_) { l_->quantize(s); l_->after_gemm(s); }
    if (r_) { r_->quantize(s); r_->after_gemm(s); }
  }
  if (l_) l_->quantize(s);
  if (r_) r_->quantize(s);
  update_alpha(s);
  GS_CUDA(cudaStreamSynchronize(s));
}

}  // namespace gs::cuda
