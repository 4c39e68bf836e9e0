// The DeepGEMM provider's JIT cache (core/providers/jit_cache) and kernel choice (core/providers/deepgemm_config):
// keys change with every input that shapes a cubin, the store round-trips and refuses stale or
// colliding entries, the folder follows the documented variables, and the heuristics keep
// DeepGEMM's invariants.
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>

#include "core/providers/deepgemm_config.hpp"
#include "core/providers/jit_cache.hpp"

namespace {

using gs::jit::CacheKey;
using gs::jit::DiskCache;

CacheKey base_key() {
  CacheKey k;
  k.kernel = "sm90_fp8_gemm_1d2d";
  k.source = "#include <x>\n&f<1, 2>";
  k.commit = "54e2261";
  k.header_hash = 0x1234;
  k.nvrtc_major = 13;
  k.nvrtc_minor = 0;
  k.arch = "sm_90a";
  k.options = {"-std=c++20", "-DNDEBUG"};
  return k;
}

std::filesystem::path temp_dir(const char* name) {
  auto d = std::filesystem::temp_directory_path() / (std::string("gs_jit_") + name + "_" + std::to_string(::getpid()));
  std::filesystem::remove_all(d);
  return d;
}

TEST(JitCache, Fnv1aKnownValues) {
  EXPECT_EQ(gs::jit::fnv1a64(""), 0xcbf29ce484222325ull);
  EXPECT_EQ(gs::jit::fnv1a64("a"), 0xaf63dc4c8601ec8cull);
}

TEST(JitCache, EveryFieldChangesTheKey) {
  const CacheKey k = base_key();
  const std::string stem = k.file_stem();
  EXPECT_EQ(stem.rfind("sm90_fp8_gemm_1d2d-", 0), 0u) << stem;
  std::vector<CacheKey> variants(8, k);
  variants[0].source += " ";
  variants[1].commit = "0000000";
  variants[2].header_hash ^= 1;
  variants[3].nvrtc_minor = 1;
  variants[4].nvrtc_major = 12;
  variants[5].arch = "sm_100a";
  variants[6].options.push_back("-lineinfo");
  variants[7].kernel = "other";
  for (size_t i = 0; i < variants.size(); ++i) EXPECT_NE(variants[i].file_stem(), stem) << "variant " << i;
  // Field boundaries are unambiguous: moving text between options is a different key.
  CacheKey a = k, b = k;
  a.options = {"-Dab", "c"};
  b.options = {"-Da", "bc"};
  EXPECT_NE(a.canonical(), b.canonical());
}

TEST(JitCache, StoreLoadRoundTripAndInvalidation) {
  const auto dir = temp_dir("rt");
  DiskCache cache(dir.string());
  const CacheKey k = base_key();
  EXPECT_FALSE(cache.load(k).has_value());  // cold
  std::string why;
  const std::string bin("name\n\x7f" "ELF\0\1\2", 10);
  ASSERT_TRUE(cache.store(k, bin, why)) << why;
  auto hit = cache.load(k);
  ASSERT_TRUE(hit.has_value());
  EXPECT_EQ(*hit, bin);
  // A new NVRTC (or header hash) is a miss, never the old binary.
  CacheKey k2 = k;
  k2.nvrtc_minor = 2;
  EXPECT_FALSE(cache.load(k2).has_value());
  // A file whose stored key differs (a hash collision, or an edited file) reads as a miss.
  {
    std::ofstream f(cache.path_for(k2), std::ios::binary);
    f << "GSJIT1\n" << k.canonical().size() << "\n" << k.canonical() << "payload";
  }
  EXPECT_FALSE(cache.load(k2).has_value());
  // A truncated file is a miss.
  {
    std::ofstream f(cache.path_for(k), std::ios::binary | std::ios::trunc);
    f << "GSJIT1\n";
  }
  EXPECT_FALSE(cache.load(k).has_value());
  std::filesystem::remove_all(dir);
}

TEST(JitCache, DisabledOrUnwritableCacheIsANote) {
  DiskCache off("");
  std::string why;
  EXPECT_FALSE(off.enabled());
  EXPECT_FALSE(off.store(base_key(), "x", why));
  EXPECT_NE(why.find("GEMMSCOPE_CACHE_DIR"), std::string::npos) << why;
  // A folder under a regular file cannot be created.
  const auto file = temp_dir("file");
  { std::ofstream f(file); f << "x"; }
  DiskCache bad((file / "sub").string());
  why.clear();
  EXPECT_FALSE(bad.store(base_key(), "x", why));
  EXPECT_FALSE(why.empty());
  std::filesystem::remove(file);
}

TEST(JitCache, FolderFollowsTheDocumentedVariables) {
  std::map<std::string, std::string> env;
  auto get = [&](const char* n) -> const char* {
    auto it = env.find(n);
    return it == env.end() ? nullptr : it->second.c_str();
  };
  EXPECT_EQ(gs::jit::cache_dir(get), "");
  env["HOME"] = "/h";
  EXPECT_EQ(gs::jit::cache_dir(get), "/h/.cache/gemmscope/deepgemm");
  env["XDG_CACHE_HOME"] = "/x";
  EXPECT_EQ(gs::jit::cache_dir(get), "/x/gemmscope/deepgemm");
  env["GEMMSCOPE_CACHE_DIR"] = "/c";
  EXPECT_EQ(gs::jit::cache_dir(get), "/c");
  env["GEMMSCOPE_CACHE_DIR"] = "";  // empty means unset
  EXPECT_EQ(gs::jit::cache_dir(get), "/x/gemmscope/deepgemm");
}

using gs::dg::Kernel;
using gs::dg::Layout;
using gs::dg::Problem;

Problem dense(int m, int n, int k) {
  Problem p;
  p.m = m; p.n = n; p.k = k; p.num_sms = 132;
  return p;
}

TEST(DeepGemmConfig, DenseChoiceKeepsDeepGemmInvariants) {
  for (auto [m, n, k] : {std::tuple{4096, 4096, 4096}, {128, 7168, 2048}, {16, 4096, 7168}, {8192, 18944, 3584}}) {
    const Problem p = dense(m, n, k);
    ASSERT_EQ(gs::dg::unsupported_reason(p), "");
    const auto c = gs::dg::best_config(p);
    EXPECT_EQ(c.block_k, 128);
    EXPECT_LE(c.block_n, 192);
    EXPECT_FALSE(c.block_m > 128 && c.block_n > 128);
    EXPECT_LE(c.smem_bytes, gs::dg::kSm90SmemCapacity);
    EXPECT_GE(c.num_stages, 3);
    EXPECT_LE(c.cluster_size(), 2);
    EXPECT_EQ(c.num_sms, 132);
    EXPECT_EQ(c.swizzle_a, 128);
    EXPECT_EQ(c.num_math_threads, c.block_m <= 64 ? 128 : 256);
  }
  // A tiny M gets a tiny block M (DeepGEMM adds 16 and 32 for small M).
  EXPECT_LE(gs::dg::best_config(dense(16, 4096, 7168)).block_m, 64);
  // A single wave never multicasts.
  EXPECT_EQ(gs::dg::best_config(dense(128, 1024, 1024)).cluster_size(), 1);
}

TEST(DeepGemmConfig, GroupedAndWgrad) {
  Problem g = dense(128 * 64, 4096, 7168);
  g.layout = Layout::MGroupedContiguous;
  g.num_groups = 8;
  ASSERT_EQ(gs::dg::unsupported_reason(g), "");
  EXPECT_EQ(gs::dg::best_config(g).block_m, gs::dg::kMGroupedAlignment);
  g.m = 100;
  EXPECT_NE(gs::dg::unsupported_reason(g).find("multiple of 128"), std::string::npos);

  Problem w = dense(4096, 7168, 8192);
  w.kernel = Kernel::FP8_1D1D;
  ASSERT_EQ(gs::dg::unsupported_reason(w), "");
  const auto c = gs::dg::best_config(w);
  EXPECT_TRUE(c.block_m == 64 || c.block_m == 128);
  EXPECT_LE(c.block_n, 160);
  EXPECT_EQ(c.swizzle_cd, 0);  // FP32 output is not swizzled
}

TEST(DeepGemmConfig, Bf16FollowsDeepGemmsBf16Choice) {
  Problem p = dense(4096, 4096, 4096);
  p.kernel = Kernel::BF16;
  ASSERT_EQ(gs::dg::unsupported_reason(p), "");
  auto c = gs::dg::best_config(p);
  EXPECT_EQ(c.block_k, 64) << "128 bytes of BF16";
  EXPECT_EQ(c.swizzle_a, 128);
  EXPECT_EQ(c.swizzle_b, 128);
  EXPECT_GT(c.swizzle_cd, 0) << "BF16 output is swizzled";
  EXPECT_LE(c.smem_bytes, gs::dg::kSm90SmemCapacity);
  EXPECT_GE(c.num_stages, 3);
  EXPECT_FALSE(c.block_m > 128 && c.block_n > 128);
  // The FP32 accumulating Wgrad: MN-major operands (swizzle along M / N), no 256-row block, FP32 unswizzled.
  Problem w = dense(4096, 7168, 8192);
  w.kernel = Kernel::BF16_FP32;
  w.a_k_major = w.b_k_major = false;
  ASSERT_EQ(gs::dg::unsupported_reason(w), "");
  c = gs::dg::best_config(w);
  EXPECT_LE(c.block_m, 128);
  EXPECT_EQ(c.swizzle_cd, 0);
  EXPECT_EQ(c.swizzle_a % 64, 0);
  const auto in = gs::dg::instantiation(w, c);
  EXPECT_NE(in.source.find("deep_gemm/impls/sm90_bf16_gemm.cuh"), std::string::npos);
  EXPECT_EQ(in.name_expression.rfind("&deep_gemm::sm90_bf16_gemm_impl<cute::UMMA::Major::MN, cute::UMMA::Major::MN, 0, 7168, 8192, 1, ", 0), 0u)
      << in.name_expression;
  EXPECT_NE(in.name_expression.find("GemmType::Normal, true, float>"), std::string::npos) << in.name_expression;
  // Same shape, BF16 out: another kernel (and another cache entry).
  Problem wb = w;
  wb.kernel = Kernel::BF16;
  EXPECT_NE(gs::dg::instantiation(wb, gs::dg::best_config(wb)).name_expression, in.name_expression);
  // M-grouped: block M = the 128-row alignment, K-major A required; K % 64, MN-major M % 8.
  Problem g = dense(128 * 32, 2048, 7168);
  g.kernel = Kernel::BF16;
  g.layout = Layout::MGroupedContiguous;
  g.num_groups = 8;
  g.b_k_major = false;
  ASSERT_EQ(gs::dg::unsupported_reason(g), "");
  EXPECT_EQ(gs::dg::best_config(g).block_m, gs::dg::kMGroupedAlignment);
  EXPECT_NE(gs::dg::instantiation(g, gs::dg::best_config(g)).name_expression.find("GemmType::MGroupedContiguous, false, cutlass::bfloat16_t>"),
            std::string::npos);
  g.a_k_major = false;
  EXPECT_NE(gs::dg::unsupported_reason(g).find("K-major A"), std::string::npos);
  Problem k = p;
  k.k = 4096 + 32;
  EXPECT_NE(gs::dg::unsupported_reason(k).find("K % 64"), std::string::npos);
  Problem mn = w;
  mn.m = 4096 + 4;
  EXPECT_NE(gs::dg::unsupported_reason(mn).find("M % 8"), std::string::npos);
  // K-grouped (the grouped Wgrad): MN-major operands, K at run time, each expert's K % 128.
  Problem kg = dense(768, 2048, 512);
  kg.kernel = Kernel::BF16_FP32;
  kg.layout = Layout::KGroupedContiguous;
  kg.num_groups = 8;
  kg.a_k_major = kg.b_k_major = false;
  ASSERT_EQ(gs::dg::unsupported_reason(kg), "");
  const auto kgc = gs::dg::best_config(kg);
  EXPECT_EQ(kgc.cluster_size(), 1) << "no multicast with more than 4 K groups";
  const auto kgi = gs::dg::instantiation(kg, kgc);
  EXPECT_EQ(kgi.kernel_name, "sm90_bf16_k_grouped_gemm_fp32_acc");
  EXPECT_NE(kgi.name_expression.find("cute::UMMA::Major::MN, cute::UMMA::Major::MN, 0, 2048, 0, 8, "), std::string::npos)
      << kgi.name_expression;
  EXPECT_NE(kgi.name_expression.find("GemmType::KGroupedContiguous, true, float>"), std::string::npos);
  kg.a_k_major = true;
  EXPECT_NE(gs::dg::unsupported_reason(kg).find("MN-major"), std::string::npos);
  kg.a_k_major = false;
  kg.k = 576;
  EXPECT_NE(gs::dg::unsupported_reason(kg).find("K % 128"), std::string::npos);
  // The FP8 kernels still refuse MN-major operands.
  Problem f = dense(4096, 4096, 4096);
  f.b_k_major = false;
  EXPECT_NE(gs::dg::unsupported_reason(f).find("K-major"), std::string::npos);
}

TEST(DeepGemmConfig, KGroupedWgradIsOneKernelForEveryExpert) {
  Problem p = dense(768, 2048, 512);  // k: the largest expert's K, DeepGEMM's choice for the tile
  p.kernel = Kernel::FP8_1D1D;
  p.layout = Layout::KGroupedContiguous;
  p.num_groups = 8;
  ASSERT_EQ(gs::dg::unsupported_reason(p), "");
  const auto c = gs::dg::best_config(p);
  EXPECT_EQ(c.cluster_size(), 1) << "DeepGEMM: no multicast with more than 4 K groups";
  EXPECT_LE(c.smem_bytes, gs::dg::kSm90SmemCapacity);
  const auto in = gs::dg::instantiation(p, c);
  EXPECT_NE(in.name_expression.find("sm90_fp8_gemm_1d1d_impl<0, 2048, 0, 8, "), std::string::npos)
      << "K at run time, the expert count compiled in: " << in.name_expression;
  EXPECT_NE(in.name_expression.find("GemmType::KGroupedContiguous"), std::string::npos);
  // A different expert count is a different kernel (kNumGroups is compiled in).
  Problem q = p;
  q.num_groups = 16;
  EXPECT_NE(gs::dg::instantiation(q, gs::dg::best_config(q)).name_expression, in.name_expression);
}

TEST(DeepGemmConfig, RefusalsSayWhy) {
  EXPECT_NE(gs::dg::unsupported_reason(dense(128, 128, 100)).find("K % 128"), std::string::npos);
  Problem odd = dense(128, 128, 128);
  odd.num_sms = 131;
  EXPECT_NE(gs::dg::unsupported_reason(odd).find("even"), std::string::npos);
}

TEST(DeepGemmConfig, InstantiationNamesTheChosenTemplate) {
  const Problem p = dense(4096, 2048, 1024);
  const auto c = gs::dg::best_config(p);
  const auto in = gs::dg::instantiation(p, c);
  EXPECT_NE(in.source.find("deep_gemm/impls/sm90_fp8_gemm_1d2d.cuh"), std::string::npos);
  EXPECT_NE(in.name_expression.find("sm90_fp8_gemm_1d2d_impl<cute::UMMA::Major::K, 0, 2048, 1024, 1, "), std::string::npos)
      << in.name_expression;
  EXPECT_NE(in.name_expression.find("GemmType::Normal"), std::string::npos);
  // A different N is a different kernel (N and K are compiled in).
  EXPECT_NE(gs::dg::instantiation(dense(4096, 4096, 1024), c).name_expression, in.name_expression);
  // M is a run-time argument: same kernel for another M with the same config.
  EXPECT_EQ(gs::dg::instantiation(dense(8192, 2048, 1024), c).name_expression, in.name_expression);
}

}  // namespace

namespace {

TEST(DeepGemmConfig, GroupedPaddingWaste) {
  const auto g = gs::dg::grouped_padding({0, 200, 37, 128, 0, 300});
  EXPECT_EQ(g.useful_rows, 665);
  EXPECT_EQ(g.padded_rows, 256 + 128 + 128 + 384);
  EXPECT_NEAR(g.waste(), (896.0 - 665.0) / 896.0, 1e-12);
  EXPECT_EQ(gs::dg::grouped_padding({}).waste(), 0.0);
  EXPECT_EQ(gs::dg::grouped_padding({128, 256}).waste(), 0.0);
}

}  // namespace
