// Measurement modes: what the timed region of one GEMM holds besides the GEMM kernel. Users see
// to_string()'s names ("per-gemm", "training", "pre-quantized"); mode_from_string() also takes the
// names earlier versions wrote ("autocast" = per-gemm, "autocast-shared" = training).
//
//   PerGemm       every GEMM quantizes both of its BF16 operands into exactly the layout it needs
//                 (amax pass and cast, transposed where Hopper's TN-only FP8 needs it).
//   Training      (the default for model plans) every tensor of a linear layer (X, W, dY) is
//                 quantized once per step, as Transformer Engine does in training: its first GEMM
//                 casts it into both the rowwise and the transposed copy in one pass ("dual"),
//                 later GEMMs reuse them. X and W are quantized in Fprop, dY in Dgrad; Wgrad
//                 quantizes nothing.
//   PreQuantized  the GEMM kernel only.
// The per-layer sum of Training is the quantized step's GEMM cost as TE pays it; the per-GEMM
// cells say which GEMM carries which cast.
#pragma once
#include <string>

#include "core/plan/plan.hpp"

namespace gs {

enum class Mode { PerGemm, Training, PreQuantized };
const char* to_string(Mode m);          // "per-gemm", "training", "pre-quantized"
// Case-insensitive; also the old names "autocast" and "autocast-shared". UsageError on anything else.
Mode mode_from_string(const std::string& s);
const char* mode_description(Mode m);   // what the timed region holds (report headers)
const char* mode_short(Mode m);         // "Per-GEMM", "Training", "Pre-quant" (table columns)

enum class Side { Left, Right };  // Gemm::a (left, [m,k]) or Gemm::b (right, [k,n])

// What a GEMM's timed region does for one operand.
enum class QuantWork {
  None,  // nothing: the operand was quantized before the timed loop (or by an earlier GEMM)
  Own,   // quantized into this GEMM's layout only
  Dual,  // quantized once into both layouts (rowwise and transposed); this GEMM uses one, a later
         // GEMM of the same linear layer uses the other (see dual_consumer)
};
const char* to_string(QuantWork w);

// The quantization work of operand `side` of `g` in mode `m`. Standalone shapes (Pass::Shape)
// have no later GEMM to share with: training mode quantizes them like per-gemm.
QuantWork quant_work(Mode m, const Gemm& g, Side side);

// The GEMM (same op, scope and sizes) that consumes the other copy of a Dual quantization of
// operand `side` of `g`, and which of its operands that copy is: Fprop X -> Wgrad right, Fprop W
// -> Dgrad right, Dgrad dY -> Wgrad left. Throws std::invalid_argument when `side` of `g` is not
// quantized Dual in training mode.
struct DualConsumer {
  Gemm gemm;
  Side side;
};
DualConsumer dual_consumer(const Gemm& g, Side side);

}  // namespace gs
