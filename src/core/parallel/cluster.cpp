#include "core/parallel/cluster.hpp"

#include <fmt/format.h>

#include <set>
#include <sys/stat.h>

#include "core/io/embedded_data.hpp"
#include "core/io/input_file.hpp"
#include "core/util/error.hpp"
#include "core/util/suggest.hpp"
#include "core/util/text_util.hpp"

namespace gs {

using json = nlohmann::json;

namespace {
constexpr size_t kMaxClusters = 256;
}  // namespace

ClusterDb parse_cluster_db(const json& doc, const std::string& where) {
  ClusterDb db;
  db.origin = where;
  const DatasheetSchema schema{"gemmscope.clusters/1", "clusters", kMaxClusters, "cluster file", "clusters", 40};
  for_each_datasheet_entry(doc, schema, where, [&](const json& c, const DatasheetEntry& e) {
    ClusterSpec s;
    s.key = e.key;
    const std::string& w = e.where;
    s.name = datasheet_text(c, "name", w, 200);
    s.gpu = datasheet_text(c, "gpu", w, 40);
    // Each number's range is checked where it is read (read_sourced: one line naming the file, the
    // field and the range).
    s.gpus_per_node = need_sourced(c, "gpus_per_node", w, {1, 1024, " GPUs"});
    s.nvlink_domain = need_sourced(c, "nvlink_domain", w, {1, 4096, " GPUs"});
    if (s.gpus_per_node.value != static_cast<double>(s.node_gpus()) || s.nvlink_domain.value != static_cast<double>(s.domain_gpus()))
      throw UsageError(w + ": gpus_per_node and nvlink_domain must be whole numbers");
    if (s.domain_gpus() < s.node_gpus())
      throw UsageError(fmt::format("{}: nvlink_domain ({}) must be at least gpus_per_node ({})", w, s.domain_gpus(), s.node_gpus()));
    s.nvlink_gbs = need_sourced(c, "nvlink_gbs", w, {1e-3, 1e5, " GB/s"});
    s.scaleout_gbs = need_sourced(c, "scaleout_gbs", w, {1e-3, 1e5, " GB/s"});
    s.nvlink_step_us = need_sourced(c, "nvlink_step_us", w, {1e-3, 1e4, " us"});
    s.net_step_us = need_sourced(c, "net_step_us", w, {1e-3, 1e4, " us"});
    s.base_us = need_sourced(c, "base_us", w, {1e-3, 1e4, " us"});
    s.nvlink_efficiency = need_sourced(c, "nvlink_efficiency", w, {1e-3, 1.0});
    s.scaleout_efficiency = need_sourced(c, "scaleout_efficiency", w, {1e-3, 1.0});
    s.nvls_efficiency = read_sourced(c, "nvls_efficiency", w, {0, 1.0});
    s.nvls_base_us = read_sourced(c, "nvls_base_us", w, {0, 1e4, " us"});
    if (s.nvls_efficiency.has_value() != s.nvls_base_us.has_value())
      throw UsageError(w + ": nvls_efficiency and nvls_base_us are given together (or both null)");
    s.tree_efficiency = need_sourced(c, "tree_efficiency", w, {1e-3, 1.0});
    if (const auto n = c.find("notes"); n != c.end()) {
      if (!n->is_array() || n->size() > 64) throw UsageError(w + ".notes must be a list of at most 64 strings");
      for (const json& x : *n) {
        if (!x.is_string()) throw UsageError(w + ".notes must be a list of strings");
        s.notes.push_back(clip_text(x.get<std::string>(), 400));
      }
    }
    s.origin = where;
    db.clusters.push_back(std::move(s));
  });
  return db;
}

const ClusterDb& cluster_presets() {
  static const ClusterDb db = [] {
    ClusterDb d = parse_cluster_db(parse_json_text(std::string(embedded_data("clusters.json").value()), "data/clusters.json"), "data/clusters.json");
    for (ClusterSpec& c : d.clusters) c.origin = "preset";
    return d;
  }();
  return db;
}

std::string ClusterDb::known_keys() const {
  std::string out;
  for (const ClusterSpec& c : clusters) out += (out.empty() ? "" : ", ") + printable(c.key);
  return out;
}

const ClusterSpec& ClusterDb::find(const std::string& key) const {
  for (const ClusterSpec& c : clusters)
    if (datasheet_key(c.key) == datasheet_key(key)) return c;
  std::vector<std::string> keys;
  for (const ClusterSpec& c : clusters) keys.push_back(c.key);
  throw UsageError(fmt::format("unknown cluster '{}'{} (known: {}; or a cluster JSON file)", clip_text(key, 80),
                               did_you_mean(key, keys), known_keys()));
}

ClusterSpec resolve_cluster(const std::string& name_or_file) {
  for (const ClusterSpec& c : cluster_presets().clusters)
    if (datasheet_key(c.key) == datasheet_key(name_or_file)) return c;
  struct stat st {};
  const bool looks_like_file = name_or_file.find('/') != std::string::npos || name_or_file.find(".json") != std::string::npos ||
                               ::stat(name_or_file.c_str(), &st) == 0;
  if (!looks_like_file) return cluster_presets().find(name_or_file);  // throws, with the known names
  const ClusterDb db = parse_cluster_db(read_json_file(name_or_file, "cluster file"), clip_text(name_or_file));
  return db.clusters.front();
}

}  // namespace gs
