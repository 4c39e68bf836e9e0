// cutlass_tiles: the CUTLASS provider's tile rule checked on the GPU. For every kernel family that
// has both tiles (128x128 and 128x256, src/cuda/providers/cutlass/cutlass_grouped.hpp) and a set of dense and grouped
// shapes (the 5B and Qwen2.5-7B layers' GEMMs as one group; Qwen3-30B-A3B-like and DeepSeek-V3-like
// experts), times both tiles and prints which is faster and what cutlass_pick_tile picks.
//
//   build/cutlass_tiles [--iters N] [--json OUT.json]
//
// Timing: CUDA events around N back-to-back launches after 10 warm-up launches, the median of 5
// such samples. Operands hold small constant values (timing only, no check: the GPU tests check
// every family and tile against FP64). Exit 0 when it ran (the verdicts are printed, not enforced),
// 2 on bad arguments, 1 without CUTLASS or an sm_90 GPU.
#include <cuda_runtime.h>
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "core/gpu/arch_policy.hpp"
#include "cuda/common/cuda_check.hpp"
#include "cuda/providers/cutlass/cutlass_grouped.hpp"
#include "cuda/common/device_buffer.hpp"

using gs::cuda::CutlassGroup;
using gs::cuda::CutlassGroupedFamily;
using gs::cuda::CutlassTile;
using F = CutlassGroupedFamily;

