// NcclEngine (nccl_comm.hpp). nccl.h gives the types and signatures only; every function is taken
// from libnccl.so.2 with dlsym.
#include "cuda/nccl_comm.hpp"

#include <dlfcn.h>

#include <algorithm>
#include <map>
#include <memory>
#include <optional>
#include <stdexcept>
#include <type_traits>
#include <vector>

#include <cuda_runtime.h>
#include <fmt/format.h>

#include "cuda/gemm_lt.hpp"

#if __has_include(<nccl.h>)
#include <nccl.h>
#define GS_HAVE_NCCL_H 1
#endif

namespace gs::cuda {

#ifndef GS_HAVE_NCCL_H

std::unique_ptr<CommEngine> make_nccl_engine(std::string& why) {
  why = "this build found no nccl.h (NCCL headers) at build time";
  return nullptr;
}

#else

namespace {

struct NcclLib {
  void* handle = nullptr;
  decltype(&ncclGetVersion) getVersion = nullptr;
  decltype(&ncclCommInitAll) commInitAll = nullptr;
  decltype(&ncclCommDestroy) commDestroy = nullptr;
  decltype(&ncclGetErrorString) getErrorString = nullptr;
  decltype(&ncclAllGather) allGather = nullptr;
  decltype(&ncclReduceScatter) reduceScatter = nullptr;
  decltype(&ncclAllReduce) allReduce = nullptr;
  decltype(&ncclSend) send = nullptr;
  decltype(&ncclRecv) recv = nullptr;
  decltype(&ncclGroupStart) groupStart = nullptr;
  decltype(&ncclGroupEnd) groupEnd = nullptr;

  bool load(std::string& why) {
    for (const char* name : {"libnccl.so.2", "libnccl.so"}) {
      handle = ::dlopen(name, RTLD_NOW | RTLD_LOCAL);
      if (handle) break;
    }
    if (!handle) {
      why = "libnccl.so.2 not found (install NCCL or put its folder on LD_LIBRARY_PATH)";
      return false;
    }
    bool ok = true;
    auto sym = [&](auto& fn, const char* name) {
      fn = reinterpret_cast<std::remove_reference_t<decltype(fn)>>(::dlsym(handle, name));
      if (!fn) {
        ok = false;
        why = fmt::format("libnccl.so.2 has no {}", name);
      }
    };
    sym(getVersion, "ncclGetVersion");
    sym(commInitAll, "ncclCommInitAll");
    sym(commDestroy, "ncclCommDestroy");
    sym(getErrorString, "ncclGetErrorString");
    sym(allGather, "ncclAllGather");
    sym(reduceScatter, "ncclReduceScatter");
    sym(allReduce, "ncclAllReduce");
    sym(send, "ncclSend");
    sym(recv, "ncclRecv");
    sym(groupStart, "ncclGroupStart");
    sym(groupEnd, "ncclGroupEnd");
    return ok;
  }
};

void check_cuda(cudaError_t e, const char* what) {
  if (e != cudaSuccess) throw std::runtime_error(fmt::format("{}: {}", what, cudaGetErrorString(e)));
}

class NcclEngine : public CommEngine {
 public:
  NcclEngine(NcclLib lib, int gpus, std::string desc) : lib_(lib), gpus_(gpus), desc_(std::move(desc)) {}
  ~NcclEngine() override {
    for (auto& [n, comms] : comms_)
      for (ncclComm_t c : comms) lib_.commDestroy(c);
    for (size_t r = 0; r < streams_.size(); ++r) {
      cudaSetDevice(static_cast<int>(r));
      cudaStreamDestroy(streams_[r]);
    }
    for (size_t r = 0; r < compute_.size(); ++r) {
      cudaSetDevice(static_cast<int>(r));
      ws_[r] = DeviceBuffer();
      cublasLtDestroy(lt_[r]);
      cudaStreamDestroy(compute_[r]);
    }
  }
  std::string description() const override { return desc_; }
  int64_t gpus() const override { return gpus_; }

  CommTiming time(const Collective& c, CommType t, int warmup, int iters) override {
    const int n = static_cast<int>(c.ranks);
    if (n < 2 || n > gpus_) throw std::runtime_error("collective over more ranks than GPUs");
    const std::vector<ncclComm_t>& comms = comms_for(n);
    Buffers b(c, t, n);
    std::vector<cudaEvent_t> ev0(n), ev1(n);
    Events e0(ev0), e1(ev1);
    sync_all(n);
    std::vector<double> samples;
    for (int it = 0; it < warmup + iters; ++it) {
      for (int r = 0; r < n; ++r) {
        cudaSetDevice(r);
        check_cuda(cudaEventRecord(ev0[r], streams_[r]), "cudaEventRecord");
      }
      launch(c, t, comms, b.s, b.d, b.row_bytes, b.total);
      for (int r = 0; r < n; ++r) {
        cudaSetDevice(r);
        check_cuda(cudaEventRecord(ev1[r], streams_[r]), "cudaEventRecord");
      }
      sync_all(n);
      if (it >= warmup) samples.push_back(slowest(ev0, ev1));
    }
    return summarize(samples);
  }

