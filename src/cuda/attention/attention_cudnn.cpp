#include "cuda/attention/attention_cudnn.hpp"

#include <cmath>
#include <stdexcept>
#include <string>

#ifndef GEMMSCOPE_HAVE_CUDNN_ATTENTION
#define GEMMSCOPE_HAVE_CUDNN_ATTENTION 0
#endif

namespace gs::cuda {

const char* to_string(AttentionDtype d) { return d == AttentionDtype::BF16 ? "BF16" : "FP8_E4M3"; }

bool cudnn_attention_built() { return GEMMSCOPE_HAVE_CUDNN_ATTENTION != 0; }

}  // namespace gs::cuda

#if !GEMMSCOPE_HAVE_CUDNN_ATTENTION

namespace gs::cuda {

struct CudnnAttention::Impl {
  AttentionDims dims;
  AttentionDtype dtype = AttentionDtype::BF16;
};

std::unique_ptr<CudnnAttention> CudnnAttention::create(const AttentionDims&, AttentionDtype, uint64_t,
                                                       std::string& why_not) {
  why_not = cudnn_unavailable_reason();
  return nullptr;
}
CudnnAttention::CudnnAttention(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
CudnnAttention::~CudnnAttention() = default;
void CudnnAttention::forward(cudaStream_t) { throw std::logic_error("cuDNN attention not built"); }
void CudnnAttention::backward(cudaStream_t) { throw std::logic_error("cuDNN attention not built"); }
const AttentionDims& CudnnAttention::dims() const { return impl_->dims; }
AttentionDtype CudnnAttention::dtype() const { return impl_->dtype; }
size_t CudnnAttention::workspace_bytes() const { return 0; }
size_t CudnnAttention::device_bytes() const { return 0; }
void* CudnnAttention::q() const { return nullptr; }
void* CudnnAttention::k() const { return nullptr; }
void* CudnnAttention::v() const { return nullptr; }
void* CudnnAttention::o() const { return nullptr; }
void* CudnnAttention::d_o() const { return nullptr; }
void* CudnnAttention::d_q() const { return nullptr; }
void* CudnnAttention::d_k() const { return nullptr; }
void* CudnnAttention::d_v() const { return nullptr; }
float* CudnnAttention::stats() const { return nullptr; }
float CudnnAttention::attn_scale() const { return 0.f; }
CudnnAttention::Fp8Scales CudnnAttention::fp8_scales() const { return {}; }
std::string cudnn_loaded_version() { return {}; }
std::string cudnn_unavailable_reason() { return "built without cuDNN attention (GEMMSCOPE_CUDNN_FRONTEND_DIR)"; }

}  // namespace gs::cuda

#else  // GEMMSCOPE_HAVE_CUDNN_ATTENTION

#include <cudnn_frontend.h>
#include <dlfcn.h>

#include <array>
#include <cstdlib>
#include <exception>
#include <mutex>
#include <unordered_map>
#include <vector>

#include "cuda/common/cuda_check.hpp"
#include "cuda/common/device_buffer.hpp"
#include "cuda/common/fill.cuh"

// The frontend's dynamic-loading shim resolves every cuDNN call through this handle; it is set
// once, by load_cudnn() below, before any frontend call. (Defined here and nowhere else.)
namespace cudnn_frontend {
void* cudnn_dlhandle = nullptr;
}

namespace gs::cuda {

namespace fe = cudnn_frontend;

namespace {

// Oldest cuDNN accepted. Before 9.6 the frontend zeroes the backward's dQ accumulator itself
// through the CUDA runtime it loads with dlopen (libcudart.so.12/13), which a GPU node with only
// the driver and cuBLASLt may lack; from 9.6 cuDNN does it. Nothing else in the path used here
// (no ALiBi, no padding mask, logging off) reaches libcudart.
constexpr size_t kMinCudnnVersion = 90600;

struct CudnnLib {
  std::string error;    // empty when loaded and recent enough
  std::string version;  // "9.14.0"
};

std::mutex g_lib_mutex;
CudnnLib* g_lib = nullptr;

std::string version_string(size_t v) {
  return std::to_string(v / 10000) + "." + std::to_string((v / 100) % 100) + "." + std::to_string(v % 100);
}

// dlopen("libcudnn.so.9") once per process (GEMMSCOPE_CUDNN_LIB names another file, e.g. the
// copy in a PyTorch wheel). The library stays loaded for the life of the process.
const CudnnLib& load_cudnn() {
  std::lock_guard<std::mutex> lock(g_lib_mutex);
  if (g_lib) return *g_lib;
  g_lib = new CudnnLib();
  const char* env = std::getenv("GEMMSCOPE_CUDNN_LIB");
  const std::string name = (env && *env) ? env : "libcudnn.so.9";
  dlerror();
  void* h = dlopen(name.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!h) {
    const char* e = dlerror();
    g_lib->error = "cuDNN not loadable: dlopen(" + name + ") failed" + (e ? std::string(": ") + e : std::string());
    return *g_lib;
  }
  using GetVersion = size_t (*)();
  auto get_version = reinterpret_cast<GetVersion>(dlsym(h, "cudnnGetVersion"));
  if (!get_version) {
    g_lib->error = "cuDNN not usable: " + name + " has no cudnnGetVersion";
    dlclose(h);
    return *g_lib;
  }
  const size_t v = get_version();
  g_lib->version = version_string(v);
  if (v / 10000 != 9) {
    g_lib->error = "cuDNN " + g_lib->version + " loaded from " + name + " is not cuDNN 9";
    dlclose(h);
    return *g_lib;
  }
  if (v < kMinCudnnVersion) {
    g_lib->error = "cuDNN " + g_lib->version + " is too old for the attention graphs (9.6 or newer needed)";
    dlclose(h);
    return *g_lib;
  }
  fe::cudnn_dlhandle = h;
  return *g_lib;
}

// Tensor UIDs in the variant packs.
enum Uid : int64_t {
  kQ = 1, kK, kV, kO, kStats, kdO, kdQ, kdK, kdV,
  // FP8 scalars (FP32 [1,1,1,1]), one slot each in the scalar buffer.
  kScalarBase = 100,
};
enum Scalar : int {
  sDescaleQ, sDescaleK, sDescaleV, sDescaleS, sScaleS, sScaleO, sAmaxS, sAmaxO,  // forward
  sDescaleO, sDescaledO, sDescaledP, sScaledP, sScaledQ, sScaledK, sScaledV,     // backward
  sAmaxdQ, sAmaxdK, sAmaxdV, sAmaxdP,
  kScalarCount
};

std::vector<int64_t> bshd_strides(int64_t s, int64_t h, int64_t d) { return {s * h * d, d, h * d, 1}; }

std::string fe_message(fe::error_t e) {
  std::string m = e.get_message();
  for (char& c : m)
    if (c == '\n' || c == '\r') c = ' ';
  return m;
}

}  // namespace

struct CudnnAttention::Impl {
  AttentionDims dims;
  AttentionDtype dtype = AttentionDtype::BF16;
  float scale = 1.f;
  Fp8Scales fp8;
  cudnnHandle_t handle = nullptr;
  std::shared_ptr<fe::graph::Graph> fwd, bwd;
  DeviceBuffer q, k, v, o, d_o, d_q, d_k, d_v, stats, scalars, workspace;
  std::unordered_map<int64_t, void*> fwd_pack, bwd_pack;

