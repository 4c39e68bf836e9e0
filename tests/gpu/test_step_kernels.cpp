// The step's own kernels (cuda/stepwork/) against host references at small sizes: AdamW one step
// for each parameter storage (to the rounding of the stored format), the gradients' L2 norm, the
// cross-entropy loss and its gradient (unfused and fused), the embedding's gather and scatter-add;
// then through the engine (Engine::measure_step_kernel): every kind measures, the optimizer's time
// scales with the parameter count, a size that does not fit is measured smaller and scaled.
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <random>
#include <stdexcept>
#include <string>
#include <vector>

#include "core/run/engine.hpp"
#include "core/step/step_kernels.hpp"
#include "cuda/engine_cuda.hpp"
#include "cuda/stepwork/embedding.hpp"
#include "cuda/stepwork/loss.hpp"
#include "cuda/stepwork/measure.hpp"
#include "cuda/stepwork/multi_tensor.cuh"
#include "cuda/stepwork/optimizer.hpp"
#include "gpu_test_util.hpp"

namespace {

using gs::ParamStorage;
using gs::StepKernelKind;
using gs::StepKernelSpec;
namespace sw = gs::cuda::stepwork;

// Device memory freed at scope exit.
struct Dev {
  void* p = nullptr;
  explicit Dev(size_t bytes) { EXPECT_EQ(cudaMalloc(&p, bytes), cudaSuccess); }
  ~Dev() { cudaFree(p); }
  template <class T>
  T* as() const { return static_cast<T*>(p); }
};

template <class T>
void upload(void* d, const std::vector<T>& h) {
  ASSERT_EQ(cudaMemcpy(d, h.data(), h.size() * sizeof(T), cudaMemcpyHostToDevice), cudaSuccess);
}
template <class T>
std::vector<T> download(const void* d, size_t n) {
  std::vector<T> h(n);
  EXPECT_EQ(cudaMemcpy(h.data(), d, n * sizeof(T), cudaMemcpyDeviceToHost), cudaSuccess);
  return h;
}

float bf(__nv_bfloat16 x) { return __bfloat162float(x); }
__nv_bfloat16 to_bf(float x) { return __float2bfloat16_rn(x); }

// |got - want| within `ulps` units in the last place of a format with `mantissa` bits.
// `scale`: the magnitude of the terms `want` was summed from; where they cancel, an FMA and a
// separate multiply and add differ by units of the terms, not of the (much smaller) result.
bool within_ulps(float got, float want, int mantissa, int ulps, float scale = 0) {
  if (got == want) return true;
  const float mag = std::max({std::fabs(want), std::fabs(scale), 1e-30f});
  const float ulp = std::ldexp(1.f, std::ilogb(mag) - mantissa);
  return std::fabs(got - want) <= ulps * ulp;
}

// ---- the multi-tensor plan (host only: runs without a GPU) ----

// Every chunk of every tensor is in exactly one launch, in order; no launch holds more blocks or
// tensor slots than its parameter block allows; a launch is cut only where PyTorch cuts one.
template <int Depth>
void check_plan(const std::vector<int64_t>& numel) {
  std::vector<std::array<void*, Depth>> lists;
  for (size_t t = 0; t < numel.size(); ++t) {
    std::array<void*, Depth> a{};
    for (int d = 0; d < Depth; ++d) a[static_cast<size_t>(d)] = reinterpret_cast<void*>((t + 1) * 4096 + d * 16);
    lists.push_back(a);
  }
  const auto launches = sw::plan_batches<Depth>(lists, numel);
  std::vector<std::pair<size_t, int64_t>> seen;  // (tensor, chunk)
  for (size_t l = 0; l < launches.size(); ++l) {
    const auto& b = launches[l];
    ASSERT_GE(b.blocks, 1);
    ASSERT_LE(b.blocks, sw::kBlocksPerLaunch);
    int slots = 0;
    for (int i = 0; i < b.blocks; ++i) {
      const int slot = b.batch.block_tensor[i];
      ASSERT_LT(slot, sw::TensorBatch<Depth>::kTensors);
      slots = std::max(slots, slot + 1);
      const size_t t = (reinterpret_cast<uintptr_t>(b.batch.addr[0][slot]) / 4096) - 1;
      ASSERT_EQ(b.batch.numel[slot], numel[t]);
      for (int d = 1; d < Depth; ++d) ASSERT_EQ(b.batch.addr[d][slot], lists[t][static_cast<size_t>(d)]);
      seen.emplace_back(t, b.batch.block_chunk[i]);
    }
    // Not the last launch: cut because its blocks or (at a tensor's end) its slots were full.
    if (l + 1 < launches.size()) {
      const bool blocks_full = b.blocks == sw::kBlocksPerLaunch;
      const bool slots_full = slots == sw::TensorBatch<Depth>::kTensors;
      EXPECT_TRUE(blocks_full || slots_full) << "launch " << l;
    }
  }
  std::vector<std::pair<size_t, int64_t>> want;
  for (size_t t = 0; t < numel.size(); ++t)
    for (int64_t c = 0; c * sw::kChunk < numel[t]; ++c) want.emplace_back(t, c);
  EXPECT_EQ(seen, want);
}

TEST(StepKernelsHost, MultiTensorPlanCoversEveryChunkOnce) {
  check_plan<4>({1000, 4099, 65536, 70001, 3});
  check_plan<5>(std::vector<int64_t>(70, 100));              // more tensors than slots (30)
  check_plan<4>({100, 700 * int64_t{sw::kChunk} + 1, 5});   // a tensor across three launches
  check_plan<1>(std::vector<int64_t>(300, 3 * sw::kChunk));  // blocks and slots both limit
  // 8e9 values in 291 equal tensors: ~122k chunks, at 320 per launch.
  std::vector<int64_t> model(291, 8'000'000'000 / 291);
  std::vector<std::array<void*, 5>> lists(model.size());
  for (size_t t = 0; t < lists.size(); ++t)
    for (auto& p : lists[t]) p = reinterpret_cast<void*>((t + 1) * 4096);
  const size_t n = sw::plan_batches<5>(lists, model).size();
  int64_t chunks = 0;
  for (int64_t x : model) chunks += (x + sw::kChunk - 1) / sw::kChunk;
  EXPECT_GE(static_cast<int64_t>(n), (chunks + sw::kBlocksPerLaunch - 1) / sw::kBlocksPerLaunch);
  EXPECT_LE(static_cast<int64_t>(n), chunks / sw::kBlocksPerLaunch + 291 / 30 + 2);
  // Unaligned addresses are refused (the kernels load 4 values at once).
  std::vector<std::array<void*, 1>> bad = {{reinterpret_cast<void*>(4100)}};
  EXPECT_THROW(sw::plan_batches<1>(bad, {10}), std::invalid_argument);
}

// ---- AdamW ----

struct HostTensor {  // one parameter tensor's values, FP32 on the host
  std::vector<float> p, g, m, v;
};

// PyTorch's fused AdamW (ADAMW mode) on one value, in FP32, with the step's constants as the
// kernel gets them.
void adamw_reference(float& p, float g, float& m, float& v, const sw::AdamWHyper& h) {
  const float lr_wd = h.lr * h.weight_decay;
  const float step_size = static_cast<float>(h.lr / (1.0 - std::pow(static_cast<double>(h.beta1), h.step)));
  const float bc2_sqrt = static_cast<float>(std::sqrt(1.0 - std::pow(static_cast<double>(h.beta2), h.step)));
  p -= lr_wd * p;
  m = h.beta1 * m + (1.f - h.beta1) * g;
  v = h.beta2 * v + (1.f - h.beta2) * g * g;
  const float denom = std::sqrt(v) / bc2_sqrt + h.eps;
  p -= step_size * m / denom;
}

// Runs one AdamW step over tensors of `sizes` in `storage` and checks every stored value against the
// reference computed from the same (stored-format) inputs, to 4 units of the stored format at the size of the terms each value is computed from (FMA
// contraction on the GPU may round differently from the host).
void check_adamw(ParamStorage storage, const std::vector<int64_t>& sizes, int step) {
  const bool bf16 = storage == ParamStorage::Bf16;
  const size_t vb = bf16 ? 2 : 4;
  std::mt19937 rng(42);
  std::uniform_real_distribution<float> u(-1.f, 1.f);
  sw::AdamWHyper h;
  h.step = step;
  std::vector<HostTensor> host(sizes.size());
  std::vector<std::unique_ptr<Dev>> bufs;
  std::vector<sw::AdamWTensor> tensors;
  auto put = [&](const std::vector<float>& x) {
    bufs.push_back(std::make_unique<Dev>(x.size() * vb + 16));
    if (bf16) {
      std::vector<__nv_bfloat16> b(x.size());
      for (size_t i = 0; i < x.size(); ++i) b[i] = to_bf(x[i]);
      upload(bufs.back()->p, b);
    } else {
      upload(bufs.back()->p, x);
    }
    return bufs.back()->p;
  };
  for (size_t t = 0; t < sizes.size(); ++t) {
    const size_t n = static_cast<size_t>(sizes[t]);
    HostTensor& x = host[t];
    for (size_t i = 0; i < n; ++i) {
      x.p.push_back(0.05f * u(rng));
      x.g.push_back(1e-2f * u(rng));
      x.m.push_back(1e-3f * u(rng));
      x.v.push_back(1e-5f * std::fabs(u(rng)));
    }
    if (bf16)  // the reference starts from the values as stored
      for (auto* vec : {&x.p, &x.g, &x.m, &x.v})
        for (float& f : *vec) f = bf(to_bf(f));
    sw::AdamWTensor d;
    d.numel = sizes[t];
    d.p = put(x.p), d.g = put(x.g), d.m = put(x.m), d.v = put(x.v);
    if (storage == ParamStorage::Bf16MainFp32) {
      bufs.push_back(std::make_unique<Dev>(n * 2 + 16));
      d.p_copy = bufs.back()->p;
    }
    tensors.push_back(d);
  }
  sw::AdamWStep run(storage, tensors, h);
  EXPECT_GE(run.pieces(), 1);
  run.enqueue_all(nullptr);
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  const int mant = bf16 ? 7 : 23;
  for (size_t t = 0; t < sizes.size(); ++t) {
    const size_t n = static_cast<size_t>(sizes[t]);
    auto get = [&](const void* d) {
      std::vector<float> out(n);
      if (bf16) {
        const auto b = download<__nv_bfloat16>(d, n);
        for (size_t i = 0; i < n; ++i) out[i] = bf(b[i]);
      } else {
        out = download<float>(d, n);
      }
      return out;
    };
    const std::vector<float> p = get(tensors[t].p), m = get(tensors[t].m), v = get(tensors[t].v);
    std::vector<float> copy;
    if (tensors[t].p_copy) {
      const auto b = download<__nv_bfloat16>(tensors[t].p_copy, n);
      for (auto x : b) copy.push_back(bf(x));
    }
    int bad = 0;
    for (size_t i = 0; i < n && bad < 5; ++i) {
      HostTensor& x = host[t];
      float rp = x.p[i], rm = x.m[i], rv = x.v[i];
      // The size of the terms each new value is computed from (m = b1 m + (1 - b1) g, also as a lerp;
      // v = b2 v + (1 - b2) g^2; p -= lr wd p + step m / denom): rounding is in units of these, and
      // m's carries into p through step / denom.
      const float m_scale = std::fabs(rm) + std::fabs(x.g[i]);
      const float v_scale = std::fabs(rv) + x.g[i] * x.g[i];
      const float p_old = std::fabs(rp);
      adamw_reference(rp, x.g[i], rm, rv, h);
      const double step_size = h.lr / (1.0 - std::pow(static_cast<double>(h.beta1), h.step));
      const double denom = std::sqrt(rv) / std::sqrt(1.0 - std::pow(static_cast<double>(h.beta2), h.step)) + h.eps;
      const float p_scale = p_old + static_cast<float>(step_size * m_scale / denom);
      if (bf16) rp = bf(to_bf(rp)), rm = bf(to_bf(rm)), rv = bf(to_bf(rv));
      const bool ok = within_ulps(p[i], rp, mant, 4, p_scale) && within_ulps(m[i], rm, mant, 4, m_scale) &&
                      within_ulps(v[i], rv, mant, 4, v_scale) &&
                      (copy.empty() || within_ulps(copy[i], bf(to_bf(rp)), 7, 1));
      if (!ok) {
        ++bad;
        ADD_FAILURE() << gs::to_string(storage) << " tensor " << t << " value " << i << ": p " << p[i] << " vs " << rp
                      << ", m " << m[i] << " vs " << rm << ", v " << v[i] << " vs " << rv
                      << (copy.empty() ? "" : ", copy " + std::to_string(copy[i]));
      }
    }
  }
}

// Sizes across the chunk (65536) and 4-value boundaries, and more tensors than one launch takes
// (36 for four lists, 30 for five).
std::vector<int64_t> adamw_sizes() {
  std::vector<int64_t> s = {1000, 4099, 65536, 70001, 3};
  for (int i = 0; i < 40; ++i) s.push_back(97 + 64 * i);
  return s;
}

TEST(StepKernelsGpu, AdamWBf16MatchesPyTorchsFusedMath) {
  GS_REQUIRE_GPU();
  check_adamw(ParamStorage::Bf16, adamw_sizes(), 1);
}

TEST(StepKernelsGpu, AdamWFp32MatchesPyTorchsFusedMath) {
  GS_REQUIRE_GPU();
  check_adamw(ParamStorage::Fp32, adamw_sizes(), 7);
}

TEST(StepKernelsGpu, AdamWMasterFp32WritesTheBf16Copy) {
  GS_REQUIRE_GPU();
  check_adamw(ParamStorage::Bf16MainFp32, adamw_sizes(), 3);
}

// A tensor of more chunks than one launch holds (320): its rest leads the next launch.
TEST(StepKernelsGpu, AdamWTensorAcrossLaunches) {
  GS_REQUIRE_GPU();
  check_adamw(ParamStorage::Bf16, {100, 320 * 65536 + 12345, 777}, 2);
}

// ---- gradient norm ----

void check_norm(bool bf16, const std::vector<int64_t>& sizes) {
  std::mt19937 rng(7);
  std::uniform_real_distribution<float> u(-1.f, 1.f);
  std::vector<std::unique_ptr<Dev>> bufs;
  std::vector<const void*> ptrs;
  double want = 0;
  for (int64_t n : sizes) {
    std::vector<float> g(static_cast<size_t>(n));
    for (float& x : g) x = 1e-3f * u(rng);
    bufs.push_back(std::make_unique<Dev>(static_cast<size_t>(n) * 4 + 16));
    if (bf16) {
      std::vector<__nv_bfloat16> b(g.size());
      for (size_t i = 0; i < g.size(); ++i) b[i] = to_bf(g[i]), g[i] = bf(b[i]);
      upload(bufs.back()->p, b);
    } else {
      upload(bufs.back()->p, g);
    }
    for (float x : g) want += static_cast<double>(x) * x;
    ptrs.push_back(bufs.back()->p);
  }
  want = std::sqrt(want);
  sw::GradNorm norm(bf16, ptrs, sizes);
  norm.enqueue_all(nullptr);
  const float got = download<float>(norm.norm(), 1)[0];
  EXPECT_NEAR(got / want, 1.0, 1e-4) << (bf16 ? "BF16" : "FP32") << " gradients: " << got << " vs " << want;
  // Run twice: the partials start again from zero.
  norm.enqueue_all(nullptr);
  EXPECT_FLOAT_EQ(download<float>(norm.norm(), 1)[0], got);
}

TEST(StepKernelsGpu, GradNormMatchesDoubleReference) {
  GS_REQUIRE_GPU();
  check_norm(false, {1000, 4099, 70001, 3});
  check_norm(true, {1000, 4099, 70001, 3});
  // More chunks than one launch: the partials add up over launches.
  check_norm(true, {8 << 20, 8 << 20, (8 << 20) + 5, 1});
}

// ---- cross-entropy ----

struct CeCase {
  int64_t rows, cols;
};

void check_cross_entropy(bool fused, CeCase c) {
  std::mt19937 rng(11);
  std::normal_distribution<float> nd(0.f, 2.f);
  std::uniform_int_distribution<int64_t> tid(0, c.cols - 1);
  const size_t n = static_cast<size_t>(c.rows * c.cols);
  std::vector<__nv_bfloat16> logits(n);
  std::vector<float> x(n);
  for (size_t i = 0; i < n; ++i) logits[i] = to_bf(nd(rng)), x[i] = bf(logits[i]);
  std::vector<int64_t> targets(static_cast<size_t>(c.rows));
  for (int64_t& t : targets) t = tid(rng);
  Dev dl(n * 2), dt(targets.size() * 8);
  upload(dl.p, logits);
  upload(dt.p, targets);
  sw::CrossEntropy ce(fused, c.rows, c.cols, dl.as<__nv_bfloat16>(), dt.as<int64_t>());
  for (int i = 0; i < ce.forward_pieces(); ++i) ce.forward(i, nullptr);
  for (int i = 0; i < ce.backward_pieces(); ++i) ce.backward(i, nullptr);
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  const float loss = download<float>(ce.loss(), 1)[0];
  const auto grad = download<__nv_bfloat16>(ce.grad(), n);
  // Reference in double.
  double want_loss = 0;
  int bad = 0;
  for (int64_t r = 0; r < c.rows; ++r) {
    const float* row = x.data() + r * c.cols;
    double m = row[0];
    for (int64_t j = 0; j < c.cols; ++j) m = std::max(m, static_cast<double>(row[j]));
    double s = 0;
    for (int64_t j = 0; j < c.cols; ++j) s += std::exp(row[j] - m);
    const double lse = m + std::log(s);
    want_loss += lse - row[targets[static_cast<size_t>(r)]];
    for (int64_t j = 0; j < c.cols && bad < 5; ++j) {
      const double want = (std::exp(row[j] - lse) - (j == targets[static_cast<size_t>(r)] ? 1.0 : 0.0)) / c.rows;
      const float got = bf(grad[static_cast<size_t>(r * c.cols + j)]);
      // BF16 rounding of the result (plus FP32 math): 2 units of BF16.
      if (!within_ulps(got, static_cast<float>(want), 7, 2) && std::fabs(got - want) > 1e-9) {
        ++bad;
        ADD_FAILURE() << (fused ? "fused" : "unfused") << " gradient [" << r << ", " << j << "] " << got << " vs "
                      << want;
      }
    }
  }
  want_loss /= static_cast<double>(c.rows);
  EXPECT_NEAR(loss / want_loss, 1.0, 1e-5) << (fused ? "fused" : "unfused") << " loss " << loss << " vs " << want_loss;
}

TEST(StepKernelsGpu, CrossEntropyUnfusedMatchesReference) {
  GS_REQUIRE_GPU();
  check_cross_entropy(false, {37, 5000});  // 4-value accesses
  check_cross_entropy(false, {9, 1001});   // one at a time (odd vocabulary)
}

TEST(StepKernelsGpu, CrossEntropyFusedMatchesReference) {
  GS_REQUIRE_GPU();
  check_cross_entropy(true, {37, 5000});
  check_cross_entropy(true, {9, 1001});
}

// ---- embedding ----

TEST(StepKernelsGpu, EmbeddingGatherAndScatterAdd) {
  GS_REQUIRE_GPU();
  const int64_t vocab = 300, cols = 72, rows = 500;  // ids repeat (500 tokens over 300 rows)
  std::mt19937 rng(5);
  std::uniform_int_distribution<int64_t> id(0, vocab - 1);
  std::uniform_int_distribution<int> k(-8, 8);
  std::vector<int64_t> ids(rows);
  for (int64_t& i : ids) i = id(rng);
  std::vector<__nv_bfloat16> table(static_cast<size_t>(vocab * cols)), dy(static_cast<size_t>(rows * cols));
  // Multiples of 1/64 below 1: their sums over a few repeats are exact in BF16, so the atomic adds'
  // order does not matter and the result is exact.
  for (auto& t : table) t = to_bf(static_cast<float>(k(rng)) / 64.f);
  for (auto& t : dy) t = to_bf(static_cast<float>(k(rng)) / 64.f);
  Dev dtable(table.size() * 2), dids(ids.size() * 8), dout(dy.size() * 2), ddy(dy.size() * 2), dgrad(table.size() * 2);
  upload(dtable.p, table);
  upload(dids.p, ids);
  upload(ddy.p, dy);
  sw::embedding_forward(dtable.as<__nv_bfloat16>(), dids.as<int64_t>(), rows, cols, dout.as<__nv_bfloat16>(), nullptr);
  // Garbage in the gradient first: the zeroing pass must clear it.
  ASSERT_EQ(cudaMemset(dgrad.p, 0x3f, table.size() * 2), cudaSuccess);
  sw::embedding_backward_zero(dgrad.as<__nv_bfloat16>(), vocab, cols, nullptr);
  sw::embedding_backward_add(ddy.as<__nv_bfloat16>(), dids.as<int64_t>(), rows, cols, dgrad.as<__nv_bfloat16>(),
                             nullptr);
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  const auto out = download<__nv_bfloat16>(dout.p, dy.size());
  const auto grad = download<__nv_bfloat16>(dgrad.p, table.size());
  std::vector<float> want(table.size(), 0.f);
  for (int64_t t = 0; t < rows; ++t)
    for (int64_t j = 0; j < cols; ++j) {
      const size_t src = static_cast<size_t>(ids[static_cast<size_t>(t)] * cols + j);
      EXPECT_EQ(bf(out[static_cast<size_t>(t * cols + j)]), bf(table[src])) << "row " << t << " col " << j;
      want[src] += bf(dy[static_cast<size_t>(t * cols + j)]);
    }
  for (size_t i = 0; i < want.size(); ++i) ASSERT_EQ(bf(grad[i]), want[i]) << "table value " << i;
  EXPECT_THROW(sw::embedding_backward_add(ddy.as<__nv_bfloat16>(), dids.as<int64_t>(), rows, 71,
                                          dgrad.as<__nv_bfloat16>(), nullptr),
               std::invalid_argument);
}

// ---- through the engine ----

std::unique_ptr<gs::Engine> engine(int iters = 10) {
  gs::EngineOptions o;
  o.timing.warmup = 2;
  o.timing.iters = iters;
  o.timing.gpu_warmup_s = 0;
  std::string why;
  auto e = gs::cuda::make_engine(o, why);
  EXPECT_TRUE(e) << why;
  return e;
}

StepKernelSpec optimizer_spec(StepKernelKind k, int64_t elements, int64_t tensors, ParamStorage s) {
  StepKernelSpec spec;
  spec.kind = k;
  spec.elements = elements;
  spec.tensors = tensors;
  spec.storage = s;
  return spec;
}

// Every kind runs through Engine::measure_step_kernel and gives a measured cell with its kernel
// configuration; the kernel records (where CUPTI is loadable) are the stepwork's, classed "other".
TEST(StepKernelsGpu, EveryKindMeasuresThroughTheEngine) {
  GS_REQUIRE_GPU();
  auto e = engine();
  ASSERT_TRUE(e);
  std::vector<StepKernelSpec> specs;
  for (ParamStorage s : {ParamStorage::Bf16, ParamStorage::Fp32, ParamStorage::Bf16MainFp32}) {
    specs.push_back(optimizer_spec(StepKernelKind::AdamW, 50'000'000, 100, s));
    specs.push_back(optimizer_spec(StepKernelKind::GradNorm, 50'000'000, 100, s));
    specs.push_back(optimizer_spec(StepKernelKind::ZeroGrad, 50'000'000, 1, s));
  }
  for (StepKernelKind k : {StepKernelKind::CrossEntropyFwd, StepKernelKind::CrossEntropyBwd})
    for (bool fused : {false, true}) {
      StepKernelSpec s;
      s.kind = k;
      s.rows = 1024;
      s.cols = 128256;
      s.fused = fused;
      specs.push_back(s);
    }
  for (StepKernelKind k : {StepKernelKind::EmbeddingFwd, StepKernelKind::EmbeddingBwd}) {
    StepKernelSpec s;
    s.kind = k;
    s.rows = 8192;
    s.cols = 4096;
    s.vocab = 128256;
    specs.push_back(s);
  }
  StepKernelSpec launch;
  launch.kind = StepKernelKind::LaunchLatency;
  specs.push_back(launch);
  for (const StepKernelSpec& s : specs) {
    const gs::Cell c = e->measure_step_kernel(s);
    ASSERT_TRUE(c.ok) << s.describe() << ": " << c.reason;
    EXPECT_GT(c.stats.mean_ms, 0) << s.describe();
    EXPECT_FALSE(c.kernels.config.empty()) << s.describe();
    EXPECT_EQ(c.kernels.config.find(sw::kScaledNote), std::string::npos) << s.describe() << " fits: not scaled";
    if (s.kind == StepKernelKind::LaunchLatency) {
      EXPECT_LT(c.stats.mean_ms, 0.1) << "a kernel launch should cost microseconds";
      continue;
    }
    // Well above the L2 these kernels stream: at least 200 GB/s on any datacenter GPU.
    if (gs::step_kernel_bytes(s) > 4e8) {
      EXPECT_GT(gs::step_kernel_bytes(s) / (c.stats.mean_ms * 1e6), 200.0) << s.describe();
    }
    for (const gs::KernelStat& k : c.kernels.kernels) {
      if (k.name.find("stepwork") != std::string::npos) {
        EXPECT_EQ(k.cls, gs::KernelClass::Other) << k.name;
      }
    }
  }
  StepKernelSpec empty = optimizer_spec(StepKernelKind::AdamW, 0, 1, ParamStorage::Bf16);
  EXPECT_FALSE(e->measure_step_kernel(empty).ok);
}

// The optimizer is memory-bound: 4x the parameters (all well above the L2) take 3-5x the time.
TEST(StepKernelsGpu, AdamWTimeScalesWithTheParameterCount) {
  GS_REQUIRE_GPU();
  auto e = engine(20);
  ASSERT_TRUE(e);
  for (ParamStorage s : {ParamStorage::Bf16, ParamStorage::Bf16MainFp32}) {
    const gs::Cell small = e->measure_step_kernel(optimizer_spec(StepKernelKind::AdamW, 250'000'000, 80, s));
    const gs::Cell large = e->measure_step_kernel(optimizer_spec(StepKernelKind::AdamW, 1'000'000'000, 320, s));
    ASSERT_TRUE(small.ok && large.ok) << small.reason << large.reason;
    const double ratio = large.stats.median_ms / small.stats.median_ms;
    EXPECT_GT(ratio, 3.0) << gs::to_string(s);
    EXPECT_LT(ratio, 5.0) << gs::to_string(s);
  }
}

// A spec whose buffers exceed the free memory is measured at a size that fits and scaled by bytes,
// said in the cell; its time per byte agrees with a real-size measurement of a smaller spec.
TEST(StepKernelsGpu, TooLargeForMemoryIsScaledAndSaysSo) {
  GS_REQUIRE_GPU();
  auto e = engine(5);
  ASSERT_TRUE(e);
  size_t free_b = 0, total_b = 0;
  ASSERT_EQ(cudaMemGetInfo(&free_b, &total_b), cudaSuccess);
  // FP32 storage: 16 bytes of buffers per parameter; 1.5x what the whole GPU holds.
  const int64_t huge = static_cast<int64_t>(static_cast<double>(total_b) / 16 * 1.5);
  const gs::Cell scaled = e->measure_step_kernel(optimizer_spec(StepKernelKind::AdamW, huge, 400, ParamStorage::Fp32));
  ASSERT_TRUE(scaled.ok) << scaled.reason;
  EXPECT_NE(scaled.kernels.config.find(sw::kScaledNote), std::string::npos) << scaled.kernels.config;
  const StepKernelSpec real = optimizer_spec(StepKernelKind::AdamW, 1'000'000'000, 100, ParamStorage::Fp32);
  const gs::Cell ref = e->measure_step_kernel(real);
  ASSERT_TRUE(ref.ok) << ref.reason;
  const double per_value_scaled = scaled.stats.median_ms / static_cast<double>(huge);
  const double per_value_real = ref.stats.median_ms / 1e9;
  EXPECT_NEAR(per_value_scaled / per_value_real, 1.0, 0.2);
}

}  // namespace
