// Bit-exact tests of the BF16 -> FP8 kernels (src/cuda/quant/quantize.cu) against a host reference
// built on cuda_fp8.h's host conversion (__nv_cvt_float_to_fp8, __NV_SATFINITE), with the
// documented scale formula re-stated here in FP32:
//   scale = fmax / amax (amax == 0 or not finite -> fallback, overflow -> FLT_MAX),
//   q = sat_rne(float(x) * scale), scale_inv = 1.f / scale.
// Every output buffer is poisoned before each run (two different poison bytes, so an element
// that a kernel never writes fails even where its expected value equals one poison), and
// carries a poisoned guard region behind it that must stay untouched.
#include <cuda_bf16.h>
#include <cuda_fp8.h>
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cfloat>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <random>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

#include "cuda/common/cuda_check.hpp"
#include "cuda/quant/quantize.cuh"
#include "gpu_test_util.hpp"

namespace {

using gs::cuda::Fp8Kind;

constexpr size_t kGuard = 256;  // poisoned bytes behind every output buffer
constexpr uint8_t kPoisons[2] = {0xAB, 0x5A};

// ---- host helpers ---------------------------------------------------------------------------
float bf2f(uint16_t h) {
  const uint32_t u = uint32_t(h) << 16;
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}
uint16_t f2bf(float f) {  // round to nearest even (inputs are finite)
  uint32_t u;
  std::memcpy(&u, &f, 4);
  u += 0x7fffu + ((u >> 16) & 1u);
  return uint16_t(u >> 16);
}
uint32_t fbits(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  return u;
}
float from_bits(uint32_t u) {
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}
float fmax_of(Fp8Kind k) { return k == Fp8Kind::E4M3 ? 448.f : 57344.f; }
uint8_t ref_fp8(float v, Fp8Kind k) {
  return __nv_cvt_float_to_fp8(v, __NV_SATFINITE, k == Fp8Kind::E4M3 ? __NV_E4M3 : __NV_E5M2);
}
float ref_scale(float amax, float fmax, float fallback) {
  if (!(amax > 0.f) || !(amax <= FLT_MAX)) return fallback;
  const float s = fmax / amax;
  return s <= FLT_MAX ? s : FLT_MAX;
}
const char* kind_name(Fp8Kind k) { return k == Fp8Kind::E4M3 ? "E4M3" : "E5M2"; }

// Random BF16 matrix with a wide, position-dependent dynamic range (so that blocks get
// different scales), ~3% exact zeros, and optionally an all-zero region
// (rows [zr0, zr1) x cols [zc0, zc1)).
struct ZeroRegion {
  int r0 = 0, r1 = 0, c0 = 0, c1 = 0;
};
std::vector<uint16_t> make_data(int rows, int cols, uint32_t seed, ZeroRegion z = {}) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> nd(0.f, 1.f);
  std::uniform_int_distribution<int> pct(0, 99);
  std::vector<uint16_t> x(size_t(rows) * cols);
  for (int r = 0; r < rows; ++r)
    for (int c = 0; c < cols; ++c) {
      const int e = ((r / 37) * 3 + (c / 53) * 5) % 23 - 11;  // 2^-11 .. 2^11
      float v = nd(rng) * std::ldexp(1.f, e);
      if (pct(rng) < 3) v = 0.f;
      if (r >= z.r0 && r < z.r1 && c >= z.c0 && c < z.c1) v = 0.f;
      x[size_t(r) * cols + c] = f2bf(v);
    }
  return x;
}
std::vector<uint16_t> transpose_host(const std::vector<uint16_t>& x, int rows, int cols) {
  std::vector<uint16_t> t(x.size());
  for (int r = 0; r < rows; ++r)
    for (int c = 0; c < cols; ++c) t[size_t(c) * rows + r] = x[size_t(r) * cols + c];
  return t;
}
float host_amax(const std::vector<uint16_t>& x) {
  float m = 0.f;
  for (uint16_t h : x) m = std::max(m, std::fabs(bf2f(h)));
  return m;
}

