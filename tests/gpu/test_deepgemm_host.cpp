// DeepGEMM provider, the parts that need no GPU: the no-NVRTC path (one clear line), the missing
// toolkit headers, and NVRTC compiling the embedded headers (where libnvrtc is installed).
#include <gtest/gtest.h>

#include "core/providers/deepgemm_config.hpp"
#include "cuda/providers/deepgemm/deepgemm_runtime.hpp"
#include "cuda/providers/deepgemm/embedded_headers.hpp"
#include "cuda/providers/deepgemm/nvrtc_lib.hpp"

namespace {

TEST(DeepGemmHost, NoNvrtcIsOneClearLine) {
  gs::dg::Nvrtc none({"/nonexistent/libnvrtc.so.13"});
  EXPECT_FALSE(none.available());
  EXPECT_NE(none.why().find("libnvrtc.so.13"), std::string::npos) << none.why();
  EXPECT_EQ(none.why().find('\n'), std::string::npos);
  const auto r = none.compile("int x;", "x.cu", {}, {}, "&x");
  EXPECT_FALSE(r.ok);
  EXPECT_EQ(r.log, none.why());
}

TEST(DeepGemmHost, MissingToolkitHeadersAreNamed) {
  gs::dg::Runtime rt("", "");  // no cache, no toolkit include folder
  const std::string why = rt.unavailable_reason();
  ASSERT_FALSE(why.empty());
  int count = 0;
  gs::dg::embedded_headers(count);
  if (count > 0 && gs::dg::Nvrtc::get().available()) {
    EXPECT_NE(why.find("toolkit headers"), std::string::npos) << why;
  }
}

// Compiles one dense and one Wgrad kernel from the embedded headers: proves the embedding and the
// NVRTC options, on any machine with libnvrtc and the toolkit headers (no GPU needed).
TEST(DeepGemmHost, EmbeddedHeadersCompileWithNvrtc) {
  int count = 0;
  gs::dg::embedded_headers(count);
  if (count == 0) GTEST_SKIP() << "built without DeepGEMM headers";
  if (!gs::dg::Nvrtc::get().available()) GTEST_SKIP() << gs::dg::Nvrtc::get().why();
  const std::string inc = gs::dg::find_toolkit_include();
  if (inc.empty()) GTEST_SKIP() << "no CUDA toolkit headers (cuda_bf16.h) for NVRTC";
  gs::dg::Runtime rt("", inc);
  for (auto kernel : {gs::dg::Kernel::FP8_1D2D, gs::dg::Kernel::FP8_1D1D}) {
    gs::dg::Problem p;
    p.kernel = kernel;
    p.m = 1024; p.n = 1536; p.k = 2048; p.num_sms = 132;
    ASSERT_EQ(gs::dg::unsupported_reason(p), "");
    const auto c = gs::dg::best_config(p);
    const auto r = rt.compile(p, c);
    EXPECT_TRUE(r.ok) << r.log.substr(0, 4000);
    EXPECT_GT(r.cubin.size(), 1000u);
    EXPECT_EQ(r.lowered_name.rfind("_ZN9deep_gemm", 0), 0u) << r.lowered_name;
    std::printf("    NVRTC %s: %.1f s, cubin %zu bytes (%s)\n", kernel == gs::dg::Kernel::FP8_1D2D ? "1d2d" : "1d1d", r.seconds,
                r.cubin.size(), c.describe().c_str());
  }
}

// The instantiations this provider adds beyond the dense FP8 pair: the BF16 GEMM (K-major, BF16
// out; MN-major operands into FP32 with accumulation, as Wgrad; M-grouped contiguous with an
// MN-major stacked weight, as grouped Dgrad; K-grouped into FP32, as grouped Wgrad) and the
// K-grouped contiguous FP8 Wgrad. Each must
// compile from the embedded headers and lower to a DeepGEMM symbol.
TEST(DeepGemmHost, Bf16AndKGroupedInstantiationsCompileWithNvrtc) {
  int count = 0;
  gs::dg::embedded_headers(count);
  if (count == 0) GTEST_SKIP() << "built without DeepGEMM headers";
  if (!gs::dg::Nvrtc::get().available()) GTEST_SKIP() << gs::dg::Nvrtc::get().why();
  const std::string inc = gs::dg::find_toolkit_include();
  if (inc.empty()) GTEST_SKIP() << "no CUDA toolkit headers (cuda_bf16.h) for NVRTC";
  gs::dg::Runtime rt("", inc);
  std::vector<gs::dg::Problem> ps;
  gs::dg::Problem dense;
  dense.kernel = gs::dg::Kernel::BF16;
  dense.m = 1024; dense.n = 1536; dense.k = 2048; dense.num_sms = 132;
  ps.push_back(dense);
  gs::dg::Problem wgrad = dense;
  wgrad.kernel = gs::dg::Kernel::BF16_FP32;
  wgrad.a_k_major = wgrad.b_k_major = false;
  ps.push_back(wgrad);
  gs::dg::Problem mg = dense;
  mg.layout = gs::dg::Layout::MGroupedContiguous;
  mg.num_groups = 4;
  mg.b_k_major = false;
  ps.push_back(mg);
  gs::dg::Problem bkg;
  bkg.kernel = gs::dg::Kernel::BF16_FP32;
  bkg.layout = gs::dg::Layout::KGroupedContiguous;
  bkg.m = 768; bkg.n = 2048; bkg.k = 512; bkg.num_groups = 8; bkg.num_sms = 132;
  bkg.a_k_major = bkg.b_k_major = false;
  ps.push_back(bkg);
  gs::dg::Problem kg;
  kg.kernel = gs::dg::Kernel::FP8_1D1D;
  kg.layout = gs::dg::Layout::KGroupedContiguous;
  kg.m = 768; kg.n = 2048; kg.k = 512; kg.num_groups = 8; kg.num_sms = 132;
  ps.push_back(kg);
  for (const auto& p : ps) {
    ASSERT_EQ(gs::dg::unsupported_reason(p), "");
    const auto c = gs::dg::best_config(p);
    const auto in = gs::dg::instantiation(p, c);
    const auto r = rt.compile(p, c);
    EXPECT_TRUE(r.ok) << in.name_expression << "\n" << r.log.substr(0, 4000);
    EXPECT_GT(r.cubin.size(), 1000u);
    EXPECT_EQ(r.lowered_name.rfind("_ZN9deep_gemm", 0), 0u) << r.lowered_name;
    std::printf("    NVRTC %s: %.1f s, cubin %zu bytes (%s)\n", in.kernel_name.c_str(), r.seconds, r.cubin.size(),
                c.describe().c_str());
  }
}

}  // namespace
