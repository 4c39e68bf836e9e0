// quant_bandwidth: bandwidth of the BF16 -> FP8 quantization kernels against the device's own
// device-to-device cudaMemcpy bandwidth.
//
//   build/quant_bandwidth [--json FILE] [--iters N] [--warmup N] [--gpu-warmup SECONDS]
//
// Bytes moved = BF16 bytes read + FP8 bytes written + scale bytes (amax: its read only; the dual
// variants " D " write both copies, so 2 + 2 bytes per element); the
// copy counts read + write bytes too. A kernel passes at >= 85% of the copy bandwidth. The exit
// code is 0 whatever the ratios (it is a report); it is non-zero only on a CUDA error or bad
// arguments.
//
// Timing method:
//  * GPU warm-up first: --gpu-warmup seconds (default 2) of back-to-back 256 MiB device copies,
//    so that the clocks have settled before the first number (the first shape used to be
//    measured on a cold GPU).
//  * Per kernel: --warmup untimed calls (default 10, and at least 50 ms of calls), then --iters (default 100, at least 50)
//    event-timed calls; the median is reported (the minimum goes to the JSON).
//  * Each timed call is preceded by a ~40 us one-warp spin kernel on the same stream, so the
//    host has enqueued the start event, the call and the end event before the GPU reaches them:
//    the events bracket the device time of the call (its GPU-side launch included) and not the
//    host's launch latency, which in a training step overlaps earlier kernels. The copy
//    reference is timed the same way.
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <functional>
#include <string>
#include <vector>

#include "cuda/common/cuda_check.hpp"
#include "cuda/quant/quantize.cuh"
#include "cuda/quant/quantize_multi.cuh"

namespace {

using gs::cuda::Fp8Kind;
constexpr double kTarget = 0.85;
constexpr int kWarmMs = 50;  // least warm-up per kernel (ms of calls)

// Non-zero pseudo-random BF16 data with a few octaves of dynamic range (never zeros: they can
// run faster than real data).
__global__ void fill_bf16(__nv_bfloat16* x, size_t n, uint32_t seed) {
  for (size_t i = size_t(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
       i += size_t(gridDim.x) * blockDim.x) {
    uint32_t h = uint32_t(i) * 0x9E3779B1u ^ seed ^ uint32_t(i >> 32) * 0x85EBCA77u;
    h ^= h >> 15;
    h *= 0x2C1B3C6Du;
    h ^= h >> 12;
    h *= 0x297A2D39u;
    h ^= h >> 15;
    const float u = (float(h & 0xffffffu) + 0.5f) * (1.f / 16777216.f);  // (0, 1)
    const float sign = (h >> 31) ? -1.f : 1.f;
    const float mag = ldexpf(0.25f + u, int((h >> 24) & 7u) - 4);
    x[i] = __float2bfloat16(sign * mag);
  }
}

// Busy-waits `ns` nanoseconds of GPU time (one warp): keeps the stream busy while the host
// enqueues the timed region.
__global__ void spin_kernel(long long ns) {
  long long t0, t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t0));
  do {
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  } while (t - t0 < ns);
}