// References on an operand stored [outer, K] (K contiguous): the transposed variants are the
// same functions applied to the host-transposed source.
std::vector<uint8_t> ref_cast(const std::vector<uint16_t>& xo, float scale, Fp8Kind k) {
  std::vector<uint8_t> q(xo.size());
  for (size_t i = 0; i < xo.size(); ++i) q[i] = ref_fp8(bf2f(xo[i]) * scale, k);
  return q;
}
void ref_block_1x128(const std::vector<uint16_t>& xo, int outer, int K, Fp8Kind k,
                     std::vector<uint8_t>& q, std::vector<float>& s) {
  const int nkb = (K + 127) / 128;
  q.assign(xo.size(), 0);
  s.assign(size_t(nkb) * outer, 0.f);
  for (int o = 0; o < outer; ++o)
    for (int kb = 0; kb < nkb; ++kb) {
      const int k0 = kb * 128, k1 = std::min(K, k0 + 128);
      float am = 0.f;
      for (int i = k0; i < k1; ++i) am = std::max(am, std::fabs(bf2f(xo[size_t(o) * K + i])));
      const float sc = ref_scale(am, fmax_of(k), 1.f);
      s[size_t(kb) * outer + o] = 1.f / sc;  // VEC128: s[kb * outer + o]
      for (int i = k0; i < k1; ++i)
        q[size_t(o) * K + i] = ref_fp8(bf2f(xo[size_t(o) * K + i]) * sc, k);
    }
}
// Scale vector of block_scale_count_128x128 entries; padding entries flagged in `is_pad`.
void ref_block_128x128(const std::vector<uint16_t>& xo, int outer, int K, Fp8Kind k,
                       std::vector<uint8_t>& q, std::vector<float>& s, std::vector<bool>& is_pad) {
  const int nob = (outer + 127) / 128, nkb = (K + 127) / 128, L4 = (nkb + 3) / 4 * 4;
  q.assign(xo.size(), 0);
  s.assign(size_t(nob) * L4, 0.f);
  is_pad.assign(s.size(), true);
  for (int ob = 0; ob < nob; ++ob)
    for (int kb = 0; kb < nkb; ++kb) {
      const int o0 = ob * 128, o1 = std::min(outer, o0 + 128);
      const int k0 = kb * 128, k1 = std::min(K, k0 + 128);
      float am = 0.f;
      for (int o = o0; o < o1; ++o)
        for (int i = k0; i < k1; ++i) am = std::max(am, std::fabs(bf2f(xo[size_t(o) * K + i])));
      const float sc = ref_scale(am, fmax_of(k), 1.f);
      s[size_t(ob) * L4 + kb] = 1.f / sc;  // BLK128x128: s[ob * L4 + kb]
      is_pad[size_t(ob) * L4 + kb] = false;
      for (int o = o0; o < o1; ++o)
        for (int i = k0; i < k1; ++i)
          q[size_t(o) * K + i] = ref_fp8(bf2f(xo[size_t(o) * K + i]) * sc, k);
    }
}

// ---- device helpers --------------------------------------------------------------------------
class DevBuf {
 public:
  explicit DevBuf(size_t bytes) : n_(bytes) { GS_CUDA(cudaMalloc(&p_, std::max<size_t>(bytes, 1))); }
  ~DevBuf() { cudaFree(p_); }
  DevBuf(const DevBuf&) = delete;
  DevBuf& operator=(const DevBuf&) = delete;
  template <class T>
  T* as() const { return static_cast<T*>(p_); }
  size_t bytes() const { return n_; }
  void poison(uint8_t b) { GS_CUDA(cudaMemset(p_, b, n_)); }
  template <class T>
  void upload(const std::vector<T>& v) {
    GS_CUDA(cudaMemcpy(p_, v.data(), v.size() * sizeof(T), cudaMemcpyHostToDevice));
  }
  template <class T>
  std::vector<T> download(size_t count) const {
    std::vector<T> v(count);
    GS_CUDA(cudaMemcpy(v.data(), p_, count * sizeof(T), cudaMemcpyDeviceToHost));
    return v;
  }

 private:
  void* p_ = nullptr;
  size_t n_ = 0;
};

void sync() {
  GS_CUDA(cudaGetLastError());
  GS_CUDA(cudaDeviceSynchronize());
}

// Compares `count` FP8 bytes laid out [outer, K]; the buffer's guard bytes must still be `poison`.
::testing::AssertionResult same_bytes(const DevBuf& d, const std::vector<uint8_t>& exp, int outer,
                                      int K, uint8_t poison) {
  const std::vector<uint8_t> got = d.download<uint8_t>(exp.size() + kGuard);
  size_t bad = 0;
  std::ostringstream os;
  for (size_t i = 0; i < exp.size(); ++i)
    if (got[i] != exp[i]) {
      if (bad < 6)
        os << " [o=" << i / size_t(K) << ",k=" << i % size_t(K) << "] got 0x" << std::hex
           << int(got[i]) << " want 0x" << int(exp[i]) << std::dec;
      ++bad;
    }
  for (size_t i = exp.size(); i < exp.size() + kGuard; ++i)
    if (got[i] != poison) {
      if (bad < 6) os << " [guard +" << i - exp.size() << "] overwritten";
      ++bad;
    }
  if (bad == 0) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << bad << " wrong bytes of " << exp.size() << " (outer "
                                       << outer << ", K " << K << "):" << os.str();
}

// Compares float scales bit for bit; entries flagged in `skip` (padding) and the guard words
// behind must still hold the poison pattern.
::testing::AssertionResult same_scales(const DevBuf& d, const std::vector<float>& exp,
                                       uint8_t poison, const std::vector<bool>* pad = nullptr) {
  const size_t guard_words = kGuard / 4;
  const std::vector<uint32_t> got = d.download<uint32_t>(exp.size() + guard_words);
  const uint32_t pw = 0x01010101u * poison;
  size_t bad = 0;
  std::ostringstream os;
  for (size_t i = 0; i < exp.size() + guard_words; ++i) {
    const bool must_be_poison = i >= exp.size() || (pad && (*pad)[i]);
    const uint32_t want = must_be_poison ? pw : fbits(exp[i]);
    if (got[i] != want) {
      if (bad < 6)
        os << " [" << i << (must_be_poison ? " (pad/guard)" : "") << "] got " << from_bits(got[i])
           << " (0x" << std::hex << got[i] << ") want " << from_bits(want) << " (0x" << want
           << std::dec << ")";
      ++bad;
    }
  }
  if (bad == 0) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << bad << " wrong scale words of " << exp.size() << ":"
                                       << os.str();
}

