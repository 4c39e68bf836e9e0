// The step context in reports: the header lines saying what ran between timed iterations, and the
// step estimate per layer (GEMMs measured + attention + other work) with the step speedup a user
// gets beside the GEMM-only speedup.
#pragma once
#include <optional>
#include <string>
#include <vector>

#include "core/results/results.hpp"
#include "core/util/printer.hpp"

namespace gs {

// Header lines; a dry run says what would run (bytes, FLOPs), a measured run what ran (ms, sources).
void add_step_context(print::Document& d, const RunResult& r);
std::string step_context_lines(const RunResult& r);  // the same lines as text

// One precision's per-layer step estimate (an average layer of the model).
struct StepEstimate {
  std::optional<double> gemm_ms;  // measured GEMMs (with their quantization in training / per-GEMM modes)
  double attention_ms = 0;        // measured (cuDNN) or modelled: see StepContextInfo
  double other_ms = 0;            // modelled memory-bound kernels (+ FP8 casts in pre-quantized mode)
  std::optional<double> step_ms() const {
    return gemm_ms ? std::optional<double>(*gemm_ms + attention_ms + other_ms) : std::nullopt;
  }
};
// Per precision (indices of r.precisions); empty without a measured step context or a model plan.
std::vector<StepEstimate> step_estimates(const RunResult& r, size_t mode);

// The table: GEMMs | attention | other | step, GEMM speedup and step speedup vs BF16.
void add_step_estimate(print::Document& d, const RunResult& r, size_t mode);
std::string step_estimate_block(const RunResult& r, size_t mode);  // the same block as text

}  // namespace gs
