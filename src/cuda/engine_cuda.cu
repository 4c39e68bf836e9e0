// The CUDA engine (core/run/engine.hpp): the measurement harness every provider's cells go
// through, one path for all of them. A cell is the shape rules and the provider's own refusal
// (N/A cells), the operands (common/operands.hpp, kept while they match; grouped cells after a
// memory check), the provider's run (providers/provider.hpp), its tuning when --algo asks for it and
// the run offers candidates (providers/tuner.hpp), the timed loop with the step context's work
// between iterations (timing/cell_timer.hpp, stepwork/), and the kernel records. Which library
// runs the GEMM is the provider's alone: cuBLASLt is one of them (providers/cublaslt/).
#include <cublasLt.h>
#include <fmt/format.h>

#include <algorithm>
#include <memory>
#include <optional>
#include <vector>

#include "core/gpu/arch_policy.hpp"
#include "core/recipes/grouped.hpp"
#include "core/util/error.hpp"
#include "cuda/common/cuda_check.hpp"
#include "cuda/common/cuda_handles.hpp"
#include "cuda/common/device_count.hpp"
#include "cuda/common/operands.hpp"
#include "cuda/engine_cuda.hpp"
#include "cuda/providers/cublaslt/gemm_lt.hpp"
#include "cuda/providers/cublaslt/lt_accuracy.hpp"
#include "cuda/providers/provider.hpp"
#include "cuda/providers/tuner.hpp"
#include "cuda/quant/quantize_mx.cuh"
#include "cuda/stepwork/measure.hpp"
#include "cuda/stepwork/step_context_runner.hpp"
#include "cuda/timing/cell_timer.hpp"
#include "cuda/timing/kernel_trace.hpp"

namespace gs::cuda {

namespace {

class CudaEngine final : public Engine {
 public:
  explicit CudaEngine(const EngineOptions& o) : opts_(o) {
    GS_CUDA(cudaSetDevice(o.device));
    cc_ = device_info().compute_capability();
    opts_.recipe.fp8_block_via_mxfp8 = ArchPolicy(cc_).fp8_block_via_mxfp8();
    try {
      handle_ = make_lt_handle();
      stream_ = make_stream();
      workspace_ = make_lt_workspace();
      timer_ = std::make_unique<CellTimer>(opts_.timing, opts_.gemm, o.device, stream_, handle_, workspace_.get(),
                                           kWorkspaceBytes, device_info().l2_bytes);
    } catch (...) {
      release();  // a constructor that throws gets no destructor call
      throw;
    }
  }
  ~CudaEngine() override { release(); }

  DeviceInfo device_info() const override {
    cudaDeviceProp p{};
    GS_CUDA(cudaGetDeviceProperties(&p, opts_.device));
    DeviceInfo d;
    d.name = p.name;
    d.cc_major = p.major;
    d.cc_minor = p.minor;
    d.sm_count = p.multiProcessorCount;
    d.memory_bytes = static_cast<int64_t>(p.totalGlobalMem);
    d.l2_bytes = p.l2CacheSize;
    cudaDriverGetVersion(&d.driver_version);
    cudaRuntimeGetVersion(&d.runtime_version);
    d.cublaslt_version = static_cast<int64_t>(cublasLtGetVersion());
    if (d.arch_policy().may_convert_fp4_in_hardware()) d.nvfp4_hw_conversion = nvfp4_hardware_conversion();
    return d;
  }

  void gpu_warmup(double seconds) override { timer_->gpu_warmup(seconds); }

  // The step's own kernels (optimizer, loss, embedding, launch cost): cuda/stepwork/, timed by this
  // engine's timed loop without the step context between iterations.
  Cell measure_step_kernel(const StepKernelSpec& spec) override {
    return stepwork::measure(spec, {stream_, opts_.timing.warmup, opts_.timing.iters, opts_.seed,
                                    [this](const LoopBody& b) { return timer_->timed(b, {}); },
                                    [this](const std::function<void()>& f) { return trace_cell(opts_.gemm, stream_, f); }});
  }

  std::optional<StepContextInfo> step_context() const override {
    if (!context_) return std::nullopt;
    return context_->info();
  }

  std::vector<std::string> provider_notes() const override {
    std::vector<std::string> out;
    for (const auto& pv : providers_)
      for (std::string& n : pv->notes()) out.push_back(std::move(n));
    if (!timer_->hold_note().empty()) out.push_back(timer_->hold_note());
    return out;
  }