struct Shape {
  int rows, cols;
};
std::string shape_str(Shape s, bool transpose, Fp8Kind k) {
  return std::to_string(s.rows) + "x" + std::to_string(s.cols) + (transpose ? " T " : " N ") +
         kind_name(k);
}

// Multiples of 128 and not, odd rows (bytewise transposed stores), partial 1x128 blocks,
// partial 128x128 tiles with L4 padding, tails of the flat cast, and one shape large enough
// that every persistent kernel loops over several tiles / spans per block.
const Shape kShapes[] = {{1, 8},     {16, 16},   {100, 72},  {128, 64},   {130, 264},
                         {257, 1000}, {384, 256}, {64, 4096}, {2560, 4096}};

// ============================================================================================
TEST(QuantizeArgs, RejectsBadShapesAndPointers) {
  // Argument checks happen before any CUDA call, so this runs without a GPU too.
  alignas(16) static unsigned char buf[4096];
  auto* x = reinterpret_cast<const __nv_bfloat16*>(buf);
  auto* q = reinterpret_cast<uint8_t*>(buf + 1024);
  auto* f = reinterpret_cast<float*>(buf + 2048);
  auto* p = reinterpret_cast<int*>(buf + 3072);
  using gs::cuda::cast_fp8_current;
  using gs::cuda::cast_fp8_delayed;
  using gs::cuda::quantize_block_128x128;
  using gs::cuda::quantize_block_1x128;
  for (bool t : {false, true}) {
    EXPECT_THROW(cast_fp8_current(x, 16, 12, t, Fp8Kind::E4M3, f, q, f, nullptr),
                 std::invalid_argument);
    EXPECT_THROW(cast_fp8_delayed(x, 16, 20, t, Fp8Kind::E4M3, f, q, f, f, p, nullptr),
                 std::invalid_argument);
    EXPECT_THROW(quantize_block_1x128(x, 16, 4, t, Fp8Kind::E4M3, q, f, nullptr),
                 std::invalid_argument);
    EXPECT_THROW(quantize_block_128x128(x, 16, 100, t, Fp8Kind::E4M3, q, f, nullptr),
                 std::invalid_argument);
    // misaligned input / output
    EXPECT_THROW(cast_fp8_current(x + 4, 16, 16, t, Fp8Kind::E4M3, f, q, f, nullptr),
                 std::invalid_argument);
    EXPECT_THROW(quantize_block_1x128(x, 16, 16, t, Fp8Kind::E4M3, q + 8, f, nullptr),
                 std::invalid_argument);
    EXPECT_THROW(quantize_block_128x128(x + 1, 16, 16, t, Fp8Kind::E5M2, q, f, nullptr),
                 std::invalid_argument);
    EXPECT_THROW(cast_fp8_current(x, -1, 16, t, Fp8Kind::E4M3, f, q, f, nullptr),
                 std::invalid_argument);
  }
  EXPECT_THROW(gs::cuda::delayed_scale_update(f, 0, p, Fp8Kind::E4M3, f, nullptr),
               std::invalid_argument);
  EXPECT_THROW(gs::cuda::amax_bf16(x, 16, f, nullptr, nullptr), std::invalid_argument);
  EXPECT_LE(gs::cuda::amax_workspace_bytes(size_t(1) << 34), size_t(8192));
  EXPECT_GE(gs::cuda::amax_workspace_bytes(0), sizeof(float));
}

// ============================================================================================
TEST(QuantizeAmax, MatchesHostMaxAtAnyAlignmentAndDoesNotAccumulate) {
  GS_REQUIRE_GPU();
  const size_t sizes[] = {0, 1, 7, 8, 9, 1000, 4099, 65536 + 3, (size_t(1) << 22) + 5};
  DevBuf d_amax(sizeof(float));
  uint32_t seed = 11;
  for (size_t n : sizes)
    for (size_t off : {size_t(0), size_t(3)}) {
      SCOPED_TRACE("n=" + std::to_string(n) + " offset=" + std::to_string(off));
      // Two different inputs through the same amax buffer and workspace: the second has a
      // smaller maximum, so an accumulator that survived the first call would show.
      std::vector<uint16_t> big(n + off), small(n + off);
      std::mt19937 rng(seed++);
      std::normal_distribution<float> nd(0.f, 1.f);
      for (size_t i = 0; i < n + off; ++i) {
        big[i] = f2bf(nd(rng) * 64.f);
        small[i] = f2bf(nd(rng) * 0.5f);
      }
      if (n > 0) {  // make the largest magnitude negative, at a random position
        const size_t at = off + rng() % n;
        big[at] = f2bf(-1.0e6f);
        small[at] = f2bf(-7.25f);
      }
      const size_t ws_bytes = gs::cuda::amax_workspace_bytes(n);
      DevBuf d_ws(ws_bytes);
      d_ws.poison(0xAB);
      DevBuf d_x((n + off) * 2);
      for (const auto* v : {&big, &small}) {
        d_x.upload(*v);
        const std::vector<uint16_t> body(v->begin() + off, v->end());
        d_amax.poison(0xFF);  // NaN bits
        gs::cuda::amax_bf16(d_x.as<__nv_bfloat16>() + off, n, d_amax.as<float>(),
                            d_ws.as<void>(), nullptr);
        sync();
        const float got = d_amax.download<float>(1)[0];
        EXPECT_EQ(fbits(got), fbits(host_amax(body))) << "got " << got << " want "
                                                       << host_amax(body);
      }
    }
}

