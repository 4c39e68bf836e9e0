#include "core/providers/lt_search.hpp"

#include <algorithm>

namespace gs {

namespace {

bool has_id(const std::vector<int32_t>& ids, int32_t id) { return std::find(ids.begin(), ids.end(), id) != ids.end(); }

}  // namespace

std::vector<LtSearchGroup> lt_search_space(const std::vector<LtAlgoCaps>& base, const std::vector<LtAlgoCaps>& others,
                                           const std::vector<uint16_t>& clusters) {
  std::vector<LtSearchGroup> out;
  auto add = [&out](LtSearchGroup g) {
    if (!g.configs.empty()) out.push_back(std::move(g));
  };
  // 1. One setting changed on each candidate.
  LtSearchGroup near;
  for (size_t b = 0; b < base.size(); ++b) {
    const LtAlgoCaps& c = base[b];
    for (uint32_t t : c.tiles) near.configs.push_back({.source = b, .tile = t});
    for (uint32_t st : c.stages) near.configs.push_back({.source = b, .stages = st});
    for (uint16_t cl : clusters) near.configs.push_back({.source = b, .cluster = cl});
    for (int32_t o = 0; o <= std::min(c.custom_option_max, kLtSearchMaxCustomOption); ++o)
      for (uint32_t sw = 0; sw <= (c.cta_swizzling ? 1u : 0u); ++sw)
        near.configs.push_back({.source = b, .custom = static_cast<uint32_t>(o), .swizzle = sw});
  }
  add(std::move(near));
  // 2. The other algorithms for these types: tile x stages (an algorithm that lists no stages
  //    keeps its own setting).
  std::vector<int32_t> base_ids;
  for (const LtAlgoCaps& c : base) base_ids.push_back(c.id);
  for (size_t i = 0; i < others.size(); ++i) {
    const LtAlgoCaps& c = others[i];
    if (has_id(base_ids, c.id)) continue;
    LtSearchGroup g;
    g.max_kept = kLtSearchPerOtherAlgo;
    const std::vector<uint32_t> stages = c.stages.empty() ? std::vector<uint32_t>{c.stages_setting} : c.stages;
    for (uint32_t t : c.tiles)
      for (uint32_t st : stages) g.configs.push_back({.other = true, .source = i, .tile = t, .stages = st});
    add(std::move(g));
  }
  // 3. Every tile x stages x cluster of each candidate's algorithm, from its first candidate.
  LtSearchGroup grid;
  std::vector<int32_t> seen;
  for (size_t b = 0; b < base.size(); ++b) {
    const LtAlgoCaps& c = base[b];
    if (has_id(seen, c.id)) continue;
    seen.push_back(c.id);
    for (uint32_t t : c.tiles)
      for (uint32_t st : c.stages)
        for (uint16_t cl : clusters) grid.configs.push_back({.source = b, .tile = t, .stages = st, .cluster = cl});
  }
  add(std::move(grid));
  return out;
}

}  // namespace gs