  ~Impl() {
    fwd.reset();  // the plans go before the handle they were built with
    bwd.reset();
    if (handle) fe::detail::destroy_handle(handle);
  }

  fe::DataType_t io_type() const {
    return dtype == AttentionDtype::BF16 ? fe::DataType_t::BFLOAT16 : fe::DataType_t::FP8_E4M3;
  }

  std::shared_ptr<fe::graph::Tensor_attributes> tensor(fe::graph::Graph& g, const char* name, int64_t uid, int64_t h,
                                                       int64_t s, int64_t d) const {
    return g.tensor(fe::graph::Tensor_attributes()
                        .set_name(name)
                        .set_uid(uid)
                        .set_dim({dims.batch, h, s, d})
                        .set_stride(bshd_strides(s, h, d)));
  }
  std::shared_ptr<fe::graph::Tensor_attributes> stats_tensor(fe::graph::Graph& g) const {
    return g.tensor(fe::graph::Tensor_attributes()
                        .set_name("Stats")
                        .set_uid(kStats)
                        .set_dim({dims.batch, dims.heads_q, dims.seq_q, 1})
                        .set_stride({dims.heads_q * dims.seq_q, dims.seq_q, 1, 1})
                        .set_data_type(fe::DataType_t::FLOAT));
  }
  std::shared_ptr<fe::graph::Tensor_attributes> scalar(fe::graph::Graph& g, int slot) const {
    return g.tensor(fe::graph::Tensor_attributes()
                        .set_name("scalar" + std::to_string(slot))
                        .set_uid(kScalarBase + slot)
                        .set_dim({1, 1, 1, 1})
                        .set_stride({1, 1, 1, 1})
                        .set_data_type(fe::DataType_t::FLOAT));
  }
  static void set_scalar_output(const std::shared_ptr<fe::graph::Tensor_attributes>& t, int slot) {
    t->set_output(true)
        .set_uid(kScalarBase + slot)
        .set_dim({1, 1, 1, 1})
        .set_stride({1, 1, 1, 1})
        .set_data_type(fe::DataType_t::FLOAT);
  }