namespace {

struct Shape {
  std::string name;
  std::vector<int> m;  // rows per group
  int n, k;
};

std::vector<int> even_groups(int groups, int rows) { return std::vector<int>(static_cast<size_t>(groups), rows); }

// A and B element bytes, D bytes, of a family.
struct Bytes {
  int a, b, d;
};
Bytes bytes_of(F f) {
  switch (f) {
    case F::Bf16RowCol:
    case F::Bf16RowRow: return {2, 2, 2};
    case F::Bf16ColRowF32Acc: return {2, 2, 4};
    case F::Bf16ColRowBf16: return {2, 2, 2};
    case F::Fp8E4m3E4m3Bf16Fast:
    case F::Fp8E5m2E4m3Bf16: return {1, 1, 2};
    case F::Fp8E5m2E4m3F32Acc: return {1, 1, 4};
    default: return {0, 0, 0};
  }
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

// Median ms per launch of `f` in `tile` on `shape`, or a negative value when CUTLASS refuses it.
double time_tile(F f, CutlassTile tile, const Shape& s, int iters, std::string& config) {
  const Bytes b = bytes_of(f);
  std::vector<gs::cuda::DeviceBuffer> keep;
  std::vector<CutlassGroup> groups;
  keep.reserve(3 * s.m.size());
  for (int m : s.m) {
    CutlassGroup g;
    g.m = m, g.n = s.n, g.k = s.k;
    const size_t as = static_cast<size_t>(m) * s.k * b.a, bs = static_cast<size_t>(s.k) * s.n * b.b,
                 ds = static_cast<size_t>(m) * s.n * b.d;
    keep.emplace_back(as), keep.emplace_back(bs), keep.emplace_back(ds);
    const int fill = b.a == 1 ? 0x30 : 0x3c;  // E4M3/E5M2 0.125; BF16 0.0115
    GS_CUDA(cudaMemset(keep[keep.size() - 3].get(), fill, as));
    GS_CUDA(cudaMemset(keep[keep.size() - 2].get(), fill, bs));
    GS_CUDA(cudaMemset(keep.back().get(), 0, ds));
    g.a = keep[keep.size() - 3].get(), g.b = keep[keep.size() - 2].get(), g.d = keep.back().get();
    groups.push_back(g);
  }
  std::unique_ptr<gs::cuda::CutlassGroupedLaunch> launch;
  try {
    launch = gs::cuda::make_cutlass_grouped(f, groups, 0, nullptr, tile);
  } catch (const std::invalid_argument& e) {
    config = e.what();
    return -1;
  }
  config = launch->config();
  cudaEvent_t e0, e1;
  GS_CUDA(cudaEventCreate(&e0));
  GS_CUDA(cudaEventCreate(&e1));
  for (int i = 0; i < 10; ++i) launch->run(nullptr);
  std::vector<double> samples;
  for (int r = 0; r < 5; ++r) {
    GS_CUDA(cudaEventRecord(e0, nullptr));
    for (int i = 0; i < iters; ++i) launch->run(nullptr);
    GS_CUDA(cudaEventRecord(e1, nullptr));
    GS_CUDA(cudaEventSynchronize(e1));
    float ms = 0;
    GS_CUDA(cudaEventElapsedTime(&ms, e0, e1));
    samples.push_back(ms / iters);
  }
  cudaEventDestroy(e0);
  cudaEventDestroy(e1);
  return median(samples);
}

}  // namespace

int main(int argc, char** argv) {
  int iters = 20;
  std::string json_path;
  for (int i = 1; i < argc; ++i) {
    if (!std::strcmp(argv[i], "--iters") && i + 1 < argc) iters = std::max(1, std::atoi(argv[++i]));
    else if (!std::strcmp(argv[i], "--json") && i + 1 < argc) json_path = argv[++i];
    else {
      std::fprintf(stderr, "usage: cutlass_tiles [--iters N] [--json OUT.json]\n");
      return 2;
    }
  }
  if (!gs::cuda::cutlass_built()) {
    std::fprintf(stderr, "cutlass_tiles: built without CUTLASS\n");
    return 1;
  }
  cudaDeviceProp prop{};
  if (cudaGetDeviceProperties(&prop, 0) != cudaSuccess || !gs::ArchPolicy(prop.major * 10 + prop.minor).kernel_target()) {
    std::fprintf(stderr, "cutlass_tiles: needs a GPU that runs %s\n", gs::ArchPolicy::arch_kernels_target().arch.c_str());
    return 1;
  }
  // 16384 tokens; 5B-like (hidden 4096, MLP 16384) and Qwen2.5-7B (hidden 3584, MLP 18944) as one
  // group; experts as in bench/moe_peer.py (balanced counts).
  const std::vector<Shape> shapes = {
      {"dense 16384x4096x4096", {16384}, 4096, 4096},
      {"dense 16384x16384x4096", {16384}, 16384, 4096},
      {"dense 16384x4096x16384", {16384}, 4096, 16384},
      {"dense 16384x3584x18944", {16384}, 3584, 18944},
      {"dense 4096x4096x4096", {4096}, 4096, 4096},
      {"dense 2048x2048x2048", {2048}, 2048, 2048},
      {"qwen3-like up 128x512 ->1536", even_groups(128, 512), 1536, 2048},
      {"qwen3-like down 128x512 ->2048", even_groups(128, 512), 2048, 768},
      {"dsv3-like up 32x1024 ->4096", even_groups(32, 1024), 4096, 7168},
      {"dsv3-like down 32x1024 ->7168", even_groups(32, 1024), 7168, 2048},
      {"dsv3-like up 8x4096 ->4096", even_groups(8, 4096), 4096, 7168},
  };
  const std::vector<F> families = {F::Bf16RowCol, F::Bf16RowRow, F::Bf16ColRowF32Acc, F::Bf16ColRowBf16,
                                   F::Fp8E4m3E4m3Bf16Fast, F::Fp8E5m2E4m3Bf16, F::Fp8E5m2E4m3F32Acc};
  std::printf("device: %s\n%-26s %-32s %10s %10s %8s %9s %7s\n", prop.name, "family", "shape", "128x128 ms",
              "128x256 ms", "faster", "rule", "rule ok");
  nlohmann::json out = nlohmann::json::array();
  int right = 0, total = 0;
  for (F f : families) {
    if (!gs::cuda::cutlass_has_wide_tile(f)) {
      std::printf("%-26s built without its 128x256 tile\n", gs::cuda::to_string(f));
      continue;
    }
    for (const Shape& s : shapes) {
      std::vector<CutlassGroup> probe;
      for (int m : s.m) probe.push_back({m, s.n, s.k});
      const CutlassTile pick = gs::cuda::cutlass_pick_tile(f, probe);
      std::string c1, c2;
      const double sq = time_tile(f, CutlassTile::Square, s, iters, c1);
      const double wd = time_tile(f, CutlassTile::Wide, s, iters, c2);
      if (sq < 0 || wd < 0) {
        std::printf("%-26s %-32s refused: %s\n", gs::cuda::to_string(f), s.name.c_str(), (sq < 0 ? c1 : c2).c_str());
        continue;
      }
      const CutlassTile faster = wd < sq ? CutlassTile::Wide : CutlassTile::Square;
      // Within 2% either way: the pick costs nothing that matters.
      const bool ok = pick == faster || std::abs(wd - sq) / std::min(wd, sq) < 0.02;
      right += ok ? 1 : 0;
      ++total;
      std::printf("%-26s %-32s %10.4f %10.4f %8s %9s %7s\n", gs::cuda::to_string(f), s.name.c_str(), sq, wd,
                  gs::cuda::to_string(faster), gs::cuda::to_string(pick), ok ? "yes" : "NO");
      out.push_back({{"family", gs::cuda::to_string(f)}, {"shape", s.name}, {"square_ms", sq}, {"wide_ms", wd},
                     {"rule", gs::cuda::to_string(pick)}, {"rule_ok", ok}});
    }
  }
  std::printf("the rule picks the faster tile (or one within 2%%) in %d of %d cases\n", right, total);
  if (!json_path.empty()) std::ofstream(json_path) << nlohmann::json{{"device", prop.name}, {"results", out}}.dump(2);
  return 0;
}
