// attention_bench: cuDNN's fused attention (SDPA flash forward and backward, as Transformer Engine
// runs it on Hopper) through gemmscope's backend component (src/cuda/attention/attention_cudnn), timed.
//
//   build/attention_bench --batch B --seq S [--seq-kv S] --heads H [--kv-heads H] [--head-dim D |
//                         --d-qk D --d-v D] [--causal | --no-causal] [--dtype bf16|fp8]
//                         [--iters N] [--warmup N] [--gpu-warmup SECONDS] [--json FILE]
//
// Defaults: causal, kv-heads = heads, head-dim 128, BF16, 50 timed calls after 10 warm-up calls,
// 1 s of back-to-back forwards first so the clocks settle. Each timed call follows a ~100 us
// one-warp spin kernel on the stream, so the CUDA events bracket the device time of the call and
// not the host's enqueue (as bench/quant_bandwidth.cu does). Median and minimum are reported;
// TFLOP/s = core/model/attention_shape.hpp's FLOPs (causal halved; backward 2x pairs x (3 d_qk + 2 d_v))
// / median time.
// Exit status: 0 measured; 1 cuDNN attention unavailable (one line: why) or a CUDA error;
// 2 bad arguments.
#include <cuda_runtime.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <functional>
#include <string>
#include <vector>

#include "core/model/attention_shape.hpp"
#include "cuda/attention/attention_cudnn.hpp"
#include "cuda/common/cuda_check.hpp"

namespace {

__global__ void spin_kernel(long long ns) {
  long long t0, t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t0));
  do {
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  } while (t - t0 < ns);
}

struct Timing {
  double median_ms = 0, min_ms = 0;
};

Timing time_calls(const std::function<void()>& fn, cudaStream_t s, int warmup, int iters) {
  cudaEvent_t a, b;
  GS_CUDA(cudaEventCreate(&a));
  GS_CUDA(cudaEventCreate(&b));
  for (int i = 0; i < warmup; ++i) fn();
  GS_CUDA(cudaStreamSynchronize(s));
  std::vector<double> ms(static_cast<size_t>(iters));
  for (int i = 0; i < iters; ++i) {
    spin_kernel<<<1, 32, 0, s>>>(100000);
    GS_CUDA_LAUNCH();
    GS_CUDA(cudaEventRecord(a, s));
    fn();
    GS_CUDA(cudaEventRecord(b, s));
    GS_CUDA(cudaEventSynchronize(b));
    float t = 0.f;
    GS_CUDA(cudaEventElapsedTime(&t, a, b));
    ms[size_t(i)] = t;
  }
  cudaEventDestroy(a);
  cudaEventDestroy(b);
  std::sort(ms.begin(), ms.end());
  const size_t n = ms.size();
  return {n % 2 ? ms[n / 2] : 0.5 * (ms[n / 2 - 1] + ms[n / 2]), ms.front()};
}

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
               "usage: %s --batch B --seq S [--seq-kv S] --heads H [--kv-heads H]\n"
               "          [--head-dim D | --d-qk D --d-v D] [--causal | --no-causal] [--dtype bf16|fp8]\n"
               "          [--iters N] [--warmup N] [--gpu-warmup SECONDS] [--json FILE]\n"
               "Times cuDNN's fused attention forward and backward (BSHD tensors) and prints ms and\n"
               "TFLOP/s. Defaults: causal, kv-heads = heads, head-dim 128, bf16, 50 iters, 10 warm-up,\n"
               "1 s GPU warm-up.\n",
               argv0);
  return rc;
}

bool parse_int(const char* s, int64_t& out) {
  char* end = nullptr;
  const long long v = std::strtoll(s, &end, 10);
  if (!end || *end || v <= 0 || v > (1ll << 31)) return false;
  out = v;
  return true;
}

}  // namespace

