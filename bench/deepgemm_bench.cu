// deepgemm_bench: TFLOP/s of DeepGEMM's FP8 1x128/128x128 kernels (compiled at run time with
// NVRTC, src/cuda/providers/deepgemm) beside cuBLASLt's FP8 block-scaled GEMM (the project's FP8Block path),
// on the 5B layer (codonfm-5b), Qwen2.5-7B and DeepSeek-V3 expert shapes.
//
//   build/deepgemm_bench [--iters N] [--num-sms N]
//
// Both providers get the same pre-quantized operands (the project's quantizers; scales converted
// once to DeepGEMM's layout, untimed). Compile time is reported separately and never timed.
// Timing: 10 warm-up calls, then N (default 50) calls each bracketed by an event pair; the median
// is reported. Grouped rows: DeepGEMM's one M-grouped contiguous launch vs cuBLASLt called once
// per expert back to back on one stream (the project's serial grouped path).
// Exit code: 0 unless a CUDA error, a refused shape or DeepGEMM is unavailable (then the reason).
#include <cublasLt.h>
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "cuda/common/cuda_check.hpp"
#include "cuda/providers/deepgemm/deepgemm_layouts.cuh"
#include "cuda/providers/deepgemm/deepgemm_runtime.hpp"
#include "cuda/common/device_buffer.hpp"
#include "cuda/common/fill.cuh"
#include "cuda/providers/cublaslt/gemm_lt.hpp"
#include "cuda/providers/cublaslt/recipe_gemm.hpp"

namespace {

using gs::cuda::DeviceBuffer;
using gs::cuda::QuantizedOperand;

struct Shape {
  const char* model;
  const char* name;
  int groups;  // 1: dense
  int m, n, k; // grouped: m per expert (aligned to 128), n and k per expert
};

double median_ms(const std::function<void()>& fn, int iters) {
  for (int i = 0; i < 10; ++i) fn();
  GS_CUDA(cudaDeviceSynchronize());
  std::vector<cudaEvent_t> ev(static_cast<size_t>(2 * iters));
  for (auto& e : ev) GS_CUDA(cudaEventCreate(&e));
  for (int i = 0; i < iters; ++i) {
    GS_CUDA(cudaEventRecord(ev[static_cast<size_t>(2 * i)], 0));
    fn();
    GS_CUDA(cudaEventRecord(ev[static_cast<size_t>(2 * i + 1)], 0));
  }
  GS_CUDA(cudaDeviceSynchronize());
  std::vector<float> ms(static_cast<size_t>(iters));
  for (int i = 0; i < iters; ++i)
    GS_CUDA(cudaEventElapsedTime(&ms[static_cast<size_t>(i)], ev[static_cast<size_t>(2 * i)], ev[static_cast<size_t>(2 * i + 1)]));
  for (auto& e : ev) cudaEventDestroy(e);
  std::sort(ms.begin(), ms.end());
  return ms[ms.size() / 2];
}

gs::OperandRecipe fp8(gs::Scaling s) {
  gs::OperandRecipe r;
  r.format = gs::ElemFormat::E4M3;
  r.scaling = s;
  return r;
}

}  // namespace

