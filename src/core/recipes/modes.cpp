#include "core/recipes/modes.hpp"

#include <fmt/format.h>

#include <cctype>
#include <stdexcept>

#include "core/io/input_file.hpp"
#include "core/util/error.hpp"
#include "core/util/suggest.hpp"

namespace gs {

const char* to_string(Mode m) {
  switch (m) {
    case Mode::PerGemm: return "per-gemm";
    case Mode::Training: return "training";
    case Mode::PreQuantized: return "pre-quantized";
  }
  return "?";
}

Mode mode_from_string(const std::string& text) {
  std::string s = text;
  for (char& ch : s) ch = static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
  // Current names first, then the names results and scripts written before they were renamed use:
  // "autocast" was per-GEMM autocast, "autocast-shared" the training schedule.
  if (s == "per-gemm" || s == "autocast" || s == "per-gemm-autocast") return Mode::PerGemm;
  if (s == "training" || s == "autocast-shared" || s == "shared") return Mode::Training;
  if (s == "pre-quantized" || s == "prequantized" || s == "pre-quantize") return Mode::PreQuantized;
  throw UsageError(fmt::format("unknown mode '{}'{} (training, per-gemm, pre-quantized; old names autocast-shared = "
                               "training, autocast = per-gemm)",
                               clip_text(text, 80), did_you_mean(text, {"training", "per-gemm", "pre-quantized"})));
}

const char* mode_description(Mode m) {
  switch (m) {
    case Mode::PerGemm:
      return "Per-GEMM (timed: each GEMM quantizes both of its BF16 operands into its layout + the GEMM; "
             "the seed tool's autocast)";
    case Mode::Training:
      return "Training (timed: the GEMM + the quantization of the tensors it is first to use, each cast once "
             "per step into its rowwise and transposed copy, as Transformer Engine trains: X and W in Fprop, dY in "
             "Dgrad; Wgrad reuses copies)";
    case Mode::PreQuantized:
      return "Pre-quantized (timed: the GEMM kernel only; operands quantized before the timed loop)";
  }
  return "?";
}

const char* mode_short(Mode m) {
  switch (m) {
    case Mode::PerGemm: return "Per-GEMM";
    case Mode::Training: return "Training";
    case Mode::PreQuantized: return "Pre-quant";
  }
  return "?";
}

const char* to_string(QuantWork w) {
  switch (w) {
    case QuantWork::None: return "none";
    case QuantWork::Own: return "own";
    case QuantWork::Dual: return "dual";
  }
  return "?";
}

QuantWork quant_work(Mode m, const Gemm& g, Side side) {
  switch (m) {
    case Mode::PreQuantized: return QuantWork::None;
    case Mode::PerGemm: return QuantWork::Own;
    case Mode::Training: break;
  }
  switch (g.pass) {
    case Pass::Shape: return QuantWork::Own;
    case Pass::Fprop: return QuantWork::Dual;                                       // X and W
    case Pass::Dgrad: return side == Side::Left ? QuantWork::Dual : QuantWork::None;  // dY; W from Fprop
    case Pass::Wgrad: return QuantWork::None;                                       // X from Fprop, dY from Dgrad
  }
  return QuantWork::Own;
}

DualConsumer dual_consumer(const Gemm& g, Side side) {
  if (quant_work(Mode::Training, g, side) != QuantWork::Dual)
    throw std::invalid_argument(fmt::format("dual_consumer: {} operand of {} {} is not quantized dual",
                                            side == Side::Left ? "left" : "right", pass_label(g.pass), g.label()));
  // The three GEMMs of a linear (linear_gemm, plan.hpp): X of Fprop is Wgrad's right operand, W
  // of Fprop Dgrad's right one, dY of Dgrad Wgrad's left one. Grouped (expert) GEMMs keep their
  // per-expert sizes: the token dimension is M in Fprop and Dgrad, K in Wgrad.
  const auto consumer = [&](Pass pass, int64_t t, int64_t in, int64_t out) {
    return g.grouped() ? grouped_linear_gemm(pass, g.op, g.scope, g.group, in, out) : linear_gemm(pass, g.op, g.scope, t, in, out);
  };
  if (g.pass == Pass::Fprop) {
    const int64_t t = g.m, in = g.k, out = g.n;
    if (side == Side::Left) return {consumer(Pass::Wgrad, t, in, out), Side::Right};
    return {consumer(Pass::Dgrad, t, in, out), Side::Right};
  }
  const int64_t t = g.m, out = g.k, in = g.n;  // Dgrad, left operand dY
  return {consumer(Pass::Wgrad, t, in, out), Side::Left};
}

}  // namespace gs