int main(int argc, char** argv) try {
  gs::AttentionShape d;
  d.causal = true;
  int64_t head_dim = 128, d_qk = 0, d_v = 0, seq_kv = 0, kv_heads = 0, iters = 50, warmup = 10;
  double gpu_warmup_s = 1.0;
  std::string json_path, dtype_name = "bf16";
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    const bool has = i + 1 < argc;
    auto num = [&](int64_t& out) {
      if (!has || !parse_int(argv[++i], out)) {
        std::fprintf(stderr, "attention_bench: %s needs a positive integer\n", a.c_str());
        std::exit(2);
      }
    };
    if (a == "--batch") num(d.batch);
    else if (a == "--seq") num(d.seq_q);
    else if (a == "--seq-kv") num(seq_kv);
    else if (a == "--heads") num(d.heads_q);
    else if (a == "--kv-heads") num(kv_heads);
    else if (a == "--head-dim") num(head_dim);
    else if (a == "--d-qk") num(d_qk);
    else if (a == "--d-v") num(d_v);
    else if (a == "--iters") num(iters);
    else if (a == "--warmup") num(warmup);
    else if (a == "--causal") d.causal = true;
    else if (a == "--no-causal") d.causal = false;
    else if (a == "--dtype" && has) dtype_name = argv[++i];
    else if (a == "--json" && has) json_path = argv[++i];
    else if (a == "--gpu-warmup" && has) gpu_warmup_s = std::max(0.0, std::atof(argv[++i]));
    else if (a == "-h" || a == "--help") return usage(argv[0], 0);
    else return usage(argv[0], 2);
  }
  if (d.seq_q == 0 || d.heads_q == 0) return usage(argv[0], 2);
  d.seq_kv = seq_kv ? seq_kv : d.seq_q;
  d.heads_kv = kv_heads ? kv_heads : d.heads_q;
  d.d_qk = d_qk ? d_qk : head_dim;
  d.d_v = d_v ? d_v : head_dim;
  gs::cuda::AttentionDtype dtype;
  if (dtype_name == "bf16" || dtype_name == "BF16") dtype = gs::cuda::AttentionDtype::BF16;
  else if (dtype_name == "fp8" || dtype_name == "FP8") dtype = gs::cuda::AttentionDtype::FP8_E4M3;
  else {
    std::fprintf(stderr, "attention_bench: --dtype is bf16 or fp8, not '%s'\n", dtype_name.c_str());
    return 2;
  }
  if (std::string bad = gs::check_attention_shape(d); !bad.empty()) {
    std::fprintf(stderr, "attention_bench: %s\n", bad.c_str());
    return 2;
  }

  int dev = 0;
  GS_CUDA(cudaGetDevice(&dev));
  cudaDeviceProp prop{};
  GS_CUDA(cudaGetDeviceProperties(&prop, dev));
  std::string why;
  auto attn = gs::cuda::CudnnAttention::create(d, dtype, 1, why);
  if (!attn) {
    std::fprintf(stderr, "attention_bench: %s\n", why.c_str());
    return 1;
  }
  const std::string cudnn = gs::cuda::cudnn_loaded_version();
  std::printf("device: %s (sm_%d%d), cuDNN %s, %s%s\n", prop.name, prop.major, prop.minor, cudnn.c_str(),
              gs::cuda::to_string(dtype), dtype == gs::cuda::AttentionDtype::FP8_E4M3 ? " (unverified on hardware)" : "");
  std::printf("attention: batch %lld, seq_q %lld, seq_kv %lld, heads %lld/%lld (q/kv), d_qk %lld, d_v %lld, %s, BSHD\n",
              (long long)d.batch, (long long)d.seq_q, (long long)d.seq_kv, (long long)d.heads_q,
              (long long)d.heads_kv, (long long)d.d_qk, (long long)d.d_v, d.causal ? "causal" : "no mask");

  cudaStream_t s;
  GS_CUDA(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  {  // GPU warm-up: back-to-back forwards until gpu_warmup_s has passed
    const auto t0 = std::chrono::steady_clock::now();
    while (std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() < gpu_warmup_s) {
      for (int i = 0; i < 8; ++i) attn->forward(s);
      GS_CUDA(cudaStreamSynchronize(s));
    }
  }
  const Timing fwd = time_calls([&] { attn->forward(s); }, s, int(warmup), int(iters));
  const Timing bwd = time_calls([&] { attn->backward(s); }, s, int(warmup), int(iters));
  GS_CUDA(cudaStreamSynchronize(s));
  const double ff = attn->fwd_flops(), bf = attn->bwd_flops();
  std::printf("%-8s %12s %12s %12s %10s\n", "pass", "median ms", "min ms", "GFLOP", "TFLOP/s");
  std::printf("%-8s %12.4f %12.4f %12.2f %10.1f\n", "forward", fwd.median_ms, fwd.min_ms, ff / 1e9,
              ff / (fwd.median_ms * 1e-3) / 1e12);
  std::printf("%-8s %12.4f %12.4f %12.2f %10.1f\n", "backward", bwd.median_ms, bwd.min_ms, bf / 1e9,
              bf / (bwd.median_ms * 1e-3) / 1e12);
  std::printf("(measured: median of %lld event-timed calls; FLOPs modelled%s)\n", (long long)iters,
              d.causal ? ", causal counted as half the score matrix" : "");
  cudaStreamDestroy(s);

  if (!json_path.empty()) {
    FILE* f = std::fopen(json_path.c_str(), "w");
    if (!f) {
      std::fprintf(stderr, "attention_bench: cannot write %s\n", json_path.c_str());
      return 1;
    }
    std::fprintf(f, "{\n  \"schema\": \"gemmscope.attention_bench/1\",\n");
    std::fprintf(f, "  \"device\": {\"name\": \"%s\", \"cc\": \"%d.%d\"},\n  \"cudnn\": \"%s\",\n",
                 json_escape(prop.name).c_str(), prop.major, prop.minor, cudnn.c_str());
    std::fprintf(f,
                 "  \"dims\": {\"batch\": %lld, \"seq_q\": %lld, \"seq_kv\": %lld, \"heads_q\": %lld, "
                 "\"heads_kv\": %lld, \"d_qk\": %lld, \"d_v\": %lld, \"causal\": %s, \"layout\": \"bshd\"},\n",
                 (long long)d.batch, (long long)d.seq_q, (long long)d.seq_kv, (long long)d.heads_q,
                 (long long)d.heads_kv, (long long)d.d_qk, (long long)d.d_v, d.causal ? "true" : "false");
    std::fprintf(f, "  \"dtype\": \"%s\",\n  \"timing\": {\"iters\": %lld, \"warmup\": %lld, \"gpu_warmup_s\": %.2f},\n",
                 gs::cuda::to_string(dtype), (long long)iters, (long long)warmup, gpu_warmup_s);
    std::fprintf(f, "  \"forward\": {\"median_ms\": %.6f, \"min_ms\": %.6f, \"flops\": %.6e, \"tflops\": %.3f},\n",
                 fwd.median_ms, fwd.min_ms, ff, ff / (fwd.median_ms * 1e-3) / 1e12);
    std::fprintf(f, "  \"backward\": {\"median_ms\": %.6f, \"min_ms\": %.6f, \"flops\": %.6e, \"tflops\": %.3f}\n}\n",
                 bwd.median_ms, bwd.min_ms, bf, bf / (bwd.median_ms * 1e-3) / 1e12);
    std::fclose(f);
  }
  return 0;
} catch (const std::exception& e) {
  std::fprintf(stderr, "attention_bench: %s\n", e.what());
  return 1;
}