TEST(QuantizeAmax, InfinityPropagates) {
  GS_REQUIRE_GPU();
  const size_t n = 100000;
  std::vector<uint16_t> x = make_data(1, int(n), 5);
  x[77777] = 0xff80;  // -inf
  DevBuf d_x(n * 2), d_amax(4), d_ws(gs::cuda::amax_workspace_bytes(n));
  d_x.upload(x);
  gs::cuda::amax_bf16(d_x.as<__nv_bfloat16>(), n, d_amax.as<float>(), d_ws.as<void>(), nullptr);
  sync();
  EXPECT_TRUE(std::isinf(d_amax.download<float>(1)[0]));
}

// ============================================================================================
// Current scaling: amax_bf16 then cast_fp8_current, every shape x transpose x kind.
TEST(QuantizeCastCurrent, BitExactRowwiseAndTransposed) {
  GS_REQUIRE_GPU();
  uint32_t seed = 100;
  for (Shape sh : kShapes) {
    const std::vector<uint16_t> x = make_data(sh.rows, sh.cols, seed++);
    const std::vector<uint16_t> xt = transpose_host(x, sh.rows, sh.cols);
    const size_t n = x.size();
    DevBuf d_x(n * 2), d_q(n + kGuard), d_sinv(4 + kGuard), d_amax(4);
    DevBuf d_ws(gs::cuda::amax_workspace_bytes(n));
    d_x.upload(x);
    const float am = host_amax(x);
    for (Fp8Kind k : {Fp8Kind::E4M3, Fp8Kind::E5M2})
      for (bool t : {false, true}) {
        SCOPED_TRACE(shape_str(sh, t, k));
        const float sc = ref_scale(am, fmax_of(k), 1.f);
        const std::vector<uint8_t> exp = ref_cast(t ? xt : x, sc, k);
        for (uint8_t poison : kPoisons) {
          d_amax.poison(poison);
          d_q.poison(poison);
          d_sinv.poison(poison);
          gs::cuda::amax_bf16(d_x.as<__nv_bfloat16>(), n, d_amax.as<float>(), d_ws.as<void>(),
                              nullptr);
          gs::cuda::cast_fp8_current(d_x.as<__nv_bfloat16>(), sh.rows, sh.cols, t, k,
                                     d_amax.as<float>(), d_q.as<uint8_t>(), d_sinv.as<float>(),
                                     nullptr);
          sync();
          EXPECT_EQ(fbits(d_amax.download<float>(1)[0]), fbits(am));
          EXPECT_TRUE(same_bytes(d_q, exp, t ? sh.cols : sh.rows, t ? sh.rows : sh.cols, poison));
          EXPECT_TRUE(same_scales(d_sinv, {1.f / sc}, poison));
        }
      }
  }
}

// The amax handed to the cast decides the scale: zero / inf / NaN fall back to scale 1, an
// amax below the data's saturates, a denormal amax clamps the scale to FLT_MAX.
TEST(QuantizeCastCurrent, ScaleGuardsAndSaturation) {
  GS_REQUIRE_GPU();
  const Shape sh{130, 264};
  std::vector<uint16_t> x = make_data(sh.rows, sh.cols, 7);
  const float am = host_amax(x);
  // a copy of tiny (denormal-range) values for the FLT_MAX case
  std::vector<uint16_t> tiny(x.size());
  for (size_t i = 0; i < x.size(); ++i) tiny[i] = f2bf(bf2f(x[i]) / am * 4e-39f);
  const float inf = std::numeric_limits<float>::infinity();
  struct Case {
    const char* name;
    float amax;
    const std::vector<uint16_t>* data;
  };
  const Case cases[] = {{"zero", 0.f, &x},          {"inf", inf, &x},
                        {"nan", std::nanf(""), &x},  {"quarter (saturates)", am / 4, &x},
                        {"denormal amax", 1e-40f, &tiny}};
  DevBuf d_x(x.size() * 2), d_q(x.size() + kGuard), d_sinv(4 + kGuard), d_amax(4);
  for (const Case& c : cases)
    for (Fp8Kind k : {Fp8Kind::E4M3, Fp8Kind::E5M2})
      for (bool t : {false, true}) {
        SCOPED_TRACE(std::string(c.name) + " " + shape_str(sh, t, k));
        d_x.upload(*c.data);
        const float sc = ref_scale(c.amax, fmax_of(k), 1.f);
        if (std::string(c.name) == "denormal amax") EXPECT_EQ(sc, FLT_MAX);
        if (!(c.amax > 0.f) || std::isinf(c.amax) || std::isnan(c.amax)) EXPECT_EQ(sc, 1.f);
        const std::vector<uint16_t> src = t ? transpose_host(*c.data, sh.rows, sh.cols) : *c.data;
        const std::vector<uint8_t> exp = ref_cast(src, sc, k);
        if (std::string(c.name).rfind("quarter", 0) == 0) {  // saturation really happens
          const uint8_t maxcode = k == Fp8Kind::E4M3 ? 0x7e : 0x7b;
          EXPECT_GT(std::count_if(exp.begin(), exp.end(),
                                  [&](uint8_t b) { return (b & 0x7f) == maxcode; }),
                    10);
        }
        d_amax.upload(std::vector<float>{c.amax});
        for (uint8_t poison : kPoisons) {
          d_q.poison(poison);
          d_sinv.poison(poison);
          gs::cuda::cast_fp8_current(d_x.as<__nv_bfloat16>(), sh.rows, sh.cols, t, k,
                                     d_amax.as<float>(), d_q.as<uint8_t>(), d_sinv.as<float>(),
                                     nullptr);
          sync();
          EXPECT_TRUE(same_bytes(d_q, exp, t ? sh.cols : sh.rows, t ? sh.rows : sh.cols, poison));
          EXPECT_TRUE(same_scales(d_sinv, {1.f / sc}, poison));
        }
      }
}