  AccuracyCell accuracy(const Gemm& g, Precision p, Dist d) override {
    if (g.grouped())  // per-expert numerics are those of the dense recipe (checked by the GPU tests)
      return AccuracyCell::na("grouped GEMM: accuracy is measured on dense GEMMs only");
    Recipe recipe = make_recipe(p, g, opts_.recipe);
    recipe.fp32_accumulate = false;  // the error of the GEMM's own output, against the reference's
    if (std::string why = shape_constraint(recipe, g); !why.empty()) return AccuracyCell::na(why);
    // Of the precision the GEMM really runs in: the LM head and the router stay BF16 in every
    // column (make_recipe), so they are never emulated.
    const Precision runs = recipe.precision;
    const bool emulate = !ArchPolicy(cc_).times(runs);
    if (emulate && runs != Precision::MXFP8 && runs != Precision::NVFP4)
      return AccuracyCell::na("needs a newer GPU (no emulation for this recipe)");
    try {
      prepare_sources(g, d);
      // FP32 output of a GEMM of the original BF16 operands, once per sources: set only once the
      // GEMM ran, never left uncomputed.
      if (!reference_) reference_ = lt_reference_output(handle_, workspace_.get(), g, *sources_, stream_);
      AccuracyCell cell;
      cell.ok = true;
      cell.emulated = emulate;
      cell.rel_error = lt_recipe_error(handle_, workspace_.get(), g, recipe, *sources_, reference_.get<float>(), emulate,
                                       opts_.recipe, stream_);
      return cell;
    } catch (const CublasError& e) {
      cudaStreamSynchronize(stream_);
      return AccuracyCell::na(e.not_supported() ? std::string("cuBLASLt NOT_SUPPORTED") : std::string(e.what()));
    } catch (const CudaError& e) {
      cudaGetLastError();
      sources_.reset();
      reference_ = DeviceBuffer();
      throw_if_context_lost(e.what(), fmt::format("the accuracy of {} {}", g.shape(), to_string(p)));
      return AccuracyCell::na(e.oom() ? "out of GPU memory" : std::string("CUDA error: ") + e.what());
    } catch (const Unsupported& e) {  // as guarded(): only what the libraries or the device refuse
      cudaStreamSynchronize(stream_);
      return AccuracyCell::na(e.what());
    } catch (const std::invalid_argument& e) {
      cudaStreamSynchronize(stream_);
      return AccuracyCell::na(e.what());
    } catch (const std::bad_alloc&) {
      return AccuracyCell::na("out of host memory");
    }
  }

  Cell measure(const Gemm& g, Precision p, Mode mode, const std::string& provider) override {
    GemmProvider* pv = find_provider(provider);
    if (!pv) return Cell::na(fmt::format("provider {} is not available in this build", provider));
    return measure_cell(*pv, g, p, mode);
  }

 private:
  // One cell through provider `pv`: the shape rules and the provider's refusal (N/A), the
  // operands, the run, then time_run(). A grouped cell of a provider that times its dense
  // equivalent also gets the time of one dense GEMM of the experts' summed (padded) size, same
  // recipe and mode (the grouping efficiency: dense / grouped); its operands replace the grouped
  // ones only if both do not fit together.
  Cell measure_cell(GemmProvider& pv, const Gemm& g, Precision p, Mode mode) {
    // The layout and the per-expert shape rule: core/recipes/grouped.hpp, the rule the dry run predicts with.
    if (std::string why = cell_shape_problem(g, p, opts_.recipe); !why.empty()) return Cell::na(why);
    std::vector<int64_t> padded;
    int64_t sum = 0;
    if (g.grouped()) {
      padded = padded_group(g, p);
      for (int64_t x : padded) sum += x;
      if (sum == 0 && g.group_dim == GroupDim::M) return Cell::na("no rows routed to any expert");
    }
    const Gemm shape = g.grouped() ? expert_gemm(g, std::max<int64_t>(sum, 1)) : g;
    const Recipe recipe = make_recipe(p, shape, opts_.recipe);
    if (std::string why = pv.cannot_run(g, p, mode, recipe, cc_); !why.empty()) return Cell::na(why);
    const CellRange range(mode, g, p);  // NVTX: gemmscope/<mode>/<pass>/<op>/<precision>
    Cell cell = guarded(g, p, mode, recipe, [&] {
      std::unique_ptr<ProviderRun> run;
      if (g.grouped()) {
        if (std::string why = ensure_grouped_sources(g, padded, recipe.fp32_accumulate, pv.grouped_bytes(g, padded, p, mode));
            !why.empty())
          return Cell::na(why);
        run = pv.grouped(*grouped_src_, recipe, mode, opts_.device);
      } else {
        prepare_sources(g, Dist::Normal, recipe.fp32_accumulate);
        run = pv.dense(g, recipe, mode, *sources_, opts_.device);
      }
      return time_run(pv, *run, g, p, mode);
    });
    if (g.grouped() && pv.times_dense_equivalent() && cell.ok && sum > 0) {
      const Cell d = measure_cell(pv, expert_gemm(g, sum), p, mode);
      if (d.ok) cell.dense_equiv_ms = d.stats.mean_ms;  // the statistic the reports use
    }
    return cell;
  }

