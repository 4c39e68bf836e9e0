// NcclEngine (nccl_comm.hpp). nccl.h gives the types and signatures only; every function is taken
// from libnccl.so.2 with dlsym.
#include "cuda/comm/nccl_comm.hpp"

#include <dlfcn.h>

#include <algorithm>
#include <map>
#include <memory>
#include <optional>
#include <stdexcept>
#include <type_traits>
#include <utility>
#include <vector>

#include <cuda_runtime.h>
#include <fmt/format.h>

#include "cuda/common/cuda_handles.hpp"
#include "cuda/common/device_buffer.hpp"
#include "cuda/providers/cublaslt/gemm_lt.hpp"

#if __has_include(<nccl.h>)
#include <nccl.h>
#define GS_HAVE_NCCL_H 1
#endif

namespace gs::cuda {

#ifndef GS_HAVE_NCCL_H

bool nccl_built() { return false; }

std::string nccl_unavailable_reason() { return "this build found no nccl.h (NCCL headers) at build time"; }

std::unique_ptr<CommEngine> make_nccl_engine(std::string& why) {
  why = nccl_unavailable_reason();
  return nullptr;
}

std::unique_ptr<CommEngine> make_nccl_engine(ProcessGroup&, std::string& why) {
  why = nccl_unavailable_reason();
  return nullptr;
}

#else

namespace {

// libnccl.so.2's functions, loaded once per process and kept for its life (NCCL's proxy threads may
// outlive a communicator; the library is never unloaded).
struct NcclLib {
  void* handle = nullptr;
  std::string why;  // why it did not load; empty when it did
  decltype(&ncclGetVersion) getVersion = nullptr;
  decltype(&ncclCommInitAll) commInitAll = nullptr;
  decltype(&ncclCommInitRank) commInitRank = nullptr;
  decltype(&ncclGetUniqueId) getUniqueId = nullptr;
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
    sym(commInitRank, "ncclCommInitRank");
    sym(getUniqueId, "ncclGetUniqueId");
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

const NcclLib& nccl_lib() {
  static const NcclLib lib = [] {
    NcclLib l;
    if (!l.load(l.why) && l.why.empty()) l.why = "libnccl.so.2 could not be loaded";
    return l;
  }();
  return lib;
}

// A communicator, destroyed with its owner (ncclCommDestroy from the loaded library).
class Comm {
 public:
  Comm(ncclComm_t c, decltype(&ncclCommDestroy) destroy) : c_(c), destroy_(destroy) {}
  ~Comm() {
    if (c_) destroy_(c_);
  }
  Comm(Comm&& o) noexcept : c_(std::exchange(o.c_, nullptr)), destroy_(o.destroy_) {}
  Comm& operator=(Comm&&) = delete;
  Comm(const Comm&) = delete;
  Comm& operator=(const Comm&) = delete;
  ncclComm_t get() const { return c_; }

 private:
  ncclComm_t c_ = nullptr;
  decltype(&ncclCommDestroy) destroy_;
};


void check_cuda(cudaError_t e, const char* what) {
  if (e != cudaSuccess) throw std::runtime_error(fmt::format("{}: {}", what, cudaGetErrorString(e)));
}

// The ranks this process drives: every GPU of the node (one process), or its own GPU (one rank per
// process under MPI, communicators bootstrapped through the ProcessGroup).
struct Member {
  int rank;    // global rank in every communicator it belongs to
  int device;  // CUDA device
};

// One buffer or event per member, each made on its member's device (and released there by its
// owner: device_buffer.hpp, cuda_handles.hpp).
template <class T, class Make>
std::vector<T> per_member(int a, const std::vector<Member>& m, Make make) {
  std::vector<T> out;
  out.reserve(static_cast<size_t>(a));
  for (int i = 0; i < a; ++i) {
    check_cuda(cudaSetDevice(m[static_cast<size_t>(i)].device), "cudaSetDevice");
    out.push_back(make(i));
  }
  return out;
}

class NcclEngine : public CommEngine {
 public:
  static constexpr int kBackToBack = 10;  // collectives per timed sample (time())
  NcclEngine(const NcclLib& lib, std::vector<Member> members, int world, ProcessGroup* pg, std::string desc)
      : lib_(lib), members_(std::move(members)), world_(world), pg_(pg), desc_(std::move(desc)) {}
  std::string description() const override { return desc_; }
  int64_t gpus() const override { return world_; }
  GpuPool pool() const override { return pg_ ? GpuPool::MpiRanks : GpuPool::Node; }

