#include "core/grouped.hpp"

#include <numeric>

namespace gs {

int64_t group_alignment(Precision p) {
  switch (p) {
    case Precision::BF16: return 1;
    case Precision::FP8Current:
    case Precision::FP8Delayed:
    case Precision::FP8Block: return 16;
    case Precision::MXFP8:
    case Precision::NVFP4: return 32;
  }
  return 1;
}

std::vector<int64_t> padded_group(const Gemm& g, Precision p) {
  const int64_t a = group_alignment(p);
  std::vector<int64_t> out;
  out.reserve(g.group.size());
  for (int64_t s : g.group) out.push_back((s + a - 1) / a * a);
  return out;
}

Gemm expert_gemm(const Gemm& g, int64_t size) {
  Gemm e = g;
  e.group_dim = GroupDim::None;
  e.group.clear();
  if (g.group_dim == GroupDim::M) e.m = size;
  if (g.group_dim == GroupDim::K) e.k = size;
  return e;
}

int64_t padded_waste(const Gemm& g, Precision p) {
  const std::vector<int64_t> pad = padded_group(g, p);
  return std::accumulate(pad.begin(), pad.end(), int64_t{0}) -
         std::accumulate(g.group.begin(), g.group.end(), int64_t{0});
}

}  // namespace gs