  // The run's untimed preparation, its tuning (--algo autotune / search, where the run offers
  // candidates; tuned in the L2 state the timed loop will see: --l2 cold flushes before every
  // call), the timed loop with the step context's work after each iteration, the tuning's last
  // word (the pick re-measured against candidate 0 in this timed loop, tuner.hpp: on an H100 a
  // 192x192 cluster-2x1 BF16 pick that won every tuning sample ran 6% slower here), and the kernel
  // records (a few more iterations, outside the timed loop: kernel_trace.hpp).
  Cell time_run(const GemmProvider& pv, ProviderRun& run, const Gemm& g, Precision p, Mode mode) {
    run.prepare(stream_);
    RunTuner* tuner = opts_.gemm.algo != AlgoChoice::Heuristic ? run.tuner() : nullptr;
    std::optional<AutotuneRecord> tuned;
    if (tuner) tuned = tuner->tune(stream_, timer_->l2_flush());
    const LoopBody body = run.body(stream_);
    const LoopGap gap = step_gap(g, p, mode);
    Cell cell = timer_->timed(body, gap);
    if (tuner)
      cell = recheck_in_timed_loop(std::move(cell), tuner->differs(), *tuned, [tuner](bool pick) { tuner->select(pick); },
                                   [&] { return timer_->timed(body, gap); });
    if (run.traced()) cell.kernels = trace_cell(opts_.gemm, stream_, [&] { run.iteration(stream_); });
    run.describe(cell.kernels, pv.name());
    cell.kernels.autotune = tuned;
    return cell;
  }

  // The step context's work after each iteration of `g` (step_context_runner.hpp); empty without one.
  LoopGap step_gap(const Gemm& g, Precision p, Mode mode) {
    if (!opts_.step_model.active() && !(opts_.timing.step_other_ms > 0)) return {};
    if (!context_) {
      int clock_khz = 0;
      cudaDeviceGetAttribute(&clock_khz, cudaDevAttrClockRate, opts_.device);
      context_ = std::make_unique<StepContextRunner>(opts_.step_model, opts_.timing.step_other_ms, device_info(),
                                                      clock_khz, stream_);
    }
    // FP8 casts belong to the context where the timed region does not run them (pre-quantized).
    const bool casts = p != Precision::BF16 && mode == Mode::PreQuantized;
    return {context_->between(g, casts), context_->between_cost()};
  }

  // Runs `f` (which returns the measured cell) and turns what the libraries or the device refuse
  // into an N/A cell (core/util/error.hpp Unsupported); a lost context stops the run, and so does any
  // other exception (a defect: exit 70 with its message, never an N/A that hides it).
  template <class F>
  Cell guarded(const Gemm& g, Precision p, Mode mode, const Recipe& recipe, F&& f) {
    try {
      return f();
    } catch (const CublasError& e) {
      cudaStreamSynchronize(stream_);
      if (e.not_supported()) return Cell::na(fmt::format("cuBLASLt NOT_SUPPORTED ({})", describe(recipe)));
      return Cell::na(e.what());
    } catch (const CudaError& e) {
      cudaGetLastError();  // clear a non-sticky error
      sources_.reset();
      grouped_src_.reset();
      throw_if_context_lost(e.what(), fmt::format("{} {} {}", g.shape(), to_string(p), to_string(mode)));
      if (e.oom()) {
        size_t free_b = 0, total_b = 0;
        cudaMemGetInfo(&free_b, &total_b);
        return Cell::na(fmt::format("out of GPU memory for {} ({:.1f} GiB free)", g.shape(),
                                    static_cast<double>(free_b) / (1 << 30)));
      }
      return Cell::na(fmt::format("CUDA error: {}", e.what()));
    } catch (const Unsupported& e) {
      cudaStreamSynchronize(stream_);
      return Cell::na(e.what());
    } catch (const std::invalid_argument& e) {  // a provider's "cannot run this after all"
      cudaStreamSynchronize(stream_);
      return Cell::na(e.what());
    } catch (const std::bad_alloc&) {
      return Cell::na(fmt::format("out of host memory for {}", g.shape()));
    }
  }