int main(int argc, char** argv) {
  int iters = 50, num_sms = 0;
  for (int i = 1; i < argc; ++i) {
    if (!std::strcmp(argv[i], "--iters") && i + 1 < argc) iters = std::max(5, std::atoi(argv[++i]));
    else if (!std::strcmp(argv[i], "--num-sms") && i + 1 < argc) num_sms = std::atoi(argv[++i]);
    else { std::fprintf(stderr, "usage: deepgemm_bench [--iters N] [--num-sms N]\n"); return 2; }
  }
  try {
    GS_CUDA(cudaFree(nullptr));
    auto& rt = gs::dg::Runtime::get();
    if (auto why = rt.unavailable_reason(); !why.empty()) { std::fprintf(stderr, "%s\n", why.c_str()); return 2; }
    rt.set_num_sms(num_sms);
    cudaDeviceProp prop{};
    GS_CUDA(cudaGetDeviceProperties(&prop, 0));
    std::printf("device: %s, %d SMs (DeepGEMM uses %d); cache: %s\n", prop.name, prop.multiProcessorCount, rt.num_sms(),
                rt.cache().enabled() ? rt.cache().dir().c_str() : "(disabled)");
    cublasLtHandle_t lt = nullptr;
    if (cublasLtCreate(&lt) != CUBLAS_STATUS_SUCCESS) { std::fprintf(stderr, "cublasLtCreate failed\n"); return 1; }
    DeviceBuffer ws(32u << 20);
    const int tokens5b = 31 * 512, tq = 8192;
    const std::vector<Shape> shapes = {
        {"codonfm-5b", "QKV", 1, tokens5b, 3 * 4096, 4096},
        {"codonfm-5b", "proj", 1, tokens5b, 4096, 4096},
        {"codonfm-5b", "fc1", 1, tokens5b, 16384, 4096},
        {"codonfm-5b", "fc2", 1, tokens5b, 4096, 16384},
        {"qwen2.5-7b", "QKV", 1, tq, 3584 + 2 * 512, 3584},
        {"qwen2.5-7b", "o_proj", 1, tq, 3584, 3584},
        {"qwen2.5-7b", "gate_up", 1, tq, 2 * 18944, 3584},
        {"qwen2.5-7b", "down", 1, tq, 3584, 18944},
        {"deepseek-v3", "expert gate_up (dense, 4096 tok)", 1, 4096, 4096, 7168},
        {"deepseek-v3", "expert down (dense, 4096 tok)", 1, 4096, 7168, 2048},
        {"deepseek-v3", "4 experts gate_up, 8192 rows each", 4, 8192, 4096, 7168},
        {"deepseek-v3", "4 experts down, 8192 rows each", 4, 8192, 7168, 2048},
        {"deepseek-v3", "8 experts gate_up, 4096 rows each", 8, 4096, 4096, 7168},
        {"deepseek-v3", "8 experts down, 4096 rows each", 8, 4096, 7168, 2048},
    };
    std::printf("%-12s %-36s %6s %6s %6s %6s | %12s %9s | %12s | %s\n", "model", "GEMM", "groups", "M", "N", "K",
                "DeepGEMM TF/s", "compile s", "cuBLASLt TF/s", "DeepGEMM config");
    gs::RecipeOptions opts;
    for (const Shape& s : shapes) {
      const int m_total = s.m * s.groups;
      DeviceBuffer a_src(static_cast<size_t>(m_total) * s.k * 2), b_src(static_cast<size_t>(s.groups) * s.n * s.k * 2);
      gs::cuda::fill_normal_bf16(a_src.get<__nv_bfloat16>(), static_cast<size_t>(m_total) * s.k, 1, 1.0f, 0);
      gs::cuda::fill_normal_bf16(b_src.get<__nv_bfloat16>(), static_cast<size_t>(s.groups) * s.n * s.k, 2, 0.02f, 0);
      QuantizedOperand qa(fp8(gs::Scaling::Block1x128), a_src.get<__nv_bfloat16>(), m_total, s.k, true, opts);
      QuantizedOperand qb(fp8(gs::Scaling::Block128x128), b_src.get<__nv_bfloat16>(), static_cast<int64_t>(s.groups) * s.n, s.k, true, opts);
      qa.quantize(0);
      qb.quantize(0);
      DeviceBuffer sfa(static_cast<size_t>(gs::dg::scales_1x128_deepgemm_count(m_total, s.k)) * 4);
      DeviceBuffer sfb(static_cast<size_t>(gs::dg::scales_128x128_deepgemm_count(s.groups * s.n, s.k, 1)) * 4);
      gs::dg::scales_1x128_to_deepgemm(static_cast<const float*>(qa.lt().scale), m_total, s.k, sfa.get<float>(), 0);
      gs::dg::scales_128x128_to_deepgemm(static_cast<const float*>(qb.lt().scale), s.groups * s.n, s.k, 1, 0, sfb.get<float>(), 0);
      DeviceBuffer d(static_cast<size_t>(m_total) * s.n * 2);
      DeviceBuffer idx;
      gs::dg::Problem p;
      p.m = m_total; p.n = s.n; p.k = s.k;
      if (s.groups > 1) {
        std::vector<int> h(static_cast<size_t>(m_total));
        for (int r = 0; r < m_total; ++r) h[static_cast<size_t>(r)] = r / s.m;
        idx = DeviceBuffer(h.size() * 4);
        GS_CUDA(cudaMemcpy(idx.get(), h.data(), idx.bytes(), cudaMemcpyHostToDevice));
        p.layout = gs::dg::Layout::MGroupedContiguous;
        p.num_groups = s.groups;
      }
      gs::dg::PrepareInfo info;
      const auto& kern = rt.prepare(p, &info);  // compile or cache load: untimed
      gs::dg::DenseArgs args;
      args.a = qa.lt().data; args.sfa = sfa.get<float>();
      args.b = qb.lt().data; args.sfb = sfb.get<float>();
      args.d = d.get(); args.m_indices = s.groups > 1 ? idx.get<int>() : nullptr;
      const double dg_ms = median_ms([&] { rt.launch_dense(kern, args, m_total, 0); }, iters);
      // cuBLASLt: one call per expert (dense: one call), same operands and scales.
      std::vector<std::unique_ptr<gs::cuda::LtMatmul>> mms;
      std::string lt_note;
      try {
        for (int g = 0; g < s.groups; ++g) {
          gs::cuda::LtProblem lp;
          lp.m = s.m; lp.n = s.n; lp.k = s.k;
          lp.l = qa.lt();
          lp.r = qb.lt();
          lp.l.data = static_cast<const uint8_t*>(qa.lt().data) + static_cast<size_t>(g) * s.m * s.k;
          lp.r.data = static_cast<const uint8_t*>(qb.lt().data) + static_cast<size_t>(g) * s.n * s.k;
          // Per-expert scale slices: 1x128 scales are [kb][outer] over all rows, so an expert's
          // slice is not contiguous; cuBLASLt is given the dense layout only when groups == 1.
          if (s.groups > 1) {
            lt_note = "per-expert (operands of expert 0 reused)";
            lp.l.data = qa.lt().data;
            lp.r.data = qb.lt().data;
          }
          lp.c = static_cast<uint8_t*>(d.get()) + static_cast<size_t>(g) * s.m * s.n * 2;
          lp.sm_count = num_sms;
          mms.push_back(std::make_unique<gs::cuda::LtMatmul>(lt, lp, ws.get(), ws.bytes()));
        }
      } catch (const std::exception& e) {
        lt_note = e.what();
        mms.clear();
      }
      double lt_ms = 0;
      if (!mms.empty()) lt_ms = median_ms([&] { for (auto& mm : mms) mm->run(0); }, iters);
      const double flops = 2.0 * m_total * static_cast<double>(s.n) * s.k;
      std::printf("%-12s %-36s %6d %6d %6d %6d | %12.0f %9.2f | %12s | %s%s %s\n", s.model, s.name, s.groups, m_total, s.n, s.k,
                  flops / dg_ms / 1e9, info.compile_seconds,
                  mms.empty() ? "n/a" : std::to_string(static_cast<int>(flops / lt_ms / 1e9)).c_str(),
                  info.config.describe().c_str(), info.cache_hit ? " (cache hit)" : "", lt_note.c_str());
    }
    cublasLtDestroy(lt);
    std::printf("NVRTC compilations this run: %d\n", rt.compiles());
  } catch (const std::exception& e) {
    std::fprintf(stderr, "deepgemm_bench: %s\n", e.what());
    return 1;
  }
  return 0;
}