  std::shared_ptr<fe::graph::Graph> new_graph() const {
    auto g = std::make_shared<fe::graph::Graph>();
    g->set_io_data_type(io_type())
        .set_intermediate_data_type(fe::DataType_t::FLOAT)
        .set_compute_data_type(fe::DataType_t::FLOAT);
    return g;
  }

  // The inputs both graphs read: Q, K and V.
  struct Inputs {
    std::shared_ptr<fe::graph::Tensor_attributes> q, k, v;
  };
  Inputs inputs(fe::graph::Graph& g) const {
    const auto& d = dims;
    return {tensor(g, "Q", kQ, d.heads_q, d.seq_q, d.d_qk), tensor(g, "K", kK, d.heads_kv, d.seq_kv, d.d_qk),
            tensor(g, "V", kV, d.heads_kv, d.seq_kv, d.d_v)};
  }

  std::shared_ptr<fe::graph::Graph> make_forward() const {
    const auto& d = dims;
    auto g = new_graph();
    auto [Q, K, V] = inputs(*g);
    std::shared_ptr<fe::graph::Tensor_attributes> O, Stats;
    auto opts = fe::graph::SDPA_attributes().set_name("sdpa_fwd").set_generate_stats(true).set_attn_scale(scale);
    if (d.causal) opts.set_causal_mask(true);
    if (dtype == AttentionDtype::BF16) {
      auto outs = g->sdpa(Q, K, V, opts);
      O = outs[0];
      Stats = outs[1];
    } else {
      auto outs = g->sdpa_fp8(Q, K, V, scalar(*g, sDescaleQ), scalar(*g, sDescaleK), scalar(*g, sDescaleV),
                              scalar(*g, sDescaleS), scalar(*g, sScaleS), scalar(*g, sScaleO), opts);
      O = outs[0];
      Stats = outs[1];
      set_scalar_output(outs[2], sAmaxS);
      set_scalar_output(outs[3], sAmaxO);
    }
    O->set_output(true).set_uid(kO).set_dim({d.batch, d.heads_q, d.seq_q, d.d_v}).set_stride(
        bshd_strides(d.seq_q, d.heads_q, d.d_v));
    Stats->set_output(true)
        .set_uid(kStats)
        .set_dim({d.batch, d.heads_q, d.seq_q, 1})
        .set_stride({d.heads_q * d.seq_q, d.seq_q, 1, 1})
        .set_data_type(fe::DataType_t::FLOAT);
    return g;
  }

