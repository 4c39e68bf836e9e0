// The DeepGEMM provider (src/cuda/providers/deepgemm/deepgemm_provider.cpp) on the engine's operands: its
// dense Fprop/Dgrad/Wgrad cells (pre-quantized and training modes), the M-grouped contiguous
// Fprop/Dgrad with empty and uneven experts and the K-grouped FP32 Wgrad (one launch), the BF16
// cells (sm90_bf16_gemm: dense and M-grouped), each against an FP64
// reference of the operands as the engine's FP8Block quantizer quantizes them (the project's
// FP8-block tolerance, 4e-3 relative Frobenius); then a small MoE model through the engine with
// --provider cublaslt,deepgemm: DeepGEMM cells measured, the rest N/A with its reason, compile
// time in the notes, and a second run compiling nothing. Skips, saying why, without a Hopper GPU,
// NVRTC or toolkit headers.
#include <gtest/gtest.h>

#include <filesystem>
#include <numeric>

#include "core/providers/deepgemm_cells.hpp"
#include "core/recipes/grouped.hpp"
#include "core/model/model_config.hpp"
#include "core/run/runner.hpp"
#include "cuda/providers/deepgemm/deepgemm_provider.hpp"
#include "cuda/providers/deepgemm/deepgemm_runtime.hpp"
#include "cuda/engine_cuda.hpp"
#include "cuda/common/fill.cuh"
#include "cuda/providers/cublaslt/grouped_gemm.hpp"
#include "cuda/providers/cublaslt/recipe_gemm.hpp"
#include "deepgemm_test_util.hpp"
#include "gemm_reference.hpp"
#include "gpu_test_util.hpp"
#include "provider_test_util.hpp"

