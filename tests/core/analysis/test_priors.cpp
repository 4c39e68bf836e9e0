// Per-format efficiency priors (core/analysis/priors.hpp): parsing, size classes, lookup and
// interpolation, the carried efficiency, and the shipped data/priors.json (CPU only).
#include <gtest/gtest.h>

#include <chrono>
#include <cmath>
#include <string>

#include "core/analysis/priors.hpp"
#include "core/io/input_file.hpp"
#include "core/util/error.hpp"
#include "predict_test_data.hpp"
#include "test_util.hpp"

using namespace gs;
using nlohmann::json;

namespace {

const GpuDb& db() { return test::shipped_gpus(); }

json point(const std::string& gpu, const std::string& fmt, int64_t m, int64_t n, int64_t k, double tflops) {
  return {{"gpu", gpu}, {"format", fmt},     {"m", m},       {"n", n},
          {"k", k},     {"tflops", tflops},  {"output", "BF16"}, {"library", "cuBLAS"},
          {"source", "a published table, row 3"}};
}
// A list parameter: `doc({x})` with a json parameter is x itself under clang, a one-element list under gcc.
json doc(const std::vector<json>& points) { return {{"schema", "gemmscope.priors/1"}, {"points", json(points)}}; }

}  // namespace

TEST(Priors, SizeClassesAndRidgeRatio) {
  EXPECT_EQ(size_class(0.5), 0);
  EXPECT_EQ(size_class(1.5), 1);
  EXPECT_EQ(size_class(2.99), 1);
  EXPECT_EQ(size_class(3.0), 2);
  EXPECT_EQ(size_class(100), 3);
  EXPECT_STREQ(size_class_name(2), "mid");
  EXPECT_EQ(size_class_range(0), "x < 1.5");
  EXPECT_EQ(size_class_range(3), "x >= 6");
  // 1000 FLOP per byte over a 1000 TFLOP/s / 2000 GB/s ridge (500 FLOP/B): x = 2.
  EXPECT_DOUBLE_EQ(ridge_ratio(1e12, 1e9, 1000, 2000), 2.0);
  EXPECT_EQ(ridge_ratio(1e12, 0, 1000, 2000), 0);
}

TEST(Priors, FormatOfAKernelFollowsTheArchitecture) {
  EXPECT_EQ(prior_format(Precision::FP8Delayed, ArchPolicy(90)), PriorFormat::FP8);
  EXPECT_EQ(prior_format(Precision::FP8Block, ArchPolicy(90)), PriorFormat::FP8Block);
  EXPECT_EQ(prior_format(Precision::FP8Block, ArchPolicy(100)), PriorFormat::MXFP8);  // Blackwell runs it as MXFP8
  EXPECT_EQ(prior_format(Precision::NVFP4, ArchPolicy(103)), PriorFormat::NVFP4);
}