  std::optional<OverlapTiming> overlap(const Collective& c, CommType t, const Gemm& g, int warmup, int iters) override {
    const int n = static_cast<int>(c.ranks);
    if (n < 2 || n > gpus_) throw std::runtime_error("collective over more ranks than GPUs");
    const std::vector<ncclComm_t>& comms = comms_for(n);
    Buffers b(c, t, n);
    // One BF16 GEMM of g's shape per rank (grouped GEMMs: one dense GEMM of their total rows).
    std::vector<void*> ga(n, nullptr), gb(n, nullptr), gc(n, nullptr);
    std::vector<std::unique_ptr<LtMatmul>> mm(n);
    auto free_gemm = [&] {
      for (int r = 0; r < n; ++r) {
        cudaSetDevice(r);
        mm[r].reset();
        cudaFree(ga[r]);
        cudaFree(gb[r]);
        cudaFree(gc[r]);
      }
    };
    try {
      for (int r = 0; r < n; ++r) {
        check_cuda(cudaSetDevice(r), "cudaSetDevice");
        ensure_compute(r);
        const size_t am = static_cast<size_t>(g.m * g.k) * 2, bm = static_cast<size_t>(g.k * g.n) * 2,
                     cm = static_cast<size_t>(g.m * g.n) * 2;
        check_cuda(cudaMalloc(&ga[r], am), "cudaMalloc (GEMM operand)");
        check_cuda(cudaMalloc(&gb[r], bm), "cudaMalloc (GEMM operand)");
        check_cuda(cudaMalloc(&gc[r], cm), "cudaMalloc (GEMM output)");
        check_cuda(cudaMemset(ga[r], 0x3c, am), "cudaMemset");  // BF16 0x3c3c: a small non-zero value
        check_cuda(cudaMemset(gb[r], 0x3c, bm), "cudaMemset");
        LtProblem p;
        p.m = g.m;
        p.n = g.n;
        p.k = g.k;
        p.l = {ga[r], CUDA_R_16BF, true};
        p.r = {gb[r], CUDA_R_16BF, true};
        p.c = gc[r];
        mm[r] = std::make_unique<LtMatmul>(lt_[r], p, ws_[r].get(), kWorkspaceBytes);
      }
    } catch (const std::exception&) {
      free_gemm();
      return std::nullopt;  // no kernel for the shape, or no memory for it: no overlap figure
    }
    std::vector<cudaEvent_t> e_start(n), e_gemm(n), e_comm(n);
    Events x0(e_start), x1(e_gemm), x2(e_comm);
    std::vector<double> alone, gemm_ov, comm_ov, both;
    try {
      for (int pass = 0; pass < 2; ++pass) {
        const bool with_comm = pass == 1;
        for (int it = 0; it < warmup + iters; ++it) {
          sync_all(n);
          for (int r = 0; r < n; ++r) {
            cudaSetDevice(r);
            check_cuda(cudaEventRecord(e_start[r], compute_[r]), "cudaEventRecord");
            check_cuda(cudaStreamWaitEvent(streams_[r], e_start[r], 0), "cudaStreamWaitEvent");
            mm[r]->run(compute_[r]);
            check_cuda(cudaEventRecord(e_gemm[r], compute_[r]), "cudaEventRecord");
          }
          if (with_comm) launch(c, t, comms, b.s, b.d, b.row_bytes, b.total);
          for (int r = 0; r < n; ++r) {
            cudaSetDevice(r);
            check_cuda(cudaEventRecord(e_comm[r], streams_[r]), "cudaEventRecord");
          }
          sync_all(n);
          if (it < warmup) continue;
          const double gm = slowest(e_start, e_gemm);
          if (!with_comm) {
            alone.push_back(gm);
            continue;
          }
          const double cm = slowest(e_start, e_comm);
          gemm_ov.push_back(gm);
          comm_ov.push_back(cm);
          both.push_back(std::max(gm, cm));
        }
      }
    } catch (...) {
      free_gemm();
      throw;
    }
    free_gemm();
    OverlapTiming o;
    o.gemm_alone_ms = summarize(alone).ms;
    o.gemm_overlap_ms = summarize(gemm_ov).ms;
    o.comm_overlap_ms = summarize(comm_ov).ms;
    o.both_ms = summarize(both).ms;
    return o;
  }