struct Timer {
  cudaEvent_t a, b;
  Timer() {
    GS_CUDA(cudaEventCreate(&a));
    GS_CUDA(cudaEventCreate(&b));
  }
  ~Timer() {
    cudaEventDestroy(a);
    cudaEventDestroy(b);
  }
  // Median and minimum milliseconds of `iters` event-timed calls after `warmup` calls.
  std::pair<double, double> run(const std::function<void()>& fn, cudaStream_t s, int warmup,
                                int iters) {
    // Warm-up: `warmup` calls, and at least kWarmMs of them. On a buffer just allocated where a
    // few GB had been allocated and freed before, a kernel's first ~100 calls can run well below
    // its steady rate (bench/amax_probe.cu --churn: the multi-tensor amax read 0.77 of copy
    // bandwidth measured first and 0.90 measured again later, same buffers); a training step
    // reuses its buffers, so the steady rate is the one to report.
    const auto t0 = std::chrono::steady_clock::now();
    for (int i = 0; i < warmup || std::chrono::steady_clock::now() - t0 < std::chrono::milliseconds(kWarmMs); ++i) {
      fn();
      if (i % 16 == 15) GS_CUDA(cudaStreamSynchronize(s));
    }
    GS_CUDA(cudaStreamSynchronize(s));
    std::vector<double> ms(iters);
    for (int i = 0; i < iters; ++i) {
      spin_kernel<<<1, 32, 0, s>>>(40000);
      GS_CUDA_LAUNCH();
      GS_CUDA(cudaEventRecord(a, s));
      fn();
      GS_CUDA(cudaEventRecord(b, s));
      GS_CUDA(cudaEventSynchronize(b));
      float t = 0.f;
      GS_CUDA(cudaEventElapsedTime(&t, a, b));
      ms[i] = t;
    }
    std::sort(ms.begin(), ms.end());
    const double med = iters % 2 ? ms[iters / 2] : 0.5 * (ms[iters / 2 - 1] + ms[iters / 2]);
    return {med, ms.front()};
  }
};

struct Row {
  std::string kernel;
  int rows = 0, cols = 0;
  double bytes = 0, ms = 0, min_ms = 0, gbps = 0, ratio = 0;
  bool counted = true;  // part of the "N of M" summary
};

std::string json_escape(const std::string& s) {
  std::string o;
  for (char c : s) {
    if (c == '"' || c == '\\') o += '\\';
    o += c;
  }
  return o;
}

int usage(const char* argv0, int rc) {
  std::fprintf(rc ? stderr : stdout,
               "usage: %s [--json FILE] [--iters N] [--warmup N] [--gpu-warmup SECONDS] [--grouped-only]\n"
               "Measures D2D cudaMemcpy bandwidth, then every FP8 quantization kernel on the\n"
               "transformer shapes, and reports GB/s and the ratio to the copy bandwidth.\n"
               "Defaults: --iters 100 (min 50, median reported), --warmup 10 calls,\n"
               "--gpu-warmup 2 s of back-to-back copies before anything is measured.\n",
               argv0);
  return rc;
}

}  // namespace

