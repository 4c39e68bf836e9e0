// amax_probe: where does the multi-tensor amax lose bandwidth against one sweep over the same bytes?
//
//   build/amax_probe
//
// Diagnostic for docs/quantization.md ("Multi-tensor launches"). Over expert token buffers of
// quant_bandwidth's grouped rows it times, with quant_bandwidth's method (a spin kernel before each
// event-timed call, median of 100):
//   lib-multi    MultiQuant(Amax): per-tensor shares of one wave + per-tensor final (PDL)
//   lib-single   amax_bf16 over the whole buffer as one tensor (the reference sweep)
//   lib-each     amax_bf16 once per tensor, back to back
//   shares       the per-tensor shares' partial pass alone (no final pass)
//   interleave   the same shares, blocks of the tensors interleaved round-robin in the grid
//   flat         one grid-stride sweep over the tensors' chunks laid end to end (virtual index),
//                each thread tracking which tensor its chunk is in; per-tensor partials + final
// Ratios are GB/s of the BF16 read over the D2D copy bandwidth (read + write), as quant_bandwidth.
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <functional>
#include <string>
#include <vector>

#include "cuda/common/cuda_check.hpp"
#include "cuda/quant/quantize.cuh"
#include "cuda/quant/quantize_kernels.cuh"
#include "cuda/quant/quantize_multi.cuh"

namespace {

using namespace gs::cuda::qk;

__global__ void fill(__nv_bfloat16* x, size_t n, uint32_t seed) {
  for (size_t i = size_t(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += size_t(gridDim.x) * blockDim.x) {
    uint32_t h = uint32_t(i) * 0x9E3779B1u ^ seed;
    h ^= h >> 15;
    h *= 0x2C1B3C6Du;
    h ^= h >> 13;
    x[i] = __float2bfloat16(ldexpf(0.25f + float(h & 0xffffu) / 65536.f, int((h >> 24) & 7u) - 4) *
                            ((h >> 31) ? -1.f : 1.f));
  }
}

__global__ void spin(long long ns) {
  long long t0, t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t0));
  do asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  while (t - t0 < ns);
}

struct Share {
  const __nv_bfloat16* x;
  size_t n;
  uint32_t* partial;
  unsigned blocks;
};

// One block per (tensor, index) entry of the table.
__global__ void __launch_bounds__(kAmaxThreads) shares_kernel(const Share* sh, const int2* table) {
  const int2 e = table[blockIdx.x];
  const Share s = sh[e.x];
  amax_partial_body(s.x, s.n, s.partial, unsigned(e.y), s.blocks);
}

__global__ void __launch_bounds__(kFinalThreads) shares_final(const Share* sh, float* amax) {
  const Share s = sh[blockIdx.x];
  amax_final_body(s.partial, int(s.blocks), amax + blockIdx.x, 0, 1);
}

constexpr int kMaxSeg = 256;
struct Seg {
  const uint4* base;
  long long start, end;  // 16-byte chunks in the virtual index
};

