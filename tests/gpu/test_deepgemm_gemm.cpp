// DeepGEMM's sm90 FP8 kernels compiled with NVRTC inside gemmscope: outputs vs an FP64 reference
// of the operands as quantized (the project's FP8-block tolerance, 4e-3 relative Frobenius), for
// the dense 1x128/128x128 GEMM, the M-grouped contiguous GEMM (empty and uneven experts) and the
// accumulating FP32 Wgrad (prior gradient + product); and the disk cache (a second runtime on the
// same folder compiles nothing). Skips, saying why, without a Hopper GPU, NVRTC or toolkit headers.
#include <gtest/gtest.h>

#include <filesystem>
#include <numeric>
#include <unistd.h>

#include "cuda/providers/deepgemm/deepgemm_layouts.cuh"
#include "cuda/providers/deepgemm/deepgemm_runtime.hpp"
#include "cuda/common/fill.cuh"
#include "deepgemm_test_util.hpp"
#include "gemm_reference.hpp"
#include "gpu_test_util.hpp"

namespace {

using namespace gs::test;
using gs::cuda::DeviceBuffer;
using gs::cuda::QuantizedOperand;

constexpr double kTol = 4e-3;  // as test_gemm_recipes: BF16 rounding + FP32 accumulation

gs::OperandRecipe fp8(gs::Scaling s) {
  gs::OperandRecipe r;
  r.format = gs::ElemFormat::E4M3;
  r.scaling = s;
  return r;
}

struct Operand {
  DeviceBuffer src;
  std::unique_ptr<QuantizedOperand> q;
  DeviceBuffer dg_scales;  // DeepGEMM's scale layout
};

Operand make_operand(int64_t outer, int64_t k, gs::Scaling s, uint64_t seed, float stddev, int zero_rows_from = -1,
                     const std::vector<int>* valid_rows = nullptr) {
  Operand o;
  o.src = DeviceBuffer(static_cast<size_t>(outer * k) * 2);
  gs::cuda::fill_normal_bf16(o.src.get<__nv_bfloat16>(), static_cast<size_t>(outer * k), seed, stddev, 0);
  if (valid_rows) {  // padding rows of grouped A are zero
    for (int64_t r = 0; r < outer; ++r)
      if (!(*valid_rows)[static_cast<size_t>(r)])
        GS_CUDA(cudaMemset(o.src.get<__nv_bfloat16>() + r * k, 0, static_cast<size_t>(k) * 2));
  }
  (void)zero_rows_from;
  gs::RecipeOptions opts;
  o.q = std::make_unique<QuantizedOperand>(fp8(s), o.src.get<__nv_bfloat16>(), outer, k, true, opts);
  o.q->quantize(0);
  const float* sc = static_cast<const float*>(o.q->lt().scale);
  if (s == gs::Scaling::Block1x128) {
    o.dg_scales = DeviceBuffer(static_cast<size_t>(gs::dg::scales_1x128_deepgemm_count(static_cast<int>(outer), static_cast<int>(k))) * 4);
    gs::dg::scales_1x128_to_deepgemm(sc, static_cast<int>(outer), static_cast<int>(k), o.dg_scales.get<float>(), 0);
  } else {
    o.dg_scales = DeviceBuffer(static_cast<size_t>(gs::dg::scales_128x128_deepgemm_count(static_cast<int>(outer), static_cast<int>(k), 1)) * 4);
    gs::dg::scales_128x128_to_deepgemm(sc, static_cast<int>(outer), static_cast<int>(k), 1, 0, o.dg_scales.get<float>(), 0);
  }
  GS_CUDA(cudaDeviceSynchronize());
  return o;
}

std::vector<double> bf16_host(const DeviceBuffer& b) {
  const auto h = to_host_u16(b);
  std::vector<double> out(h.size());
  for (size_t i = 0; i < h.size(); ++i) out[i] = gs::nf::bf16_to_float(h[i]);
  return out;
}

void check_dense(int m, int n, int k) {
  SCOPED_TRACE(testing::Message() << "dense " << m << "x" << n << "x" << k);
  auto& rt = gs::dg::Runtime::get();
  Operand a = make_operand(m, k, gs::Scaling::Block1x128, 21, 1.0f);
  Operand b = make_operand(n, k, gs::Scaling::Block128x128, 22, 0.02f);
  DeviceBuffer d(static_cast<size_t>(m) * n * 2);
  GS_CUDA(cudaMemset(d.get(), 0xFF, d.bytes()));  // NaN poison
  gs::dg::Problem p;
  p.m = m; p.n = n; p.k = k;
  gs::dg::PrepareInfo info;
  const auto& kern = rt.prepare(p, &info);
  std::printf("    %s: %s, %s %.1f s\n", "dense", info.config.describe().c_str(),
              info.cache_hit ? "cache hit" : info.memory_hit ? "loaded" : "compiled", info.compile_seconds);
  gs::dg::DenseArgs args;
  args.a = a.q->lt().data; args.sfa = a.dg_scales.get<float>();
  args.b = b.q->lt().data; args.sfb = b.dg_scales.get<float>();
  args.d = d.get();
  rt.launch_dense(kern, args, m, 0);
  GS_CUDA(cudaDeviceSynchronize());
  const auto ref = ref_gemm(dequantize(*a.q), dequantize(*b.q), m, n, k);
  const double err = rel_frobenius(bf16_host(d), ref);
  std::printf("    dense %dx%dx%d vs FP64 of the quantized operands: %.2e\n", m, n, k, err);
  EXPECT_LT(err, kTol);
}

TEST(DeepGemm, DenseFp8BlockMatchesReference) {
  GS_REQUIRE_DEEPGEMM();
  check_dense(256, 512, 1024);
  check_dense(200, 384, 512);   // M not a multiple of the block: TMA bounds
  check_dense(16, 256, 2048);   // tiny M: block M 16
}

TEST(DeepGemm, MGroupedContiguousWithEmptyAndUnevenExperts) {
  GS_REQUIRE_DEEPGEMM();
  auto& rt = gs::dg::Runtime::get();
  const int n = 256, k = 512, align = gs::dg::kMGroupedAlignment;
  const std::vector<int> tokens = {0, 200, 37, 128, 0, 300};  // empty, uneven, exact
  const int groups = static_cast<int>(tokens.size());
  std::vector<int> m_indices, valid;
  for (int e = 0; e < groups; ++e) {
    const int padded = (tokens[static_cast<size_t>(e)] + align - 1) / align * align;
    for (int r = 0; r < padded; ++r) {
      const bool v = r < tokens[static_cast<size_t>(e)];
      m_indices.push_back(v ? e : -1);
      valid.push_back(v ? 1 : 0);
    }
  }
  const int m = static_cast<int>(m_indices.size());
  const int useful = std::accumulate(tokens.begin(), tokens.end(), 0);
  std::printf("    grouped: %d experts, %d rows for %d tokens (padding waste %.1f%%)\n", groups, m, useful,
              100.0 * (m - useful) / m);
  Operand a = make_operand(m, k, gs::Scaling::Block1x128, 31, 1.0f, -1, &valid);
  Operand b = make_operand(static_cast<int64_t>(groups) * n, k, gs::Scaling::Block128x128, 32, 0.02f);
  DeviceBuffer idx(m_indices.size() * 4);
  GS_CUDA(cudaMemcpy(idx.get(), m_indices.data(), idx.bytes(), cudaMemcpyHostToDevice));
  DeviceBuffer d(static_cast<size_t>(m) * n * 2);
  GS_CUDA(cudaMemset(d.get(), 0xFF, d.bytes()));
  gs::dg::Problem p;
  p.layout = gs::dg::Layout::MGroupedContiguous;
  p.m = m; p.n = n; p.k = k; p.num_groups = groups;
  const auto& kern = rt.prepare(p);
  gs::dg::DenseArgs args;
  args.a = a.q->lt().data; args.sfa = a.dg_scales.get<float>();
  args.b = b.q->lt().data; args.sfb = b.dg_scales.get<float>();
  args.d = d.get(); args.m_indices = idx.get<int>();
  rt.launch_dense(kern, args, m, 0);
  GS_CUDA(cudaDeviceSynchronize());
  const auto ad = dequantize(*a.q), bd = dequantize(*b.q), out = bf16_host(d);
  std::vector<double> got, ref;
  for (int r = 0; r < m; ++r) {
    const int e = m_indices[static_cast<size_t>(r)];
    if (e < 0) continue;
    for (int j = 0; j < n; ++j) {
      double acc = 0;
      for (int t = 0; t < k; ++t)
        acc += ad[static_cast<size_t>(r) * k + t] * bd[(static_cast<size_t>(e) * n + j) * k + t];
      ref.push_back(acc);
      got.push_back(out[static_cast<size_t>(r) * n + j]);
    }
  }
  ASSERT_EQ(static_cast<int>(got.size()), useful * n);
  const double err = rel_frobenius(got, ref);
  std::printf("    grouped vs FP64: %.2e\n", err);
  EXPECT_LT(err, kTol);
}

TEST(DeepGemm, WgradAccumulatesIntoFp32) {
  GS_REQUIRE_DEEPGEMM();
  auto& rt = gs::dg::Runtime::get();
  const int m = 256, n = 384, k = 1024;  // Wgrad: [out, in] += dY^T X over K = tokens
  Operand a = make_operand(m, k, gs::Scaling::Block1x128, 41, 1.0f);
  Operand b = make_operand(n, k, gs::Scaling::Block1x128, 42, 1.0f);
  std::vector<float> prior(static_cast<size_t>(m) * n);
  for (size_t i = 0; i < prior.size(); ++i) prior[i] = static_cast<float>((static_cast<int>(i * 2654435761u % 2001) - 1000) * 0.01);
  DeviceBuffer d(prior.size() * 4);
  GS_CUDA(cudaMemcpy(d.get(), prior.data(), d.bytes(), cudaMemcpyHostToDevice));
  gs::dg::Problem p;
  p.kernel = gs::dg::Kernel::FP8_1D1D;
  p.m = m; p.n = n; p.k = k;
  const auto& kern = rt.prepare(p);
  gs::dg::WgradArgs args;
  args.a = a.q->lt().data; args.sfa = a.dg_scales.get<float>();
  args.b = b.q->lt().data; args.sfb = b.dg_scales.get<float>();
  args.d = d.get<float>();
  rt.launch_wgrad(kern, args, m, 0);
  GS_CUDA(cudaDeviceSynchronize());
  std::vector<float> out(prior.size());
  GS_CUDA(cudaMemcpy(out.data(), d.get(), d.bytes(), cudaMemcpyDeviceToHost));
  const auto prod = ref_gemm(dequantize(*a.q), dequantize(*b.q), m, n, k);
  std::vector<double> got_prod(out.size()), want_total(out.size()), got_total(out.size());
  for (size_t i = 0; i < out.size(); ++i) {
    got_prod[i] = static_cast<double>(out[i]) - prior[i];
    got_total[i] = out[i];
    want_total[i] = prior[i] + prod[i];
  }
  const double e_prod = rel_frobenius(got_prod, prod), e_total = rel_frobenius(got_total, want_total);
  std::printf("    wgrad: product vs FP64 %.2e, prior + product %.2e\n", e_prod, e_total);
  EXPECT_LT(e_prod, kTol);   // the product is there (not overwritten, not dropped)
  EXPECT_LT(e_total, kTol);  // and the prior gradient kept
}

TEST(DeepGemm, SecondRuntimeOnTheSameCacheCompilesNothing) {
  GS_REQUIRE_DEEPGEMM();
  const auto dir = std::filesystem::temp_directory_path() / ("gs_dg_cache_" + std::to_string(::getpid()));
  std::filesystem::remove_all(dir);
  gs::dg::Problem p;
  p.m = 512; p.n = 768; p.k = 1536;
  {
    gs::dg::Runtime first(dir.string(), gs::dg::find_toolkit_include());
    gs::dg::PrepareInfo info;
    first.prepare(p, &info);
    EXPECT_FALSE(info.cache_hit);
    EXPECT_GT(info.compile_seconds, 0.0);
    EXPECT_EQ(first.compiles(), 1);
    EXPECT_TRUE(std::filesystem::exists(info.cache_path)) << info.cache_path << " " << info.cache_note;
    first.prepare(p, &info);  // same process: in memory
    EXPECT_TRUE(info.memory_hit);
    EXPECT_EQ(first.compiles(), 1);
  }
  gs::dg::Runtime second(dir.string(), gs::dg::find_toolkit_include());
  gs::dg::PrepareInfo info;
  second.prepare(p, &info);
  EXPECT_TRUE(info.cache_hit);
  EXPECT_EQ(info.compile_seconds, 0.0);
  EXPECT_EQ(second.compiles(), 0);
  // Another N is another kernel: a miss.
  p.n = 1024;
  second.prepare(p, &info);
  EXPECT_FALSE(info.cache_hit);
  EXPECT_EQ(second.compiles(), 1);
  std::filesystem::remove_all(dir);
}

}  // namespace
