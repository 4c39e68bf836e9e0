// --algo search: the cuBLASLt configurations beyond the heuristic's list, as a pure function of
// what cuBLASLt reports about the algorithms (their capabilities, as plain numbers), in the
// spirit of DeepGEMM's candidate configs (deepgemm_config.hpp). The backend (src/cuda/providers/cublaslt/lt_tuner)
// reads the capabilities, turns each proposed configuration into an algorithm, keeps those that
// cublasLtMatmulAlgoCheck accepts within the workspace and drops duplicates; the order here is
// the order they are kept in, nearest first:
//  1. for each heuristic candidate, every tile, every stages setting and every cluster shape its
//     algorithm lists, each changed on its own, then each custom option x CTA swizzle;
//  2. the other algorithms cuBLASLt has for the problem's types, up to kLtSearchPerOtherAlgo
//     kept configurations each (tile x stages from their defaults);
//  3. every tile x stages x cluster combination of each candidate's algorithm (from the first
//     candidate of that algorithm).
// Split-K and reduction stay as the source algorithm has them.
#pragma once
#include <cstddef>
#include <cstdint>
#include <limits>
#include <optional>
#include <vector>

namespace gs {

// Configurations kept at most per GEMM and recipe, and per other algorithm (stage 2).
inline constexpr size_t kLtMaxSearched = 384;
inline constexpr size_t kLtSearchPerOtherAlgo = 24;
// Custom options tried at most up to this one (cuBLASLt's cap can be larger).
inline constexpr int32_t kLtSearchMaxCustomOption = 63;

// What cuBLASLt reports for one algorithm (cublasLtMatmulAlgoCapGetAttribute / ConfigGetAttribute).
struct LtAlgoCaps {
  int32_t id = 0;                        // CUBLASLT_ALGO_CONFIG_ID
  std::vector<uint32_t> tiles, stages;   // CUBLASLT_ALGO_CAP_TILE_IDS / STAGES_IDS
  int32_t custom_option_max = 0;         // CUBLASLT_ALGO_CAP_CUSTOM_OPTION_MAX
  bool cta_swizzling = false;            // CUBLASLT_ALGO_CAP_CTA_SWIZZLING_SUPPORT
  uint32_t stages_setting = 0;           // CUBLASLT_ALGO_CONFIG_STAGES_ID as the algorithm is set
};

// One configuration: a source algorithm with some settings changed (unset: as the source has
// them). The backend applies them in this order: tile, stages, cluster, custom option, swizzle.
struct LtConfig {
  bool other = false;  // the source is others[source] (stage 2), else base[source]
  size_t source = 0;
  std::optional<uint32_t> tile, stages;
  std::optional<uint16_t> cluster;
  std::optional<uint32_t> custom, swizzle;
};

// Configurations tried in order; at most `max_kept` of them are kept (after cuBLASLt's check),
// and no more once kLtMaxSearched are kept overall.
struct LtSearchGroup {
  std::vector<LtConfig> configs;
  size_t max_kept = std::numeric_limits<size_t>::max();
};

// The search space, in the order above. `base`: the heuristic's candidates, best first;
// `others`: every algorithm cuBLASLt lists for the problem's types (those of base's ids are
// skipped here); `clusters`: the cluster shapes to try (the backend's CUBLASLT_CLUSTER_SHAPE_*
// values). Groups without configurations are left out.
std::vector<LtSearchGroup> lt_search_space(const std::vector<LtAlgoCaps>& base, const std::vector<LtAlgoCaps>& others,
                                           const std::vector<uint16_t>& clusters);

}  // namespace gs