// Flat sweep: chunk v of the virtual index lies in tensor t with start[t] <= v < end[t].
__global__ void __launch_bounds__(kAmaxThreads) flat_kernel(const Seg* segs, int nseg, long long total,
                                                             uint32_t* partial) {
  __shared__ long long s_start[kMaxSeg], s_end[kMaxSeg];
  __shared__ const uint4* s_base[kMaxSeg];
  __shared__ uint32_t s_max[kMaxSeg];
  for (int i = threadIdx.x; i < nseg; i += blockDim.x) {
    s_start[i] = segs[i].start;
    s_end[i] = segs[i].end;
    s_base[i] = segs[i].base;
    s_max[i] = 0;
  }
  __syncthreads();
  const long long nthr = (long long)gridDim.x * blockDim.x;
  long long v = (long long)blockIdx.x * blockDim.x + threadIdx.x;
  int t = 0;
  {
    int lo = 0, hi = nseg - 1;  // first tensor whose end > v
    while (lo < hi) {
      const int mid = (lo + hi) / 2;
      if (s_end[mid] > v) hi = mid; else lo = mid + 1;
    }
    t = lo;
  }
  int cur = t;
  uint32_t acc = 0;
  auto locate = [&](long long vk) {
    while (vk >= s_end[t]) ++t;
    return s_base[t] + (vk - s_start[t]);
  };
  auto take = [&](int tk, uint4 val) {
    if (tk != cur) {
      atomicMax(&s_max[cur], fold_to_f32bits(acc));
      acc = 0;
      cur = tk;
    }
    acc = absmax_acc(acc, val);
  };
  for (; v + 3 * nthr < total; v += 4 * nthr) {
    const uint4* p0 = locate(v);
    const int t0 = t;
    const uint4* p1 = locate(v + nthr);
    const int t1 = t;
    const uint4* p2 = locate(v + 2 * nthr);
    const int t2 = t;
    const uint4* p3 = locate(v + 3 * nthr);
    const int t3 = t;
    const uint4 a = ldg16(p0), b = ldg16(p1), c = ldg16(p2), d = ldg16(p3);
    take(t0, a);
    take(t1, b);
    take(t2, c);
    take(t3, d);
  }
  for (; v < total; v += nthr) {
    const uint4* p = locate(v);
    take(t, ldg16(p));
  }
  atomicMax(&s_max[cur], fold_to_f32bits(acc));
  __syncthreads();
  for (int i = threadIdx.x; i < nseg; i += blockDim.x) partial[size_t(i) * gridDim.x + blockIdx.x] = s_max[i];
}

__global__ void __launch_bounds__(kFinalThreads) flat_final(const uint32_t* partial, int np, float* amax) {
  amax_final_body(partial + size_t(blockIdx.x) * np, np, amax + blockIdx.x, 0, 1);
}

// Flat sweep, boundaries in registers: a thread's chunks advance by the grid's stride, so its
// tensor index only grows; shared memory is read only when a chunk crosses into the next tensor.
__global__ void __launch_bounds__(kAmaxThreads) flat2_kernel(const Seg* segs, int nseg, long long total,
                                                              uint32_t* partial) {
  __shared__ Seg s_seg[kMaxSeg];
  __shared__ uint32_t s_max[kMaxSeg];
  for (int i = threadIdx.x; i < nseg; i += blockDim.x) {
    s_seg[i] = segs[i];
    s_max[i] = 0;
  }
  __syncthreads();
  const long long nthr = (long long)gridDim.x * blockDim.x;
  long long v = (long long)blockIdx.x * blockDim.x + threadIdx.x;
  int t = 0;
  while (t + 1 < nseg && v >= s_seg[t].end) ++t;
  long long start = s_seg[t].start, end = s_seg[t].end;
  const uint4* base = s_seg[t].base;
  int cur = t;
  uint32_t acc = 0;
  auto at = [&](long long vk) {
    if (vk >= end) {
      do ++t; while (vk >= s_seg[t].end);
      start = s_seg[t].start;
      end = s_seg[t].end;
      base = s_seg[t].base;
    }
    return base + (vk - start);
  };
  auto take = [&](int tk, uint4 val) {
    if (tk != cur) {
      atomicMax(&s_max[cur], fold_to_f32bits(acc));
      acc = 0;
      cur = tk;
    }
    acc = absmax_acc(acc, val);
  };
  for (; v + 3 * nthr < total; v += 4 * nthr) {
    const uint4 a = ldg16(at(v));
    const int t0 = t;
    const uint4 b = ldg16(at(v + nthr));
    const int t1 = t;
    const uint4 c = ldg16(at(v + 2 * nthr));
    const int t2 = t;
    const uint4 d = ldg16(at(v + 3 * nthr));
    const int t3 = t;
    take(t0, a);
    take(t1, b);
    take(t2, c);
    take(t3, d);
  }
  for (; v < total; v += nthr) {
    const uint4 a = ldg16(at(v));
    take(t, a);
  }
  atomicMax(&s_max[cur], fold_to_f32bits(acc));
  __syncthreads();
  for (int i = threadIdx.x; i < nseg; i += blockDim.x) partial[size_t(i) * gridDim.x + blockIdx.x] = s_max[i];
}