// ============================================================================================
// Delayed scaling over several steps: per step two casts (one rowwise, one transposed, into the
// same history slot) with the scale from earlier steps, then the history update. A host model
// tracks history, pos and scale; everything is compared bit for bit after each call.
void run_delayed_sequence(Fp8Kind k, int hist_len, int steps) {
  const Shape sa{130, 264}, sb{257, 136};
  // Per-step magnitude factors; step 4 is all zeros (its amax is 0).
  const float factors[] = {1.f, 16.f, 0.125f, 1000.f, 0.f, 3.f, 0.01f, 2.f, 50.f};
  ASSERT_LE(steps, int(sizeof(factors) / sizeof(factors[0])));
  std::vector<float> hist(hist_len, 0.f);
  int pos = 0;
  float scale = 1.f;
  DevBuf d_hist(hist_len * 4 + kGuard), d_pos(4), d_scale(4), d_sinv_a(4), d_sinv_b(4);
  GS_CUDA(cudaMemset(d_hist.as<void>(), 0, hist_len * 4));
  GS_CUDA(cudaMemset(d_hist.as<uint8_t>() + hist_len * 4, 0xAB, kGuard));
  d_pos.upload(std::vector<int>{0});
  d_scale.upload(std::vector<float>{1.f});
  DevBuf d_a(size_t(sa.rows) * sa.cols * 2), d_b(size_t(sb.rows) * sb.cols * 2);
  DevBuf d_qa(size_t(sa.rows) * sa.cols + kGuard), d_qb(size_t(sb.rows) * sb.cols + kGuard);
  for (int step = 0; step < steps; ++step) {
    SCOPED_TRACE(std::string(kind_name(k)) + " hist_len=" + std::to_string(hist_len) +
                 " step=" + std::to_string(step));
    std::vector<uint16_t> a = make_data(sa.rows, sa.cols, 1000 + step);
    std::vector<uint16_t> b = make_data(sb.rows, sb.cols, 2000 + step);
    for (auto& h : a) h = f2bf(bf2f(h) * factors[step]);
    for (auto& h : b) h = f2bf(bf2f(h) * factors[step] * 0.75f);
    d_a.upload(a);
    d_b.upload(b);
    d_qa.poison(0xAB);
    d_qb.poison(0xAB);
    d_sinv_a.poison(0xAB);
    d_sinv_b.poison(0xAB);
    gs::cuda::cast_fp8_delayed(d_a.as<__nv_bfloat16>(), sa.rows, sa.cols, false, k,
                               d_scale.as<float>(), d_qa.as<uint8_t>(), d_sinv_a.as<float>(),
                               d_hist.as<float>(), d_pos.as<int>(), nullptr);
    gs::cuda::cast_fp8_delayed(d_b.as<__nv_bfloat16>(), sb.rows, sb.cols, true, k,
                               d_scale.as<float>(), d_qb.as<uint8_t>(), d_sinv_b.as<float>(),
                               d_hist.as<float>(), d_pos.as<int>(), nullptr);
    sync();
    // host model of the casts: both use `scale`, both record into hist[pos]
    hist[pos] = std::max({hist[pos], host_amax(a), host_amax(b)});
    EXPECT_TRUE(same_bytes(d_qa, ref_cast(a, scale, k), sa.rows, sa.cols, 0xAB));
    EXPECT_TRUE(same_bytes(d_qb, ref_cast(transpose_host(b, sb.rows, sb.cols), scale, k),
                           sb.cols, sb.rows, 0xAB));
    EXPECT_EQ(fbits(d_sinv_a.download<float>(1)[0]), fbits(1.f / scale));
    EXPECT_EQ(fbits(d_sinv_b.download<float>(1)[0]), fbits(1.f / scale));
    EXPECT_TRUE(same_scales(d_hist, hist, 0xAB)) << "history after the casts";

    gs::cuda::delayed_scale_update(d_hist.as<float>(), hist_len, d_pos.as<int>(), k,
                                   d_scale.as<float>(), nullptr);
    sync();
    const float m = *std::max_element(hist.begin(), hist.end());
    scale = ref_scale(m, fmax_of(k), scale);
    pos = (pos + 1) % hist_len;
    hist[pos] = 0.f;
    EXPECT_EQ(d_pos.download<int>(1)[0], pos);
    EXPECT_EQ(fbits(d_scale.download<float>(1)[0]), fbits(scale))
        << "device " << d_scale.download<float>(1)[0] << " host " << scale;
    EXPECT_TRUE(same_scales(d_hist, hist, 0xAB)) << "history after the update";
  }
}

