// --algo search's configurations (core/providers/lt_search.hpp) from given algorithm
// capabilities: the three stages in order, the custom-option cap, other algorithms of the
// heuristic's ids skipped, their own stages setting where they list none, one grid per algorithm.
#include <gtest/gtest.h>

#include <ostream>
#include <vector>

#include "core/providers/lt_search.hpp"

namespace gs {
inline bool operator==(const LtConfig& a, const LtConfig& b) {
  return a.other == b.other && a.source == b.source && a.tile == b.tile && a.stages == b.stages &&
         a.cluster == b.cluster && a.custom == b.custom && a.swizzle == b.swizzle;
}
// For gtest's messages.
inline std::ostream& operator<<(std::ostream& os, const LtConfig& c) {
  os << (c.other ? "other " : "base ") << c.source;
  if (c.tile) os << " tile " << *c.tile;
  if (c.stages) os << " stages " << *c.stages;
  if (c.cluster) os << " cluster " << *c.cluster;
  if (c.custom) os << " custom " << *c.custom;
  if (c.swizzle) os << " swizzle " << *c.swizzle;
  return os;
}
}  // namespace gs

namespace {

using gs::LtAlgoCaps;
using gs::LtConfig;

LtAlgoCaps caps(int32_t id, std::vector<uint32_t> tiles, std::vector<uint32_t> stages, int32_t custom_max = 0,
                bool swizzle = false, uint32_t stages_setting = 0) {
  LtAlgoCaps c;
  c.id = id;
  c.tiles = std::move(tiles);
  c.stages = std::move(stages);
  c.custom_option_max = custom_max;
  c.cta_swizzling = swizzle;
  c.stages_setting = stages_setting;
  return c;
}

LtConfig base(size_t b) { return {.source = b}; }
LtConfig other(size_t o) { return {.other = true, .source = o}; }
template <class F>
LtConfig with(LtConfig c, F f) {
  f(c);
  return c;
}

}  // namespace

TEST(LtSearch, NearestFirstThenOtherAlgorithmsThenTheGrid) {
  // Heuristic candidates: two of algorithm 21 (the second with other tiles) and one of 30.
  const std::vector<LtAlgoCaps> b = {caps(21, {1, 2}, {7}, 1, true), caps(30, {3}, {}), caps(21, {9}, {7})};
  // What cuBLASLt lists for the types: 21 and 30 are the heuristic's (skipped), 40 lists no
  // stages (its own setting, 11), 41 no tiles (nothing), 42 two stages.
  const std::vector<LtAlgoCaps> o = {caps(21, {1}, {7}), caps(30, {3}, {}), caps(40, {4, 5}, {}, 0, false, 11),
                                     caps(41, {}, {8}), caps(42, {6}, {8, 10})};
  const std::vector<uint16_t> clusters = {100, 200};
  const std::vector<gs::LtSearchGroup> g = gs::lt_search_space(b, o, clusters);
  ASSERT_EQ(g.size(), 4u);

  // 1. One setting changed on each candidate, in the heuristic's order.
  std::vector<LtConfig> near;
  for (uint32_t t : {1u, 2u}) near.push_back(with(base(0), [&](LtConfig& c) { c.tile = t; }));
  near.push_back(with(base(0), [](LtConfig& c) { c.stages = 7; }));
  for (uint16_t cl : clusters) near.push_back(with(base(0), [&](LtConfig& c) { c.cluster = cl; }));
  for (uint32_t opt : {0u, 1u})
    for (uint32_t sw : {0u, 1u}) near.push_back(with(base(0), [&](LtConfig& c) { c.custom = opt; c.swizzle = sw; }));
  near.push_back(with(base(1), [](LtConfig& c) { c.tile = 3; }));
  for (uint16_t cl : clusters) near.push_back(with(base(1), [&](LtConfig& c) { c.cluster = cl; }));
  near.push_back(with(base(1), [](LtConfig& c) { c.custom = 0; c.swizzle = 0; }));  // no swizzle support: 0 only
  near.push_back(with(base(2), [](LtConfig& c) { c.tile = 9; }));
  near.push_back(with(base(2), [](LtConfig& c) { c.stages = 7; }));
  for (uint16_t cl : clusters) near.push_back(with(base(2), [&](LtConfig& c) { c.cluster = cl; }));
  near.push_back(with(base(2), [](LtConfig& c) { c.custom = 0; c.swizzle = 0; }));
  EXPECT_EQ(g[0].configs, near);
  EXPECT_GE(g[0].max_kept, gs::kLtMaxSearched);

  // 2. The other algorithms, each capped: tile x stages.
  const std::vector<LtConfig> o40 = {with(other(2), [](LtConfig& c) { c.tile = 4; c.stages = 11; }),
                                     with(other(2), [](LtConfig& c) { c.tile = 5; c.stages = 11; })};
  EXPECT_EQ(g[1].configs, o40);
  EXPECT_EQ(g[1].max_kept, gs::kLtSearchPerOtherAlgo);
  const std::vector<LtConfig> o42 = {with(other(4), [](LtConfig& c) { c.tile = 6; c.stages = 8; }),
                                     with(other(4), [](LtConfig& c) { c.tile = 6; c.stages = 10; })};
  EXPECT_EQ(g[2].configs, o42);
  EXPECT_EQ(g[2].max_kept, gs::kLtSearchPerOtherAlgo);

  // 3. The grid of each algorithm once, from its first candidate (21 from candidate 0; 30 lists
  //    no stages, so no grid).
  std::vector<LtConfig> grid;
  for (uint32_t t : {1u, 2u})
    for (uint16_t cl : clusters) grid.push_back(with(base(0), [&](LtConfig& c) { c.tile = t; c.stages = 7; c.cluster = cl; }));
  EXPECT_EQ(g[3].configs, grid);
}

TEST(LtSearch, CustomOptionsStopAt63AndEmptyInputsGiveNothing) {
  const std::vector<gs::LtSearchGroup> g = gs::lt_search_space({caps(5, {}, {}, 1000, true)}, {}, {});
  ASSERT_EQ(g.size(), 1u);
  ASSERT_EQ(g[0].configs.size(), 2u * 64u);  // options 0..63, swizzle 0 and 1
  EXPECT_EQ(*g[0].configs.back().custom, 63u);
  EXPECT_EQ(*g[0].configs.back().swizzle, 1u);
  EXPECT_TRUE(gs::lt_search_space({}, {caps(5, {1}, {2})}, {1}).size() == 1u);  // others only
  EXPECT_TRUE(gs::lt_search_space({}, {}, {1, 2}).empty());
  // A negative cap: no custom options at all.
  EXPECT_TRUE(gs::lt_search_space({caps(5, {}, {}, -1, true)}, {}, {}).empty());
}
