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


namespace {

using json = nlohmann::json;

constexpr size_t kMaxClusters = 256;

std::string normalized(const std::string& s) {
  std::string out;
  for (char c : ascii_lower(s)) out += (c == '_' || c == ' ') ? '-' : c;
  return out;
}

std::string text_field(const json& obj, const char* key, const std::string& where, size_t max_chars) {
  const auto it = obj.find(key);
  if (it == obj.end() || !it->is_string() || it->get<std::string>().empty())
    throw UsageError(fmt::format("{}.{} must be a non-empty string", where, key));
  const std::string v = it->get<std::string>();
  if (v.size() > max_chars)
    throw UsageError(fmt::format("{}.{} must be at most {} characters, got {}", where, key, max_chars, json_value_hint(*it)));
  return v;
}

// A sourced number that must be present and within [lo, hi].
Sourced bounded(const json& obj, const char* key, const std::string& where, double lo, double hi) {
  const std::optional<Sourced> s = read_sourced(obj, key, where);
  if (!s) throw UsageError(fmt::format("{}.{} is needed (null is not allowed)", where, key));
  if (s->value < lo || s->value > hi)
    throw UsageError(fmt::format("{}.{}.value must be between {} and {}, got {}", where, key, lo, hi, s->value));
  return *s;
}

}  // namespace

ClusterDb parse_cluster_db(const json& doc, const std::string& where) {
  const json* list = &datasheet_entries(doc, "gemmscope.clusters/1", "clusters", kMaxClusters, where, "cluster file", "clusters");
  ClusterDb db;
  db.origin = where;
  std::set<std::string> keys;
  for (size_t i = 0; i < list->size(); ++i) {
    const json& c = (*list)[i];
    std::string w = fmt::format("{}: clusters[{}]", where, i);
    if (!c.is_object()) throw UsageError(w + " is not an object");
    ClusterSpec s;
    s.key = text_field(c, "key", w, 40);
    w = fmt::format("{}: {}", where, printable(s.key));
    if (!keys.insert(normalized(s.key)).second) throw UsageError(fmt::format("{}: key {} twice", where, printable(s.key)));
    s.name = text_field(c, "name", w, 200);
    s.gpu = text_field(c, "gpu", w, 40);
    s.gpus_per_node = bounded(c, "gpus_per_node", w, 1, 1024);
    s.nvlink_domain = bounded(c, "nvlink_domain", w, 1, 4096);
    if (s.gpus_per_node.value != static_cast<double>(s.node_gpus()) || s.nvlink_domain.value != static_cast<double>(s.domain_gpus()))
      throw UsageError(w + ": gpus_per_node and nvlink_domain must be whole numbers");
    if (s.domain_gpus() < s.node_gpus())
      throw UsageError(fmt::format("{}: nvlink_domain ({}) must be at least gpus_per_node ({})", w, s.domain_gpus(), s.node_gpus()));
    s.nvlink_gbs = bounded(c, "nvlink_gbs", w, 1e-3, 1e5);
    s.scaleout_gbs = bounded(c, "scaleout_gbs", w, 1e-3, 1e5);
    s.nvlink_step_us = bounded(c, "nvlink_step_us", w, 1e-3, 1e4);
    s.net_step_us = bounded(c, "net_step_us", w, 1e-3, 1e4);
    s.base_us = bounded(c, "base_us", w, 1e-3, 1e4);
    s.nvlink_efficiency = bounded(c, "nvlink_efficiency", w, 1e-3, 1.0);
    s.scaleout_efficiency = bounded(c, "scaleout_efficiency", w, 1e-3, 1.0);
    s.nvls_efficiency = read_sourced(c, "nvls_efficiency", w);
    if (s.nvls_efficiency && s.nvls_efficiency->value > 1.0)
      throw UsageError(fmt::format("{}.nvls_efficiency.value must be between 0 and 1, got {}", w, s.nvls_efficiency->value));
    s.nvls_base_us = read_sourced(c, "nvls_base_us", w);
    if (s.nvls_efficiency.has_value() != s.nvls_base_us.has_value())
      throw UsageError(w + ": nvls_efficiency and nvls_base_us are given together (or both null)");
    if (s.nvls_base_us && s.nvls_base_us->value > 1e4)
      throw UsageError(fmt::format("{}.nvls_base_us.value must be at most 10000, got {}", w, s.nvls_base_us->value));
    s.tree_efficiency = bounded(c, "tree_efficiency", w, 1e-3, 1.0);
    if (const auto n = c.find("notes"); n != c.end()) {
      if (!n->is_array() || n->size() > 64) throw UsageError(w + ".notes must be a list of at most 64 strings");
      for (const json& x : *n) {
        if (!x.is_string()) throw UsageError(w + ".notes must be a list of strings");
        s.notes.push_back(clip_text(x.get<std::string>(), 400));
      }
    }
    s.origin = where;
    db.clusters.push_back(std::move(s));
  }
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
    if (normalized(c.key) == normalized(key)) return c;
  std::vector<std::string> keys;
  for (const ClusterSpec& c : clusters) keys.push_back(c.key);
  throw UsageError(fmt::format("unknown cluster '{}'{} (known: {}; or a cluster JSON file)", clip_text(key, 80),
                               did_you_mean(key, keys), known_keys()));
}

ClusterSpec resolve_cluster(const std::string& name_or_file) {
  for (const ClusterSpec& c : cluster_presets().clusters)
    if (normalized(c.key) == normalized(name_or_file)) return c;
  struct stat st {};
  const bool looks_like_file = name_or_file.find('/') != std::string::npos || name_or_file.find(".json") != std::string::npos ||
                               ::stat(name_or_file.c_str(), &st) == 0;
  if (!looks_like_file) return cluster_presets().find(name_or_file);  // throws, with the known names
  const ClusterDb db = parse_cluster_db(read_json_file(name_or_file, "cluster file"), clip_text(name_or_file));
  return db.clusters.front();
}

}  // namespace gs