TEST(QuantizeCastDelayed, HistoryRingE4M3) {
  GS_REQUIRE_GPU();
  run_delayed_sequence(Fp8Kind::E4M3, 3, 9);  // wraps around the ring three times
}
TEST(QuantizeCastDelayed, HistoryOfOneKeepsScaleOnZeroStepE5M2) {
  GS_REQUIRE_GPU();
  run_delayed_sequence(Fp8Kind::E5M2, 1, 7);  // step 4 (all zeros) keeps the previous scale
}
TEST(QuantizeCastDelayed, LongHistory) {
  GS_REQUIRE_GPU();
  run_delayed_sequence(Fp8Kind::E4M3, 1024, 5);
}

// Large delayed casts: the fused amax over many blocks (one atomicMax each) must be exact.
TEST(QuantizeCastDelayed, LargeTensorsRecordExactAmax) {
  GS_REQUIRE_GPU();
  const Shape sh{2560, 4096};
  const std::vector<uint16_t> x = make_data(sh.rows, sh.cols, 4242);
  const float am = host_amax(x);
  DevBuf d_x(x.size() * 2), d_q(x.size() + kGuard), d_hist(8), d_pos(4), d_scale(4), d_sinv(4);
  d_x.upload(x);
  d_pos.upload(std::vector<int>{1});
  const float given = 3.5f;
  d_scale.upload(std::vector<float>{given});
  for (bool t : {false, true}) {
    SCOPED_TRACE(shape_str(sh, t, Fp8Kind::E4M3));
    GS_CUDA(cudaMemset(d_hist.as<void>(), 0, 8));
    d_q.poison(0xAB);
    gs::cuda::cast_fp8_delayed(d_x.as<__nv_bfloat16>(), sh.rows, sh.cols, t, Fp8Kind::E4M3,
                               d_scale.as<float>(), d_q.as<uint8_t>(), d_sinv.as<float>(),
                               d_hist.as<float>(), d_pos.as<int>(), nullptr);
    sync();
    const std::vector<float> h = d_hist.download<float>(2);
    EXPECT_EQ(fbits(h[0]), 0u) << "slot 0 must stay untouched";
    EXPECT_EQ(fbits(h[1]), fbits(am));
    EXPECT_TRUE(same_bytes(d_q, ref_cast(t ? transpose_host(x, sh.rows, sh.cols) : x, given,
                                         Fp8Kind::E4M3),
                           t ? sh.cols : sh.rows, t ? sh.rows : sh.cols, 0xAB));
  }
}

// ============================================================================================
// Block scaling. The data get an all-zero region covering whole blocks (scale_inv 1).
TEST(QuantizeBlock1x128, BitExactDataAndVec128Layout) {
  GS_REQUIRE_GPU();
  uint32_t seed = 300;
  for (Shape sh : kShapes) {
    const ZeroRegion z{0, std::min(sh.rows, 128), 0, std::min(sh.cols, 128)};
    const std::vector<uint16_t> x = make_data(sh.rows, sh.cols, seed++, z);
    const std::vector<uint16_t> xt = transpose_host(x, sh.rows, sh.cols);
    DevBuf d_x(x.size() * 2), d_q(x.size() + kGuard);
    d_x.upload(x);
    for (Fp8Kind k : {Fp8Kind::E4M3, Fp8Kind::E5M2})
      for (bool t : {false, true}) {
        SCOPED_TRACE(shape_str(sh, t, k));
        const int outer = t ? sh.cols : sh.rows, K = t ? sh.rows : sh.cols;
        std::vector<uint8_t> exp_q;
        std::vector<float> exp_s;
        ref_block_1x128(t ? xt : x, outer, K, k, exp_q, exp_s);
        ASSERT_EQ(exp_s.size(), size_t(gs::cuda::block_scale_count_1x128(outer, K)));
        DevBuf d_s(exp_s.size() * 4 + kGuard);
        for (uint8_t poison : kPoisons) {
          d_q.poison(poison);
          d_s.poison(poison);
          gs::cuda::quantize_block_1x128(d_x.as<__nv_bfloat16>(), sh.rows, sh.cols, t, k,
                                         d_q.as<uint8_t>(), d_s.as<float>(), nullptr);
          sync();
          EXPECT_TRUE(same_bytes(d_q, exp_q, outer, K, poison));
          EXPECT_TRUE(same_scales(d_s, exp_s, poison));
        }
      }
  }
}

