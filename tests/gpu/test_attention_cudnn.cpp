// cuDNN fused attention (src/cuda/attention/attention_cudnn) against an FP64 host reference computed from
// the exact BF16 inputs the GPU read. Skips with the reason where no GPU can be used, where the
// build has no cudnn-frontend ("not built"), or where libcudnn.so.9 (9.6 or newer) cannot be loaded;
// GS_EXPECT_GPU=1 turns the last into a failure as it does the first (the node is expected to have
// what the build carries). With cuDNN loaded, a create() that returns nullptr is a failure.
//
// Tolerances (BF16 inputs and outputs, FP32 softmax and accumulation; cuDNN rounds the
// probabilities P to BF16 before P V, and dS to BF16 in the backward):
//   forward  O:           max |err| <= 2e-2 * max |ref|, ||err||_2 <= 1e-2 * ||ref||_2
//   statistics (LSE):     max |err| <= 1e-2 + 1e-3 * |ref|   (FP32 on the GPU)
//   backward dQ, dK, dV:  max |err| <= 4e-2 * max |ref|, ||err||_2 <= 2e-2 * ||ref||_2
// A causal mask applied the wrong way, a GQA head map off by one or a missing scale each move
// the norm error to order 1.
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "cuda/attention/attention_cudnn.hpp"
#include "gpu_test_util.hpp"