  std::shared_ptr<fe::graph::Graph> make_backward() const {
    const auto& d = dims;
    auto g = new_graph();
    auto [Q, K, V] = inputs(*g);
    auto O = tensor(*g, "O", kO, d.heads_q, d.seq_q, d.d_v);
    auto dO = tensor(*g, "dO", kdO, d.heads_q, d.seq_q, d.d_v);
    auto Stats = stats_tensor(*g);
    std::shared_ptr<fe::graph::Tensor_attributes> dQ, dK, dV;
    if (dtype == AttentionDtype::BF16) {
      auto opts = fe::graph::SDPA_backward_attributes().set_name("sdpa_bwd").set_attn_scale(scale);
      if (d.causal) opts.set_causal_mask(true);
      auto outs = g->sdpa_backward(Q, K, V, O, dO, Stats, opts);
      dQ = outs[0];
      dK = outs[1];
      dV = outs[2];
    } else {
      auto opts = fe::graph::SDPA_fp8_backward_attributes().set_name("sdpa_fp8_bwd").set_attn_scale(scale);
      if (d.causal) opts.set_causal_mask(true);
      auto outs = g->sdpa_fp8_backward(Q, K, V, O, dO, Stats, scalar(*g, sDescaleQ), scalar(*g, sDescaleK),
                                       scalar(*g, sDescaleV), scalar(*g, sDescaleO), scalar(*g, sDescaledO),
                                       scalar(*g, sDescaleS), scalar(*g, sDescaledP), scalar(*g, sScaleS),
                                       scalar(*g, sScaledQ), scalar(*g, sScaledK), scalar(*g, sScaledV),
                                       scalar(*g, sScaledP), opts);
      dQ = outs[0];
      dK = outs[1];
      dV = outs[2];
      set_scalar_output(outs[3], sAmaxdQ);
      set_scalar_output(outs[4], sAmaxdK);
      set_scalar_output(outs[5], sAmaxdV);
      set_scalar_output(outs[6], sAmaxdP);
    }
    dQ->set_output(true).set_uid(kdQ).set_dim({d.batch, d.heads_q, d.seq_q, d.d_qk}).set_stride(
        bshd_strides(d.seq_q, d.heads_q, d.d_qk));
    dK->set_output(true).set_uid(kdK).set_dim({d.batch, d.heads_kv, d.seq_kv, d.d_qk}).set_stride(
        bshd_strides(d.seq_kv, d.heads_kv, d.d_qk));
    dV->set_output(true).set_uid(kdV).set_dim({d.batch, d.heads_kv, d.seq_kv, d.d_v}).set_stride(
        bshd_strides(d.seq_kv, d.heads_kv, d.d_v));
    return g;
  }

  // Empty on success, else why the graph cannot run here.
  std::string build(fe::graph::Graph& g, const char* what) const {
    fe::error_t st = g.validate();
    if (st.is_good()) st = g.build_operation_graph(handle);
    if (st.is_good()) st = g.create_execution_plans({fe::HeurMode_t::A});
    if (st.is_good()) st = g.check_support(handle);
    if (st.is_good()) st = g.build_plans(handle, fe::BuildPlanPolicy_t::HEURISTICS_CHOICE);
    if (st.is_good()) return {};
    return std::string("cuDNN ") + to_string(dtype) + " SDPA " + what + " graph not supported here: " + fe_message(st);
  }