double time_ms(const std::function<void()>& fn, cudaStream_t s) {
  cudaEvent_t a, b;
  GS_CUDA(cudaEventCreate(&a));
  GS_CUDA(cudaEventCreate(&b));
  for (int i = 0; i < 10; ++i) fn();
  GS_CUDA(cudaStreamSynchronize(s));
  std::vector<double> ms(100);
  for (double& m : ms) {
    spin<<<1, 32, 0, s>>>(40000);
    GS_CUDA(cudaEventRecord(a, s));
    fn();
    GS_CUDA(cudaEventRecord(b, s));
    GS_CUDA(cudaEventSynchronize(b));
    float t = 0;
    GS_CUDA(cudaEventElapsedTime(&t, a, b));
    m = t;
  }
  std::sort(ms.begin(), ms.end());
  cudaEventDestroy(a);
  cudaEventDestroy(b);
  return 0.5 * (ms[49] + ms[50]);
}

int blocks_per_sm(const void* k, int threads) {
  int n = 0;
  GS_CUDA(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&n, k, threads, 0));
  return n;
}

}  // namespace

// Allocates, touches and frees `mb` MiB in quant_bandwidth's pattern of earlier groups (a large
// buffer and two halves), so the next allocation lands where a long benchmark's would.
void churn(size_t mb, cudaStream_t s) {
  if (!mb) return;
  std::vector<void*> ps;
  for (size_t part : {mb / 2, mb / 4, mb / 4}) {
    void* p = nullptr;
    GS_CUDA(cudaMalloc(&p, part << 20));
    GS_CUDA(cudaMemsetAsync(p, 1, part << 20, s));
    ps.push_back(p);
  }
  GS_CUDA(cudaStreamSynchronize(s));
  for (void* p : ps) GS_CUDA(cudaFree(p));
}