TEST(Priors, ClassMediansAndInterpolation) {
  // Three NVFP4 points on B200 (ridge 9000 / 8000 = 1125 FLOP/B): two in one class, one in another.
  const PriorDb p = parse_priors(doc({point("B200", "NVFP4", 2048, 6144, 4096, 3411.5), point("B200", "NVFP4", 16384, 6144, 4096, 3904.3),
                                      point("B200", "NVFP4", 8192, 8192, 8192, 5239)}),
                                 "t.json", db());
  ASSERT_EQ(p.points.size(), 3u);
  EXPECT_EQ(p.points[0].arch, "blackwell");
  EXPECT_NEAR(p.points[0].fraction, 3411.5 / 9000, 1e-9);
  const auto classes = class_priors(p, PriorFormat::NVFP4, "blackwell");
  ASSERT_EQ(classes.size(), 2u);
  EXPECT_EQ(classes[0].size_class, 1);  // low: both 6144x4096 points
  EXPECT_NEAR(classes[0].fraction, 0.5 * (3411.5 + 3904.3) / 9000, 1e-9);
  EXPECT_EQ(classes[1].size_class, 2);
  // At a class centre the prior is the median; between centres it is interpolated in log x.
  const Prior at_low = lookup_prior(p, PriorFormat::NVFP4, "blackwell", classes[0].x_center);
  ASSERT_TRUE(at_low.found);
  EXPECT_NEAR(at_low.fraction, classes[0].fraction, 1e-9);
  const double mid_x = std::sqrt(classes[0].x_center * classes[1].x_center);
  const Prior between = lookup_prior(p, PriorFormat::NVFP4, "blackwell", mid_x);
  EXPECT_NEAR(between.fraction, 0.5 * (classes[0].fraction + classes[1].fraction), 1e-9);
  EXPECT_NE(between.basis.find("between classes low and mid"), std::string::npos) << between.basis;
  // Up to 2x in x beyond the outermost centres takes the nearest class; further out, no prior.
  EXPECT_TRUE(lookup_prior(p, PriorFormat::NVFP4, "blackwell", 1.9 * classes[1].x_center).found);
  EXPECT_TRUE(lookup_prior(p, PriorFormat::NVFP4, "blackwell", classes[0].x_center / 1.9).found);
  EXPECT_FALSE(lookup_prior(p, PriorFormat::NVFP4, "blackwell", 2.1 * classes[1].x_center).found);
  EXPECT_FALSE(lookup_prior(p, PriorFormat::NVFP4, "blackwell", 0.5).found);
  const PriorDb high_only = parse_priors(doc({point("B200", "NVFP4", 16384, 16384, 16384, 5000)}), "h.json", db());
  ASSERT_EQ(size_class(high_only.points[0].x), 3);
  const Prior far = lookup_prior(high_only, PriorFormat::NVFP4, "blackwell", 2.0);
  EXPECT_FALSE(far.found);
  EXPECT_NE(far.why_not.find("published only in size classes high, more than 2x in x"), std::string::npos) << far.why_not;
  // No point of the format on the generation: no prior, and it says so.
  const Prior none = lookup_prior(p, PriorFormat::NVFP4, "ada", 3.0);
  EXPECT_FALSE(none.found);
  EXPECT_EQ(none.why_not, "no published NVFP4 GEMM measurement on a ada GPU");
  // The spread is the points' scatter around the prior at their own x (the low class's two
  // points: the lower one 6.6% under the class median).
  EXPECT_NEAR(at_low.spread_lo, 1 - 3411.5 / (0.5 * (3411.5 + 3904.3)), 1e-9);
  EXPECT_GE(at_low.spread_hi, 0.0);
}

TEST(Priors, ParserRefusesBadPoints) {
  const auto refused = [](json d, const std::string& part) {
    try {
      parse_priors(d, "t.json", db());
      ADD_FAILURE() << "accepted: " << d.dump();
    } catch (const UsageError& e) {
      EXPECT_NE(std::string(e.what()).find(part), std::string::npos) << e.what();
    }
  };
  refused(json{{"schema", "x"}}, "not a gemmscope priors file");
  refused(doc(json::array()), "non-empty list");
  refused(doc({point("H999", "BF16", 1, 1, 1, 1)}), "not a key of the GPU spec database");
  refused(doc({point("A100", "FP8", 1024, 1024, 1024, 100)}), "no dense FP8 peak");
  refused(doc({point("H100", "FP6", 1024, 1024, 1024, 100)}), "format must be one of");
  refused(doc({point("H100", "BF16", 0, 1024, 1024, 100)}), ".m must be an integer");
  refused(doc({point("H100", "BF16", 1024, 1024, 1024, -1)}), "tflops must be a positive number");
  refused(doc({point("H100", "BF16", 1024, 1024, 1024, 1900)}), "a sparse peak, or a wrong GPU");
  // A vanishing fraction of peak (5e-324 TFLOP/s is 0 once divided) would predict an infinite time.
  refused(doc({point("H100", "BF16", 1024, 1024, 1024, 5e-324)}), "under 0.01% of");
  refused(doc({point("H100", "BF16", 1024, 1024, 1024, 0.05)}), "under 0.01% of");
  json no_source = point("H100", "BF16", 1024, 1024, 1024, 500);
  no_source.erase("source");
  refused(doc({no_source}), "has no \"source\"");
}