  CommTiming time(const Collective& c, CommType t, int warmup, int iters) override {
    const int n = static_cast<int>(c.ranks);
    if (n < 2 || n > world_) throw std::runtime_error("collective over more ranks than GPUs");
    const std::vector<Comm>& comms = comms_for(n);
    const int a = active(n);
    const Buffers b(c, t, members_, a);
    const std::vector<Event> ev0 = events(a), ev1 = events(a);
    sync_all(a);
    // A sample is the mean of kBackToBack collectives enqueued back to back between two events, as
    // nccl-tests times them: a collective launched from an idle GPU would add its launch latency
    // (about 15 us) to every sample.
    std::vector<double> samples;
    for (int it = 0; it < warmup + iters; ++it) {
      for (int i = 0; i < a; ++i) {
        cudaSetDevice(members_[i].device);
        check_cuda(cudaEventRecord(ev0[i], streams_[i]), "cudaEventRecord");
      }
      for (int k = 0; k < kBackToBack && a > 0; ++k) launch(c, t, comms, a, b);
      for (int i = 0; i < a; ++i) {
        cudaSetDevice(members_[i].device);
        check_cuda(cudaEventRecord(ev1[i], streams_[i]), "cudaEventRecord");
      }
      sync_all(a);
      if (it >= warmup) samples.push_back(slowest(ev0, ev1) / kBackToBack);
    }
    slowest_over_processes(samples);
    return summarize(samples);
  }

  std::optional<OverlapTiming> overlap(const Collective& c, CommType t, const Gemm& g, OverlapGemm kind, int warmup,
                                       int iters) override {
    const int n = static_cast<int>(c.ranks);
    if (n < 2 || n > world_) throw std::runtime_error("collective over more ranks than GPUs");
    const std::vector<Comm>& comms = comms_for(n);
    const int a = active(n);
    const Buffers b(c, t, members_, a);
    // One GEMM of g's shape per rank (grouped GEMMs: one dense GEMM of their total rows), both
    // operands K-major: BF16, or FP8 E4M3 with unit scales (cuBLASLt's default for a null scale
    // pointer) and TE's accumulation (fast in Fprop, split in Dgrad/Wgrad). Its operands are
    // released before the matmuls that read them are (declared first).
    const bool fp8 = kind == OverlapGemm::Fp8;
    const size_t es = fp8 ? 1 : 2;
    std::vector<DeviceBuffer> ga, gb, gc;
    std::vector<std::unique_ptr<LtMatmul>> mm;
    std::vector<double> failed = {0};
    try {
      for (int i = 0; i < a; ++i) {
        ensure_compute(i);
        const size_t am = static_cast<size_t>(g.m * g.k) * es, bm = static_cast<size_t>(g.k * g.n) * es,
                     cm = static_cast<size_t>(g.m * g.n) * 2;
        ga.emplace_back(am);
        gb.emplace_back(bm);
        gc.emplace_back(cm);
        // Small non-zero values: BF16 0x3c3c (0.0115), E4M3 0x30 (0.125).
        const int fill = fp8 ? 0x30 : 0x3c;
        check_cuda(cudaMemset(ga.back().get(), fill, am), "cudaMemset");
        check_cuda(cudaMemset(gb.back().get(), fill, bm), "cudaMemset");
        LtProblem p;
        p.m = g.m;
        p.n = g.n;
        p.k = g.k;
        const cudaDataType_t type = fp8 ? CUDA_R_8F_E4M3 : CUDA_R_16BF;
        p.l = {ga.back().get(), type, true};
        p.r = {gb.back().get(), type, true};
        p.c = gc.back().get();
        p.fast_accum = fp8 && g.pass == Pass::Fprop;
        mm.push_back(std::make_unique<LtMatmul>(lt_[i], p, ws_[i].get(), kWorkspaceBytes));
      }
    } catch (const std::exception&) {
      failed[0] = 1;  // no kernel for the shape, or no memory for it: no overlap figure
    }
    slowest_over_processes(failed);  // every process skips the pair when one cannot run it
    if (failed[0] > 0) return std::nullopt;
    const std::vector<Event> e_start = events(a), e_gemm = events(a), e_comm = events(a);
    std::vector<double> alone, gemm_ov, comm_ov;
    {
      for (int pass = 0; pass < 2; ++pass) {
        const bool with_comm = pass == 1;
        for (int it = 0; it < warmup + iters; ++it) {
          sync_all(a);
          for (int i = 0; i < a; ++i) {
            cudaSetDevice(members_[i].device);
            check_cuda(cudaEventRecord(e_start[i], compute_[i]), "cudaEventRecord");
            check_cuda(cudaStreamWaitEvent(streams_[i], e_start[i], 0), "cudaStreamWaitEvent");
            mm[i]->run(compute_[i]);
            check_cuda(cudaEventRecord(e_gemm[i], compute_[i]), "cudaEventRecord");
          }
          if (with_comm && a > 0) launch(c, t, comms, a, b);
          for (int i = 0; i < a; ++i) {
            cudaSetDevice(members_[i].device);
            check_cuda(cudaEventRecord(e_comm[i], streams_[i]), "cudaEventRecord");
          }
          sync_all(a);
          if (it < warmup) continue;
          const double gm = slowest(e_start, e_gemm);
          if (!with_comm) {
            alone.push_back(gm);
            continue;
          }
          gemm_ov.push_back(gm);
          comm_ov.push_back(slowest(e_start, e_comm));
        }
      }
    }
    slowest_over_processes(alone);
    slowest_over_processes(gemm_ov);
    slowest_over_processes(comm_ov);
    std::vector<double> both(gemm_ov.size());
    for (size_t k = 0; k < both.size(); ++k) both[k] = std::max(gemm_ov[k], comm_ov[k]);
    OverlapTiming o;
    o.gemm_alone_ms = summarize(alone).ms;
    o.gemm_overlap_ms = summarize(gemm_ov).ms;
    o.comm_overlap_ms = summarize(comm_ov).ms;
    o.both_ms = summarize(both).ms;
    return o;
  }

