#include "core/step/step_kernels.hpp"

#include <gtest/gtest.h>

namespace gs {

TEST(StepKernels, AdamWBytesPerStorage) {
  StepKernelSpec s;
  s.kind = StepKernelKind::AdamW;
  s.elements = 1000;
  s.storage = ParamStorage::Bf16;
  EXPECT_DOUBLE_EQ(step_kernel_bytes(s), 1000.0 * 14);  // read p, g, m, v, write p, m, v: 2 bytes each
  s.storage = ParamStorage::Fp32;
  EXPECT_DOUBLE_EQ(step_kernel_bytes(s), 1000.0 * 28);
  s.storage = ParamStorage::Bf16MainFp32;
  EXPECT_DOUBLE_EQ(step_kernel_bytes(s), 1000.0 * 30);  // FP32 master state + the BF16 copy written
}

TEST(StepKernels, CrossEntropyFusedMovesLess) {
  StepKernelSpec s;
  s.kind = StepKernelKind::CrossEntropyFwd;
  s.rows = 8192;
  s.cols = 128256;
  const double logits = 8192.0 * 128256;
  s.fused = true;
  EXPECT_DOUBLE_EQ(step_kernel_bytes(s), logits * 2);
  s.fused = false;
  EXPECT_DOUBLE_EQ(step_kernel_bytes(s), logits * 14);
  s.kind = StepKernelKind::CrossEntropyBwd;
  EXPECT_DOUBLE_EQ(step_kernel_bytes(s), logits * 14);
  s.fused = true;
  EXPECT_DOUBLE_EQ(step_kernel_bytes(s), logits * 4);
}

TEST(StepKernels, EmbeddingBackwardZeroesTheTable) {
  StepKernelSpec s;
  s.kind = StepKernelKind::EmbeddingBwd;
  s.rows = 100;
  s.cols = 64;
  s.vocab = 1000;
  EXPECT_DOUBLE_EQ(step_kernel_bytes(s), 1000.0 * 64 * 2 + 100.0 * 64 * 6);
  EXPECT_EQ(s.describe(), "embedding-bwd 100 tokens x 64 of a 1000-row table");
}

}  // namespace gs
