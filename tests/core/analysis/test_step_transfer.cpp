// The step hook of predict (core/analysis/step_transfer.hpp): attention by BF16 peak and attention
// efficiency, memory-bound work by bandwidth, the rest carried (CPU only).
#include <gtest/gtest.h>

#include <string>

#include "core/analysis/step_transfer.hpp"
#include "core/util/error.hpp"
#include "predict_test_data.hpp"

using namespace gs;

namespace {
const GpuDb& db() { return test::shipped_gpus(); }
}  // namespace

TEST(StepTransfer, EachPartByItsOwnRoofline) {
  const StepParts h100{28.0, 6.0, 4.0, 1.0};
  const GpuSpec &s = db().find("H100"), &t = db().find("B300");
  const StepTransfer x = transfer_step(h100, 14.0, s, t, 1e15);
  EXPECT_NEAR(x.attention_factor, 989.4 / 2250, 1e-9);
  EXPECT_NEAR(x.memory_factor, 3350.0 / 8000, 1e-9);
  EXPECT_NEAR(x.target.attention_ms, 6.0 * 989.4 / 2250, 1e-9);
  EXPECT_NEAR(x.target.memory_ms, 4.0 * 3350.0 / 8000, 1e-9);
  EXPECT_EQ(x.target.unscaled_ms, 1.0);
  EXPECT_EQ(x.target.gemm_ms, 14.0);
  EXPECT_NEAR(x.mfu, 1e15 / (x.target.total() * 1e-3) / 2250e12, 1e-12);
  EXPECT_NE(x.basis.find("no attention prior"), std::string::npos) << x.basis;
  // With attention efficiencies: the target's lower efficiency lengthens its attention.
  const StepTransfer y = transfer_step(h100, 14.0, s, t, 1e15, 0.75, 0.60);
  EXPECT_NEAR(y.attention_factor, (989.4 * 0.75) / (2250 * 0.60), 1e-9);
}

TEST(StepTransfer, RefusesAGpuWithoutABf16Peak) {
  GpuSpec t = db().find("B300");
  t.tflops[static_cast<int>(PeakFormat::BF16)].reset();
  EXPECT_THROW(transfer_step(StepParts{1, 1, 1, 0}, 1, db().find("H100"), t, 1e12), UsageError);
}