int main(int argc, char** argv) try {
  std::string json_path;
  int iters = 100, warmup = 10;
  double gpu_warmup_s = 2.0;
  bool grouped_only = false;  // --grouped-only: the multi-tensor launches alone
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--json" && i + 1 < argc) {
      json_path = argv[++i];
    } else if (a == "--iters" && i + 1 < argc) {
      iters = std::max(50, std::atoi(argv[++i]));
    } else if (a == "--warmup" && i + 1 < argc) {
      warmup = std::max(0, std::atoi(argv[++i]));
    } else if (a == "--gpu-warmup" && i + 1 < argc) {
      gpu_warmup_s = std::max(0.0, std::atof(argv[++i]));
    } else if (a == "--grouped-only") {
      grouped_only = true;
    } else if (a == "-h" || a == "--help") {
      return usage(argv[0], 0);
    } else {
      return usage(argv[0], 2);
    }
  }

  int dev = 0;
  GS_CUDA(cudaGetDevice(&dev));
  cudaDeviceProp prop{};
  GS_CUDA(cudaGetDeviceProperties(&prop, dev));
  std::printf("device: %s (sm_%d%d, %d SMs, L2 %d MiB)\n", prop.name, prop.major, prop.minor,
              prop.multiProcessorCount, prop.l2CacheSize >> 20);
  cudaStream_t s;
  GS_CUDA(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  Timer timer;

  // ---- copy bandwidth: 1 GiB device-to-device, read + write bytes ----
  double copy_gbps = 0, copy_ms = 0;
  const size_t copy_bytes = size_t(1) << 30;
  {
    void *src = nullptr, *dst = nullptr;
    GS_CUDA(cudaMalloc(&src, copy_bytes));
    GS_CUDA(cudaMalloc(&dst, copy_bytes));
    GS_CUDA(cudaMemsetAsync(src, 0x3c, copy_bytes, s));
    // GPU warm-up: back-to-back 256 MiB copies for gpu_warmup_s seconds (clocks settle).
    {
      const auto t0 = std::chrono::steady_clock::now();
      int batches = 0;
      while (std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() <
             gpu_warmup_s) {
        for (int j = 0; j < 16; ++j)
          GS_CUDA(cudaMemcpyAsync(static_cast<char*>(dst) + (size_t(j & 3) << 28),
                                  static_cast<char*>(src) + (size_t(j & 3) << 28),
                                  size_t(1) << 28, cudaMemcpyDeviceToDevice, s));
        GS_CUDA(cudaStreamSynchronize(s));
        ++batches;
      }
      std::printf("GPU warm-up: %.1f s of back-to-back copies (%d x 4 GiB)\n", gpu_warmup_s,
                  batches);
    }
    auto r = timer.run(
        [&] { GS_CUDA(cudaMemcpyAsync(dst, src, copy_bytes, cudaMemcpyDeviceToDevice, s)); }, s,
        3, iters);
    copy_ms = r.first;
    copy_gbps = 2.0 * double(copy_bytes) / (copy_ms * 1e-3) / 1e9;
    GS_CUDA(cudaFree(src));
    GS_CUDA(cudaFree(dst));
  }
  std::printf("D2D cudaMemcpy: %zu MiB, %.3f ms, %.1f GB/s (read+write); target %.0f%% = %.1f GB/s\n\n",
              copy_bytes >> 20, copy_ms, copy_gbps, kTarget * 100, kTarget * copy_gbps);

  struct Shape {
    int rows, cols;
  };
  const Shape shapes[] = {{15872, 4096}, {15872, 16384}, {4096, 12288}, {16384, 4096}, {8192, 8192}};
  std::vector<Row> rows_out;

  auto measure_as = [&](const std::string& name, const std::string& shape, int r_rows, int r_cols, double bytes,
                        const std::function<void()>& fn, bool counted = true) {
    auto r = timer.run(fn, s, warmup, iters);
    Row row;
    row.kernel = name;
    row.rows = r_rows;
    row.cols = r_cols;
    row.bytes = bytes;
    row.ms = r.first;
    row.min_ms = r.second;
    row.gbps = bytes / (r.first * 1e-3) / 1e9;
    row.ratio = row.gbps / copy_gbps;
    row.counted = counted;
    if (counted)
      std::printf("%-30s %13s %10.1f %10.1f %9.1f %7.3f  %s\n", name.c_str(), shape.c_str(),
                  bytes / 1e6, r.first * 1e3, row.gbps, row.ratio,
                  row.ratio >= kTarget ? "PASS" : "FAIL");
    else
      std::printf("%-30s %13s %10s %10.1f %9s %7s  %s\n", name.c_str(), shape.c_str(), "-",
                  r.first * 1e3, "-", "-", "(latency, not counted)");
    std::fflush(stdout);
    rows_out.push_back(row);
  };

  std::printf("%-30s %13s %10s %10s %9s %7s  %s\n", "kernel", "shape", "MB moved", "median us",
              "GB/s", "ratio", "vs 0.85");
  for (const Shape sh : shapes) {
    if (grouped_only) break;
    const size_t n = size_t(sh.rows) * sh.cols;
    __nv_bfloat16* x = nullptr;
    uint8_t *q = nullptr, *q2 = nullptr;  // q2, sc2: the dual passes' transposed copy
    float *sc = nullptr, *sc2 = nullptr, *amax = nullptr, *hist = nullptr, *scale = nullptr;
    int* pos = nullptr;
    void* ws = nullptr;
    const size_t nscale = size_t(std::max(
        {gs::cuda::block_scale_count_1x128(sh.rows, sh.cols),
         gs::cuda::block_scale_count_1x128(sh.cols, sh.rows),
         gs::cuda::block_scale_count_128x128(sh.rows, sh.cols),
         gs::cuda::block_scale_count_128x128(sh.cols, sh.rows), 1}));
    GS_CUDA(cudaMalloc(&x, n * 2));
    GS_CUDA(cudaMalloc(&q, n));
    GS_CUDA(cudaMalloc(&q2, n));
    GS_CUDA(cudaMalloc(&sc, nscale * 4));
    GS_CUDA(cudaMalloc(&sc2, nscale * 4));
    GS_CUDA(cudaMalloc(&amax, 4));
    GS_CUDA(cudaMalloc(&hist, 1024 * 4));
    GS_CUDA(cudaMalloc(&scale, 4));
    GS_CUDA(cudaMalloc(&pos, 4));
    GS_CUDA(cudaMalloc(&ws, gs::cuda::amax_workspace_bytes(n)));
    fill_bf16<<<prop.multiProcessorCount * 8, 256, 0, s>>>(x, n, 0x1234u + uint32_t(sh.cols));
    GS_CUDA_LAUNCH();
    GS_CUDA(cudaMemsetAsync(hist, 0, 1024 * 4, s));
    GS_CUDA(cudaMemsetAsync(pos, 0, 4, s));
    const float one = 1.f;
    GS_CUDA(cudaMemcpyAsync(scale, &one, 4, cudaMemcpyHostToDevice, s));
    gs::cuda::amax_bf16(x, n, amax, ws, s);  // the current-scaling casts read it
    GS_CUDA(cudaStreamSynchronize(s));

    const std::string shape = std::to_string(sh.rows) + "x" + std::to_string(sh.cols);
    auto measure = [&](const std::string& name, double bytes, const std::function<void()>& fn, bool counted = true) {
      measure_as(name, shape, sh.rows, sh.cols, bytes, fn, counted);
    };

    const double nd = double(n);
    measure("amax_bf16", 2 * nd, [&] { gs::cuda::amax_bf16(x, n, amax, ws, s); });
    for (Fp8Kind k : {Fp8Kind::E4M3, Fp8Kind::E5M2}) {
      const std::string kn = k == Fp8Kind::E4M3 ? "E4M3" : "E5M2";
      for (bool t : {false, true}) {
        const std::string v = std::string(t ? " T " : " N ") + kn;
        measure("cast_fp8_current" + v, 3 * nd + 8, [&] {
          gs::cuda::cast_fp8_current(x, sh.rows, sh.cols, t, k, amax, q, sc, s);
        });
        measure("cast_fp8_delayed" + v, 3 * nd + 12, [&] {
          gs::cuda::cast_fp8_delayed(x, sh.rows, sh.cols, t, k, scale, q, sc, hist, pos, s);
        });
        const int outer = t ? sh.cols : sh.rows, K = t ? sh.rows : sh.cols;
        measure("quantize_block_1x128" + v,
                3 * nd + 4.0 * gs::cuda::block_scale_count_1x128(outer, K), [&] {
                  gs::cuda::quantize_block_1x128(x, sh.rows, sh.cols, t, k, q, sc, s);
                });
        measure("quantize_block_128x128" + v,
                3 * nd + 4.0 * ((outer + 127) / 128) * ((K + 127) / 128), [&] {
                  gs::cuda::quantize_block_128x128(x, sh.rows, sh.cols, t, k, q, sc, s);
                });
      }
    }
    // Dual output (autocast-shared): one read, the rowwise and the transposed copy written.
    for (Fp8Kind k : {Fp8Kind::E4M3, Fp8Kind::E5M2}) {
      const std::string v = std::string(" D ") + (k == Fp8Kind::E4M3 ? "E4M3" : "E5M2");
      measure("cast_fp8_current" + v, 4 * nd + 8, [&] {
        gs::cuda::cast_fp8_current_dual(x, sh.rows, sh.cols, k, amax, q, sc, q2, sc2, s);
      });
      measure("cast_fp8_delayed" + v, 4 * nd + 12, [&] {
        gs::cuda::cast_fp8_delayed_dual(x, sh.rows, sh.cols, k, scale, q, sc, q2, sc2, hist, pos, s);
      });
      measure("quantize_block_1x128" + v,
              4 * nd + 4.0 * (gs::cuda::block_scale_count_1x128(sh.rows, sh.cols) +
                              gs::cuda::block_scale_count_1x128(sh.cols, sh.rows)),
              [&] { gs::cuda::quantize_block_1x128_dual(x, sh.rows, sh.cols, k, q, sc, q2, sc2, s); });
      measure("quantize_block_128x128" + v, 4 * nd + 8.0 * ((sh.rows + 127) / 128) * ((sh.cols + 127) / 128),
              [&] { gs::cuda::quantize_block_128x128_dual(x, sh.rows, sh.cols, k, q, sc, q2, sc2, s); });
    }
    measure("delayed_scale_update (1024)", 0,
            [&] { gs::cuda::delayed_scale_update(hist, 1024, pos, Fp8Kind::E4M3, scale, s); },
            false);
    GS_CUDA(cudaStreamSynchronize(s));
    GS_CUDA(cudaFree(x));
    GS_CUDA(cudaFree(q));
    GS_CUDA(cudaFree(q2));
    GS_CUDA(cudaFree(sc));
    GS_CUDA(cudaFree(sc2));
    GS_CUDA(cudaFree(amax));
    GS_CUDA(cudaFree(hist));
    GS_CUDA(cudaFree(scale));
    GS_CUDA(cudaFree(pos));
    GS_CUDA(cudaFree(ws));
  }

  // ---- grouped expert operands: multi-tensor launches over every expert of a grouped GEMM --------
  // Expert sizes around the mean rows per expert of the model's layout (seeded +-25%, multiples of
  // 16 as FP8 padding makes them): the token buffer (activations, every expert's rows) and the
  // expert weights, each quantized for training mode (dual copies) by one multi-tensor launch.
  struct Grouped {
    const char* name;
    int experts, mean_rows, cols;  // token buffer: experts x ~mean_rows rows of `cols`
    int w_rows, w_cols;            // one expert weight [w_rows, w_cols]
  };
  const Grouped groups[] = {
      {"DeepSeek-V3 EP64 (4 local)", 4, 8192, 7168, 4096, 7168},
      {"DeepSeek-V3 EP8 (32 local)", 32, 1024, 7168, 4096, 7168},
      {"Qwen3-30B-A3B EP8 (16 local)", 16, 2048, 2048, 1536, 2048},
      {"Qwen3-30B-A3B EP1 (128)", 128, 256, 2048, 1536, 2048},
  };
  std::printf("\nGrouped (multi-tensor) launches over expert operands:\n");
  for (const Grouped& gr : groups) {
    uint32_t seed = 0x9e3779b9u ^ uint32_t(gr.experts);
    for (bool weights : {false, true}) {
      std::vector<int> rows(size_t(gr.experts));
      for (int& r : rows) {
        seed = seed * 1664525u + 1013904223u;
        const double f = 0.75 + 0.5 * double(seed >> 8) / double(1u << 24);
        r = weights ? gr.w_rows : std::max(16, int(gr.mean_rows * f) / 16 * 16);
      }
      const int cols = weights ? gr.w_cols : gr.cols;
      size_t total_elems = 0;
      for (int r : rows) total_elems += size_t(r) * size_t(cols);
      __nv_bfloat16* x = nullptr;
      uint8_t *q = nullptr, *q2 = nullptr;
      float *sc = nullptr, *sc2 = nullptr, *amax = nullptr;
      uint8_t* ws = nullptr;
      size_t nscale = 0, nws = 0;
      for (int r : rows) {
        nscale += size_t(std::max({gs::cuda::block_scale_count_1x128(r, cols), gs::cuda::block_scale_count_1x128(cols, r),
                                   gs::cuda::block_scale_count_128x128(r, cols),
                                   gs::cuda::block_scale_count_128x128(cols, r), 1}));
        nws += (gs::cuda::amax_workspace_bytes(size_t(r) * cols) + 15) / 16 * 16;
      }
      GS_CUDA(cudaMalloc(&x, total_elems * 2));
      GS_CUDA(cudaMalloc(&q, total_elems));
      GS_CUDA(cudaMalloc(&q2, total_elems));
      GS_CUDA(cudaMalloc(&sc, nscale * 4));
      GS_CUDA(cudaMalloc(&sc2, nscale * 4));
      GS_CUDA(cudaMalloc(&amax, rows.size() * 4));
      GS_CUDA(cudaMalloc(&ws, nws));
      fill_bf16<<<prop.multiProcessorCount * 8, 256, 0, s>>>(x, total_elems, 0x777u + uint32_t(cols));
      GS_CUDA_LAUNCH();
      std::vector<gs::cuda::QuantTensor> ts;
      size_t off = 0, soff = 0, woff = 0;
      for (size_t e = 0; e < rows.size(); ++e) {
        gs::cuda::QuantTensor t;
        t.x = x + off;
        t.rows = rows[e];
        t.cols = cols;
        t.q = q2 + off;  // transposed copy
        t.q_row = q + off;
        t.scale_inv = sc2 + soff;
        t.scale_row = sc + soff;
        t.amax = amax + e;
        t.amax_ws = ws + woff;
        ts.push_back(t);
        off += size_t(rows[e]) * cols;
        soff += size_t(std::max({gs::cuda::block_scale_count_1x128(rows[e], cols),
                                 gs::cuda::block_scale_count_1x128(cols, rows[e]),
                                 gs::cuda::block_scale_count_128x128(rows[e], cols),
                                 gs::cuda::block_scale_count_128x128(cols, rows[e]), 1}));
        woff += (gs::cuda::amax_workspace_bytes(size_t(rows[e]) * cols) + 15) / 16 * 16;
      }
      const gs::cuda::MultiQuant m_amax(gs::cuda::MultiQuantOp::Amax, Fp8Kind::E4M3, false, true, ts);
      const gs::cuda::MultiQuant m_cur(gs::cuda::MultiQuantOp::CastCurrent, Fp8Kind::E4M3, true, true, ts);
      const gs::cuda::MultiQuant m_blk(weights ? gs::cuda::MultiQuantOp::Block128x128 : gs::cuda::MultiQuantOp::Block1x128,
                                       Fp8Kind::E4M3, true, true, ts);
      m_amax.launch(s);
      GS_CUDA(cudaStreamSynchronize(s));
      const double nd = double(total_elems);
      char label[96];
      std::snprintf(label, sizeof label, "%s %s x%d", gr.name, weights ? "weights" : "tokens", gr.experts);
      std::printf("%s: %zu MiB of BF16 in %d tensors\n", label, (total_elems * 2) >> 20, gr.experts);
      const std::string tag = std::string(weights ? " W" : " X") + " x" + std::to_string(gr.experts);
      const std::string gshape = std::to_string(total_elems / size_t(cols)) + "x" + std::to_string(cols);
      auto measure = [&](const std::string& name, double bytes, const std::function<void()>& fn) {
        measure_as(name, gshape, int(total_elems / size_t(cols)), cols, bytes, fn, true);
      };
      measure("multi amax" + tag, 2 * nd, [&] { m_amax.launch(s); });
      if (grouped_only) {  // reference, not counted: the same bytes as one tensor (one sweep of the grid)
        void* ws1 = nullptr;
        GS_CUDA(cudaMalloc(&ws1, gs::cuda::amax_workspace_bytes(total_elems)));
        measure_as("ref amax one tensor" + tag, gshape, int(total_elems / size_t(cols)), cols, 2 * nd,
                   [&] { gs::cuda::amax_bf16(x, total_elems, amax, ws1, s); }, false);
        GS_CUDA(cudaStreamSynchronize(s));
        GS_CUDA(cudaFree(ws1));
      }
      measure("multi cast_fp8_current D" + tag, 4 * nd, [&] { m_cur.launch(s); });
      measure(std::string(weights ? "multi block_128x128 D" : "multi block_1x128 D") + tag, 4 * nd,
              [&] { m_blk.launch(s); });
      GS_CUDA(cudaStreamSynchronize(s));
      for (void* pp : {(void*)x, (void*)q, (void*)q2, (void*)sc, (void*)sc2, (void*)amax, (void*)ws}) GS_CUDA(cudaFree(pp));
    }
  }

  int total = 0, passed = 0;
  double worst = 1e9;
  std::string worst_name;
  for (const Row& r : rows_out)
    if (r.counted) {
      ++total;
      if (r.ratio >= kTarget) ++passed;
      if (r.ratio < worst) {
        worst = r.ratio;
        worst_name = r.kernel + " " + std::to_string(r.rows) + "x" + std::to_string(r.cols);
      }
    }
  std::printf("\ncopy bandwidth %.1f GB/s; worst ratio %.3f (%s)\n", copy_gbps, worst,
              worst_name.c_str());
  std::printf("%d of %d kernels >= 85%% of copy bandwidth\n", passed, total);

  if (!json_path.empty()) {
    FILE* f = std::fopen(json_path.c_str(), "w");
    if (!f) {
      std::fprintf(stderr, "cannot write %s\n", json_path.c_str());
      return 1;
    }
    std::fprintf(f, "{\n  \"schema\": \"gemmscope.quant_bandwidth/1\",\n");
    std::fprintf(f,
                 "  \"device\": {\"name\": \"%s\", \"compute_capability\": \"%d.%d\", "
                 "\"sm_count\": %d},\n",
                 json_escape(prop.name).c_str(), prop.major, prop.minor, prop.multiProcessorCount);
    std::fprintf(f,
                 "  \"timing\": {\"method\": \"cuda-events, launch hidden behind a spin kernel\", "
                 "\"statistic\": \"median\", \"warmup\": %d, \"iters\": %d, "
                 "\"gpu_warmup_s\": %.2f},\n",
                 warmup, iters, gpu_warmup_s);
    std::fprintf(f,
                 "  \"copy\": {\"bytes_moved\": %.0f, \"median_ms\": %.6f, \"gbps\": %.3f},\n",
                 2.0 * double(copy_bytes), copy_ms, copy_gbps);
    std::fprintf(f, "  \"target_ratio\": %.2f,\n  \"results\": [\n", kTarget);
    for (size_t i = 0; i < rows_out.size(); ++i) {
      const Row& r = rows_out[i];
      std::fprintf(f,
                   "    {\"kernel\": \"%s\", \"rows\": %d, \"cols\": %d, \"bytes_moved\": %.0f, "
                   "\"median_ms\": %.6f, \"min_ms\": %.6f, \"gbps\": %.3f, \"ratio\": %.4f, "
                   "\"counted\": %s, \"pass\": %s}%s\n",
                   json_escape(r.kernel).c_str(), r.rows, r.cols, r.bytes, r.ms, r.min_ms,
                   r.gbps, r.ratio, r.counted ? "true" : "false",
                   r.counted && r.ratio >= kTarget ? "true" : "false",
                   i + 1 < rows_out.size() ? "," : "");
    }
    std::fprintf(f, "  ],\n  \"summary\": {\"passed\": %d, \"total\": %d}\n}\n", passed, total);
    std::fclose(f);
    std::printf("wrote %s\n", json_path.c_str());
  }
  GS_CUDA(cudaStreamDestroy(s));
  return 0;
} catch (const std::exception& e) {
  std::fprintf(stderr, "quant_bandwidth: %s\n", e.what());
  return 1;
}