namespace {

using gs::cuda::AttentionDims;
using gs::cuda::AttentionDtype;
using gs::cuda::CudnnAttention;

std::vector<double> read_bf16(const void* dev, size_t n) {
  std::vector<uint16_t> raw(n);
  EXPECT_EQ(cudaMemcpy(raw.data(), dev, n * 2, cudaMemcpyDeviceToHost), cudaSuccess);
  std::vector<double> out(n);
  for (size_t i = 0; i < n; ++i) {
    const uint32_t bits = uint32_t(raw[i]) << 16;
    float f;
    std::memcpy(&f, &bits, 4);
    out[i] = f;
  }
  return out;
}

std::vector<double> read_f32(const float* dev, size_t n) {
  std::vector<float> raw(n);
  EXPECT_EQ(cudaMemcpy(raw.data(), dev, n * 4, cudaMemcpyDeviceToHost), cudaSuccess);
  return {raw.begin(), raw.end()};
}

// BSHD index.
size_t at(const AttentionDims& d, int64_t b, int64_t s, int64_t h, int64_t x, int64_t S, int64_t H, int64_t D) {
  (void)d;
  return size_t(((b * S + s) * H + h) * D + x);
}

struct Reference {
  std::vector<double> o, lse, dq, dk, dv;
};

// FP64 attention forward and backward. Query head h reads K/V head h / (heads_q / heads_kv);
// causal is top-left: key j is masked for query i when j > i.
Reference reference(const AttentionDims& d, const std::vector<double>& q, const std::vector<double>& k,
                    const std::vector<double>& v, const std::vector<double>& d_o, double scale, bool backward) {
  Reference r;
  r.o.assign(size_t(d.batch * d.seq_q * d.heads_q * d.d_v), 0.0);
  r.lse.assign(size_t(d.batch * d.heads_q * d.seq_q), 0.0);
  if (backward) {
    r.dq.assign(size_t(d.batch * d.seq_q * d.heads_q * d.d_qk), 0.0);
    r.dk.assign(size_t(d.batch * d.seq_kv * d.heads_kv * d.d_qk), 0.0);
    r.dv.assign(size_t(d.batch * d.seq_kv * d.heads_kv * d.d_v), 0.0);
  }
  const int64_t group = d.heads_q / d.heads_kv;
  std::vector<double> p(size_t(d.seq_kv)), dp(size_t(d.seq_kv));
  for (int64_t b = 0; b < d.batch; ++b)
    for (int64_t h = 0; h < d.heads_q; ++h) {
      const int64_t hk = h / group;
      for (int64_t i = 0; i < d.seq_q; ++i) {
        const int64_t nj = d.causal ? std::min<int64_t>(i + 1, d.seq_kv) : d.seq_kv;
        double mx = -INFINITY;
        for (int64_t j = 0; j < nj; ++j) {
          double s = 0;
          for (int64_t x = 0; x < d.d_qk; ++x)
            s += q[at(d, b, i, h, x, d.seq_q, d.heads_q, d.d_qk)] * k[at(d, b, j, hk, x, d.seq_kv, d.heads_kv, d.d_qk)];
          p[size_t(j)] = s * scale;
          mx = std::max(mx, p[size_t(j)]);
        }
        double sum = 0;
        for (int64_t j = 0; j < nj; ++j) sum += std::exp(p[size_t(j)] - mx);
        for (int64_t j = 0; j < nj; ++j) p[size_t(j)] = std::exp(p[size_t(j)] - mx) / sum;
        r.lse[size_t((b * d.heads_q + h) * d.seq_q + i)] = mx + std::log(sum);
        for (int64_t x = 0; x < d.d_v; ++x) {
          double acc = 0;
          for (int64_t j = 0; j < nj; ++j) acc += p[size_t(j)] * v[at(d, b, j, hk, x, d.seq_kv, d.heads_kv, d.d_v)];
          r.o[at(d, b, i, h, x, d.seq_q, d.heads_q, d.d_v)] = acc;
        }
        if (!backward) continue;
        // dP = dO V^T, D = rowsum(dO * O), dS = P * (dP - D)
        double dsum = 0;
        for (int64_t x = 0; x < d.d_v; ++x)
          dsum += d_o[at(d, b, i, h, x, d.seq_q, d.heads_q, d.d_v)] * r.o[at(d, b, i, h, x, d.seq_q, d.heads_q, d.d_v)];
        for (int64_t j = 0; j < nj; ++j) {
          double s = 0;
          for (int64_t x = 0; x < d.d_v; ++x)
            s += d_o[at(d, b, i, h, x, d.seq_q, d.heads_q, d.d_v)] * v[at(d, b, j, hk, x, d.seq_kv, d.heads_kv, d.d_v)];
          dp[size_t(j)] = p[size_t(j)] * (s - dsum);
        }
        for (int64_t j = 0; j < nj; ++j) {
          for (int64_t x = 0; x < d.d_v; ++x)  // dV += P^T dO
            r.dv[at(d, b, j, hk, x, d.seq_kv, d.heads_kv, d.d_v)] +=
                p[size_t(j)] * d_o[at(d, b, i, h, x, d.seq_q, d.heads_q, d.d_v)];
          for (int64_t x = 0; x < d.d_qk; ++x) {
            r.dq[at(d, b, i, h, x, d.seq_q, d.heads_q, d.d_qk)] +=
                scale * dp[size_t(j)] * k[at(d, b, j, hk, x, d.seq_kv, d.heads_kv, d.d_qk)];
            r.dk[at(d, b, j, hk, x, d.seq_kv, d.heads_kv, d.d_qk)] +=
                scale * dp[size_t(j)] * q[at(d, b, i, h, x, d.seq_q, d.heads_q, d.d_qk)];
          }
        }
      }
    }
  return r;
}

void expect_close(const std::vector<double>& got, const std::vector<double>& ref, double max_rel, double norm_rel,
                  const std::string& what) {
  ASSERT_EQ(got.size(), ref.size()) << what;
  double max_ref = 0, max_err = 0, err2 = 0, ref2 = 0;
  size_t worst = 0;
  for (size_t i = 0; i < ref.size(); ++i) {
    ASSERT_TRUE(std::isfinite(got[i])) << what << "[" << i << "] is not finite";
    const double e = std::abs(got[i] - ref[i]);
    if (e > max_err) {
      max_err = e;
      worst = i;
    }
    max_ref = std::max(max_ref, std::abs(ref[i]));
    err2 += e * e;
    ref2 += ref[i] * ref[i];
  }
  ASSERT_GT(max_ref, 0.0) << what << ": the reference is all zeros (the test would prove nothing)";
  EXPECT_LE(max_err, max_rel * max_ref) << what << ": worst element " << worst << " got " << got[worst] << " ref "
                                        << ref[worst] << " (max |ref| " << max_ref << ")";
  EXPECT_LE(std::sqrt(err2), norm_rel * std::sqrt(ref2))
      << what << ": relative norm error " << std::sqrt(err2 / ref2);
}

// Skips where cuDNN attention is genuinely absent: a build without it (said), or no libcudnn 9.6+
// here (said; a failure under GS_EXPECT_GPU=1).
#define GS_REQUIRE_CUDNN_ATTENTION()                                                                          \
  GS_REQUIRE_GPU();                                                                                           \
  if (!gs::cuda::cudnn_attention_built()) GTEST_SKIP() << "not built: " << gs::cuda::cudnn_unavailable_reason(); \
  GS_REQUIRE_RUNTIME(gs::cuda::cudnn_unavailable_reason().empty() ? std::string()                              \
                                                                   : "cuDNN attention: " + gs::cuda::cudnn_unavailable_reason())

// Creates the attention: with cuDNN there, a create() that returns nullptr (a graph that does not
// build on this GPU, no memory) fails the test.
#define GS_MAKE_ATTENTION(var, dims, dtype)                                                 \
  GS_REQUIRE_CUDNN_ATTENTION();                                                             \
  std::string var##_why;                                                                    \
  auto var = CudnnAttention::create(dims, dtype, 42, var##_why);                            \
  ASSERT_NE(var, nullptr) << "cuDNN " << gs::cuda::cudnn_loaded_version() << " is loaded, yet: " << var##_why;

void check_forward(const AttentionDims& d) {
  GS_MAKE_ATTENTION(attn, d, AttentionDtype::BF16);
  const size_t nq = size_t(d.batch * d.seq_q * d.heads_q * d.d_qk);
  const size_t nk = size_t(d.batch * d.seq_kv * d.heads_kv * d.d_qk);
  const size_t nv = size_t(d.batch * d.seq_kv * d.heads_kv * d.d_v);
  const size_t no = size_t(d.batch * d.seq_q * d.heads_q * d.d_v);
  // create() ran one forward; run it again on a stream to exercise the enqueue path.
  cudaStream_t s;
  ASSERT_EQ(cudaStreamCreate(&s), cudaSuccess);
  ASSERT_EQ(cudaMemset(attn->o(), 0, no * 2), cudaSuccess);
  attn->forward(s);
  ASSERT_EQ(cudaStreamSynchronize(s), cudaSuccess);
  cudaStreamDestroy(s);
  const auto q = read_bf16(attn->q(), nq), k = read_bf16(attn->k(), nk), v = read_bf16(attn->v(), nv);
  const Reference r = reference(d, q, k, v, {}, attn->attn_scale(), false);
  expect_close(read_bf16(attn->o(), no), r.o, 2e-2, 1e-2, "O");
  const auto lse = read_f32(attn->stats(), r.lse.size());
  for (size_t i = 0; i < lse.size(); ++i)
    ASSERT_NEAR(lse[i], r.lse[i], 1e-2 + 1e-3 * std::abs(r.lse[i])) << "softmax statistics (log-sum-exp) row " << i;
}

void check_backward(const AttentionDims& d) {
  GS_MAKE_ATTENTION(attn, d, AttentionDtype::BF16);
  const size_t nq = size_t(d.batch * d.seq_q * d.heads_q * d.d_qk);
  const size_t nk = size_t(d.batch * d.seq_kv * d.heads_kv * d.d_qk);
  const size_t nv = size_t(d.batch * d.seq_kv * d.heads_kv * d.d_v);
  const size_t no = size_t(d.batch * d.seq_q * d.heads_q * d.d_v);
  ASSERT_EQ(cudaMemset(attn->d_q(), 0xff, nq * 2), cudaSuccess);  // NaN patterns: every element must be written
  ASSERT_EQ(cudaMemset(attn->d_k(), 0xff, nk * 2), cudaSuccess);
  ASSERT_EQ(cudaMemset(attn->d_v(), 0xff, nv * 2), cudaSuccess);
  attn->backward(nullptr);
  attn->backward(nullptr);  // twice: dQ's accumulator must start from zero on every call
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  const auto q = read_bf16(attn->q(), nq), k = read_bf16(attn->k(), nk), v = read_bf16(attn->v(), nv);
  const auto d_o = read_bf16(attn->d_o(), no);
  const Reference r = reference(d, q, k, v, d_o, attn->attn_scale(), true);
  expect_close(read_bf16(attn->d_q(), nq), r.dq, 4e-2, 2e-2, "dQ");
  expect_close(read_bf16(attn->d_k(), nk), r.dk, 4e-2, 2e-2, "dK");
  expect_close(read_bf16(attn->d_v(), nv), r.dv, 4e-2, 2e-2, "dV");
}

AttentionDims dims(int64_t b, int64_t sq, int64_t skv, int64_t hq, int64_t hkv, int64_t dqk, int64_t dv, bool causal) {
  AttentionDims d;
  d.batch = b;
  d.seq_q = sq;
  d.seq_kv = skv;
  d.heads_q = hq;
  d.heads_kv = hkv;
  d.d_qk = dqk;
  d.d_v = dv;
  d.causal = causal;
  return d;
}

}  // namespace

TEST(CudnnAttention, BuiltOrSaysWhy) {
  GS_REQUIRE_GPU();
  std::string why;
  auto a = CudnnAttention::create(dims(1, 64, 64, 2, 2, 64, 64, false), AttentionDtype::BF16, 1, why);
  if (!gs::cuda::cudnn_attention_built()) {
    EXPECT_EQ(a, nullptr);
    EXPECT_EQ(why, "built without cuDNN attention (GEMMSCOPE_CUDNN_FRONTEND_DIR)");
    GTEST_SKIP() << "not built: " << why;
  }
  GS_REQUIRE_RUNTIME(gs::cuda::cudnn_unavailable_reason());
  ASSERT_NE(a, nullptr) << "cuDNN " << gs::cuda::cudnn_loaded_version() << " is loaded, yet: " << why;
  EXPECT_TRUE(why.empty());
  EXPECT_FALSE(gs::cuda::cudnn_loaded_version().empty());
  std::printf("cuDNN %s, workspace %zu bytes\n", gs::cuda::cudnn_loaded_version().c_str(), a->workspace_bytes());
}

TEST(CudnnAttention, ForwardMha) { check_forward(dims(2, 128, 128, 4, 4, 64, 64, false)); }
TEST(CudnnAttention, ForwardCausalGqa) { check_forward(dims(1, 256, 256, 8, 2, 128, 128, true)); }
TEST(CudnnAttention, ForwardCausalMqa) { check_forward(dims(2, 128, 128, 4, 1, 64, 64, true)); }
TEST(CudnnAttention, ForwardCrossLengths) { check_forward(dims(1, 64, 192, 4, 2, 64, 64, false)); }
TEST(CudnnAttention, BackwardMha) { check_backward(dims(1, 128, 128, 2, 2, 64, 64, false)); }
TEST(CudnnAttention, BackwardCausalGqa) { check_backward(dims(1, 128, 128, 4, 2, 64, 64, true)); }

// MLA (DeepSeek): d_qk 192, d_v 128. cuDNN supports d_qk != d_v on Hopper in recent versions (9.14
// on the H200 and H100); where a loaded cuDNN does not, the test fails with create()'s line: the
// step context would then model an MLA model's attention instead of timing it.
TEST(CudnnAttention, ForwardMla) { check_forward(dims(1, 128, 128, 4, 4, 192, 128, true)); }
TEST(CudnnAttention, BackwardMla) { check_backward(dims(1, 128, 128, 2, 2, 192, 128, true)); }

// FP8 E4M3 (TE's FP8 DPA): its numerics are unverified on hardware. Checks only that the graphs
// build (a loaded cuDNN that refuses them fails the test with the reason), run, and write finite
// values; the numerics are not compared.
TEST(CudnnAttention, Fp8RunsOrSaysWhy) {
  const AttentionDims d = dims(1, 256, 256, 4, 4, 128, 128, true);
  GS_MAKE_ATTENTION(attn, d, AttentionDtype::FP8_E4M3);
  attn->backward(nullptr);
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  const size_t no = size_t(d.batch * d.seq_q * d.heads_q * d.d_v);
  std::vector<uint8_t> o(no);
  ASSERT_EQ(cudaMemcpy(o.data(), attn->o(), no, cudaMemcpyDeviceToHost), cudaSuccess);
  size_t nonzero = 0;
  for (uint8_t b : o) {
    ASSERT_NE(b & 0x7f, 0x7f) << "E4M3 NaN in O";
    nonzero += (b & 0x7f) != 0;
  }
  EXPECT_GT(nonzero, no / 2) << "O is mostly zeros";
}

TEST(CudnnAttention, RefusesBadDims) {
  GS_REQUIRE_GPU();
  std::string why;
  EXPECT_EQ(CudnnAttention::create(dims(1, 64, 64, 6, 4, 64, 64, false), AttentionDtype::BF16, 1, why), nullptr);
  EXPECT_NE(why.find("multiple"), std::string::npos) << why;
}
