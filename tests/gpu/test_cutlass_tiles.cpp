// Every CUTLASS family (cuda/providers/cutlass/cutlass_grouped.hpp) in each of its tile configurations, called
// directly on host-made operands: uneven groups (one above a 256-wide tile, one of 8 rows) against
// an FP64 GEMM of the same values. FP8 operands are random codes with per-group alphas (per-tensor)
// or random power-of-two block scales in CUTLASS's layout (block scaling); FP32 outputs accumulate
// into a known value (beta = 1). Also the tile rule (cutlass_pick_tile) on its own.
#include <cuda_bf16.h>

#include <cmath>
#include <cstring>
#include <random>
#include <stdexcept>
#include <string>
#include <vector>

#include "core/formats/formats.hpp"
#include "cuda/providers/cutlass/cutlass_grouped.hpp"
#include "cuda/common/device_buffer.hpp"
#include "gemm_reference.hpp"
#include "cutlass_test_util.hpp"
#include "gpu_test_util.hpp"

using namespace gs;
using namespace gs::cuda;
using namespace gs::test;

namespace {

enum class In { Bf16, E4m3, E5m2 };
struct Family {
  CutlassGroupedFamily f;
  In a, b;
  bool a_k_major, b_k_major;  // storage of A [m,k] / [k,m] and B [n,k] / [k,n]
  bool fp32_out;
  int block_n;  // 0: no block scales; 1 or 128: B's block scale granularity along n (A: 1x128)
};

const Family kFamilies[] = {
    {CutlassGroupedFamily::Bf16RowCol, In::Bf16, In::Bf16, true, true, false, 0},
    {CutlassGroupedFamily::Bf16RowRow, In::Bf16, In::Bf16, true, false, false, 0},
    {CutlassGroupedFamily::Bf16ColRowF32Acc, In::Bf16, In::Bf16, false, false, true, 0},
    {CutlassGroupedFamily::Bf16ColRowBf16, In::Bf16, In::Bf16, false, false, false, 0},
    {CutlassGroupedFamily::Fp8E4m3E4m3Bf16Fast, In::E4m3, In::E4m3, true, true, false, 0},
    {CutlassGroupedFamily::Fp8E5m2E4m3Bf16, In::E5m2, In::E4m3, true, true, false, 0},
    {CutlassGroupedFamily::Fp8E5m2E4m3F32Acc, In::E5m2, In::E4m3, true, true, true, 0},
    {CutlassGroupedFamily::Fp8Block1x128x128x128Bf16, In::E4m3, In::E4m3, true, true, false, 128},
    {CutlassGroupedFamily::Fp8Block1x128x1x128F32Acc, In::E4m3, In::E4m3, true, true, true, 1},
    {CutlassGroupedFamily::Fp8Block1x128x1x128Bf16, In::E4m3, In::E4m3, true, true, false, 1},
};

constexpr float kInit = 0.5f;

// One operand [outer, k] (values v[o*k + j]) as the family stores it, and its values as doubles.
struct Operand {
  std::vector<uint8_t> bytes;
  std::vector<double> values;  // [outer, k], before any scale
};

Operand make_operand(In in, int64_t outer, int64_t k, bool k_major, std::mt19937& rng) {
  std::normal_distribution<float> nd(0.f, 1.f);
  Operand op;
  op.values.resize(static_cast<size_t>(outer * k));
  const size_t esize = in == In::Bf16 ? 2 : 1;
  op.bytes.resize(op.values.size() * esize);
  for (int64_t o = 0; o < outer; ++o)
    for (int64_t j = 0; j < k; ++j) {
      const size_t at = static_cast<size_t>(k_major ? o * k + j : j * outer + o);
      const float x = nd(rng);
      double v = 0;
      if (in == In::Bf16) {
        const uint16_t b = nf::float_to_bf16_rne(x);
        std::memcpy(&op.bytes[at * 2], &b, 2);
        v = nf::bf16_to_float(b);
      } else {
        const nf::Fp8 kind = in == In::E4m3 ? nf::Fp8::E4M3 : nf::Fp8::E5M2;
        op.bytes[at] = nf::encode_fp8(x, kind);
        v = nf::decode_fp8(op.bytes[at], kind);
      }
      op.values[static_cast<size_t>(o * k + j)] = v;
    }
  return op;
}

DeviceBuffer upload_bytes(const void* p, size_t n) {
  DeviceBuffer b(n);
  GS_CUDA(cudaMemcpy(b.get(), p, n, cudaMemcpyHostToDevice));
  return b;
}

void run_family(const Family& fam, CutlassTile tile) {
  const int64_t k = 384, n = 256;
  const std::vector<int64_t> rows = {304, 8, 136};  // M-major A (Wgrad families): 16-byte rows, m % 8 == 0
  std::mt19937 rng(17);
  std::uniform_int_distribution<int> pow2(-3, 3);
  std::vector<CutlassGroup> groups;
  std::vector<DeviceBuffer> keep;
  std::vector<std::vector<double>> refs;
  std::vector<float> alphas;
  for (int64_t m : rows) {
    Operand a = make_operand(fam.a, m, k, fam.a_k_major, rng);
    Operand b = make_operand(fam.b, n, k, fam.b_k_major, rng);
    CutlassGroup g{static_cast<int>(m), static_cast<int>(n), static_cast<int>(k)};
    if (fam.block_n) {
      // Block scales in CUTLASS's layouts: A [ceil(k/128), m]; B [ceil(k/128), n] (1x128) or
      // [ceil(n/128), ceil(k/128)] (128x128).
      const int64_t kb = (k + 127) / 128, nb = fam.block_n == 1 ? n : (n + 127) / 128;
      std::vector<float> sa(static_cast<size_t>(kb * m)), sb(static_cast<size_t>(kb * nb));
      for (float& x : sa) x = std::ldexp(1.f, pow2(rng));
      for (float& x : sb) x = std::ldexp(1.f, pow2(rng));
      for (int64_t o = 0; o < m; ++o)
        for (int64_t j = 0; j < k; ++j) a.values[static_cast<size_t>(o * k + j)] *= sa[static_cast<size_t>((j / 128) * m + o)];
      for (int64_t o = 0; o < n; ++o)
        for (int64_t j = 0; j < k; ++j)
          b.values[static_cast<size_t>(o * k + j)] *=
              fam.block_n == 1 ? sb[static_cast<size_t>((j / 128) * n + o)] : sb[static_cast<size_t>((o / 128) * kb + j / 128)];
      keep.push_back(upload_bytes(sa.data(), sa.size() * 4));
      g.sfa = keep.back().get<float>();
      keep.push_back(upload_bytes(sb.data(), sb.size() * 4));
      g.sfb = keep.back().get<float>();
    }
    std::vector<double> ref = ref_gemm(a.values, b.values, m, n, k);
    if (fam.a != In::Bf16 && !fam.block_n) {
      const float alpha = std::ldexp(1.f, pow2(rng));
      alphas.push_back(alpha);
      for (double& x : ref) x *= alpha;
    }
    refs.push_back(std::move(ref));
    keep.push_back(upload_bytes(a.bytes.data(), a.bytes.size()));
    g.a = keep.back().get();
    keep.push_back(upload_bytes(b.bytes.data(), b.bytes.size()));
    g.b = keep.back().get();
    const size_t out_bytes = static_cast<size_t>(m * n) * (fam.fp32_out ? 4 : 2);
    keep.emplace_back(out_bytes);
    if (fam.fp32_out) {
      std::vector<float> init(static_cast<size_t>(m * n), kInit);
      GS_CUDA(cudaMemcpy(keep.back().get(), init.data(), out_bytes, cudaMemcpyHostToDevice));
    } else {
      GS_CUDA(cudaMemset(keep.back().get(), 0xFF, out_bytes));  // NaN until written
    }
    g.d = keep.back().get();
    groups.push_back(g);
  }
  DeviceBuffer alpha_dev;
  if (!alphas.empty()) alpha_dev = upload_bytes(alphas.data(), alphas.size() * 4);
  std::unique_ptr<CutlassGroupedLaunch> launch;
  try {
    launch = make_cutlass_grouped(fam.f, groups, 0, alphas.empty() ? nullptr : alpha_dev.get<float>(), tile);
  } catch (const std::exception& e) {
    FAIL() << to_string(fam.f) << " in " << to_string(tile) << ": " << e.what();
  }
  EXPECT_NE(launch->config().find(tile == CutlassTile::Wide ? "128x256" : "128x128"), std::string::npos)
      << launch->config();
  launch->run(nullptr);
  GS_CUDA(cudaDeviceSynchronize());
  for (size_t i = 0; i < groups.size(); ++i) {
    SCOPED_TRACE("group of " + std::to_string(groups[i].m) + " rows");
    const size_t count = static_cast<size_t>(groups[i].m) * static_cast<size_t>(n);
    std::vector<double> out(count);
    if (fam.fp32_out) {
      std::vector<float> h(count);
      GS_CUDA(cudaMemcpy(h.data(), groups[i].d, count * 4, cudaMemcpyDeviceToHost));
      for (size_t j = 0; j < count; ++j) out[j] = static_cast<double>(h[j]) - kInit;
    } else {
      std::vector<uint16_t> h(count);
      GS_CUDA(cudaMemcpy(h.data(), groups[i].d, count * 2, cudaMemcpyDeviceToHost));
      for (size_t j = 0; j < count; ++j) out[j] = nf::bf16_to_float(h[j]);
    }
    // BF16 outputs: their rounding (4e-3, as every FP8 GPU test); FP32 outputs of BF16 operands:
    // FP32 accumulation (1e-5); FP32 outputs of FP8 operands: FP8 wgmma's own accumulator keeps
    // fewer bits than FP32 between promotions (1.0-1.3e-4 measured on an H100 at K = 384), so 1e-3.
    EXPECT_LT(rel_frobenius(out, refs[i]), !fam.fp32_out ? 4e-3 : fam.a == In::Bf16 ? 1e-5 : 1e-3);
  }
}

TEST(CutlassTiles, EveryFamilyInEveryTileMatchesFp64) {
  GS_REQUIRE_CUTLASS();
  int wide = 0;
  for (const Family& fam : kFamilies) {
    SCOPED_TRACE(to_string(fam.f));
    run_family(fam, CutlassTile::Square);
    if (cutlass_has_wide_tile(fam.f)) {
      ++wide;
      run_family(fam, CutlassTile::Wide);
    } else {
      EXPECT_THROW(make_cutlass_grouped(fam.f, {{8, 256, 128}}, 0, nullptr, CutlassTile::Wide), std::invalid_argument);
    }
  }
  EXPECT_EQ(wide, cutlass_has_wide_tile(CutlassGroupedFamily::Bf16RowCol) ? 5 : 0)
      << "5 families with a 128x256 tile (none in a build with GEMMSCOPE_CUTLASS_WIDE_TILES=OFF)";
}

// The rule (measured with bench/cutlass_tiles.cu): the wide tile wherever a family has it, small
// experts and small GEMMs included; the split-accumulation FP8 families and FP8Block have none.
TEST(CutlassTiles, TheRulePicksWideWhereBuilt) {
  if (!cutlass_has_wide_tile(CutlassGroupedFamily::Fp8E4m3E4m3Bf16Fast)) GTEST_SKIP() << "built without the 128x256 tiles";
  for (const auto f : {CutlassGroupedFamily::Fp8E4m3E4m3Bf16Fast, CutlassGroupedFamily::Bf16RowCol,
                       CutlassGroupedFamily::Bf16RowRow, CutlassGroupedFamily::Bf16ColRowF32Acc,
                       CutlassGroupedFamily::Bf16ColRowBf16}) {
    SCOPED_TRACE(to_string(f));
    EXPECT_EQ(cutlass_pick_tile(f, {{8192, 4096, 4096}}), CutlassTile::Wide);
    EXPECT_EQ(cutlass_pick_tile(f, {{512, 1536, 2048}, {8, 1536, 2048}}), CutlassTile::Wide) << "small experts";
  }
  for (const auto f : {CutlassGroupedFamily::Fp8E5m2E4m3Bf16, CutlassGroupedFamily::Fp8E5m2E4m3F32Acc,
                       CutlassGroupedFamily::Fp8Block1x128x128x128Bf16, CutlassGroupedFamily::Fp8Block1x128x1x128F32Acc}) {
    SCOPED_TRACE(to_string(f));
    EXPECT_FALSE(cutlass_has_wide_tile(f));
    EXPECT_EQ(cutlass_pick_tile(f, {{8192, 4096, 4096}}), CutlassTile::Square);
  }
}

}  // namespace