 private:
  // Per-rank send and receive buffers of one collective in one type, zero-filled; freed on scope exit.
  struct Buffers {
    int n;
    size_t row_bytes, total;
    std::vector<void*> s, d;
    Buffers(const Collective& c, CommType t, int ranks)
        : n(ranks),
          row_bytes(static_cast<size_t>(c.bytes_of_rows(1, t))),
          total(static_cast<size_t>(c.kind == CollKind::AllToAll ? 0 : c.bytes_of_rows(c.rows, t))),
          s(ranks, nullptr),
          d(ranks, nullptr) {
      try {
        for (int r = 0; r < n; ++r) {
          size_t sb = 0, rb = 0;
          switch (c.kind) {
            case CollKind::AllGather: sb = total / n; rb = total; break;
            case CollKind::ReduceScatter: sb = total; rb = total / n; break;
            case CollKind::AllReduce: sb = rb = total; break;
            case CollKind::AllToAll:
              sb = static_cast<size_t>(c.rows_sent(r)) * row_bytes;
              rb = static_cast<size_t>(c.rows_received(r)) * row_bytes;
              break;
          }
          check_cuda(cudaSetDevice(r), "cudaSetDevice");
          check_cuda(cudaMalloc(&s[r], std::max<size_t>(sb, 256)), "cudaMalloc (collective send buffer)");
          check_cuda(cudaMalloc(&d[r], std::max<size_t>(rb, 256)), "cudaMalloc (collective receive buffer)");
          check_cuda(cudaMemset(s[r], 0, std::max<size_t>(sb, 256)), "cudaMemset");
        }
      } catch (...) {
        release();
        throw;
      }
    }
    ~Buffers() { release(); }
    void release() {
      for (int r = 0; r < n; ++r) {
        cudaSetDevice(r);
        if (s[r]) cudaFree(s[r]);
        if (d[r]) cudaFree(d[r]);
        s[r] = d[r] = nullptr;
      }
    }
  };
  // Events of every rank, created on its device; destroyed on scope exit.
  struct Events {
    std::vector<cudaEvent_t>& e;
    explicit Events(std::vector<cudaEvent_t>& ev) : e(ev) {
      for (size_t r = 0; r < e.size(); ++r) {
        cudaSetDevice(static_cast<int>(r));
        check_cuda(cudaEventCreate(&e[r]), "cudaEventCreate");
      }
    }
    ~Events() {
      for (size_t r = 0; r < e.size(); ++r) {
        cudaSetDevice(static_cast<int>(r));
        if (e[r]) cudaEventDestroy(e[r]);
      }
    }
  };
  static double slowest(const std::vector<cudaEvent_t>& a, const std::vector<cudaEvent_t>& b) {
    double worst = 0;
    for (size_t r = 0; r < a.size(); ++r) {
      float ms = 0;
      check_cuda(cudaEventElapsedTime(&ms, a[r], b[r]), "cudaEventElapsedTime");
      worst = std::max(worst, static_cast<double>(ms));
    }
    return worst;
  }
  static CommTiming summarize(std::vector<double> samples) {
    std::sort(samples.begin(), samples.end());
    CommTiming out;
    out.iterations = static_cast<int64_t>(samples.size());
    if (!samples.empty()) {
      const size_t m = samples.size();
      out.ms = m % 2 ? samples[m / 2] : (samples[m / 2 - 1] + samples[m / 2]) / 2;
      out.ms_min = samples.front();
      out.ms_max = samples.back();
    }
    return out;
  }
  // A compute stream, a cuBLASLt handle and workspace on rank r (for the overlap GEMMs).
  void ensure_compute(int r) {
    while (static_cast<int>(compute_.size()) <= r) {
      const int q = static_cast<int>(compute_.size());
      check_cuda(cudaSetDevice(q), "cudaSetDevice");
      cudaStream_t s = nullptr;
      check_cuda(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking), "cudaStreamCreate");
      compute_.push_back(s);
      cublasLtHandle_t h = nullptr;
      if (cublasLtCreate(&h) != CUBLAS_STATUS_SUCCESS) throw std::runtime_error("cublasLtCreate failed");
      lt_.push_back(h);
      ws_.push_back(make_lt_workspace());
    }
    check_cuda(cudaSetDevice(r), "cudaSetDevice");
  }
  void nccl_check(ncclResult_t r, const char* what) {
    if (r != ncclSuccess) throw std::runtime_error(fmt::format("{}: {}", what, lib_.getErrorString(r)));
  }
  void sync_all(int n) {
    for (int r = 0; r < n; ++r) {
      cudaSetDevice(r);
      check_cuda(cudaStreamSynchronize(streams_[r]), "cudaStreamSynchronize");
      if (r < static_cast<int>(compute_.size()))
        check_cuda(cudaStreamSynchronize(compute_[r]), "cudaStreamSynchronize");
    }
  }
  const std::vector<ncclComm_t>& comms_for(int n) {
    auto it = comms_.find(n);
    if (it != comms_.end()) return it->second;
    while (static_cast<int>(streams_.size()) < n) {
      const int r = static_cast<int>(streams_.size());
      check_cuda(cudaSetDevice(r), "cudaSetDevice");
      cudaStream_t s = nullptr;
      check_cuda(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking), "cudaStreamCreate");
      streams_.push_back(s);
    }
    std::vector<ncclComm_t> comms(n);
    std::vector<int> devs(n);
    for (int r = 0; r < n; ++r) devs[r] = r;
    nccl_check(lib_.commInitAll(comms.data(), n, devs.data()), "ncclCommInitAll");
    return comms_[n] = comms;
  }
  void launch(const Collective& c, CommType t, const std::vector<ncclComm_t>& comms, const std::vector<void*>& s,
              const std::vector<void*>& d, size_t row_bytes, size_t total) {
    const int n = static_cast<int>(comms.size());
    // Reductions in their type; gathers and all-to-alls move bytes (FP8 payload and scales alike).
    const ncclDataType_t red = t == CommType::Fp32 ? ncclFloat32 : ncclBfloat16;
    const size_t elem = static_cast<size_t>(comm_type_bytes(t));
    nccl_check(lib_.groupStart(), "ncclGroupStart");
    for (int r = 0; r < n; ++r) {
      switch (c.kind) {
        case CollKind::AllGather:
          nccl_check(lib_.allGather(s[r], d[r], total / n, ncclUint8, comms[r], streams_[r]), "ncclAllGather");
          break;
        case CollKind::ReduceScatter:
          nccl_check(lib_.reduceScatter(s[r], d[r], total / n / elem, red, ncclSum, comms[r], streams_[r]),
                     "ncclReduceScatter");
          break;
        case CollKind::AllReduce:
          nccl_check(lib_.allReduce(s[r], d[r], total / elem, red, ncclSum, comms[r], streams_[r]), "ncclAllReduce");
          break;
        case CollKind::AllToAll: {
          size_t so = 0, ro = 0;
          for (int p = 0; p < n; ++p) {
            const size_t sb = static_cast<size_t>(c.matrix[static_cast<size_t>(r * n + p)]) * row_bytes;
            const size_t rb = static_cast<size_t>(c.matrix[static_cast<size_t>(p * n + r)]) * row_bytes;
            if (sb) nccl_check(lib_.send(static_cast<char*>(s[r]) + so, sb, ncclUint8, p, comms[r], streams_[r]), "ncclSend");
            if (rb) nccl_check(lib_.recv(static_cast<char*>(d[r]) + ro, rb, ncclUint8, p, comms[r], streams_[r]), "ncclRecv");
            so += sb;
            ro += rb;
          }
          break;
        }
      }
    }
    nccl_check(lib_.groupEnd(), "ncclGroupEnd");
  }