TEST(Priors, CarriedEfficiencyTakesHalfTheRatioAndSpansNoneToAll) {
  Prior src, tgt;
  src.found = tgt.found = true;
  src.fraction = 0.80;
  tgt.fraction = 0.60;
  // Measured 0.64 on the source: 0.8x its prior; half of it (in log terms) carried.
  const CarriedEfficiency c = carry_efficiency(0.64, src, tgt);
  EXPECT_NEAR(c.ratio, 0.8, 1e-12);
  EXPECT_NEAR(c.efficiency, 0.60 * std::sqrt(0.8), 1e-12);
  EXPECT_NEAR(c.lo, 1 - std::sqrt(0.8), 1e-12);
  EXPECT_NEAR(c.hi, 1 / std::sqrt(0.8) - 1, 1e-12);
  // Without a source prior nothing is carried.
  src.found = false;
  EXPECT_NEAR(carry_efficiency(0.64, src, tgt).efficiency, 0.60, 1e-12);
}

TEST(Priors, ShippedFileParsesAndEveryPointHasASource) {
  const PriorDb& p = test::shipped_priors();
  ASSERT_GE(p.points.size(), 40u);
  for (const PriorPoint& x : p.points) {
    SCOPED_TRACE(x.source);
    EXPECT_GE(x.source.size(), 20u);
    EXPECT_GT(x.fraction, 0.05);
    EXPECT_LT(x.fraction, 1.0);
  }
  // The five formats and the generations the issue names have priors where published data exists.
  for (auto [f, arch] : {std::pair{PriorFormat::BF16, "ampere"}, {PriorFormat::BF16, "hopper"}, {PriorFormat::BF16, "blackwell"},
                         {PriorFormat::FP8, "hopper"}, {PriorFormat::FP8, "blackwell"}, {PriorFormat::MXFP8, "blackwell"},
                         {PriorFormat::NVFP4, "blackwell"}, {PriorFormat::FP8Block, "hopper"}})
    EXPECT_FALSE(class_priors(p, f, arch).empty()) << to_string(f) << " " << arch;
  // NVFP4 near the ridge keeps a smaller fraction of its peak than far above it (the published
  // B200 points), and less than FP8 at the same size class on Blackwell.
  const Prior nv_low = lookup_prior(p, PriorFormat::NVFP4, "blackwell", 2.0), nv_mid = lookup_prior(p, PriorFormat::NVFP4, "blackwell", 4.5);
  ASSERT_TRUE(nv_low.found && nv_mid.found);
  EXPECT_LT(nv_low.fraction, nv_mid.fraction);
  EXPECT_LT(nv_low.fraction, lookup_prior(p, PriorFormat::FP8, "blackwell", 2.0).fraction);
  // No published Ada measurement: no prior, and a bias direction for the formats that have one.
  EXPECT_FALSE(lookup_prior(p, PriorFormat::FP8, "ada", 5).found);
  EXPECT_NE(missing_prior_bias(PriorFormat::NVFP4, PriorFormat::FP8).find("likely too fast"), std::string::npos);
  EXPECT_NE(missing_prior_bias(PriorFormat::BF16, PriorFormat::BF16).find("no known direction"), std::string::npos);
}

// A priors file at its bound (10,000 points of one format and generation): a lookup is linear in
// the points (the spread recomputed each point's class priors: quadratic, minutes per prediction).
TEST(Priors, LookupIsLinearInThePoints) {
  json pts = json::array();
  for (int i = 0; i < 10000; ++i) pts.push_back(point("B200", "NVFP4", 2048 + 16 * (i % 512), 6144, 4096, 3000 + i % 97));
  const PriorDb p = parse_priors(doc(pts), "big.json", db());
  const auto t0 = std::chrono::steady_clock::now();
  for (int i = 0; i < 20; ++i) {
    const Prior pr = lookup_prior(p, PriorFormat::NVFP4, "blackwell", p.points[0].x);
    ASSERT_TRUE(pr.found);
    EXPECT_GE(pr.spread_hi, 0);
  }
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  EXPECT_LT(s, 5.0 * test::kSanitizerSlowdown) << "20 lookups over 10,000 points took " << s << " s";
}