TEST(QuantizeBlock128x128, BitExactDataAndBlk128Layout) {
  GS_REQUIRE_GPU();
  uint32_t seed = 500;
  for (Shape sh : kShapes) {
    const ZeroRegion z{0, std::min(sh.rows, 128), 0, std::min(sh.cols, 128)};
    const std::vector<uint16_t> x = make_data(sh.rows, sh.cols, seed++, z);
    const std::vector<uint16_t> xt = transpose_host(x, sh.rows, sh.cols);
    DevBuf d_x(x.size() * 2), d_q(x.size() + kGuard);
    d_x.upload(x);
    for (Fp8Kind k : {Fp8Kind::E4M3, Fp8Kind::E5M2})
      for (bool t : {false, true}) {
        SCOPED_TRACE(shape_str(sh, t, k));
        const int outer = t ? sh.cols : sh.rows, K = t ? sh.rows : sh.cols;
        std::vector<uint8_t> exp_q;
        std::vector<float> exp_s;
        std::vector<bool> pad;
        ref_block_128x128(t ? xt : x, outer, K, k, exp_q, exp_s, pad);
        ASSERT_EQ(exp_s.size(), size_t(gs::cuda::block_scale_count_128x128(outer, K)));
        DevBuf d_s(exp_s.size() * 4 + kGuard);
        for (uint8_t poison : kPoisons) {
          d_q.poison(poison);
          d_s.poison(poison);
          gs::cuda::quantize_block_128x128(d_x.as<__nv_bfloat16>(), sh.rows, sh.cols, t, k,
                                           d_q.as<uint8_t>(), d_s.as<float>(), nullptr);
          sync();
          EXPECT_TRUE(same_bytes(d_q, exp_q, outer, K, poison));
          EXPECT_TRUE(same_scales(d_s, exp_s, poison, &pad)) << "padding must stay untouched";
        }
      }
  }
}

// ============================================================================================
// Dual output (autocast-shared): one read, the rowwise and the transposed copy, each equal to the
// host reference of that layout (and so to the single-output kernels), scales and guards included.
enum class DualKind { Current, Delayed, Block1x128, Block128x128 };
const char* dual_name(DualKind d) {
  switch (d) {
    case DualKind::Current: return "current";
    case DualKind::Delayed: return "delayed";
    case DualKind::Block1x128: return "1x128";
    case DualKind::Block128x128: return "128x128";
  }
  return "?";
}

TEST(QuantizeDual, BothCopiesBitExact) {
  GS_REQUIRE_GPU();
  uint32_t seed = 900;
  for (Shape sh : kShapes) {
    const ZeroRegion z{0, std::min(sh.rows, 128), 0, std::min(sh.cols, 128)};
    const std::vector<uint16_t> x = make_data(sh.rows, sh.cols, seed++, z);
    const std::vector<uint16_t> xt = transpose_host(x, sh.rows, sh.cols);
    const size_t n = x.size();
    const float am = host_amax(x);
    DevBuf d_x(n * 2), d_qr(n + kGuard), d_qt(n + kGuard), d_amax(4), d_ws(gs::cuda::amax_workspace_bytes(n));
    DevBuf d_scale(4), d_hist(16), d_pos(4);
    d_x.upload(x);
    for (DualKind dk : {DualKind::Current, DualKind::Delayed, DualKind::Block1x128, DualKind::Block128x128})
      for (Fp8Kind k : {Fp8Kind::E4M3, Fp8Kind::E5M2}) {
        SCOPED_TRACE(std::string(dual_name(dk)) + " " + shape_str(sh, false, k));
        // Expected copies: row = [rows, cols], t = [cols, rows].
        std::vector<uint8_t> er, et;
        std::vector<float> sr, st;
        std::vector<bool> pr, pt;
        const float delayed_scale = 0.75f * fmax_of(k) / std::max(am, 1e-30f);  // some saturation-free scale
        switch (dk) {
          case DualKind::Current:
          case DualKind::Delayed: {
            const float sc = dk == DualKind::Current ? ref_scale(am, fmax_of(k), 1.f) : delayed_scale;
            er = ref_cast(x, sc, k);
            et = ref_cast(xt, sc, k);
            sr = st = {1.f / sc};
            break;
          }
          case DualKind::Block1x128:
            ref_block_1x128(x, sh.rows, sh.cols, k, er, sr);
            ref_block_1x128(xt, sh.cols, sh.rows, k, et, st);
            break;
          case DualKind::Block128x128:
            ref_block_128x128(x, sh.rows, sh.cols, k, er, sr, pr);
            ref_block_128x128(xt, sh.cols, sh.rows, k, et, st, pt);
            break;
        }
        DevBuf d_sr(sr.size() * 4 + kGuard), d_st(st.size() * 4 + kGuard);
        for (uint8_t poison : kPoisons) {
          d_qr.poison(poison);
          d_qt.poison(poison);
          d_sr.poison(poison);
          d_st.poison(poison);
          GS_CUDA(cudaMemset(d_hist.as<void>(), 0, 16));
          GS_CUDA(cudaMemset(d_pos.as<void>(), 0, 4));
          d_scale.upload(std::vector<float>{delayed_scale});
          auto* xb = d_x.as<__nv_bfloat16>();
          switch (dk) {
            case DualKind::Current:
              gs::cuda::amax_bf16(xb, n, d_amax.as<float>(), d_ws.as<void>(), nullptr);
              gs::cuda::cast_fp8_current_dual(xb, sh.rows, sh.cols, k, d_amax.as<float>(), d_qr.as<uint8_t>(),
                                              d_sr.as<float>(), d_qt.as<uint8_t>(), d_st.as<float>(), nullptr);
              break;
            case DualKind::Delayed:
              gs::cuda::cast_fp8_delayed_dual(xb, sh.rows, sh.cols, k, d_scale.as<float>(), d_qr.as<uint8_t>(),
                                              d_sr.as<float>(), d_qt.as<uint8_t>(), d_st.as<float>(),
                                              d_hist.as<float>(), d_pos.as<int>(), nullptr);
              break;
            case DualKind::Block1x128:
              gs::cuda::quantize_block_1x128_dual(xb, sh.rows, sh.cols, k, d_qr.as<uint8_t>(), d_sr.as<float>(),
                                                  d_qt.as<uint8_t>(), d_st.as<float>(), nullptr);
              break;
            case DualKind::Block128x128:
              gs::cuda::quantize_block_128x128_dual(xb, sh.rows, sh.cols, k, d_qr.as<uint8_t>(), d_sr.as<float>(),
                                                    d_qt.as<uint8_t>(), d_st.as<float>(), nullptr);
              break;
          }
          sync();
          EXPECT_TRUE(same_bytes(d_qr, er, sh.rows, sh.cols, poison)) << "rowwise copy";
          EXPECT_TRUE(same_bytes(d_qt, et, sh.cols, sh.rows, poison)) << "transposed copy";
          EXPECT_TRUE(same_scales(d_sr, sr, poison, pr.empty() ? nullptr : &pr)) << "rowwise scales";
          EXPECT_TRUE(same_scales(d_st, st, poison, pt.empty() ? nullptr : &pt)) << "transposed scales";
          if (dk == DualKind::Delayed) {
            const std::vector<float> h = d_hist.download<float>(4);
            EXPECT_EQ(fbits(h[0]), fbits(am)) << "the amax is recorded once, exactly";
            EXPECT_EQ(fbits(h[1]), 0u);
          }
        }
      }
  }
}

