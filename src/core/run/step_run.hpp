// The whole step of a run (core/step/): its plan per (mode, precision), the step kernels the engine
// times (optimizer, gradient norm, zero-grad, loss, embedding, launch latency), and each group's
// time read from the run's result: the GEMM cells, the step context's attention and memory-bound
// work, the engine's step kernels, or bytes at the stand-in's calibrated rate. Every time carries
// its source (measured / modelled / given); a group without one leaves the step's time unknown
// rather than guessed.
#pragma once
#include <functional>
#include <optional>
#include <string>

#include "core/results/results.hpp"
#include "core/run/engine.hpp"

namespace gs {

// The step of every mode and precision of `r` (a model plan with its cells), the engine's step
// kernels measured once each and added to r as records (core/results/step_kernel_records.hpp,
// replacing any there). nullopt for a shapes plan.
std::optional<StepResult> measure_step(Engine& engine, RunResult& r);
// The same without an engine (a dry run): FLOPs, bytes, launches, memory; no times.
std::optional<StepResult> plan_step(const RunResult& r);
// The step from `r`'s records: its cells, its step context and its step kernel records (measured,
// N/A or predicted): what measure_step computes once the kernels ran; `timed` false leaves every
// time unknown. `name` names the file in the message of a step kernel record that breaks the
// schema (UsageError).
StepResult step_from_result(const RunResult& r, bool timed, const std::string& name = "result");

}  // namespace gs
