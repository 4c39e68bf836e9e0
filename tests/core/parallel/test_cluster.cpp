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

  // A number outside its range: one line naming the file, the cluster, the field and the range.
  const auto refused = [](const json& c) { return test::usage_error_of([&] { parse_cluster_db(doc(c), "pod.json"); }); };
  json bad = one_cluster();
  bad["gpus_per_node"]["value"] = 100000;
  EXPECT_EQ(refused(bad), "pod.json: my-pod.gpus_per_node.value must be from 1 to 1024 GPUs, got 100000");
  bad = one_cluster();
  bad["nvlink_efficiency"]["value"] = 1.5;
  EXPECT_EQ(refused(bad), "pod.json: my-pod.nvlink_efficiency.value must be from 0.001 to 1, got 1.5");
  bad = one_cluster();
  bad["net_step_us"]["value"] = 1e6;
  EXPECT_EQ(refused(bad), "pod.json: my-pod.net_step_us.value must be from 0.001 to 10000 us, got 1e+06");
  bad = one_cluster();
  bad["nvls_efficiency"] = json{{"value", 2}, {"source", "t"}};
  bad["nvls_base_us"] = json{{"value", 5}, {"source", "t"}};
  EXPECT_EQ(refused(bad), "pod.json: my-pod.nvls_efficiency.value must be from 0 to 1, got 2");
  bad = one_cluster();
  bad["tree_efficiency"] = nullptr;
  EXPECT_EQ(refused(bad), "pod.json: my-pod.tree_efficiency is needed (null is not allowed)");
  bad = one_cluster();
  bad["key"] = std::string(41, 'k');
  EXPECT_NE(refused(bad).find("pod.json: clusters[0].key must be at most 40 characters"), std::string::npos) << refused(bad);
  json twice = doc(one_cluster());
  twice["clusters"].push_back(one_cluster());
  twice["clusters"][1]["key"] = "MY_POD";  // the same key as looked up
  EXPECT_NE(test::usage_error_of([&] { parse_cluster_db(twice, "pod.json"); }).find("twice"), std::string::npos);
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
