// NcclEngine (nccl_comm.hpp). nccl.h gives the types and signatures only; every function is taken
// from libnccl.so.2 with dlsym.
#include "cuda/nccl_comm.hpp"

#include <dlfcn.h>

#include <algorithm>
#include <map>
#include <stdexcept>
#include <vector>

#include <cuda_runtime.h>
#include <fmt/format.h>

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
  }
  std::string description() const override { return desc_; }
  int64_t gpus() const override { return gpus_; }

  CommTiming time(const Collective& c, CommType t, int warmup, int iters) override {
    const int n = static_cast<int>(c.ranks);
    if (n < 2 || n > gpus_) throw std::runtime_error("collective over more ranks than GPUs");
    const std::vector<ncclComm_t>& comms = comms_for(n);
    // Per-rank buffers, zero-filled.
    const size_t row_bytes = static_cast<size_t>(c.bytes_of_rows(1, t));
    const size_t total = static_cast<size_t>(c.kind == CollKind::AllToAll ? 0 : c.bytes_of_rows(c.rows, t));
    std::vector<size_t> send_bytes(n), recv_bytes(n);
    for (int r = 0; r < n; ++r) {
      switch (c.kind) {
        case CollKind::AllGather: send_bytes[r] = total / n; recv_bytes[r] = total; break;
        case CollKind::ReduceScatter: send_bytes[r] = total; recv_bytes[r] = total / n; break;
        case CollKind::AllReduce: send_bytes[r] = recv_bytes[r] = total; break;
        case CollKind::AllToAll:
          send_bytes[r] = static_cast<size_t>(c.rows_sent(r)) * row_bytes;
          recv_bytes[r] = static_cast<size_t>(c.rows_received(r)) * row_bytes;
          break;
      }
    }
    std::vector<void*> sbuf(n, nullptr), rbuf(n, nullptr);
    std::vector<cudaEvent_t> ev0(n), ev1(n);
    auto cleanup = [&] {
      for (int r = 0; r < n; ++r) {
        cudaSetDevice(r);
        cudaFree(sbuf[r]);
        cudaFree(rbuf[r]);
        cudaEventDestroy(ev0[r]);
        cudaEventDestroy(ev1[r]);
      }
    };
    try {
      for (int r = 0; r < n; ++r) {
        check_cuda(cudaSetDevice(r), "cudaSetDevice");
        check_cuda(cudaMalloc(&sbuf[r], std::max<size_t>(send_bytes[r], 256)), "cudaMalloc (collective send buffer)");
        check_cuda(cudaMalloc(&rbuf[r], std::max<size_t>(recv_bytes[r], 256)), "cudaMalloc (collective receive buffer)");
        check_cuda(cudaMemset(sbuf[r], 0, std::max<size_t>(send_bytes[r], 256)), "cudaMemset");
        check_cuda(cudaEventCreate(&ev0[r]), "cudaEventCreate");
        check_cuda(cudaEventCreate(&ev1[r]), "cudaEventCreate");
      }
      sync_all(n);
      std::vector<double> samples;
      for (int it = 0; it < warmup + iters; ++it) {
        for (int r = 0; r < n; ++r) {
          cudaSetDevice(r);
          check_cuda(cudaEventRecord(ev0[r], streams_[r]), "cudaEventRecord");
        }
        launch(c, t, comms, sbuf, rbuf, row_bytes, total);
        for (int r = 0; r < n; ++r) {
          cudaSetDevice(r);
          check_cuda(cudaEventRecord(ev1[r], streams_[r]), "cudaEventRecord");
        }
        sync_all(n);
        if (it < warmup) continue;
        double slowest = 0;
        for (int r = 0; r < n; ++r) {
          float ms = 0;
          check_cuda(cudaEventElapsedTime(&ms, ev0[r], ev1[r]), "cudaEventElapsedTime");
          slowest = std::max(slowest, static_cast<double>(ms));
        }
        samples.push_back(slowest);
      }
      cleanup();
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
    } catch (...) {
      cleanup();
      throw;
    }
  }

 private:
  void nccl_check(ncclResult_t r, const char* what) {
    if (r != ncclSuccess) throw std::runtime_error(fmt::format("{}: {}", what, lib_.getErrorString(r)));
  }
  void sync_all(int n) {
    for (int r = 0; r < n; ++r) {
      cudaSetDevice(r);
      check_cuda(cudaStreamSynchronize(streams_[r]), "cudaStreamSynchronize");
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
  std::vector<cudaStream_t> streams_;
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