  NcclLib lib_;
  int gpus_;
  std::string desc_;
  std::map<int, std::vector<ncclComm_t>> comms_;
  std::vector<cudaStream_t> streams_;  // the collectives' streams, one per rank
  std::vector<cudaStream_t> compute_;  // the overlap GEMMs' streams
  std::vector<cublasLtHandle_t> lt_;
  std::vector<DeviceBuffer> ws_;
};

}  // namespace

std::unique_ptr<CommEngine> make_nccl_engine(std::string& why) {
  NcclLib lib;
  if (!lib.load(why)) return nullptr;
  int n = 0;
  const cudaError_t e = cudaGetDeviceCount(&n);
  if (e != cudaSuccess || n < 1) {
    why = e != cudaSuccess ? cudaGetErrorString(e) : "no CUDA device is visible";
    return nullptr;
  }
  int v = 0;
  lib.getVersion(&v);
  cudaDeviceProp prop{};
  cudaGetDeviceProperties(&prop, 0);
  const std::string desc =
      fmt::format("NCCL {}.{}.{}, {} x {}", v / 10000, (v / 100) % 100, v % 100, n, static_cast<const char*>(prop.name));
  return std::make_unique<NcclEngine>(lib, n, desc);
}

#endif

}  // namespace gs::cuda
