// Grouped quantization and Wgrad accumulation as training runs them:
//  * multi-tensor FP8 launches (quantize_multi.cuh) are bit-identical to the single-tensor calls for
//    every op, layout and dual form, over tensors of mixed sizes (empty ones, rows not multiples of 16);
//  * a grouped GEMM with fused quantization (grouped_quant.hpp) gives every expert the same quantized
//    copies, scales and output bits as the per-expert path, on random routings with empty experts, in a
//    fixed number of launches whatever the expert count;
//  * Wgrad accumulating into an FP32 main gradient equals the prior gradient plus an FP64 GEMM of the
//    quantized operands, dense and grouped;
//  * the kernel check flags a real BF16 fallback from CUPTI's records, and not a BF16-by-design cell.
#include <cuda_bf16.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "core/providers/provider.hpp"
#include "core/recipes/grouped.hpp"
#include "core/results/kernels.hpp"
#include "core/plan/plan.hpp"
#include "core/recipes/recipe.hpp"
#include "cuda/engine_cuda.hpp"
#include "cuda/common/fill.cuh"
#include "cuda/providers/cublaslt/grouped_gemm.hpp"
#include "cuda/quant/quantize.cuh"
#include "cuda/quant/quantize_multi.cuh"
#include "gemm_reference.hpp"
#include "gpu_test_util.hpp"

using namespace gs;
using namespace gs::cuda;
using namespace gs::test;