  void run(fe::graph::Graph& g, std::unordered_map<int64_t, void*>& pack, cudaStream_t stream, const char* what) {
    cudnnStatus_t s = fe::detail::set_stream(handle, stream);
    if (s != CUDNN_STATUS_SUCCESS) throw std::runtime_error(std::string("cudnnSetStream failed before SDPA ") + what);
    fe::error_t st = g.execute(handle, pack, workspace.get());
    if (!st.is_good()) throw std::runtime_error(std::string("cuDNN SDPA ") + what + " failed: " + fe_message(st));
  }
};

std::unique_ptr<CudnnAttention> CudnnAttention::create(const AttentionDims& dims, AttentionDtype dtype,
                                                       uint64_t seed, std::string& why_not) {
  why_not.clear();
  if (std::string bad = check_attention_shape(dims); !bad.empty()) {
    why_not = bad;
    return nullptr;
  }
  const CudnnLib& lib = load_cudnn();
  if (!lib.error.empty()) {
    why_not = lib.error;
    return nullptr;
  }
  auto impl = std::make_unique<Impl>();
  impl->dims = dims;
  impl->dtype = dtype;
  impl->scale = 1.0f / std::sqrt(static_cast<float>(dims.d_qk));
  try {
    if (cudnnStatus_t st = fe::detail::create_handle(&impl->handle); st != CUDNN_STATUS_SUCCESS) {
      impl->handle = nullptr;
      why_not = std::string("cudnnCreate failed: ") + fe::detail::get_error_string(st) + " (cuDNN " + lib.version + ")";
      return nullptr;
    }
    impl->fwd = impl->make_forward();
    impl->bwd = impl->make_backward();
    if (std::string e = impl->build(*impl->fwd, "forward"); !e.empty()) {
      why_not = e;
      return nullptr;
    }
    if (std::string e = impl->build(*impl->bwd, "backward"); !e.empty()) {
      why_not = e;
      return nullptr;
    }
    int64_t ws_f = 0, ws_b = 0;
    if (!impl->fwd->get_workspace_size(ws_f).is_good() || !impl->bwd->get_workspace_size(ws_b).is_good()) {
      why_not = "cuDNN SDPA: workspace size query failed";
      return nullptr;
    }

    const auto& d = dims;
    const size_t el = dtype == AttentionDtype::BF16 ? 2 : 1;
    const size_t nq = size_t(d.batch * d.seq_q * d.heads_q * d.d_qk);
    const size_t nk = size_t(d.batch * d.seq_kv * d.heads_kv * d.d_qk);
    const size_t nv = size_t(d.batch * d.seq_kv * d.heads_kv * d.d_v);
    const size_t no = size_t(d.batch * d.seq_q * d.heads_q * d.d_v);
    Impl& m = *impl;
    m.q = DeviceBuffer(nq * el);
    m.k = DeviceBuffer(nk * el);
    m.v = DeviceBuffer(nv * el);
    m.o = DeviceBuffer(no * el);
    m.d_o = DeviceBuffer(no * el);
    m.d_q = DeviceBuffer(nq * el);
    m.d_k = DeviceBuffer(nk * el);
    m.d_v = DeviceBuffer(nv * el);
    m.stats = DeviceBuffer(size_t(d.batch * d.heads_q * d.seq_q) * sizeof(float));
    m.workspace = DeviceBuffer(size_t(std::max<int64_t>(ws_f, ws_b)));

    cudaStream_t s0 = nullptr;
    if (dtype == AttentionDtype::BF16) {
      fill_normal_bf16(m.q.get<__nv_bfloat16>(), nq, seed * 8 + 1, 1.f, s0);
      fill_normal_bf16(m.k.get<__nv_bfloat16>(), nk, seed * 8 + 2, 1.f, s0);
      fill_normal_bf16(m.v.get<__nv_bfloat16>(), nv, seed * 8 + 3, 1.f, s0);
      fill_normal_bf16(m.d_o.get<__nv_bfloat16>(), no, seed * 8 + 4, 1.f, s0);
    } else {
      fill_normal_fp8_e4m3(m.q.get<uint8_t>(), nq, seed * 8 + 1, 1.f, s0);
      fill_normal_fp8_e4m3(m.k.get<uint8_t>(), nk, seed * 8 + 2, 1.f, s0);
      fill_normal_fp8_e4m3(m.v.get<uint8_t>(), nv, seed * 8 + 3, 1.f, s0);
      fill_normal_fp8_e4m3(m.d_o.get<uint8_t>(), no, seed * 8 + 4, 1.f, s0);
      // Per-tensor scales: quantized = value * scale, descale = 1 / scale.
      std::array<float, kScalarCount> h{};
      const Fp8Scales& f = m.fp8;
      h[sDescaleQ] = h[sDescaleK] = h[sDescaleV] = 1.f / f.qkv;
      h[sDescaleS] = 1.f / f.s;
      h[sScaleS] = f.s;
      h[sScaleO] = f.o;
      h[sDescaleO] = 1.f / f.o;
      h[sDescaledO] = 1.f / f.d_o;
      h[sDescaledP] = 1.f / f.dp;
      h[sScaledP] = f.dp;
      h[sScaledQ] = h[sScaledK] = h[sScaledV] = f.dqkv;
      m.scalars = DeviceBuffer(sizeof(float) * kScalarCount);
      GS_CUDA(cudaMemcpy(m.scalars.get(), h.data(), sizeof(float) * kScalarCount, cudaMemcpyHostToDevice));
    }

    m.fwd_pack = {{kQ, m.q.get()}, {kK, m.k.get()}, {kV, m.v.get()}, {kO, m.o.get()}, {kStats, m.stats.get()}};
    m.bwd_pack = {{kQ, m.q.get()},   {kK, m.k.get()},   {kV, m.v.get()},   {kO, m.o.get()},
                  {kStats, m.stats.get()}, {kdO, m.d_o.get()}, {kdQ, m.d_q.get()}, {kdK, m.d_k.get()},
                  {kdV, m.d_v.get()}};
    if (dtype != AttentionDtype::BF16) {
      float* sc = m.scalars.get<float>();
      for (int i : {sDescaleQ, sDescaleK, sDescaleV, sDescaleS, sScaleS, sScaleO, sAmaxS, sAmaxO})
        m.fwd_pack[kScalarBase + i] = sc + i;
      for (int i : {sDescaleQ, sDescaleK, sDescaleV, sDescaleO, sDescaledO, sDescaleS, sDescaledP, sScaleS,
                    sScaledQ, sScaledK, sScaledV, sScaledP, sAmaxdQ, sAmaxdK, sAmaxdV, sAmaxdP})
        m.bwd_pack[kScalarBase + i] = sc + i;
    }

    // One forward now, so that O and the statistics the backward reads are real.
    m.run(*m.fwd, m.fwd_pack, s0, "forward");
    GS_CUDA(cudaDeviceSynchronize());
  } catch (const CudaError& e) {
    cudaGetLastError();  // an allocation failure must not linger as the thread's last error
    why_not = e.oom() ? std::string("out of device memory for the attention tensors") : std::string(e.what());
    return nullptr;
  } catch (const std::exception& e) {
    why_not = std::string("cuDNN attention: ") + e.what();
    return nullptr;
  }
  return std::unique_ptr<CudnnAttention>(new CudnnAttention(std::move(impl)));
}

CudnnAttention::CudnnAttention(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
CudnnAttention::~CudnnAttention() = default;

void CudnnAttention::forward(cudaStream_t stream) { impl_->run(*impl_->fwd, impl_->fwd_pack, stream, "forward"); }
void CudnnAttention::backward(cudaStream_t stream) {
  impl_->run(*impl_->bwd, impl_->bwd_pack, stream, "backward");
}

const AttentionDims& CudnnAttention::dims() const { return impl_->dims; }
AttentionDtype CudnnAttention::dtype() const { return impl_->dtype; }
size_t CudnnAttention::workspace_bytes() const { return impl_->workspace.bytes(); }
size_t CudnnAttention::device_bytes() const {
  const Impl& m = *impl_;
  return m.q.bytes() + m.k.bytes() + m.v.bytes() + m.o.bytes() + m.d_o.bytes() + m.d_q.bytes() + m.d_k.bytes() +
         m.d_v.bytes() + m.stats.bytes() + m.scalars.bytes() + m.workspace.bytes();
}
void* CudnnAttention::q() const { return impl_->q.get(); }
void* CudnnAttention::k() const { return impl_->k.get(); }
void* CudnnAttention::v() const { return impl_->v.get(); }
void* CudnnAttention::o() const { return impl_->o.get(); }
void* CudnnAttention::d_o() const { return impl_->d_o.get(); }
void* CudnnAttention::d_q() const { return impl_->d_q.get(); }
void* CudnnAttention::d_k() const { return impl_->d_k.get(); }
void* CudnnAttention::d_v() const { return impl_->d_v.get(); }
float* CudnnAttention::stats() const { return impl_->stats.get<float>(); }
float CudnnAttention::attn_scale() const { return impl_->scale; }
CudnnAttention::Fp8Scales CudnnAttention::fp8_scales() const { return impl_->fp8; }

std::string cudnn_loaded_version() {
  std::lock_guard<std::mutex> lock(g_lib_mutex);
  return (g_lib && g_lib->error.empty()) ? g_lib->version : std::string();
}

std::string cudnn_unavailable_reason() { return load_cudnn().error; }

}  // namespace gs::cuda

#endif  // GEMMSCOPE_HAVE_CUDNN_ATTENTION
