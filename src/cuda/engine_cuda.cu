#include <cublasLt.h>
#include <dlfcn.h>
#include <fmt/format.h>

#include <memory>
#include <optional>
#include <vector>

#include "core/gpu/arch_policy.hpp"
#include "core/recipes/grouped.hpp"
#include "core/recipes/modes.hpp"
#include "core/providers/provider.hpp"
#include "core/results/results.hpp"
#include "core/run/step_context.hpp"
#include "core/util/error.hpp"
#include "cuda/clock_probe.hpp"
#include "cuda/cuda_check.hpp"
#include "cuda/cuda_handles.hpp"
#include "cuda/device_buffer.hpp"
#include "cuda/engine_cuda.hpp"
#include "cuda/launch_gate.hpp"
#include "cuda/lt_tuner.hpp"
#include "cuda/error_norm.cuh"
#include "cuda/fill.cuh"
#include "cuda/gemm_lt.hpp"
#include "cuda/grouped_gemm.hpp"
#include "cuda/kernel_trace.hpp"
#include "cuda/provider.hpp"
#include "cuda/quantize_mx.cuh"
#include "cuda/recipe_gemm.hpp"
#include "cuda/power_hold.hpp"
#include "cuda/step_context_runner.hpp"
#include "cuda/stepwork/measure.hpp"
#include "cuda/timed_loop.hpp"