namespace {

std::vector<uint8_t> bytes_of(const DeviceBuffer& b) {
  std::vector<uint8_t> h(b.bytes());
  if (!h.empty()) GS_CUDA(cudaMemcpy(h.data(), b.get(), h.size(), cudaMemcpyDeviceToHost));
  return h;
}

// One tensor's source and two sets of outputs (single-tensor call, multi-tensor launch).
struct Slot {
  int rows, cols;
  DeviceBuffer x;
  DeviceBuffer q[2], qr[2], s[2], sr[2], amax[2], ws[2], scale[2], hist[2], pos[2];
};

enum class QOp { Cur, Del, B1, B128 };

size_t scale_floats(QOp op, int outer, int k) {
  if (op == QOp::B1) return size_t(block_scale_count_1x128(outer, k));
  if (op == QOp::B128) return size_t(block_scale_count_128x128(outer, k));
  return 1;
}

void init_slot(Slot& t, QOp op, uint64_t seed) {
  const size_t n = size_t(t.rows) * size_t(t.cols);
  t.x = DeviceBuffer(std::max<size_t>(n, 8) * 2);
  if (n) fill_normal_bf16(t.x.get<__nv_bfloat16>(), n, seed, 1.f, nullptr);
  const size_t s_max = std::max(scale_floats(op, t.rows, t.cols), scale_floats(op, t.cols, t.rows)) * 4;
  for (int i = 0; i < 2; ++i) {
    t.q[i] = DeviceBuffer(std::max<size_t>(n, 16));
    t.qr[i] = DeviceBuffer(std::max<size_t>(n, 16));
    t.s[i] = DeviceBuffer(s_max);
    t.sr[i] = DeviceBuffer(s_max);
    for (DeviceBuffer* b : {&t.q[i], &t.qr[i], &t.s[i], &t.sr[i]}) GS_CUDA(cudaMemset(b->get(), 0, b->bytes()));
    t.amax[i] = DeviceBuffer(4);
    t.ws[i] = DeviceBuffer(amax_workspace_bytes(n));
    t.scale[i] = DeviceBuffer(4);
    t.hist[i] = DeviceBuffer(16 * 4);
    t.pos[i] = DeviceBuffer(4);
    const float one = 0.75f;  // a delayed scale in use
    GS_CUDA(cudaMemcpy(t.scale[i].get(), &one, 4, cudaMemcpyHostToDevice));
    GS_CUDA(cudaMemset(t.hist[i].get(), 0, t.hist[i].bytes()));
    GS_CUDA(cudaMemset(t.pos[i].get(), 0, 4));
  }
  GS_CUDA(cudaDeviceSynchronize());
}

// The single-tensor calls for slot t, output set 0.
void single(Slot& t, QOp op, bool transpose, bool dual, Fp8Kind kind, bool pow2) {
  const auto* x = t.x.get<__nv_bfloat16>();
  const size_t n = size_t(t.rows) * size_t(t.cols);
  if (n == 0) return;
  switch (op) {
    case QOp::Cur:
      amax_bf16(x, n, t.amax[0].get<float>(), t.ws[0].get(), nullptr);
      if (dual)
        cast_fp8_current_dual(x, t.rows, t.cols, kind, t.amax[0].get<float>(), t.qr[0].get<uint8_t>(),
                              t.sr[0].get<float>(), t.q[0].get<uint8_t>(), t.s[0].get<float>(), nullptr);
      else
        cast_fp8_current(x, t.rows, t.cols, transpose, kind, t.amax[0].get<float>(), t.q[0].get<uint8_t>(),
                         t.s[0].get<float>(), nullptr);
      break;
    case QOp::Del:
      if (dual)
        cast_fp8_delayed_dual(x, t.rows, t.cols, kind, t.scale[0].get<float>(), t.qr[0].get<uint8_t>(),
                              t.sr[0].get<float>(), t.q[0].get<uint8_t>(), t.s[0].get<float>(), t.hist[0].get<float>(),
                              t.pos[0].get<int>(), nullptr);
      else
        cast_fp8_delayed(x, t.rows, t.cols, transpose, kind, t.scale[0].get<float>(), t.q[0].get<uint8_t>(),
                         t.s[0].get<float>(), t.hist[0].get<float>(), t.pos[0].get<int>(), nullptr);
      delayed_scale_update(t.hist[0].get<float>(), 16, t.pos[0].get<int>(), kind, t.scale[0].get<float>(), nullptr);
      break;
    case QOp::B1:
      if (dual)
        quantize_block_1x128_dual(x, t.rows, t.cols, kind, t.qr[0].get<uint8_t>(), t.sr[0].get<float>(),
                                  t.q[0].get<uint8_t>(), t.s[0].get<float>(), nullptr, pow2);
      else
        quantize_block_1x128(x, t.rows, t.cols, transpose, kind, t.q[0].get<uint8_t>(), t.s[0].get<float>(), nullptr,
                             pow2);
      break;
    case QOp::B128:
      if (dual)
        quantize_block_128x128_dual(x, t.rows, t.cols, kind, t.qr[0].get<uint8_t>(), t.sr[0].get<float>(),
                                    t.q[0].get<uint8_t>(), t.s[0].get<float>(), nullptr, pow2);
      else
        quantize_block_128x128(x, t.rows, t.cols, transpose, kind, t.q[0].get<uint8_t>(), t.s[0].get<float>(), nullptr,
                               pow2);
      break;
  }
}

QuantTensor tensor_of(Slot& t, bool transpose) {
  QuantTensor q;
  q.x = t.x.get<__nv_bfloat16>();
  q.rows = t.rows;
  q.cols = t.cols;
  q.transpose = transpose;
  q.q = t.q[1].get<uint8_t>();
  q.scale_inv = t.s[1].get<float>();
  q.q_row = t.qr[1].get<uint8_t>();
  q.scale_row = t.sr[1].get<float>();
  q.amax = t.amax[1].get<float>();
  q.amax_ws = t.ws[1].get();
  q.scale = t.scale[1].get<float>();
  q.history = t.hist[1].get<float>();
  q.pos = t.pos[1].get<int>();
  q.hist_len = 16;
  return q;
}

struct MqCase {
  QOp op;
  bool transpose, dual;
  Fp8Kind kind;
};

class MultiQuantTest : public ::testing::TestWithParam<MqCase> {};

TEST_P(MultiQuantTest, BitIdenticalToSingleTensorCalls) {
  GS_REQUIRE_GPU();
  const MqCase c = GetParam();
  // Mixed sizes: empty, rows not multiples of 16 (bytewise transposed stores), partial blocks, a big one.
  const std::vector<std::pair<int, int>> shapes = {{40, 256}, {0, 256}, {17, 128}, {128, 512}, {3, 64},
                                                   {200, 136}, {1024, 384}, {64, 8}};
  std::vector<Slot> slots(shapes.size());
  std::vector<QuantTensor> tensors;
  for (size_t i = 0; i < shapes.size(); ++i) {
    slots[i].rows = shapes[i].first;
    slots[i].cols = shapes[i].second;
    init_slot(slots[i], c.op, 100 + i);
    single(slots[i], c.op, c.transpose, c.dual, c.kind, true);
    tensors.push_back(tensor_of(slots[i], c.transpose));
  }
  const bool pow2 = true;
  const MultiQuantOp cast = c.op == QOp::Cur   ? MultiQuantOp::CastCurrent
                            : c.op == QOp::Del ? MultiQuantOp::CastDelayed
                            : c.op == QOp::B1  ? MultiQuantOp::Block1x128
                                              : MultiQuantOp::Block128x128;
  std::vector<MultiQuant> launches;
  if (c.op == QOp::Cur) launches.emplace_back(MultiQuantOp::Amax, c.kind, false, pow2, tensors);
  launches.emplace_back(cast, c.kind, c.dual, pow2, tensors);
  if (c.op == QOp::Del) launches.emplace_back(MultiQuantOp::DelayedUpdate, c.kind, false, pow2, tensors);
  int kernels = 0;
  for (const MultiQuant& m : launches) {
    m.launch(nullptr);
    kernels += m.launches();
  }
  GS_CUDA(cudaDeviceSynchronize());
  // A fixed number of launches for 8 tensors: amax 2, cast 1 or 2 (mixed row alignment), update 1.
  EXPECT_LE(kernels, 5);
  for (size_t i = 0; i < slots.size(); ++i) {
    SCOPED_TRACE("tensor " + std::to_string(i) + " " + std::to_string(slots[i].rows) + "x" +
                 std::to_string(slots[i].cols));
    Slot& t = slots[i];
    EXPECT_EQ(bytes_of(t.q[0]), bytes_of(t.q[1])) << "quantized data";
    EXPECT_EQ(bytes_of(t.s[0]), bytes_of(t.s[1])) << "scales";
    if (c.dual) {
      EXPECT_EQ(bytes_of(t.qr[0]), bytes_of(t.qr[1])) << "source-layout copy";
      EXPECT_EQ(bytes_of(t.sr[0]), bytes_of(t.sr[1])) << "source-layout scales";
    }
    if (c.op == QOp::Cur && t.rows > 0) EXPECT_EQ(bytes_of(t.amax[0]), bytes_of(t.amax[1])) << "amax";
    if (c.op == QOp::Del) {
      EXPECT_EQ(bytes_of(t.hist[0]), bytes_of(t.hist[1])) << "amax history";
      EXPECT_EQ(bytes_of(t.scale[0]), bytes_of(t.scale[1])) << "updated scale";
      EXPECT_EQ(bytes_of(t.pos[0]), bytes_of(t.pos[1])) << "history position";
    }
  }
}

std::vector<MqCase> mq_cases() {
  std::vector<MqCase> v;
  for (QOp op : {QOp::Cur, QOp::Del, QOp::B1, QOp::B128})
    for (Fp8Kind k : {Fp8Kind::E4M3, Fp8Kind::E5M2}) {
      v.push_back({op, false, false, k});
      v.push_back({op, true, false, k});
      v.push_back({op, true, true, k});
    }
  return v;
}

INSTANTIATE_TEST_SUITE_P(Fp8, MultiQuantTest, ::testing::ValuesIn(mq_cases()), [](const auto& info) {
  const MqCase& c = info.param;
  const char* op = c.op == QOp::Cur ? "Current" : c.op == QOp::Del ? "Delayed" : c.op == QOp::B1 ? "Block1x128" : "Block128";
  return std::string(op) + (c.dual ? "_Dual" : c.transpose ? "_Transposed" : "_Rowwise") +
         (c.kind == Fp8Kind::E4M3 ? "_E4M3" : "_E5M2");
});

// The amax pass over many tensors laid end to end, as a grouped GEMM's token buffer is (300 and
// 1030 tensors: more tensors than a wave has blocks): bit-identical to the single-tensor amax,
// whatever the tensors' sizes (one 16-byte chunk up to several grid strides), magnitudes and
// place in the buffer, with an all-zero tensor and one holding +inf, over two passes.
TEST(MultiAmax, ManyTensorsBitIdenticalToSingleTensorAmax) {
  GS_REQUIRE_GPU();
  // Up to kAmaxParamTensors the tensors travel as a kernel parameter, beyond it in a table: both
  // sides of the boundary, and far beyond.
  for (int count : {gs::cuda::kAmaxParamTensors, gs::cuda::kAmaxParamTensors + 1, 300, 1030}) {
    SCOPED_TRACE(std::to_string(count) + " tensors");
    std::mt19937 rng(static_cast<unsigned>(count));
    const int col_choices[] = {8, 64, 136, 2048};
    std::vector<int> rows(static_cast<size_t>(count)), cols(static_cast<size_t>(count));
    std::vector<size_t> off(static_cast<size_t>(count) + 1, 0);
    for (int t = 0; t < count; ++t) {
      cols[t] = col_choices[rng() % 4];
      rows[t] = t % 97 == 5 ? 3000 : 1 + static_cast<int>(rng() % 40);  // a few span several grid strides
      off[t + 1] = off[t] + size_t(rows[t]) * size_t(cols[t]);
    }
    std::vector<__nv_bfloat16> h(off.back());
    std::uniform_real_distribution<float> u(-1.f, 1.f);
    for (int t = 0; t < count; ++t) {
      const float mag = std::ldexp(1.f, t % 23 - 11);
      for (size_t i = off[t]; i < off[t + 1]; ++i)
        h[i] = __float2bfloat16(t == 7 ? 0.f : (t == 11 && i == off[t] + 3) ? INFINITY : u(rng) * mag);
    }
    DeviceBuffer x(h.size() * sizeof(__nv_bfloat16)), ref(size_t(count) * 4), got(size_t(count) * 4);
    GS_CUDA(cudaMemcpy(x.get(), h.data(), x.bytes(), cudaMemcpyHostToDevice));
    std::vector<DeviceBuffer> ws;
    std::vector<QuantTensor> ts;
    for (int t = 0; t < count; ++t) {
      const size_t n = off[t + 1] - off[t];
      ws.emplace_back(amax_workspace_bytes(n));
      const __nv_bfloat16* xt = x.get<__nv_bfloat16>() + off[t];
      amax_bf16(xt, n, ref.get<float>() + t, ws.back().get(), nullptr);
      QuantTensor q;
      q.x = xt;
      q.rows = rows[t];
      q.cols = cols[t];
      q.amax = got.get<float>() + t;
      q.amax_ws = ws.back().get();
      ts.push_back(q);
    }
    GS_CUDA(cudaMemset(got.get(), 0x7f, got.bytes()));  // garbage the pass must overwrite
    const MultiQuant m(MultiQuantOp::Amax, Fp8Kind::E4M3, false, true, ts);
    EXPECT_EQ(m.launches(), 2);
    m.launch(nullptr);
    m.launch(nullptr);  // twice, as a timed loop runs it
    GS_CUDA(cudaDeviceSynchronize());
    const std::vector<uint8_t> a = bytes_of(ref), b = bytes_of(got);
    for (int t = 0; t < count; ++t)
      EXPECT_EQ(std::memcmp(a.data() + 4 * t, b.data() + 4 * t, 4), 0)
          << "tensor " << t << " (" << rows[t] << "x" << cols[t] << ")";
  }
}

// ---- grouped GEMMs: fused vs per-expert quantization -------------------------------------------

struct LtContext {
  cublasLtHandle_t handle = nullptr;
  DeviceBuffer workspace = make_lt_workspace();
  cudaStream_t stream = nullptr;
  LtContext() {
    GS_CUBLAS(cublasLtCreate(&handle));
    GS_CUDA(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  }
  ~LtContext() {
    cudaStreamDestroy(stream);
    cublasLtDestroy(handle);
  }
  LtContext(const LtContext&) = delete;
  LtContext& operator=(const LtContext&) = delete;
};

// A random routing over `experts` with ~20% empty experts and sizes that are not multiples of 16.
std::vector<int64_t> random_group(int experts, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::vector<int64_t> g(static_cast<size_t>(experts));
  for (auto& s : g) s = rng() % 5 == 0 ? 0 : static_cast<int64_t>(1 + rng() % 90);
  return g;
}

Gemm expert_up(Pass pass, const std::vector<int64_t>& group, int64_t hidden = 256, int64_t ffn = 384) {
  return grouped_linear_gemm(pass, Op::ExpertUp, Scope::Layer, group, hidden, ffn);
}

// Every byte a grouped GEMM's iteration leaves: each expert's quantized copies and scales, the output.
std::vector<std::vector<uint8_t>> state_of(const GroupedGemm& gg, const GroupedSources& src) {
  std::vector<std::vector<uint8_t>> out;
  for (int e = 0; e < gg.experts(); ++e) {
    const RecipeGemm* rg = gg.expert(e);
    if (!rg) continue;
    for (const QuantizedOperand* q : {rg->l(), rg->r(), rg->l_sibling(), rg->r_sibling()}) {
      if (!q) continue;
      out.push_back(q->data_host());
      const auto s = q->scales_host();
      std::vector<uint8_t> b(s.size() * 4);
      if (!s.empty()) std::memcpy(b.data(), s.data(), b.size());
      out.push_back(b);
    }
  }
  if (src.gemm.group_dim == GroupDim::M) out.push_back(bytes_of(src.out));
  for (const DeviceBuffer& b : src.per_expert)
    if (src.gemm.group_dim == GroupDim::K) out.push_back(bytes_of(b));
  return out;
}

struct GqCase {
  Precision precision;
  Pass pass;
  Mode mode;
};

class FusedGroupedQuantTest : public ::testing::TestWithParam<GqCase> {};

TEST_P(FusedGroupedQuantTest, SameBitsAsPerExpertInFewLaunches) {
  GS_REQUIRE_GPU();
  const GqCase c = GetParam();
  LtContext lt;
  for (int experts : {9, 64}) {
    SCOPED_TRACE(std::to_string(experts) + " experts");
    const Gemm g = expert_up(c.pass, random_group(experts, 17 + static_cast<uint64_t>(experts)));
    const auto padded = padded_group(g, c.precision);
    std::vector<std::vector<std::vector<uint8_t>>> states;
    int fused_launches = -1;
    for (bool fused : {false, true}) {
      RecipeOptions opts;
      opts.grouped_quant_fused = fused;
      opts.amax_history_len = 4;
      opts.wgrad_fp32_accumulate = false;  // a BF16 output: the same bits after any number of iterations
      auto src = GroupedSources::allocate(g, padded, 5, lt.stream, false);
      GroupedGemm gg(lt.handle, *src, c.precision, c.mode, opts, 4, lt.stream, lt.workspace.get(), nullptr);
      EXPECT_EQ(gg.quantizer() != nullptr, fused);
      gg.prepare();
      for (int i = 0; i < 3; ++i) gg.run_once();  // delayed scaling: history steps in both paths
      states.push_back(state_of(gg, *src));
      if (fused && gg.quantizer()) fused_launches = gg.quantizer()->launches();
    }
    ASSERT_EQ(states[0].size(), states[1].size());
    for (size_t i = 0; i < states[0].size(); ++i) EXPECT_EQ(states[0][i], states[1][i]) << "buffer " << i;
    // Launches per iteration do not grow with the expert count: per operand amax 2 + cast 1-2 (+ update 1).
    // (Training-mode Wgrad quantizes nothing: its operands are the copies Fprop and Dgrad cast.)
    if (c.mode == Mode::Training && c.pass == Pass::Wgrad) {
      EXPECT_EQ(fused_launches, 0);
    } else {
      EXPECT_GT(fused_launches, 0);
      EXPECT_LE(fused_launches, 10);
    }
  }
}

std::vector<GqCase> gq_cases() {
  std::vector<GqCase> v;
  for (Precision p : {Precision::FP8Current, Precision::FP8Delayed, Precision::FP8Block})
    for (Pass pass : {Pass::Fprop, Pass::Dgrad, Pass::Wgrad})
      for (Mode m : {Mode::PerGemm, Mode::Training}) v.push_back({p, pass, m});
  return v;
}

INSTANTIATE_TEST_SUITE_P(Hopper, FusedGroupedQuantTest, ::testing::ValuesIn(gq_cases()), [](const auto& info) {
  const GqCase& c = info.param;
  return std::string(to_string(c.precision)) + "_" + pass_label(c.pass) + "_" +
         (c.mode == Mode::PerGemm ? "PerGemm" : "Training");
});

// ---- Wgrad into an FP32 main gradient --------------------------------------------------------------

std::vector<float> floats_of(const DeviceBuffer& b) {
  std::vector<float> h(b.bytes() / 4);
  GS_CUDA(cudaMemcpy(h.data(), b.get(), b.bytes(), cudaMemcpyDeviceToHost));
  return h;
}

void set_floats(DeviceBuffer& b, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<float> d(0.f, 3.f);
  std::vector<float> h(b.bytes() / 4);
  for (float& x : h) x = d(rng);
  GS_CUDA(cudaMemcpy(b.get(), h.data(), b.bytes(), cudaMemcpyHostToDevice));
}

// out - prior against an FP64 GEMM of the operands the GEMM read (quantized ones decoded).
double accumulated_error(const std::vector<float>& out, const std::vector<float>& prior, const std::vector<double>& ref) {
  std::vector<double> delta(out.size());
  for (size_t i = 0; i < out.size(); ++i) delta[i] = static_cast<double>(out[i]) - static_cast<double>(prior[i]);
  return rel_frobenius(delta, ref);
}

TEST(WgradFp32, DenseAccumulatesIntoThePriorGradient) {
  GS_REQUIRE_GPU();
  LtContext lt;
  const Gemm g = linear_gemm(Pass::Wgrad, Op::MlpUp, Scope::Layer, 512, 384, 256);
  for (Precision p : {Precision::BF16, Precision::FP8Current, Precision::FP8Delayed, Precision::FP8Block}) {
    SCOPED_TRACE(to_string(p));
    RecipeOptions opts;
    const Recipe r = make_recipe(p, g, opts);
    ASSERT_TRUE(r.fp32_accumulate);
    GemmSources src = GemmSources::allocate(g, true);
    fill_normal_bf16(src.l.get<__nv_bfloat16>(), size_t(g.m) * size_t(g.k), 3, 1.f, lt.stream);
    fill_normal_bf16(src.r.get<__nv_bfloat16>(), size_t(g.k) * size_t(g.n), 4, 1.f, lt.stream);
    set_floats(src.c, 9);
    GS_CUDA(cudaDeviceSynchronize());
    const std::vector<float> prior = floats_of(src.c);
    RecipeGemm rg(lt.handle, g, r, src, lt.workspace.get(), opts);
    rg.per_gemm_step(lt.stream);
    GS_CUDA(cudaStreamSynchronize(lt.stream));
    const auto out = floats_of(src.c);
    const auto l = p == Precision::BF16 ? bf16_operand(to_host_u16(src.l), g.m, g.k, g.a.k_major) : dequantize(*rg.l());
    const auto rr = p == Precision::BF16 ? bf16_operand(to_host_u16(src.r), g.n, g.k, g.b.k_major) : dequantize(*rg.r());
    // The prior is ~0.13 of the product here: a GEMM that overwrote it (beta 0) would be off by that.
    // BF16 inputs accumulate to FP32 rounding; FP8 tensor cores accumulate with fewer bits (1e-4).
    const double tol = p == Precision::BF16 ? 1e-5 : 1e-3;
    EXPECT_LT(accumulated_error(out, prior, ref_gemm(l, rr, g.m, g.n, g.k)), tol) << "FP32 accumulation";
    // A second step adds the (re-quantized) product again: the gradient accumulates.
    rg.per_gemm_step(lt.stream);
    GS_CUDA(cudaStreamSynchronize(lt.stream));
    const auto twice = floats_of(src.c);
    const auto l2 = p == Precision::BF16 ? l : dequantize(*rg.l());
    const auto r2 = p == Precision::BF16 ? rr : dequantize(*rg.r());
    EXPECT_LT(accumulated_error(twice, out, ref_gemm(l2, r2, g.m, g.n, g.k)), tol) << "second accumulation";
  }
}

TEST(WgradFp32, GroupedExpertsAccumulateAndEmptyOnesAddNothing) {
  GS_REQUIRE_GPU();
  LtContext lt;
  const Gemm g = expert_up(Pass::Wgrad, {40, 0, 17, 64, 3, 0, 33});
  for (Precision p : {Precision::BF16, Precision::FP8Current, Precision::FP8Block}) {
    SCOPED_TRACE(to_string(p));
    RecipeOptions opts;
    const auto padded = padded_group(g, p);
    auto src = GroupedSources::allocate(g, padded, 7, lt.stream, true);
    for (DeviceBuffer& b : src->per_expert) set_floats(b, 21);
    GS_CUDA(cudaDeviceSynchronize());
    std::vector<std::vector<float>> prior;
    for (const DeviceBuffer& b : src->per_expert) prior.push_back(floats_of(b));
    GroupedGemm gg(lt.handle, *src, p, Mode::PerGemm, opts, 4, lt.stream, lt.workspace.get(), nullptr);
    gg.prepare();
    gg.run_once();
    for (int e = 0; e < gg.experts(); ++e) {
      SCOPED_TRACE("expert " + std::to_string(e));
      const auto out = floats_of(src->per_expert[static_cast<size_t>(e)]);
      if (padded[static_cast<size_t>(e)] == 0) {
        EXPECT_EQ(out, prior[static_cast<size_t>(e)]) << "an empty expert adds nothing to its main gradient";
        continue;
      }
      const Gemm eg = gg.expert_gemm_of(e);
      const RecipeGemm& rg = *gg.expert(e);
      const GemmSources& v = gg.expert_sources(e);
      const auto l = p == Precision::BF16 ? bf16_operand(to_host_u16(v.l), eg.m, eg.k, eg.a.k_major) : dequantize(*rg.l());
      const auto r = p == Precision::BF16 ? bf16_operand(to_host_u16(v.r), eg.n, eg.k, eg.b.k_major) : dequantize(*rg.r());
      EXPECT_LT(accumulated_error(out, prior[static_cast<size_t>(e)], ref_gemm(l, r, eg.m, eg.n, eg.k)),
                p == Precision::BF16 ? 1e-5 : 1e-3);  // FP8 tensor cores accumulate with fewer bits
    }
  }
}

// ---- kernel check: a real fallback is flagged, a BF16-by-design cell is not -------------------------

TEST(KernelCheck, FlagsARealFallbackFromCuptiRecords) {
  GS_REQUIRE_GPU();
  EngineOptions o;
  o.timing.warmup = 2;
  o.timing.iters = 5;
  o.gemm.trace_kernels = true;
  std::string why;
  auto engine = make_engine(o, why);
  ASSERT_NE(engine, nullptr) << why;
  const Gemm g{Pass::Fprop, Op::MlpUp, Scope::Layer, 1024, 1024, 1024, {Role::Activation, true}, {Role::Weight, true}};
  const Cell bf16 = engine->measure(g, Precision::BF16, Mode::PreQuantized, kProviderCublasLt);
  ASSERT_TRUE(bf16.ok) << bf16.reason;
  if (!bf16.kernels.traced) GTEST_SKIP() << "CUPTI unavailable: " << bf16.kernels.trace_note;
  // The BF16 kernel in a cell meant to run FP8 is a fallback...
  EXPECT_NE(kernel_flag(Precision::FP8Current, bf16.kernels.kernels), "");
  // ...and in a BF16-by-design cell (the router in an FP8 column) it is what should run.
  Gemm router = g;
  router.op = Op::Router;
  const Precision intended = make_recipe(Precision::FP8Current, router, RecipeOptions{}).precision;
  EXPECT_EQ(intended, Precision::BF16);
  EXPECT_EQ(kernel_flag(intended, bf16.kernels.kernels), "");
  const Cell fp8 = engine->measure(g, Precision::FP8Current, Mode::PreQuantized, kProviderCublasLt);
  ASSERT_TRUE(fp8.ok) << fp8.reason;
  EXPECT_EQ(kernel_flag(Precision::FP8Current, fp8.kernels.kernels), "");
}

}  // namespace
