#include <gtest/gtest.h>
namespace gs { const char* version(); }
TEST(Version, IsSet) { EXPECT_STRNE(gs::version(), ""); }