  // The operands of grouped GEMM `g` at `padded` in grouped_src_ (kept from the last grouped cell
  // when they match), after a memory check that counts `extra` bytes the cell needs beyond them.
  // Returns the N/A reason when they do not fit, "" when grouped_src_ is ready.
  std::string ensure_grouped_sources(const Gemm& g, const std::vector<int64_t>& padded, bool fp32, size_t extra) {
    size_t need = extra;
    if (!grouped_src_ || !grouped_src_->matches(g, padded, fp32)) {
      grouped_src_.reset();
      sources_.reset();  // the dense operands are regenerated for the dense equivalent
      reference_ = DeviceBuffer();
      need += GroupedSources::bytes_needed(g, padded, fp32);
    }
    size_t free_b = 0, total_b = 0;
    GS_CUDA(cudaMemGetInfo(&free_b, &total_b));
    const size_t reserve = 256u << 20;  // cuBLASLt, events, fragmentation
    if (need + reserve > free_b)
      return fmt::format("grouped {} over {} experts needs {:.1f} GiB of GPU memory ({:.1f} GiB free)", g.shape(),
                         g.group.size(), static_cast<double>(need) / (1 << 30), static_cast<double>(free_b) / (1 << 30));
    if (!grouped_src_) grouped_src_ = GroupedSources::allocate(g, padded, opts_.seed, stream_, fp32);
    return {};
  }

  // fp32: C is an FP32 main gradient (Wgrad accumulating, Recipe::fp32_accumulate).
  void prepare_sources(const Gemm& g, Dist d = Dist::Normal, bool fp32 = false) {
    if (sources_ && sources_->matches(g, fp32) && dist_ == d) return;
    sources_.reset();  // free the previous operands before allocating the next
    reference_ = DeviceBuffer();
    dist_ = d;
    sources_.emplace(GemmSources::allocate(g, fp32));
    sources_->fill(g, d, opts_.seed, stream_);
  }

  // Each provider is made on its first cell (provider.hpp) and configured with the run's options.
  GemmProvider* find_provider(const std::string& name) {
    for (auto& pv : providers_)
      if (name == pv->name()) return pv.get();
    std::unique_ptr<GemmProvider> pv = make_provider(name, {stream_.get(), handle_.get(), workspace_.get()});
    if (!pv) return nullptr;
    pv->configure(opts_);
    providers_.push_back(std::move(pv));
    return providers_.back().get();
  }

  void release() {
    context_.reset();  // its buffers and attention graphs before the stream
    timer_.reset();    // the power hold's GEMM
    providers_.clear();
    sources_.reset();
    grouped_src_.reset();
    stream_.reset();
    handle_.reset();
  }

  static std::string describe(const Recipe& r) {
    return fmt::format("{} {}/{} x {} {}/{}", to_string(r.a.format), to_string(r.a.scaling), "L",
                       to_string(r.b.format), to_string(r.b.scaling), "R");
  }

  EngineOptions opts_;
  int cc_ = 0;  // compute capability, read once
  LtHandle handle_;           // the cuBLASLt provider's, the accuracy reference's and the power hold's
  Stream stream_;             // the timing stream
  DeviceBuffer workspace_;    // cuBLASLt's, with the handle
  std::unique_ptr<CellTimer> timer_;            // the timed loop and what surrounds it
  std::unique_ptr<StepContextRunner> context_;  // --step-context / --step-other-ms: run between iterations
  std::vector<std::unique_ptr<GemmProvider>> providers_;  // made on first use (provider.hpp)
  std::optional<GemmSources> sources_;
  std::unique_ptr<GroupedSources> grouped_src_;  // the operands of the last grouped GEMM
  Dist dist_ = Dist::Normal;
  DeviceBuffer reference_;  // FP32 reference output for the current sources (accuracy)
};

}  // namespace

std::unique_ptr<Engine> make_engine(const EngineOptions& options, std::string& why) {
  why = device_unavailable_reason(options.device);
  if (!why.empty()) return nullptr;
  try {
    return std::make_unique<CudaEngine>(options);
  } catch (const std::exception& ex) {
    why = ex.what();
    return nullptr;
  }
}

}  // namespace gs::cuda