TEST(QuantizeDual, RejectsBadArguments) {
  GS_REQUIRE_GPU();
  DevBuf d_x(64 * 64 * 2), d_q(64 * 64 + 16), d_s(64);
  auto* xb = d_x.as<__nv_bfloat16>();
  EXPECT_THROW(gs::cuda::quantize_block_1x128_dual(xb, 64, 64, Fp8Kind::E4M3, d_q.as<uint8_t>(), d_s.as<float>(),
                                                   nullptr, d_s.as<float>(), nullptr),
               std::invalid_argument);
  EXPECT_THROW(gs::cuda::quantize_block_128x128_dual(xb, 64, 60, Fp8Kind::E4M3, d_q.as<uint8_t>(), d_s.as<float>(),
                                                     d_q.as<uint8_t>(), d_s.as<float>(), nullptr),
               std::invalid_argument);
  EXPECT_THROW(gs::cuda::cast_fp8_current_dual(xb, 64, 64, Fp8Kind::E4M3, nullptr, d_q.as<uint8_t>(), d_s.as<float>(),
                                               d_q.as<uint8_t>() + 1, d_s.as<float>(), nullptr),
               std::invalid_argument);
}

// Every FP8 kernel is asynchronous on the given stream: run a block cast on a non-blocking
// stream behind a long-running copy and check the result after synchronizing that stream only.
TEST(QuantizeStreams, RunsOnTheGivenStream) {
  GS_REQUIRE_GPU();
  const Shape sh{384, 256};
  const std::vector<uint16_t> x = make_data(sh.rows, sh.cols, 77);
  cudaStream_t s;
  GS_CUDA(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  DevBuf d_x(x.size() * 2), d_q(x.size() + kGuard), d_s(4096), d_big(size_t(64) << 20),
      d_big2(size_t(64) << 20);
  GS_CUDA(cudaMemcpyAsync(d_x.as<void>(), x.data(), x.size() * 2, cudaMemcpyHostToDevice, s));
  GS_CUDA(cudaMemsetAsync(d_q.as<void>(), 0xAB, d_q.bytes(), s));
  GS_CUDA(cudaMemsetAsync(d_s.as<void>(), 0xAB, d_s.bytes(), s));
  GS_CUDA(cudaMemsetAsync(d_big.as<void>(), 0, d_big.bytes(), s));  // defined bytes (initcheck)
  GS_CUDA(cudaMemcpyAsync(d_big2.as<void>(), d_big.as<void>(), d_big.bytes(),
                          cudaMemcpyDeviceToDevice, s));
  gs::cuda::quantize_block_1x128(d_x.as<__nv_bfloat16>(), sh.rows, sh.cols, true,
                                 Fp8Kind::E4M3, d_q.as<uint8_t>(), d_s.as<float>(), s);
  GS_CUDA(cudaStreamSynchronize(s));
  std::vector<uint8_t> exp_q;
  std::vector<float> exp_s;
  ref_block_1x128(transpose_host(x, sh.rows, sh.cols), sh.cols, sh.rows, Fp8Kind::E4M3, exp_q,
                  exp_s);
  EXPECT_TRUE(same_bytes(d_q, exp_q, sh.cols, sh.rows, 0xAB));
  GS_CUDA(cudaStreamDestroy(s));
}

}  // namespace
