// Cluster specs (core/parallel/cluster.hpp): the embedded presets, a user's file, the bounds.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "core/parallel/cluster.hpp"
#include "core/util/error.hpp"
#include "test_util.hpp"

using namespace gs;
using json = nlohmann::json;

namespace {

json one_cluster() {
  auto s = [](double v) { return json{{"value", v}, {"source", "test"}}; };
  return {{"key", "my-pod"}, {"name", "my pod"}, {"gpu", "H100"}, {"gpus_per_node", s(8)}, {"nvlink_domain", s(8)},
          {"nvlink_gbs", s(450)}, {"scaleout_gbs", s(25)}, {"nvlink_step_us", s(3)}, {"net_step_us", s(10)},
          {"base_us", s(8)}, {"nvlink_efficiency", s(0.8)}, {"scaleout_efficiency", s(0.9)}, {"nvls_efficiency", nullptr}, {"nvls_base_us", nullptr},
          {"tree_efficiency", s(0.6)}};
}
json doc(json c) { return {{"schema", "gemmscope.clusters/1"}, {"clusters", json::array({std::move(c)})}}; }

}  // namespace

TEST(Cluster, PresetsAreEmbeddedAndSourced) {
  const ClusterDb& db = cluster_presets();
  for (const char* k : {"dgx-h100", "dgx-h200", "dgx-a100", "h800-cluster", "hgx-b200", "gb200-nvl72"}) {
    const ClusterSpec& c = db.find(k);
    EXPECT_FALSE(c.gpus_per_node.source.empty());
    EXPECT_FALSE(c.scaleout_gbs.source.empty());
    EXPECT_EQ(c.origin, "preset");
  }
  EXPECT_EQ(db.find("GB200_NVL72").domain_gpus(), 72);
  EXPECT_EQ(db.find("dgx-h100").node_gpus(), 8);
  EXPECT_DOUBLE_EQ(db.find("dgx-h100").scaleout_gbs.value, 50.0);  // 8 x 400 Gb/s over 8 GPUs
  EXPECT_FALSE(db.find("dgx-a100").nvls_efficiency.has_value());
}

TEST(Cluster, UnknownNameSuggests) {
  try {
    cluster_presets().find("dgx-h10");
    FAIL();
  } catch (const UsageError& e) {
    EXPECT_NE(std::string(e.what()).find("did you mean"), std::string::npos) << e.what();
  }
}

TEST(Cluster, AUsersFileIsReadAndBounded) {
  const auto dir = test::scratch_dir("cluster");
  const auto path = dir / "pod.json";
  std::ofstream(path) << doc(one_cluster()).dump();
  const ClusterSpec c = resolve_cluster(path.string());
  EXPECT_EQ(c.key, "my-pod");
  EXPECT_DOUBLE_EQ(c.scaleout_gbs.value, 25.0);
  EXPECT_FALSE(c.nvls_efficiency.has_value());

  json bad = one_cluster();
  bad["gpus_per_node"]["value"] = 100000;
  EXPECT_THROW(parse_cluster_db(doc(bad), "f"), UsageError);
  bad = one_cluster();
  bad["nvlink_efficiency"]["value"] = 1.5;
  EXPECT_THROW(parse_cluster_db(doc(bad), "f"), UsageError);
  bad = one_cluster();
  bad["nvlink_domain"]["value"] = 4;  // smaller than a node
  EXPECT_THROW(parse_cluster_db(doc(bad), "f"), UsageError);
  bad = one_cluster();
  bad["scaleout_gbs"].erase("source");
  EXPECT_THROW(parse_cluster_db(doc(bad), "f"), UsageError);
  bad = one_cluster();
  bad.erase("tree_efficiency");
  EXPECT_THROW(parse_cluster_db(doc(bad), "f"), UsageError);
  EXPECT_THROW(parse_cluster_db(json{{"schema", "other"}}, "f"), UsageError);
  EXPECT_THROW(resolve_cluster((dir / "missing.json").string()), UsageError);
}