namespace {

using namespace gs;
using namespace gs::test;
using gs::cuda::GemmSources;
using gs::cuda::GroupedSources;

constexpr double kTol = 4e-3;  // as test_gemm_recipes / test_deepgemm_gemm

std::vector<double> bf16_host(const void* d, size_t elems) {
  std::vector<uint16_t> h(elems);
  GS_CUDA(cudaMemcpy(h.data(), d, elems * 2, cudaMemcpyDeviceToHost));
  std::vector<double> out(elems);
  for (size_t i = 0; i < elems; ++i) out[i] = gs::nf::bf16_to_float(h[i]);
  return out;
}

std::vector<float> prior_pattern(size_t n, int salt) {
  std::vector<float> p(n);
  for (size_t i = 0; i < n; ++i)
    p[i] = static_cast<float>((static_cast<int>((i + static_cast<size_t>(salt)) * 2654435761u % 2001) - 1000) * 0.01);
  return p;
}

std::unique_ptr<cuda::GemmProvider> provider(const EngineOptions& o) { return configured(cuda::make_deepgemm_provider(), o); }

Gemm linear(Pass pass, int64_t tokens, int64_t in, int64_t out) {
  return linear_gemm(pass, Op::MlpUp, Scope::Layer, tokens, in, out);
}

void check_dense(Pass pass, Mode mode) {
  SCOPED_TRACE(testing::Message() << pass_label(pass) << " " << to_string(mode));
  EngineOptions eo;
  auto pv = provider(eo);
  const Gemm g = linear(pass, 512, 1024, 768);
  const Recipe r = make_recipe(Precision::FP8Block, g, eo.recipe);
  ASSERT_EQ(pv->cannot_run(g, Precision::FP8Block, mode, r, compute_capability()), "");
  GemmSources src = GemmSources::allocate(g, r.fp32_accumulate);
  const size_t le = static_cast<size_t>(g.m * g.k), re = static_cast<size_t>(g.k * g.n), mn = static_cast<size_t>(g.m * g.n);
  cuda::fill_normal_bf16(src.l.get<__nv_bfloat16>(), le, 71, g.a.role == Role::Weight ? 0.02f : 1.f, nullptr);
  cuda::fill_normal_bf16(src.r.get<__nv_bfloat16>(), re, 72, g.b.role == Role::Weight ? 0.02f : 1.f, nullptr);
  const std::vector<float> prior = prior_pattern(mn, 3);
  if (r.fp32_accumulate) GS_CUDA(cudaMemcpy(src.c.get(), prior.data(), mn * 4, cudaMemcpyHostToDevice));
  else GS_CUDA(cudaMemset(src.c.get(), 0xFF, src.c.bytes()));  // NaN until written
  GS_CUDA(cudaDeviceSynchronize());
  auto run = pv->dense(g, r, mode, src, 0);
  std::printf("    %s %s: %s\n", pass_label(pass), to_string(mode), run->config().c_str());
  EXPECT_NE(run->config().find("deepgemm"), std::string::npos);
  run->iteration(nullptr);
  GS_CUDA(cudaDeviceSynchronize());
  // The reference: the same sources through the engine's quantizer (deterministic: the provider
  // quantized exactly these values), dequantized, multiplied in FP64.
  cuda::RecipeGemm q(nullptr, g, r, src, nullptr, eo.recipe, /*with_gemm=*/false);
  q.prequantize(nullptr);
  const auto prod = ref_gemm(dequantize(*q.l()), dequantize(*q.r()), g.m, g.n, g.k);
  if (r.fp32_accumulate) {
    std::vector<float> out(mn);
    GS_CUDA(cudaMemcpy(out.data(), src.c.get(), mn * 4, cudaMemcpyDeviceToHost));
    std::vector<double> got_prod(mn), got(mn), want(mn);
    for (size_t i = 0; i < mn; ++i) {
      got_prod[i] = static_cast<double>(out[i]) - prior[i];
      got[i] = out[i];
      want[i] = prior[i] + prod[i];
    }
    const double ep = rel_frobenius(got_prod, prod), et = rel_frobenius(got, want);
    std::printf("    Wgrad into FP32: product %.2e, prior + product %.2e\n", ep, et);
    EXPECT_LT(ep, kTol);
    EXPECT_LT(et, kTol);
  } else {
    const double err = rel_frobenius(bf16_host(src.c.get(), mn), prod);
    std::printf("    vs FP64 of the quantized operands: %.2e\n", err);
    EXPECT_LT(err, kTol);
  }
}

TEST(DeepGemmProvider, DenseCellsMatchTheReference) {
  GS_REQUIRE_DEEPGEMM();
  for (Mode mode : {Mode::PreQuantized, Mode::Training, Mode::PerGemm})
    for (Pass pass : {Pass::Fprop, Pass::Dgrad, Pass::Wgrad}) check_dense(pass, mode);
}

Gemm grouped(Pass pass, const std::vector<int64_t>& rows, int64_t in, int64_t out) {
  return grouped_linear_gemm(pass, Op::ExpertUp, Scope::MoeLayer, rows, in, out);
}

void check_m_grouped(Pass pass, Mode mode) {
  SCOPED_TRACE(testing::Message() << "grouped " << pass_label(pass) << " " << to_string(mode));
  EngineOptions eo;
  auto pv = provider(eo);
  const std::vector<int64_t> rows = {0, 200, 37, 128, 0, 300};  // empty, uneven, exact
  const Gemm g = grouped(pass, rows, 512, 384);
  const Recipe r = make_recipe(Precision::FP8Block, expert_gemm(g, 128), eo.recipe);
  ASSERT_EQ(pv->cannot_run(g, Precision::FP8Block, mode, r, compute_capability()), "");
  auto src = GroupedSources::allocate(g, padded_group(g, Precision::FP8Block), 5, nullptr, false);
  auto run = pv->grouped(*src, r, mode, 0);
  std::printf("    %s\n", run->config().c_str());
  run->iteration(nullptr);
  GS_CUDA(cudaDeviceSynchronize());
  const auto out = cuda::deepgemm_grouped_output(*run);
  ASSERT_TRUE(out);
  const auto d = bf16_host(out->d, static_cast<size_t>(out->rows * g.n));
  std::vector<double> got, want;
  for (size_t e = 0; e < rows.size(); ++e) {
    if (rows[e] == 0) continue;
    // Expert e's real rows and weight, quantized as the engine quantizes them (1x128 scales are
    // per row: a slice quantizes as the whole does).
    cuda::QuantizedOperand a(r.a, src->tokens_l.get<__nv_bfloat16>() + src->offsets[e] * g.k, rows[e], g.k, true, eo.recipe);
    cuda::QuantizedOperand w(r.b, src->per_expert[e].get<__nv_bfloat16>(), g.n, g.k, g.b.k_major, eo.recipe);
    a.quantize(nullptr);
    w.quantize(nullptr);
    GS_CUDA(cudaDeviceSynchronize());
    const auto ref = ref_gemm(dequantize(a), dequantize(w), rows[e], g.n, g.k);
    want.insert(want.end(), ref.begin(), ref.end());
    const size_t first = static_cast<size_t>(out->row_offsets[e] * g.n);
    got.insert(got.end(), d.begin() + static_cast<std::ptrdiff_t>(first),
               d.begin() + static_cast<std::ptrdiff_t>(first + static_cast<size_t>(rows[e] * g.n)));
  }
  const double err = rel_frobenius(got, want);
  std::printf("    grouped %s vs FP64: %.2e over %zu values\n", pass_label(pass), err, got.size());
  EXPECT_LT(err, kTol);
}

TEST(DeepGemmProvider, MGroupedCellsWithEmptyAndUnevenExpertsMatchTheReference) {
  GS_REQUIRE_DEEPGEMM();
  for (Mode mode : {Mode::PreQuantized, Mode::PerGemm})
    for (Pass pass : {Pass::Fprop, Pass::Dgrad}) check_m_grouped(pass, mode);
}

// The K-grouped contiguous Wgrad: one launch for every expert (empty, uneven and last-empty
// experts), each expert's FP32 main gradient = its prior + its product; pre-quantized and with the
// quantization (and the copy into the concatenated operands) inside the iteration.
void check_k_grouped(Mode mode) {
  SCOPED_TRACE(to_string(mode));
  EngineOptions eo;
  auto pv = provider(eo);
  const std::vector<int64_t> tokens = {0, 200, 37, 300, 128, 0};
  const Gemm g = grouped(Pass::Wgrad, tokens, 256, 384);  // m = out, n = in, K = tokens
  const Recipe r = make_recipe(Precision::FP8Block, expert_gemm(g, 128), eo.recipe);
  ASSERT_TRUE(r.fp32_accumulate);
  ASSERT_EQ(pv->cannot_run(g, Precision::FP8Block, mode, r, compute_capability()), "");
  auto src = GroupedSources::allocate(g, padded_group(g, Precision::FP8Block), 9, nullptr, true);
  const size_t mn = static_cast<size_t>(g.m * g.n);
  std::vector<std::vector<float>> prior;
  for (size_t e = 0; e < tokens.size(); ++e) {
    prior.push_back(prior_pattern(mn, static_cast<int>(e)));
    GS_CUDA(cudaMemcpy(src->per_expert[e].get(), prior[e].data(), mn * 4, cudaMemcpyHostToDevice));
  }
  auto run = pv->grouped(*src, r, mode, 0);
  std::printf("    %s\n", run->config().c_str());
  EXPECT_NE(run->config().find("sm90_k_grouped_fp8_gemm_contiguous_1d1d"), std::string::npos) << "one K-grouped launch";
  EXPECT_NE(run->config().find("in one launch"), std::string::npos);
  run->iteration(nullptr);
  GS_CUDA(cudaDeviceSynchronize());
  for (size_t e = 0; e < tokens.size(); ++e) {
    SCOPED_TRACE(testing::Message() << "expert " << e << " with " << tokens[e] << " tokens");
    std::vector<float> out(mn);
    GS_CUDA(cudaMemcpy(out.data(), src->per_expert[e].get(), mn * 4, cudaMemcpyDeviceToHost));
    if (tokens[e] == 0) {
      EXPECT_EQ(out, prior[e]) << "an expert without tokens adds nothing";
      continue;
    }
    // The reference: the expert's tokens padded with zero rows to 128, as the provider lays
    // them out, quantized by the engine's quantizer along the tokens (K).
    const int64_t t = (tokens[e] + 127) / 128 * 128;
    auto padded_copy = [&](const cuda::DeviceBuffer& from, int64_t width) {
      cuda::DeviceBuffer b(static_cast<size_t>(t * width) * 2);
      GS_CUDA(cudaMemset(b.get(), 0, b.bytes()));
      GS_CUDA(cudaMemcpy(b.get(), from.get<char>() + static_cast<size_t>(src->offsets[e] * width) * 2,
                         static_cast<size_t>(tokens[e] * width) * 2, cudaMemcpyDeviceToDevice));
      return b;
    };
    cuda::DeviceBuffer xl = padded_copy(src->tokens_l, g.m), xr = padded_copy(src->tokens_r, g.n);
    cuda::QuantizedOperand a(r.a, xl.get<__nv_bfloat16>(), g.m, t, false, eo.recipe);
    cuda::QuantizedOperand b(r.b, xr.get<__nv_bfloat16>(), g.n, t, false, eo.recipe);
    a.quantize(nullptr);
    b.quantize(nullptr);
    GS_CUDA(cudaDeviceSynchronize());
    const auto prod = ref_gemm(dequantize(a), dequantize(b), g.m, g.n, t);
    std::vector<double> got(mn), want(mn), got_prod(mn);
    for (size_t i = 0; i < mn; ++i) {
      got[i] = out[i];
      want[i] = prior[e][i] + prod[i];
      got_prod[i] = static_cast<double>(out[i]) - prior[e][i];
    }
    const double ep = rel_frobenius(got_prod, prod), et = rel_frobenius(got, want);
    std::printf("    expert %zu (%lld tokens): product %.2e, prior + product %.2e\n", e, static_cast<long long>(tokens[e]),
                ep, et);
    EXPECT_LT(ep, kTol);
    EXPECT_LT(et, kTol);
  }
}

TEST(DeepGemmProvider, GroupedWgradIsOneKGroupedLaunchAccumulatingEachExpertIntoFp32) {
  GS_REQUIRE_DEEPGEMM();
  for (Mode mode : {Mode::PreQuantized, Mode::PerGemm}) check_k_grouped(mode);
}

// BF16 cells (sm90_bf16_gemm) on the BF16 sources as the engine stores them, vs FP64 of the same
// BF16 values: BF16 out within the project's BF16 tolerance (4e-3: output rounding); the FP32
// main gradient (prior + product, accumulated by the kernel's reduce-add store) much tighter.
constexpr double kFp32Tol = 1e-4;

void check_bf16_dense(Pass pass, bool fp32_wgrad) {
  SCOPED_TRACE(testing::Message() << "BF16 " << pass_label(pass) << (fp32_wgrad ? "" : " (BF16 Wgrad output)"));
  EngineOptions eo;
  eo.recipe.wgrad_fp32_accumulate = fp32_wgrad;
  auto pv = provider(eo);
  const Gemm g = linear(pass, 512, 1024, 768);
  const Recipe r = make_recipe(Precision::BF16, g, eo.recipe);
  ASSERT_EQ(pv->cannot_run(g, Precision::BF16, Mode::PreQuantized, r, compute_capability()), "");
  GemmSources src = GemmSources::allocate(g, r.fp32_accumulate);
  const size_t le = static_cast<size_t>(g.m * g.k), re = static_cast<size_t>(g.k * g.n), mn = static_cast<size_t>(g.m * g.n);
  cuda::fill_normal_bf16(src.l.get<__nv_bfloat16>(), le, 81, 1.f, nullptr);
  cuda::fill_normal_bf16(src.r.get<__nv_bfloat16>(), re, 82, g.b.role == Role::Weight ? 0.02f : 1.f, nullptr);
  const std::vector<float> prior = prior_pattern(mn, 5);
  if (r.fp32_accumulate) GS_CUDA(cudaMemcpy(src.c.get(), prior.data(), mn * 4, cudaMemcpyHostToDevice));
  else GS_CUDA(cudaMemset(src.c.get(), 0xFF, src.c.bytes()));  // NaN until written
  GS_CUDA(cudaDeviceSynchronize());
  auto run = pv->dense(g, r, Mode::PreQuantized, src, 0);
  std::printf("    %s\n", run->config().c_str());
  EXPECT_NE(run->config().find("sm90_bf16_gemm"), std::string::npos);
  run->iteration(nullptr);
  GS_CUDA(cudaDeviceSynchronize());
  const auto prod = ref_gemm(bf16_operand(to_host_u16(src.l), g.m, g.k, g.a.k_major),
                             bf16_operand(to_host_u16(src.r), g.n, g.k, g.b.k_major), g.m, g.n, g.k);
  if (r.fp32_accumulate) {
    std::vector<float> out(mn);
    GS_CUDA(cudaMemcpy(out.data(), src.c.get(), mn * 4, cudaMemcpyDeviceToHost));
    std::vector<double> got_prod(mn), got(mn), want(mn);
    for (size_t i = 0; i < mn; ++i) {
      got_prod[i] = static_cast<double>(out[i]) - prior[i];
      got[i] = out[i];
      want[i] = prior[i] + prod[i];
    }
    const double ep = rel_frobenius(got_prod, prod), et = rel_frobenius(got, want);
    std::printf("    BF16 Wgrad into FP32: product %.2e, prior + product %.2e\n", ep, et);
    EXPECT_LT(ep, kFp32Tol);
    EXPECT_LT(et, kFp32Tol);
  } else {
    const double err = rel_frobenius(bf16_host(src.c.get(), mn), prod);
    std::printf("    BF16 %s vs FP64: %.2e\n", pass_label(pass), err);
    EXPECT_LT(err, kTol);
  }
}

TEST(DeepGemmProvider, Bf16DenseCellsMatchTheReference) {
  GS_REQUIRE_DEEPGEMM();
  for (Pass pass : {Pass::Fprop, Pass::Dgrad, Pass::Wgrad}) check_bf16_dense(pass, true);
  check_bf16_dense(Pass::Wgrad, false);
}

void check_bf16_m_grouped(Pass pass) {
  SCOPED_TRACE(testing::Message() << "BF16 grouped " << pass_label(pass));
  EngineOptions eo;
  auto pv = provider(eo);
  const std::vector<int64_t> rows = {0, 200, 37, 128, 0, 300};  // empty, uneven, exact
  const Gemm g = grouped(pass, rows, 512, 384);
  const Recipe r = make_recipe(Precision::BF16, expert_gemm(g, 128), eo.recipe);
  ASSERT_EQ(pv->cannot_run(g, Precision::BF16, Mode::PreQuantized, r, compute_capability()), "");
  auto src = GroupedSources::allocate(g, padded_group(g, Precision::BF16), 5, nullptr, false);
  auto run = pv->grouped(*src, r, Mode::PreQuantized, 0);
  std::printf("    %s\n", run->config().c_str());
  EXPECT_NE(run->config().find("sm90_m_grouped_bf16_gemm_contiguous"), std::string::npos);
  run->iteration(nullptr);
  GS_CUDA(cudaDeviceSynchronize());
  const auto out = cuda::deepgemm_grouped_output(*run);
  ASSERT_TRUE(out);
  const auto d = bf16_host(out->d, static_cast<size_t>(out->rows * g.n));
  const auto tokens = to_host_u16(src->tokens_l);
  std::vector<double> got, want;
  for (size_t e = 0; e < rows.size(); ++e) {
    if (rows[e] == 0) continue;
    const std::vector<uint16_t> a_e(tokens.begin() + static_cast<std::ptrdiff_t>(src->offsets[e] * g.k),
                                    tokens.begin() + static_cast<std::ptrdiff_t>((src->offsets[e] + rows[e]) * g.k));
    const auto ref = ref_gemm(bf16_operand(a_e, rows[e], g.k, true),
                              bf16_operand(to_host_u16(src->per_expert[e]), g.n, g.k, g.b.k_major), rows[e], g.n, g.k);
    want.insert(want.end(), ref.begin(), ref.end());
    const size_t first = static_cast<size_t>(out->row_offsets[e] * g.n);
    got.insert(got.end(), d.begin() + static_cast<std::ptrdiff_t>(first),
               d.begin() + static_cast<std::ptrdiff_t>(first + static_cast<size_t>(rows[e] * g.n)));
  }
  const double err = rel_frobenius(got, want);
  std::printf("    BF16 grouped %s vs FP64: %.2e over %zu values\n", pass_label(pass), err, got.size());
  EXPECT_LT(err, kTol);
}

TEST(DeepGemmProvider, Bf16MGroupedCellsWithEmptyAndUnevenExpertsMatchTheReference) {
  GS_REQUIRE_DEEPGEMM();
  for (Pass pass : {Pass::Fprop, Pass::Dgrad}) check_bf16_m_grouped(pass);
}

// The BF16 grouped Wgrad: DeepGEMM's K-grouped BF16 GEMM, one launch, empty, uneven and last-empty
// experts; FP32 main gradients (prior + product) or BF16 out (--wgrad-output bf16).
void check_bf16_k_grouped(bool fp32) {
  SCOPED_TRACE(fp32 ? "BF16 K-grouped into FP32" : "BF16 K-grouped, BF16 out");
  EngineOptions eo;
  eo.recipe.wgrad_fp32_accumulate = fp32;
  auto pv = provider(eo);
  const std::vector<int64_t> tokens = {0, 200, 37, 300, 128, 0};
  const Gemm g = grouped(Pass::Wgrad, tokens, 256, 384);  // m = out, n = in, K = tokens
  const Recipe r = make_recipe(Precision::BF16, expert_gemm(g, 128), eo.recipe);
  ASSERT_EQ(r.fp32_accumulate, fp32);
  ASSERT_EQ(pv->cannot_run(g, Precision::BF16, Mode::PreQuantized, r, compute_capability()), "");
  auto src = GroupedSources::allocate(g, padded_group(g, Precision::BF16), 13, nullptr, fp32);
  const size_t mn = static_cast<size_t>(g.m * g.n);
  std::vector<std::vector<float>> prior;
  for (size_t e = 0; e < tokens.size(); ++e) {
    prior.push_back(prior_pattern(mn, static_cast<int>(e) + 7));
    if (fp32) GS_CUDA(cudaMemcpy(src->per_expert[e].get(), prior[e].data(), mn * 4, cudaMemcpyHostToDevice));
  }
  auto run = pv->grouped(*src, r, Mode::PreQuantized, 0);
  std::printf("    %s\n", run->config().c_str());
  EXPECT_NE(run->config().find("sm90_bf16_k_grouped_gemm"), std::string::npos);
  EXPECT_NE(run->config().find("in one launch"), std::string::npos);
  run->iteration(nullptr);
  GS_CUDA(cudaDeviceSynchronize());
  const auto xl = to_host_u16(src->tokens_l), xr = to_host_u16(src->tokens_r);
  for (size_t e = 0; e < tokens.size(); ++e) {
    SCOPED_TRACE(testing::Message() << "expert " << e << " with " << tokens[e] << " tokens");
    if (tokens[e] == 0) {
      if (fp32) {
        std::vector<float> out(mn);
        GS_CUDA(cudaMemcpy(out.data(), src->per_expert[e].get(), mn * 4, cudaMemcpyDeviceToHost));
        EXPECT_EQ(out, prior[e]) << "an expert without tokens adds nothing";
      }
      continue;
    }
    auto slice = [&](const std::vector<uint16_t>& all, int64_t width) {
      return std::vector<uint16_t>(all.begin() + static_cast<std::ptrdiff_t>(src->offsets[e] * width),
                                   all.begin() + static_cast<std::ptrdiff_t>((src->offsets[e] + tokens[e]) * width));
    };
    const auto prod = ref_gemm(bf16_operand(slice(xl, g.m), g.m, tokens[e], false),
                               bf16_operand(slice(xr, g.n), g.n, tokens[e], false), g.m, g.n, tokens[e]);
    if (!fp32) {
      const double err = rel_frobenius(bf16_host(src->per_expert[e].get(), mn), prod);
      std::printf("    expert %zu (%lld tokens), BF16 out: %.2e\n", e, static_cast<long long>(tokens[e]), err);
      EXPECT_LT(err, kTol);
      continue;
    }
    std::vector<float> out(mn);
    GS_CUDA(cudaMemcpy(out.data(), src->per_expert[e].get(), mn * 4, cudaMemcpyDeviceToHost));
    std::vector<double> got(mn), want(mn), got_prod(mn);
    for (size_t i = 0; i < mn; ++i) {
      got[i] = out[i];
      want[i] = prior[e][i] + prod[i];
      got_prod[i] = static_cast<double>(out[i]) - prior[e][i];
    }
    const double ep = rel_frobenius(got_prod, prod), et = rel_frobenius(got, want);
    std::printf("    expert %zu (%lld tokens): product %.2e, prior + product %.2e\n", e, static_cast<long long>(tokens[e]),
                ep, et);
    EXPECT_LT(ep, kFp32Tol);
    EXPECT_LT(et, kFp32Tol);
  }
}

TEST(DeepGemmProvider, Bf16GroupedWgradIsOneKGroupedLaunch) {
  GS_REQUIRE_DEEPGEMM();
  check_bf16_k_grouped(true);
  check_bf16_k_grouped(false);
}

RunRequest small_moe_request() {
  RunRequest req;
  ModelConfig c = find_preset("qwen3-30b-a3b").config;  // 128 experts of 768, EP 8: 16 local experts
  c.num_hidden_layers = 1;
  c.sequence_length = 1024;
  c.vocab_size = 0;  // no LM head
  req.plan = build_model_plan(c);
  req.precisions = {Precision::BF16, Precision::FP8Block};
  req.modes = {Mode::PreQuantized, Mode::Training};
  req.options.timing.warmup = 2;
  req.options.timing.iters = 5;
  req.options.timing.gpu_warmup_s = 0;
  req.providers = {"cublaslt", "deepgemm"};
  return req;
}

bool any_note(const RunResult& r, const std::string& part) {
  for (const std::string& n : r.notes)
    if (n.find(part) != std::string::npos) return true;
  return false;
}

TEST(DeepGemmProvider, EngineMeasuresItsCellsBesideCublasLtAndASecondRunCompilesNothing) {
  GS_REQUIRE_DEEPGEMM();
  const RunRequest req = small_moe_request();
  std::string why;
  auto engine = cuda::make_engine(req.options, why);
  ASSERT_NE(engine, nullptr) << why;
  const RunResult r = run(*engine, req);
  ASSERT_EQ(r.providers, req.providers);
  int measured = 0, bf16_measured = 0;
  for (size_t m = 0; m < r.modes.size(); ++m)
    for (size_t g = 0; g < r.plan.gemms.size(); ++g)
      for (size_t p = 0; p < r.precisions.size(); ++p) {
        const Gemm& x = r.plan.gemms[g];
        SCOPED_TRACE(testing::Message() << to_string(r.modes[m]) << " " << to_string(r.precisions[p]) << " "
                                        << pass_label(x.pass) << " " << x.label());
        const Cell& c = r.provider_cell(1, m, g, p);
        const Recipe rec = make_recipe(r.precisions[p], x.grouped() ? expert_gemm(x, 128) : x, req.options.recipe);
        const std::string rule = deepgemm_cell_problem(x, rec, compute_capability());
        if (!rule.empty()) {
          EXPECT_FALSE(c.ok);
          EXPECT_EQ(c.reason, rule);
          continue;
        }
        ASSERT_TRUE(c.ok) << c.reason;
        EXPECT_GT(c.stats.mean_ms, 0);
        EXPECT_EQ(c.kernels.provider, "deepgemm");
        EXPECT_NE(c.kernels.config.find("deepgemm sm90_"), std::string::npos) << c.kernels.config;
        if (rec.precision == Precision::BF16) {
          EXPECT_NE(c.kernels.config.find("bf16"), std::string::npos) << c.kernels.config;
          ++bf16_measured;
        } else {
          ++measured;
        }
        if (x.grouped() && x.group_dim == GroupDim::M)
          EXPECT_NE(c.kernels.config.find("m_grouped"), std::string::npos) << c.kernels.config;
        if (x.grouped() && x.group_dim == GroupDim::K)
          EXPECT_NE(c.kernels.config.find("k_grouped"), std::string::npos) << c.kernels.config;
      }
  EXPECT_GE(bf16_measured, 2 * 8) << "DeepGEMM's BF16 GEMM: the BF16 column's projections and experts, both modes";
  EXPECT_GE(measured, 2 * 12) << "every projection and expert GEMM, both modes";
  EXPECT_TRUE(any_note(r, "deepgemm: ")) << "compile time and cache hits in the notes";
  EXPECT_TRUE(any_note(r, "compiled with NVRTC"));
  for (const std::string& n : r.notes) std::printf("    note: %s\n", n.c_str());
  // A second run (a new engine, the same process): nothing is compiled again.
  const int compiles = dg::Runtime::get().compiles();
  engine.reset();
  auto again = cuda::make_engine(req.options, why);
  ASSERT_NE(again, nullptr) << why;
  const RunResult r2 = run(*again, req);
  EXPECT_EQ(dg::Runtime::get().compiles(), compiles) << "the second run compiled something";
  EXPECT_TRUE(any_note(r2, "deepgemm: 0 kernel(s) compiled")) << "the note says nothing was compiled";
  // The kernels are also on disk (a second process reads them: the README's GPU command runs
  // gemmscope twice and its notes say so).
  const auto& cache = dg::Runtime::get().cache();
  if (cache.enabled()) {
    std::error_code ec;
    EXPECT_TRUE(std::filesystem::exists(cache.dir(), ec)) << cache.dir();
  }
}

}  // namespace