namespace gs::cuda {

namespace {

class CudaEngine final : public Engine {
 public:
  explicit CudaEngine(const EngineOptions& o) : opts_(o) {
    GS_CUDA(cudaSetDevice(o.device));
    cc_ = device_info().compute_capability();
    opts_.recipe.fp8_block_via_mxfp8 = ArchPolicy(cc_).fp8_block_via_mxfp8();
    probe_ = std::make_unique<ClockProbe>(o.device);
    gate_ = std::make_unique<LaunchGate>();
    try {
      handle_ = make_lt_handle();
      stream_ = make_stream();
      workspace_ = make_lt_workspace();
      events_.reserve(static_cast<size_t>(o.timing.iters) + 16);
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

  void gpu_warmup(double seconds) override {
    if (PowerHold* h = power_hold()) h->run_for(stream_, seconds);
  }

  // The step's own kernels (optimizer, loss, embedding, launch cost): cuda/stepwork/, timed by this
  // engine's timed loop without the step context between iterations.
  Cell measure_step_kernel(const StepKernelSpec& spec) override {
    return stepwork::measure(spec, {stream_, opts_.timing.warmup, opts_.timing.iters, opts_.seed,
                                    [this](const LoopBody& b) { return timed_cell(b, Gap{}); },
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
    if (!hold_note_.empty()) out.push_back(hold_note_);
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
      const size_t mn = static_cast<size_t>(g.m) * static_cast<size_t>(g.n);
      if (!reference_) {
        // FP32 output of a GEMM of the original BF16 operands (exact products, FP32 accumulation).
        // Built in a local buffer: reference_ is set only once the GEMM ran, never left uncomputed.
        DeviceBuffer ref_out(mn * sizeof(float));
        // NaN until the GEMM writes it: an element it did not write can never pass as an error of
        // zero (and compute-sanitizer's initcheck, which does not see this GEMM kernel's stores,
        // stops flagging the reads).
        GS_CUDA(cudaMemsetAsync(ref_out.get(), 0xFF, ref_out.bytes(), stream_));
        LtProblem lp;
        lp.m = g.m; lp.n = g.n; lp.k = g.k;
        lp.l = {sources_->l.get(), CUDA_R_16BF, g.a.k_major, nullptr, CUBLASLT_MATMUL_MATRIX_SCALE_SCALAR_32F};
        lp.r = {sources_->r.get(), CUDA_R_16BF, g.b.k_major, nullptr, CUBLASLT_MATMUL_MATRIX_SCALE_SCALAR_32F};
        lp.c = ref_out.get();
        lp.c_type = CUDA_R_32F;
        LtMatmul ref(handle_, lp, workspace_.get(), kWorkspaceBytes);
        ref.run(stream_);
        GS_CUDA(cudaStreamSynchronize(stream_));
        reference_ = std::move(ref_out);
      }
      AccuracyCell cell;
      cell.ok = true;
      cell.emulated = emulate;
      if (!emulate) {
        RecipeGemm rg(handle_, g, recipe, *sources_, workspace_.get(), opts_.recipe);
        for (int i = 0; i < 3; ++i) rg.per_gemm_step(stream_);  // delayed scaling: a real history
        cell.rel_error = rel_frobenius_error(sources_->c.get(), true, reference_.get<float>(), mn, nullptr, stream_);
        return cell;
      }
      // Emulation: our quantization kernels, dequantized to BF16 (exact for these formats), a
      // BF16 GEMM with FP32 accumulation and output, times the NVFP4 global scales.
      RecipeGemm rg(handle_, g, recipe, *sources_, workspace_.get(), opts_.recipe, /*with_gemm=*/false);
      rg.quantize_only(stream_);
      DeviceBuffer lq(static_cast<size_t>(g.m) * static_cast<size_t>(g.k) * 2);
      DeviceBuffer rq(static_cast<size_t>(g.n) * static_cast<size_t>(g.k) * 2);
      DeviceBuffer out(mn * sizeof(float));
      GS_CUDA(cudaMemsetAsync(out.get(), 0xFF, out.bytes(), stream_));  // NaN until written, as the reference
      rg.l()->dequantize_to(lq.get<__nv_bfloat16>(), stream_);
      rg.r()->dequantize_to(rq.get<__nv_bfloat16>(), stream_);
      LtProblem lp;
      lp.m = g.m; lp.n = g.n; lp.k = g.k;
      lp.l = {lq.get(), CUDA_R_16BF, true, nullptr, CUBLASLT_MATMUL_MATRIX_SCALE_SCALAR_32F};
      lp.r = {rq.get(), CUDA_R_16BF, true, nullptr, CUBLASLT_MATMUL_MATRIX_SCALE_SCALAR_32F};
      lp.c = out.get();
      lp.c_type = CUDA_R_32F;
      LtMatmul mm(handle_, lp, workspace_.get(), kWorkspaceBytes);
      mm.run(stream_);
      cell.rel_error = rel_frobenius_error(out.get(), false, reference_.get<float>(), mn, rg.alpha_device(), stream_);
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

  Cell measure_with(const Gemm& g, Precision p, Mode mode, const std::string& provider) override {
    if (provider == kProviderCublasLt) return measure(g, p, mode);
    GemmProvider* pv = find_provider(provider);
    if (!pv) return Cell::na(fmt::format("provider {} is not available in this build", provider));
    return measure_provider(*pv, g, p, mode);
  }

  Cell measure(const Gemm& g, Precision p, Mode mode) override {
    if (g.grouped()) return measure_grouped(g, p, mode);
    const Recipe recipe = make_recipe(p, g, opts_.recipe);
    if (std::string why = cell_shape_problem(g, p, opts_.recipe); !why.empty()) return Cell::na(why);
    const CellRange range(mode, g, p);  // NVTX: gemmscope/<mode>/<pass>/<op>/<precision>
    return guarded(g, p, mode, recipe, [&] {
      prepare_sources(g, Dist::Normal, recipe.fp32_accumulate);
      RecipeGemm rg(handle_, g, recipe, *sources_, workspace_.get(), opts_.recipe, /*with_gemm=*/true,
                    operand_work(mode, g, Side::Left, recipe, opts_.recipe),
                    operand_work(mode, g, Side::Right, recipe, opts_.recipe), /*cache=*/nullptr, opts_.gemm.num_sms,
                    LtTuner::heuristic_count(opts_.gemm));
      if (rg.needs_prequantize()) rg.prequantize(stream_);
      std::optional<LtTuner> tuner;
      std::optional<AutotuneRecord> tuned;
      // Tuned in the L2 state the timed loop will see (--l2 cold flushes before every call).
      if (opts_.gemm.algo != AlgoChoice::Heuristic) {
        tuner.emplace(*rg.matmul(), opts_.gemm);
        tuned = tuner->tune(stream_, l2_flush());
      }
      LoopBody body;
      body.cost = [&](int) { return rg.step_ops(); };
      body.enqueue = [&](int) { rg.step(stream_); };
      const Gap gap = step_gap(g, p, mode);  // the step context's work after each iteration of g
      Cell cell = timed_cell(body, gap);
      // The pick re-measured against the heuristic's choice in this timed loop (lt_tuner.hpp). On
      // an H100 a 192x192 cluster-2x1 BF16 pick that won every tuning sample ran 6% slower here.
      if (tuner) cell = tuner->recheck(std::move(cell), *tuned, [&] { return timed_cell(body, gap); });
      // Kernel records: a few more iterations, outside the timed loop (kernel_trace.hpp).
      cell.kernels = trace_cell(opts_.gemm, stream_, [&] { rg.step(stream_); });
      cell.kernels.algo = rg.matmul()->algo_record();
      cell.kernels.autotune = tuned;
      return cell;
    });
  }

 private:
  // The timed loop (chunked behind the launch gate, timed_loop.hpp) as a cell.
  // --l2 cold: enqueues a write of a buffer twice the L2's size, which evicts the operands (its
  // time is never in the samples); empty with --l2 warm.
  std::function<void()> l2_flush() {
    if (!opts_.timing.l2_cold()) return {};
    if (!l2_flush_.get()) {
      const int64_t l2 = std::max<int64_t>(device_info().l2_bytes, int64_t{16} << 20);
      l2_flush_ = DeviceBuffer(static_cast<size_t>(2 * l2));
    }
    return [this] { GS_CUDA(cudaMemsetAsync(l2_flush_.get(), 0, l2_flush_.bytes(), stream_)); };
  }

  // The step context's work after each iteration of `g` (step_context_runner.hpp); empty without one.
  struct Gap {
    std::function<void()> run;
    int cost = 0;
  };
  Gap step_gap(const Gemm& g, Precision p, Mode mode) {
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

  // The GEMMs that bring the GPU to its loaded power state (power_hold.hpp), made on first use;
  // null when neither the GPU warm-up nor --power-hold on needs them, or when they cannot be made
  // here (said once in the notes, naming what goes without them).
  PowerHold* power_hold() {
    if (!opts_.timing.power_hold && opts_.timing.gpu_warmup_s <= 0) return nullptr;
    if (!hold_ && hold_note_.empty()) {
      // What goes without it: the GPU warm-up always, and the hold before each loop when asked for.
      const auto without = [this](const std::string& why) {
        return fmt::format("power hold: {}; the GPU warm-up was skipped{}", why,
                           opts_.timing.power_hold ? " and timed loops start from whatever power state the gap "
                                                     "before them left (--power-hold on has no effect)"
                                                   : "");
      };
      try {
        hold_ = std::make_unique<PowerHold>(handle_.get(), workspace_.get(), kWorkspaceBytes, stream_.get());
      } catch (const CudaError& e) {
        cudaGetLastError();
        throw_if_context_lost(e.what(), "the power hold");
        hold_note_ = without(fmt::format("its GEMM could not be set up ({})", e.what()));
      } catch (const CublasError& e) {
        cudaStreamSynchronize(stream_.get());
        hold_note_ = without(fmt::format("cuBLASLt ran no BF16 GEMM for it ({})", e.what()));
      }
    }
    return hold_.get();
  }

  Cell timed_cell(LoopBody body, const Gap& step) {
    auto flush = l2_flush();
    auto gap = step.run;
    if (flush || gap) {
      body.between = [flush, gap] {
        if (gap) gap();
        if (flush) flush();
      };
      body.between_cost = (flush ? 1 : 0) + (gap ? step.cost : 0);
    }
    ProfileBracket profiled(opts_.gemm.profile);  // --profile: the timed loop (and its warm-up) only
    std::function<void(double)> hold;
    if (opts_.timing.power_hold)
      if (PowerHold* h = power_hold()) hold = [this, h](double host_ms) { h->enqueue(stream_, PowerHold::hold_ms(host_ms)); };
    const LoopResult lr = run_timed_loop(*gate_, events_, stream_, body, opts_.timing.warmup, opts_.timing.iters,
                                         probe_.get(), kChunkOps, hold);
    profiled.stop();
    Cell cell = Cell::measured(summarize(lr.samples_ms));
    cell.clock = lr.clock;
    cell.gate_timed_out = lr.gate_timed_out;
    return cell;
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

  // A grouped GEMM (grouped_gemm.hpp), then the dense GEMM of the same total padded size beside it.
  Cell measure_grouped(const Gemm& g, Precision p, Mode mode) {
    // The layout and the per-expert shape rule: core/recipes/grouped.hpp, the rule the dry run predicts with.
    if (std::string why = cell_shape_problem(g, p, opts_.recipe); !why.empty()) return Cell::na(why);
    const std::vector<int64_t> padded = padded_group(g, p);
    int64_t sum = 0;
    for (int64_t x : padded) sum += x;
    const Gemm dense = expert_gemm(g, sum);
    const Recipe recipe = make_recipe(p, dense, opts_.recipe);
    if (sum == 0 && g.group_dim == GroupDim::M) return Cell::na("no rows routed to any expert");
    Cell cell = guarded(g, p, mode, recipe, [&] {
      const int streams = std::max(opts_.grouped_streams, 0);
      const size_t need = GroupedGemm::quantized_bytes(g, padded, p, mode) + static_cast<size_t>(streams) * kWorkspaceBytes;
      if (std::string why = ensure_grouped_sources(g, padded, recipe.fp32_accumulate, need); !why.empty())
        return Cell::na(why);
      GroupedGemm gg(handle_, *grouped_src_, p, mode, opts_.recipe, streams, stream_, workspace_.get(), &algo_cache_);
      gg.prepare();
      Cell timed = timed_cell(gg.body(), step_gap(g, p, mode));
      // Kernel records of whole iterations (every expert's launches) when the experts run one after
      // another: their GEMM time beside the cell's event time tells the gaps between the experts'
      // launches apart from the kernels. On several streams the experts' kernels overlap, and their
      // summed durations compare with nothing in the cell: no records.
      if (streams <= 1) timed.kernels = trace_cell(opts_.gemm, stream_, [&] { gg.run_once(); });
      return timed;
    });
    if (!cell.ok || sum == 0) return cell;
    // Grouping efficiency = dense / grouped: one GEMM with the summed (padded) size, same recipe
    // and mode. Its operands replace the grouped ones only if both do not fit together.
    const Cell d = measure(dense, p, mode);
    if (d.ok) cell.dense_equiv_ms = d.stats.mean_ms;  // the statistic the reports use
    return cell;
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

  GemmProvider* find_provider(const std::string& name) {
    if (providers_.empty()) {
      providers_ = make_providers();
      for (auto& pv : providers_) pv->configure(opts_);
    }
    for (auto& pv : providers_)
      if (name == pv->name()) return pv.get();
    return nullptr;
  }

  // A cell through a provider other than cuBLASLt (provider.hpp): the same operands, shape rules,
  // memory check, timed loop and kernel records as the cuBLASLt path; the provider builds and
  // launches the kernels. Grouped cells get no dense-equivalent time (that GEMM is cuBLASLt's).
  Cell measure_provider(GemmProvider& pv, const Gemm& g, Precision p, Mode mode) {
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
    const CellRange range(mode, g, p);
    return guarded(g, p, mode, recipe, [&] {
      std::unique_ptr<ProviderRun> run;
      if (g.grouped()) {
        if (std::string why = ensure_grouped_sources(g, padded, recipe.fp32_accumulate, 0); !why.empty())
          return Cell::na(why);
        run = pv.grouped(*grouped_src_, recipe, mode, opts_.device);
      } else {
        prepare_sources(g, Dist::Normal, recipe.fp32_accumulate);
        run = pv.dense(g, recipe, mode, *sources_, opts_.device);
      }
      LoopBody body;
      body.cost = [&](int) { return run->ops(); };
      body.enqueue = [&](int) { run->iteration(stream_); };
      Cell cell = timed_cell(body, step_gap(g, p, mode));
      cell.kernels = trace_cell(opts_.gemm, stream_, [&] { run->iteration(stream_); });
      cell.kernels.provider = pv.name();
      cell.kernels.config = run->config();
      return cell;
    });
  }

  void release() {
    context_.reset();  // its buffers and attention graphs before the stream
    hold_.reset();
    providers_.clear();
    sources_.reset();
    grouped_src_.reset();
    stream_.reset();
    handle_.reset();
  }

  // A sticky CUDA error (illegal address, launch failure, ...) poisons the context: every later
  // cell would be an error too. Stop the run with the cause instead of reporting N/A cells.
  static void throw_if_context_lost(const std::string& what, const std::string& where) {
    const cudaError_t e = cudaDeviceSynchronize();
    if (e == cudaSuccess) return;
    throw std::runtime_error(fmt::format("the GPU reported an unrecoverable error during {} ({}; then {}); "
                                         "no further measurement is possible in this process",
                                         where, what, cudaGetErrorString(e)));
  }

  static std::string describe(const Recipe& r) {
    return fmt::format("{} {}/{} x {} {}/{}", to_string(r.a.format), to_string(r.a.scaling), "L",
                       to_string(r.b.format), to_string(r.b.scaling), "R");
  }

  // fp32: C is an FP32 main gradient (Wgrad accumulating, Recipe::fp32_accumulate).
  void prepare_sources(const Gemm& g, Dist d = Dist::Normal, bool fp32 = false) {
    if (sources_ && sources_->matches(g, fp32) && dist_ == d) return;
    sources_.reset();  // free the previous operands before allocating the next
    reference_ = DeviceBuffer();
    dist_ = d;
    sources_.emplace(GemmSources::allocate(g, fp32));
    const size_t le = static_cast<size_t>(g.m) * static_cast<size_t>(g.k);
    const size_t re = static_cast<size_t>(g.k) * static_cast<size_t>(g.n);
    // Inputs ~ N(0,1), weights ~ N(0, 0.02) as a trained layer roughly has; fixed seeds.
    // --dist outliers: activations and gradients get 0.1% of elements scaled by 50 (weights stay normal).
    auto fill = [&](__nv_bfloat16* x, size_t n, uint64_t seed, Role r) {
      const float sd = r == Role::Weight ? 0.02f : 1.0f;
      if (d == Dist::Outliers && r != Role::Weight) fill_outliers_bf16(x, n, seed, sd, 1e-3f, 50.f, stream_);
      else fill_normal_bf16(x, n, seed, sd, stream_);
    };
    fill(sources_->l.get<__nv_bfloat16>(), le, opts_.seed * 2 + 1, g.a.role);
    fill(sources_->r.get<__nv_bfloat16>(), re, opts_.seed * 2 + 2, g.b.role);
    GS_CUDA(cudaMemsetAsync(sources_->c.get(), 0, sources_->c.bytes(), stream_));
    GS_CUDA(cudaStreamSynchronize(stream_));
  }

  EngineOptions opts_;
  int cc_ = 0;  // compute capability, read once
  std::unique_ptr<ClockProbe> probe_;
  std::unique_ptr<LaunchGate> gate_;  // created after cudaSetDevice
  LtHandle handle_;
  Stream stream_;
  DeviceBuffer workspace_;
  DeviceBuffer l2_flush_;  // --l2 cold: written between iterations
  std::unique_ptr<StepContextRunner> context_;  // --step-context / --step-other-ms: run between iterations
  std::unique_ptr<PowerHold> hold_;  // --power-hold and the GPU warm-up (power_hold())
  std::string hold_note_;            // why there is none, once
  EventPool events_;
  std::optional<GemmSources> sources_;
  std::unique_ptr<GroupedSources> grouped_src_;  // the operands of the last grouped GEMM
  LtAlgoCache algo_cache_;
  std::vector<std::unique_ptr<GemmProvider>> providers_;  // made on first use (provider.hpp)                        // grouped path: heuristic per distinct problem
  Dist dist_ = Dist::Normal;
  DeviceBuffer reference_;  // FP32 reference output for the current sources (accuracy)
};

}  // namespace

std::unique_ptr<Engine> make_engine(const EngineOptions& options, std::string& why) {
  int n = 0;
  cudaError_t e = cudaGetDeviceCount(&n);
  if (e != cudaSuccess) {
    // Without the driver library the runtime says "driver version is insufficient", which sends
    // people to upgrade a driver they do not have: ask the loader first (core/run/engine.hpp).
    void* libcuda = dlopen("libcuda.so.1", RTLD_LAZY | RTLD_LOCAL);
    why = cuda_unavailable_reason(libcuda != nullptr, cudaGetErrorString(e));
    if (libcuda) dlclose(libcuda);
    cudaGetLastError();
    return nullptr;
  }
  if (n == 0) { why = "no CUDA device found"; return nullptr; }
  if (options.device < 0 || options.device >= n) {
    why = fmt::format("--device {} does not exist ({} device(s))", options.device, n);
    return nullptr;
  }
  try {
    return std::make_unique<CudaEngine>(options);
  } catch (const std::exception& ex) {
    why = ex.what();
    return nullptr;
  }
}

}  // namespace gs::cuda
