// Kernel providers: the libraries a cell's GEMM can run through (the provider axis, as the CUTLASS
// profiler has operation x provider). A run measures every cell once per provider it names
// (--provider); the result keeps one grid of cells per provider (RunResult::providers), and the
// reports add per-provider times and, per layer, each provider's total and the best available.
// Names only: what a provider can run, and how, is the backend's (src/cuda/providers/provider.hpp).
#pragma once
#include <optional>
#include <string>
#include <vector>

#include "core/results/results.hpp"
#include "core/util/printer.hpp"

namespace gs {

inline constexpr const char* kProviderCublasLt = "cublaslt";  // the default: what TE and PyTorch run
inline constexpr const char* kProviderCutlass = "cutlass";
inline constexpr const char* kProviderDeepGemm = "deepgemm";  // DeepSeek's FP8 kernels (core/providers/deepgemm_cells.hpp)

// Every provider name gemmscope knows, in the order "all" lists them (the default first). A new
// library adds its name here and its backend in src/cuda (provider.hpp).
const std::vector<std::string>& known_providers();
bool is_known_provider(const std::string& name);

// What a provider other than cuBLASLt runs, for the run's notes ("" for cuBLASLt, whose grouped
// GEMMs have their own note).
std::string provider_note(const std::string& name);

// --provider: "cublaslt", "cutlass", ..., "all", or a comma list of names (any case). The order is
// kept (the first provider's cells are the run's main columns); a name listed twice, an empty item
// or an unknown name is a UsageError naming --provider.
std::vector<std::string> parse_provider_option(const std::string& v);
std::string provider_option_string(const std::vector<std::string>& providers);  // "cublaslt,cutlass"

// The best available time of one cell over a run's providers: the fastest measured provider's
// mean, or nullopt when every provider's cell is N/A. `provider` gets its index.
std::optional<double> best_provider_ms(const RunResult& r, size_t mode, size_t gemm, size_t prec,
                                       size_t* provider = nullptr);

// Per-layer sums (as summarize_mode) of each provider's cells, and of the best available cell of
// every GEMM ("best"): a GEMM counts in "best" when at least one provider measured it.
struct ProviderSums {
  std::vector<std::vector<PrecisionSums>> per_provider;  // [provider][precision]
  std::vector<PrecisionSums> best;                       // [precision]
};
ProviderSums summarize_providers(const RunResult& r, size_t mode);

// The report block of a run with more than one provider: per GEMM and precision, every provider's
// time (N/A with the reason's footnote-free short form), the best; then, model runs, the full
// model's totals per provider and best available, and their speedups vs BF16. Nothing for a single-provider run.
void add_provider_block(print::Document& d, const RunResult& r, size_t mode);
std::string render_provider_block(const RunResult& r, size_t mode);  // the same block as text

}  // namespace gs
