// Host references for GPU GEMM tests: operands as the GEMM sees them, decoded quantized operands
// (our bytes with our scales, in the layouts we claim), an FP64 GEMM and the relative error.
#pragma once
#include <cuda_bf16.h>
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "core/formats/formats.hpp"
#include "cuda/common/cuda_check.hpp"
#include "cuda/common/device_buffer.hpp"
#include "cuda/providers/cublaslt/recipe_gemm.hpp"

namespace gs::test {

using gs::cuda::DeviceBuffer;
using gs::cuda::QuantizedOperand;

inline std::vector<uint16_t> to_host_u16(const DeviceBuffer& b) {
  std::vector<uint16_t> h(b.bytes() / 2);
  GS_CUDA(cudaMemcpy(h.data(), b.get(), b.bytes(), cudaMemcpyDeviceToHost));
  return h;
}

// Operand as the GEMM sees it: [outer, K] in double.
inline std::vector<double> bf16_operand(const std::vector<uint16_t>& src, int64_t outer, int64_t k, bool k_major) {
  std::vector<double> out(static_cast<size_t>(outer * k));
  for (int64_t o = 0; o < outer; ++o)
    for (int64_t j = 0; j < k; ++j)
      out[static_cast<size_t>(o * k + j)] =
          gs::nf::bf16_to_float(src[static_cast<size_t>(k_major ? o * k + j : j * outer + o)]);
  return out;
}

inline std::vector<double> dequantize(const QuantizedOperand& q) {
  const int64_t outer = q.outer(), k = q.k();
  const auto data = q.data_host();
  const auto sc = q.scales_host();
  const gs::nf::Fp8 kind = q.recipe().format == ElemFormat::E5M2 ? gs::nf::Fp8::E5M2 : gs::nf::Fp8::E4M3;
  const int64_t kb_count = (k + 127) / 128, l4 = (kb_count + 3) / 4 * 4;
  std::vector<double> out(static_cast<size_t>(outer * k));
  for (int64_t o = 0; o < outer; ++o)
    for (int64_t j = 0; j < k; ++j) {
      double s = 0;
      switch (q.recipe().scaling) {
        case Scaling::TensorCurrent:
        case Scaling::TensorDelayed: s = sc[0]; break;
        case Scaling::Block1x128: s = sc[static_cast<size_t>((j / 128) * outer + o)]; break;          // VEC128
        case Scaling::Block128x128: s = sc[static_cast<size_t>((o / 128) * l4 + j / 128)]; break;    // BLK128x128
        default: ADD_FAILURE() << "unexpected scaling"; return out;
      }
      out[static_cast<size_t>(o * k + j)] = gs::nf::decode_fp8(data[static_cast<size_t>(o * k + j)], kind) * s;
    }
  return out;
}

// C[m,n] = sum_k L[m,k] R[n,k]
inline std::vector<double> ref_gemm(const std::vector<double>& l, const std::vector<double>& r, int64_t m, int64_t n, int64_t k) {
  std::vector<double> c(static_cast<size_t>(m * n));
  for (int64_t i = 0; i < m; ++i)
    for (int64_t j = 0; j < n; ++j) {
      double acc = 0;
      const double* a = &l[static_cast<size_t>(i * k)];
      const double* b = &r[static_cast<size_t>(j * k)];
      for (int64_t t = 0; t < k; ++t) acc += a[t] * b[t];
      c[static_cast<size_t>(i * n + j)] = acc;
    }
  return c;
}

inline double rel_frobenius(const std::vector<double>& x, const std::vector<double>& ref) {
  double num = 0, den = 0;
  for (size_t i = 0; i < x.size(); ++i) {
    if (!std::isfinite(x[i])) return INFINITY;
    num += (x[i] - ref[i]) * (x[i] - ref[i]);
    den += ref[i] * ref[i];
  }
  return std::sqrt(num / den);
}

}  // namespace gs::test
