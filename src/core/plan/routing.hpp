// Routing of one step's tokens to experts: how many rows each expert's GEMMs get. Seeded and
// reproducible (same seed, same counts on every platform: no std:: distributions, whose output is
// implementation-defined). With expert parallelism each of N ranks holds E/N experts and receives
// the rows routed to them from the whole EP group (N x tokens tokens); the busiest rank sets the
// step time, so the plan's grouped GEMMs are that rank's.
#pragma once
#include <cstdint>
#include <nlohmann/json_fwd.hpp>
#include <string>
#include <vector>

namespace gs {

// --routing random draws top-k experts for every token of the EP group: at most this many draws.
constexpr int64_t kMaxRandomDraws = int64_t{1} << 26;

enum class RoutingKind { Balanced, Random, LogNormal, Hot, File };

struct RoutingSpec {
  RoutingKind kind = RoutingKind::Random;
  double param = 0;   // lognormal: sigma; hot: the fraction of tokens routed to the hot expert
  std::string path;   // file
  std::string text() const;  // "random", "lognormal:1.0", "file:counts.json"
};
// "balanced" | "random" | "lognormal:SIGMA" | "hot:FRACTION" | "file:PATH"; UsageError otherwise.
RoutingSpec parse_routing(const std::string& s);

struct Routing {
  RoutingSpec spec;
  uint64_t seed = 0;
  int64_t experts = 0, top_k = 0;
  int64_t tokens = 0;         // per rank (micro-batch x sequence)
  int64_t expert_parallel = 1;
  double capacity_factor = 0; // 0: no capacity (nothing dropped)
  int64_t capacity = 0;       // rows per expert kept (capacity_factor > 0)
  int64_t dropped = 0;        // rows over capacity, dropped
  std::vector<int64_t> counts;     // rows per expert over the EP group, after dropping
  std::vector<int64_t> rank_rows;  // rows per EP rank
  int64_t busiest_rank = 0;
  int64_t assignments() const { return tokens * expert_parallel * top_k; }  // before dropping
  int64_t local_experts() const { return experts / expert_parallel; }
  std::vector<int64_t> local_counts(int64_t rank) const;  // the rank's experts' rows
  std::vector<int64_t> busiest_counts() const { return local_counts(busiest_rank); }
  // Imbalance: max rows per expert over the mean, experts with no rows, busiest rank over the mean rank.
  double max_over_mean() const;
  int64_t empty_experts() const;
  double busiest_over_mean_rank() const;
};

// Counts for `experts` experts, `top_k` per token, `tokens` tokens on each of `ep` ranks. Random:
// each token picks top_k distinct experts uniformly. Balanced: assignments spread evenly.
// LogNormal: expected loads proportional to exp(sigma * z_e), z_e ~ N(0,1) per expert (each
// expert capped at one row per token). Hot: one expert (picked by the seed) gets FRACTION of the
// tokens, the others share the rest evenly. File: the JSON list of per-expert counts at the path,
// which must have `experts` non-negative integers summing to tokens x ep x top_k, none above
// tokens x ep. Throws UsageError naming the problem.
Routing route(const RoutingSpec& spec, int64_t experts, int64_t top_k, int64_t tokens, int64_t ep, uint64_t seed,
              double capacity_factor = 0);

// A routing file's counts (regular file, at most 4 MiB, a JSON list of integers >= 0).
std::vector<int64_t> read_routing_file(const std::string& path);
// The same checks on a parsed document (`what` names it in messages): a non-empty list of at most
// kMaxExperts integers from 0 to 2^62.
std::vector<int64_t> routing_counts_from_json(const nlohmann::json& j, const std::string& what);

// The checks a Routing read from a file must pass (a result's plan.routing), the invariants
// route() keeps: sizes in range (experts at most kMaxExperts, top-k within them, tokens at most
// 2^24, expert parallelism dividing the experts), one count per expert from 0 to the step's tokens,
// and the counts plus the dropped rows summing to tokens x ranks x top-k (sums checked for
// overflow). UsageError "{where}: ..." otherwise.
void check_routing(const Routing& r, const std::string& where);

}  // namespace gs