int main(int argc, char** argv) {
  size_t churn_mb = 0;
  for (int i = 1; i + 1 < argc; ++i)
    if (std::string(argv[i]) == "--churn") churn_mb = std::stoul(argv[i + 1]);
  cudaStream_t s;
  GS_CUDA(cudaStreamCreate(&s));
  cudaDeviceProp prop{};
  GS_CUDA(cudaGetDeviceProperties(&prop, 0));
  const int sms = prop.multiProcessorCount;
  const int wave = blocks_per_sm(reinterpret_cast<const void*>(shares_kernel), kAmaxThreads) * sms;
  const int fwave = blocks_per_sm(reinterpret_cast<const void*>(flat_kernel), kAmaxThreads) * sms;
  const int f2wave = blocks_per_sm(reinterpret_cast<const void*>(flat2_kernel), kAmaxThreads) * sms;
  std::printf("device: %s, %d SMs; amax wave %d blocks (flat kernel %d, flat2 %d); churn %zu MiB before each case\n",
              prop.name, sms, wave, fwave, f2wave, churn_mb);

  // Copy bandwidth (1 GiB D2D, read + write bytes).
  double copy_gbps = 0;
  {
    const size_t bytes = size_t(1) << 30;
    void *a = nullptr, *b = nullptr;
    GS_CUDA(cudaMalloc(&a, bytes));
    GS_CUDA(cudaMalloc(&b, bytes));
    for (int i = 0; i < 400; ++i) GS_CUDA(cudaMemcpyAsync(b, a, bytes, cudaMemcpyDeviceToDevice, s));  // ~2 s warm-up
    const double ms = time_ms([&] { GS_CUDA(cudaMemcpyAsync(b, a, bytes, cudaMemcpyDeviceToDevice, s)); }, s);
    copy_gbps = 2.0 * bytes / ms / 1e6;
    GS_CUDA(cudaFree(a));
    GS_CUDA(cudaFree(b));
  }
  std::printf("copy %.1f GB/s\n", copy_gbps);

  struct Case {
    const char* name;
    int experts, mean_rows, cols;
    bool equal;
  };
  const Case cases[] = {
      {"Qwen3 EP8 X x16 (quant_bandwidth's sizes)", 16, 2048, 2048, false},
      {"Qwen3 EP8 X x16, equal sizes", 16, 2048, 2048, true},
      {"Qwen3 EP1 X x128", 128, 256, 2048, false},
      {"DeepSeek-V3 EP8 X x32", 32, 1024, 7168, false},
      {"x16 of 7168 columns, 134 MB", 16, 580, 7168, false},
  };
  std::printf("| case | MB | lib-multi | lib-single | lib-each | shares | interleave | flat | flat2 | lib-multi again | flat check |\n");
  std::printf("|---|---|---|---|---|---|---|---|---|---|---|\n");
  for (const Case& c : cases) {
    uint32_t seed = 0x9e3779b9u ^ uint32_t(c.experts);
    std::vector<int> rows(size_t(c.experts));
    for (int& r : rows) {
      seed = seed * 1664525u + 1013904223u;
      const double f = 0.75 + 0.5 * double(seed >> 8) / double(1u << 24);
      r = c.equal ? c.mean_rows : std::max(16, int(c.mean_rows * f) / 16 * 16);
    }
    size_t total = 0;
    for (int r : rows) total += size_t(r) * c.cols;
    churn(churn_mb, s);
    __nv_bfloat16* x = nullptr;
    GS_CUDA(cudaMalloc(&x, total * 2));
    fill<<<sms * 8, 256, 0, s>>>(x, total, 0x1234u + uint32_t(c.experts));
    GS_CUDA_LAUNCH();
    const size_t ws_per = 2048 * 4;
    uint8_t* ws = nullptr;
    float* amax = nullptr;
    GS_CUDA(cudaMalloc(&ws, ws_per * rows.size() + size_t(std::max(fwave, f2wave)) * rows.size() * 4 + 4096));
    GS_CUDA(cudaMalloc(&amax, 4 * rows.size() * 4));
    std::vector<gs::cuda::QuantTensor> ts;
    std::vector<Share> sh;
    std::vector<Seg> segs;
    size_t off = 0;
    long long v = 0;
    for (size_t e = 0; e < rows.size(); ++e) {
      gs::cuda::QuantTensor t;
      t.x = x + off;
      t.rows = rows[e];
      t.cols = c.cols;
      t.amax = amax + e;
      t.amax_ws = ws + e * ws_per;
      ts.push_back(t);
      const size_t n = size_t(rows[e]) * c.cols;
      const long long share = std::max<long long>(1, std::llround(double(wave) * double(n) / double(total)));
      sh.push_back(Share{x + off, n, reinterpret_cast<uint32_t*>(ws + e * ws_per), unsigned(share)});
      segs.push_back(Seg{reinterpret_cast<const uint4*>(x + off), v, v + (long long)(n / 8)});
      v += (long long)(n / 8);
      off += n;
    }
    const gs::cuda::MultiQuant multi(gs::cuda::MultiQuantOp::Amax, gs::cuda::Fp8Kind::E4M3, false, true, ts);
    // Tables: tensor-major (as MultiQuant lays them) and interleaved round-robin.
    std::vector<int2> major, inter;
    for (size_t e = 0; e < sh.size(); ++e)
      for (unsigned b = 0; b < sh[e].blocks; ++b) major.push_back(make_int2(int(e), int(b)));
    for (unsigned b = 0;; ++b) {
      bool any = false;
      for (size_t e = 0; e < sh.size(); ++e)
        if (b < sh[e].blocks) {
          inter.push_back(make_int2(int(e), int(b)));
          any = true;
        }
      if (!any) break;
    }
    Share* d_sh = nullptr;
    int2 *d_major = nullptr, *d_inter = nullptr;
    Seg* d_segs = nullptr;
    GS_CUDA(cudaMalloc(&d_sh, sh.size() * sizeof(Share)));
    GS_CUDA(cudaMalloc(&d_major, major.size() * sizeof(int2)));
    GS_CUDA(cudaMalloc(&d_inter, inter.size() * sizeof(int2)));
    GS_CUDA(cudaMalloc(&d_segs, segs.size() * sizeof(Seg)));
    GS_CUDA(cudaMemcpy(d_sh, sh.data(), sh.size() * sizeof(Share), cudaMemcpyHostToDevice));
    GS_CUDA(cudaMemcpy(d_major, major.data(), major.size() * sizeof(int2), cudaMemcpyHostToDevice));
    GS_CUDA(cudaMemcpy(d_inter, inter.data(), inter.size() * sizeof(int2), cudaMemcpyHostToDevice));
    GS_CUDA(cudaMemcpy(d_segs, segs.data(), segs.size() * sizeof(Seg), cudaMemcpyHostToDevice));
    uint32_t* fpart = reinterpret_cast<uint32_t*>(ws + ws_per * rows.size());
    float* amax2 = amax + rows.size();
    const int nseg = int(segs.size());

    auto gbps = [&](double ms) { return double(total) * 2 / ms / 1e6 / copy_gbps; };
    const double t_multi = time_ms([&] { multi.launch(s); }, s);
    const double t_single = time_ms([&] { gs::cuda::amax_bf16(x, total, amax, ws, s); }, s);
    const double t_each = time_ms([&] {
      for (size_t e = 0; e < ts.size(); ++e)
        gs::cuda::amax_bf16(ts[e].x, size_t(ts[e].rows) * ts[e].cols, ts[e].amax, ts[e].amax_ws, s);
    }, s);
    const double t_shares = time_ms([&] { shares_kernel<<<int(major.size()), kAmaxThreads, 0, s>>>(d_sh, d_major); }, s);
    const double t_inter = time_ms([&] {
      shares_kernel<<<int(inter.size()), kAmaxThreads, 0, s>>>(d_sh, d_inter);
      shares_final<<<nseg, kFinalThreads, 0, s>>>(d_sh, amax2);
    }, s);
    const double t_flat = time_ms([&] {
      flat_kernel<<<fwave, kAmaxThreads, 0, s>>>(d_segs, nseg, v, fpart);
      flat_final<<<nseg, kFinalThreads, 0, s>>>(fpart, fwave, amax2);
    }, s);
    const double t_flat2 = time_ms([&] {
      flat2_kernel<<<f2wave, kAmaxThreads, 0, s>>>(d_segs, nseg, v, fpart);
      flat_final<<<nseg, kFinalThreads, 0, s>>>(fpart, f2wave, amax2);
    }, s);
    const double t_multi2 = time_ms([&] { multi.launch(s); }, s);  // again, last: an order effect?
    // Check: flat's and flat2's per-tensor amax equal the library's.
    multi.launch(s);
    GS_CUDA(cudaStreamSynchronize(s));
    std::vector<float> a1(rows.size()), a2(rows.size());
    GS_CUDA(cudaMemcpy(a1.data(), amax, 4 * rows.size(), cudaMemcpyDeviceToHost));
    flat_kernel<<<fwave, kAmaxThreads, 0, s>>>(d_segs, nseg, v, fpart);
    flat_final<<<nseg, kFinalThreads, 0, s>>>(fpart, fwave, amax2);
    GS_CUDA(cudaStreamSynchronize(s));
    GS_CUDA(cudaMemcpy(a2.data(), amax2, 4 * rows.size(), cudaMemcpyDeviceToHost));
    bool same = a1 == a2;
    flat2_kernel<<<f2wave, kAmaxThreads, 0, s>>>(d_segs, nseg, v, fpart);
    flat_final<<<nseg, kFinalThreads, 0, s>>>(fpart, f2wave, amax2);
    GS_CUDA(cudaStreamSynchronize(s));
    GS_CUDA(cudaMemcpy(a2.data(), amax2, 4 * rows.size(), cudaMemcpyDeviceToHost));
    same = same && a1 == a2;
    std::printf("| %s | %.1f | %.1f us %.3f | %.1f us %.3f | %.1f us %.3f | %.1f us %.3f | %.1f us %.3f | %.1f us %.3f | %.1f us %.3f | %.1f us %.3f | %s |\n",
                c.name, double(total) * 2 / 1e6, t_multi * 1e3, gbps(t_multi), t_single * 1e3, gbps(t_single),
                t_each * 1e3, gbps(t_each), t_shares * 1e3, gbps(t_shares), t_inter * 1e3, gbps(t_inter),
                t_flat * 1e3, gbps(t_flat), t_flat2 * 1e3, gbps(t_flat2), t_multi2 * 1e3, gbps(t_multi2), same ? "same" : "DIFFERENT");
    for (void* p : {(void*)x, (void*)ws, (void*)amax, (void*)d_sh, (void*)d_major, (void*)d_inter, (void*)d_segs})
      GS_CUDA(cudaFree(p));
  }
  return 0;
}
