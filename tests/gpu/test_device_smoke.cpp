#include <cuda_runtime.h>

#include "gpu_test_util.hpp"

TEST(GpuSmoke, DeviceReportsHopperOrNewer) {
  GS_REQUIRE_GPU();
  // The GPU engine targets sm_90+; on anything older the precision tests would be meaningless.
  EXPECT_GE(gs::test::compute_capability(), 90);
}
