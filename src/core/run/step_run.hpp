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
// kernels measured once each. nullopt for a shapes plan.
std::optional<StepResult> measure_step(Engine& engine, const RunResult& r);
// The same without an engine (a dry run): FLOPs, bytes, launches, memory; no times.
std::optional<StepResult> plan_step(const RunResult& r);
// The step from `r`'s cells and step context with the step kernels of `kernels` (measured or not):
// what measure_step computes once the kernels ran; `timed` false leaves every time unknown.
StepResult step_from_result(const RunResult& r, const std::vector<StepKernelRun>& kernels, bool timed);

}  // namespace gs