 private:
  // Per-member send and receive buffers of one collective in one type (the first `a` members, the
  // ranks of the communicator), the send buffers zero-filled; each freed on its device.
  struct Buffers {
    size_t row_bytes, total;
    std::vector<DeviceBuffer> s, d;
    Buffers(const Collective& c, CommType t, const std::vector<Member>& m, int a)
        : row_bytes(static_cast<size_t>(c.bytes_of_rows(1, t))),
          total(static_cast<size_t>(c.kind == CollKind::AllToAll ? 0 : c.bytes_of_rows(c.rows, t))) {
      const size_t n = static_cast<size_t>(c.ranks);
      for (int i = 0; i < a; ++i) {
        const int r = m[static_cast<size_t>(i)].rank;
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
        check_cuda(cudaSetDevice(m[static_cast<size_t>(i)].device), "cudaSetDevice");
        s.emplace_back(std::max<size_t>(sb, 256));
        d.emplace_back(std::max<size_t>(rb, 256));
        check_cuda(cudaMemset(s.back().get(), 0, s.back().bytes()), "cudaMemset");
      }
    }
  };
  // An event per active member, made on its device (and destroyed there).
  std::vector<Event> events(int a) const {
    return per_member<Event>(a, members_, [](int) { return make_event(); });
  }
  // How many of this process's members belong to a communicator over ranks 0..n-1 (members are in
  // rank order).
  int active(int n) const {
    int a = 0;
    while (a < static_cast<int>(members_.size()) && members_[a].rank < n) ++a;
    return a;
  }
  static double slowest(const std::vector<Event>& a, const std::vector<Event>& b) {
    double worst = 0;
    for (size_t r = 0; r < a.size(); ++r) {
      float ms = 0;
      check_cuda(cudaEventElapsedTime(&ms, a[r], b[r]), "cudaEventElapsedTime");
      worst = std::max(worst, static_cast<double>(ms));
    }
    return worst;
  }
  // Per iteration, the slowest rank of every process (a process without a member in the
  // communicator contributes zeros).
  void slowest_over_processes(std::vector<double>& v) {
    if (pg_) pg_->max_in_place(v);
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
  // A compute stream, a cuBLASLt handle and workspace for member i (for the overlap GEMMs).
  void ensure_compute(int i) {
    while (static_cast<int>(compute_.size()) <= i) {
      const int q = static_cast<int>(compute_.size());
      check_cuda(cudaSetDevice(members_[q].device), "cudaSetDevice");
      compute_.push_back(make_stream());
      lt_.push_back(make_lt_handle());
      ws_.push_back(make_lt_workspace());
    }
    check_cuda(cudaSetDevice(members_[i].device), "cudaSetDevice");
  }
  void nccl_check(ncclResult_t r, const char* what) {
    if (r != ncclSuccess) throw std::runtime_error(fmt::format("{}: {}", what, lib_.getErrorString(r)));
  }
  void sync_all(int a) {
    for (int i = 0; i < a; ++i) {
      cudaSetDevice(members_[i].device);
      check_cuda(cudaStreamSynchronize(streams_[i]), "cudaStreamSynchronize");
      if (i < static_cast<int>(compute_.size())) check_cuda(cudaStreamSynchronize(compute_[i]), "cudaStreamSynchronize");
    }
  }
  // The communicator over ranks 0..n-1, one handle per active member. One process: ncclCommInitAll.
  // Under MPI: rank 0 makes a unique id, every process receives it (the ProcessGroup's broadcast,
  // so every process calls this for the same n in the same order), ranks below n join.
  const std::vector<Comm>& comms_for(int n) {
    auto it = comms_.find(n);
    if (it != comms_.end()) return it->second;
    while (streams_.size() < members_.size()) {
      const size_t i = streams_.size();
      check_cuda(cudaSetDevice(members_[i].device), "cudaSetDevice");
      streams_.push_back(make_stream());
    }
    const int a = active(n);
    std::vector<ncclComm_t> raw(a, nullptr);
    // Owned from here on, also the ones a failing group had already made.
    const auto owned = [&] {
      std::vector<Comm> v;
      for (ncclComm_t c : raw) v.emplace_back(c, lib_.commDestroy);
      return v;
    };
    try {
      if (!pg_) {
        std::vector<int> devs(a);
        for (int i = 0; i < a; ++i) devs[i] = members_[i].device;
        nccl_check(lib_.commInitAll(raw.data(), a, devs.data()), "ncclCommInitAll");
      } else {
        ncclUniqueId id{};
        if (pg_->rank() == 0) nccl_check(lib_.getUniqueId(&id), "ncclGetUniqueId");
        pg_->broadcast(&id, sizeof id, 0);
        if (a > 0) {
          nccl_check(lib_.groupStart(), "ncclGroupStart");
          for (int i = 0; i < a; ++i) {
            check_cuda(cudaSetDevice(members_[i].device), "cudaSetDevice");
            nccl_check(lib_.commInitRank(&raw[i], n, id, members_[i].rank), "ncclCommInitRank");
          }
          nccl_check(lib_.groupEnd(), "ncclGroupEnd");
        }
      }
    } catch (...) {
      owned();  // destroys what was made
      throw;
    }
    return comms_.emplace(n, owned()).first->second;
  }
  void launch(const Collective& c, CommType t, const std::vector<Comm>& comms, int a, const Buffers& b) {
    const size_t row_bytes = b.row_bytes, total = b.total;
    const int n = static_cast<int>(c.ranks);
    // Reductions in their type; gathers and all-to-alls move bytes (FP8 payload and scales alike).
    const ncclDataType_t red = t == CommType::Fp32 ? ncclFloat32 : ncclBfloat16;
    const size_t elem = static_cast<size_t>(comm_type_bytes(t));
    nccl_check(lib_.groupStart(), "ncclGroupStart");
    for (int i = 0; i < a; ++i) {
      const int r = members_[i].rank;
      switch (c.kind) {
        case CollKind::AllGather:
          nccl_check(lib_.allGather(b.s[i].get(), b.d[i].get(), total / n, ncclUint8, comms[i].get(), streams_[i]), "ncclAllGather");
          break;
        case CollKind::ReduceScatter:
          nccl_check(lib_.reduceScatter(b.s[i].get(), b.d[i].get(), total / n / elem, red, ncclSum, comms[i].get(), streams_[i]),
                     "ncclReduceScatter");
          break;
        case CollKind::AllReduce:
          nccl_check(lib_.allReduce(b.s[i].get(), b.d[i].get(), total / elem, red, ncclSum, comms[i].get(), streams_[i]), "ncclAllReduce");
          break;
        case CollKind::AllToAll: {
          size_t so = 0, ro = 0;
          for (int p = 0; p < n; ++p) {
            const size_t sb = static_cast<size_t>(c.matrix[static_cast<size_t>(r * n + p)]) * row_bytes;
            const size_t rb = static_cast<size_t>(c.matrix[static_cast<size_t>(p * n + r)]) * row_bytes;
            if (sb) nccl_check(lib_.send(b.s[i].get<char>() + so, sb, ncclUint8, p, comms[i].get(), streams_[i]), "ncclSend");
            if (rb) nccl_check(lib_.recv(b.d[i].get<char>() + ro, rb, ncclUint8, p, comms[i].get(), streams_[i]), "ncclRecv");
            so += sb;
            ro += rb;
          }
          break;
        }
      }
    }
    nccl_check(lib_.groupEnd(), "ncclGroupEnd");
  }

  const NcclLib& lib_;
  std::vector<Member> members_;  // in rank order
  int world_;                    // ranks in all: GPUs of the node, or MPI processes
  ProcessGroup* pg_;             // MPI, or nullptr (one process)
  std::string desc_;
  // Every resource releases itself on its device; the communicators first (declared last).
  std::vector<Stream> streams_;  // the collectives' streams, one per member
  std::vector<Stream> compute_;  // the overlap GEMMs' streams
  std::vector<LtHandle> lt_;
  std::vector<DeviceBuffer> ws_;
  std::map<int, std::vector<Comm>> comms_;
};

std::string version_text(const NcclLib& lib) {
  int v = 0;
  lib.getVersion(&v);
  return fmt::format("NCCL {}.{}.{}", v / 10000, (v / 100) % 100, v % 100);
}

}  // namespace

bool nccl_built() { return true; }

std::string nccl_unavailable_reason() { return nccl_lib().why; }

std::unique_ptr<CommEngine> make_nccl_engine(std::string& why) {
  const NcclLib& lib = nccl_lib();
  if (!lib.why.empty()) {
    why = lib.why;
    return nullptr;
  }
  int n = 0;
  const cudaError_t e = cudaGetDeviceCount(&n);
  if (e != cudaSuccess || n < 1) {
    why = e != cudaSuccess ? cudaGetErrorString(e) : "no CUDA device is visible";
    return nullptr;
  }
  cudaDeviceProp prop{};
  cudaGetDeviceProperties(&prop, 0);
  const std::string desc = fmt::format("{}, {} x {}", version_text(lib), n, static_cast<const char*>(prop.name));
  std::vector<Member> members;
  for (int r = 0; r < n; ++r) members.push_back({r, r});
  return std::make_unique<NcclEngine>(lib, std::move(members), n, nullptr, desc);
}

std::unique_ptr<CommEngine> make_nccl_engine(ProcessGroup& pg, std::string& why) {
  // Every process reaches the same verdict: a process that cannot take part stops them all here.
  const NcclLib& lib = nccl_lib();
  std::string mine;
  int n = 0;
  if (!lib.why.empty()) {
    mine = "rank " + std::to_string(pg.rank()) + ": " + lib.why;
  } else {
    const cudaError_t e = cudaGetDeviceCount(&n);
    if (e != cudaSuccess || n < 1)
      mine = fmt::format("rank {} on {}: {}", pg.rank(), pg.host(), e != cudaSuccess ? cudaGetErrorString(e) : "no CUDA device is visible");
    else if (pg.local_rank() >= n)
      mine = fmt::format("rank {} on {} is local rank {}, but only {} GPU{} visible there", pg.rank(), pg.host(),
                         pg.local_rank(), n, n == 1 ? " is" : "s are");
  }
  std::vector<double> bad = {mine.empty() ? 0.0 : 1.0};
  pg.max_in_place(bad);
  if (bad[0] > 0) {
    why = mine.empty() ? "another rank cannot take part (its own line says why)" : mine;
    return nullptr;
  }
  cudaDeviceProp prop{};
  cudaGetDeviceProperties(&prop, pg.local_rank());
  const std::string desc = fmt::format("{} over MPI, {} ranks of one GPU each ({} on rank {})", version_text(lib), pg.size(),
                                       static_cast<const char*>(prop.name), pg.rank());
  return std::make_unique<NcclEngine>(lib, std::vector<Member>{{pg.rank(), pg.local_rank()}}, pg.size(), &pg, desc);
}

#endif

}  // namespace gs::cuda
