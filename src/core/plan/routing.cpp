#include "core/plan/routing.hpp"
#include "core/util/text_util.hpp"

#include "core/io/input_file.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <charconv>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <numeric>
#include <sstream>

#include "core/util/error.hpp"
#include "core/util/suggest.hpp"
#include "core/model/moe_config.hpp"

namespace gs {

namespace {

// splitmix64: a small generator whose output is fixed by the seed on every platform.
struct Rng {
  uint64_t s;
  uint64_t next() {
    uint64_t z = (s += 0x9E3779B97F4A7C15ULL);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
    return z ^ (z >> 31);
  }
  // Uniform in [0, n) without modulo bias: reject the lowest (2^64 mod n) values.
  uint64_t below(uint64_t n) {
    const uint64_t threshold = (0 - n) % n;
    uint64_t x = next();
    while (x < threshold) x = next();
    return x % n;
  }
  double uniform01() { return static_cast<double>(next() >> 11) * 0x1.0p-53; }  // [0, 1)
  double normal() {  // Box-Muller
    const double u1 = 1.0 - uniform01(), u2 = uniform01();
    return std::sqrt(-2.0 * std::log(u1)) * std::cos(2.0 * M_PI * u2);
  }
};

double parse_param(const std::string& text, const std::string& whole) {
  double v = 0;
  const auto [ptr, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
  if (text.empty() || ec != std::errc() || ptr != text.data() + text.size() || !std::isfinite(v))
    throw UsageError(fmt::format("--routing '{}': '{}' is not a number", clip_text(whole, 80), clip_text(text, 40)));
  return v;
}

// Largest-remainder rounding of `share` (sums to `total`), each count at most `cap`; shares above
// the cap are capped and the excess spread over the others in proportion (water-filling).
std::vector<int64_t> apportion(std::vector<double> share, int64_t total, int64_t cap) {
  const size_t n = share.size();
  std::vector<bool> capped(n, false);
  for (int round = 0; round < 64; ++round) {
    double free_share = 0;
    int64_t free_total = total;
    for (size_t e = 0; e < n; ++e) {
      if (capped[e]) free_total -= cap;
      else free_share += share[e];
    }
    bool changed = false;
    for (size_t e = 0; e < n; ++e)
      if (!capped[e] && free_share > 0 && share[e] / free_share * static_cast<double>(free_total) > static_cast<double>(cap)) {
        capped[e] = true;
        changed = true;
      }
    if (!changed) break;
  }
  double free_share = 0;
  int64_t free_total = total;
  for (size_t e = 0; e < n; ++e) {
    if (capped[e]) free_total -= cap;
    else free_share += share[e];
  }
  std::vector<int64_t> out(n, 0);
  std::vector<std::pair<double, size_t>> rem;
  int64_t given = 0;
  for (size_t e = 0; e < n; ++e) {
    if (capped[e]) { out[e] = cap; continue; }
    const double exact = free_share > 0 ? share[e] / free_share * static_cast<double>(free_total) : 0;
    out[e] = std::min<int64_t>(cap, static_cast<int64_t>(std::floor(exact)));
    given += out[e];
    rem.emplace_back(exact - static_cast<double>(out[e]), e);
  }
  // Remainders, largest first (ties: lower index), one row each while rows are left.
  std::stable_sort(rem.begin(), rem.end(), [](const auto& a, const auto& b) { return a.first > b.first; });
  int64_t left = free_total - given;
  for (size_t pass = 0; left > 0 && pass < 2; ++pass)  // total <= n x cap: one pass suffices; two for safety
    for (size_t i = 0; left > 0 && i < rem.size(); ++i)
      if (out[rem[i].second] < cap) { ++out[rem[i].second]; --left; }
  return out;
}

}  // namespace

std::string RoutingSpec::text() const {
  switch (kind) {
    case RoutingKind::Balanced: return "balanced";
    case RoutingKind::Random: return "random";
    case RoutingKind::LogNormal: return fmt::format("lognormal:{}", param);
    case RoutingKind::Hot: return fmt::format("hot:{}", param);
    case RoutingKind::File: return "file:" + path;
  }
  return "?";
}

RoutingSpec parse_routing(const std::string& s) {
  RoutingSpec r;
  const std::string shown = clip_text(s, 80);  // what messages quote of it
  const auto colon = s.find(':');
  const std::string name = ascii_lower(s.substr(0, colon));  // the kind in any case; a file's path as given
  const std::string arg = colon == std::string::npos ? std::string() : s.substr(colon + 1);
  const bool has_arg = colon != std::string::npos;
  if ((name == "balanced" || name == "random") && !has_arg) {
    r.kind = name == "balanced" ? RoutingKind::Balanced : RoutingKind::Random;
  } else if (name == "lognormal" && has_arg) {
    r.kind = RoutingKind::LogNormal;
    r.param = parse_param(arg, s);
    if (r.param < 0 || r.param > 10) throw UsageError(fmt::format("--routing '{}': sigma must be from 0 to 10", shown));
  } else if (name == "hot" && has_arg) {
    r.kind = RoutingKind::Hot;
    r.param = parse_param(arg, s);
    if (!(r.param > 0 && r.param <= 1))
      throw UsageError(fmt::format("--routing '{}': the hot fraction must be in (0, 1] (of the tokens)", shown));
  } else if (name == "file" && has_arg && !arg.empty()) {
    r.kind = RoutingKind::File;
    r.path = arg;
  } else {
    throw UsageError(fmt::format("unknown --routing '{}'{} (balanced, random, lognormal:SIGMA, hot:FRACTION, file:PATH)", shown,
                                 did_you_mean(name, {"balanced", "random", "lognormal", "hot", "file"})));
  }
  return r;
}

std::vector<int64_t> routing_counts_from_json(const nlohmann::json& j, const std::string& what) {
  if (!j.is_array() || j.empty())
    throw UsageError(fmt::format("{} must be a non-empty JSON list of per-expert token counts, got {}", what,
                                 json_value_hint(j)));
  if (j.size() > static_cast<size_t>(kMaxExperts))
    throw UsageError(fmt::format("{} has {} counts, more than the {} experts a model may have", what, j.size(), kMaxExperts));
  std::vector<int64_t> out;
  for (size_t i = 0; i < j.size(); ++i) {
    const auto& v = j[i];
    if (v.is_number_unsigned() && v.get<uint64_t>() <= (uint64_t{1} << 62)) out.push_back(static_cast<int64_t>(v.get<uint64_t>()));
    else if (v.is_number_integer() && v.get<int64_t>() < 0)
      throw UsageError(fmt::format("{}: item {} is negative ({})", what, i, v.get<int64_t>()));
    else
      throw UsageError(fmt::format("{}: item {} must be a non-negative integer, got {}", what, i, json_value_hint(v)));
  }
  return out;
}

std::vector<int64_t> read_routing_file(const std::string& path) {
  // The input-file policy (input_file.hpp): regular files only, checked before opening; a size
  // limit; depth and size checked in linear time before parsing; no trailing content.
  const std::string what = fmt::format("routing file '{}'", clip_text(path, 80));
  return routing_counts_from_json(parse_json_text(read_input_file(path, "routing file", 4u << 20), what), what);
}

void check_routing(const Routing& r, const std::string& where) {
  const auto bad = [&](const std::string& why) { return UsageError(fmt::format("{}: {}", where, why)); };
  if (r.experts < 1 || r.experts > kMaxExperts) throw bad(fmt::format("experts must be from 1 to {}, got {}", kMaxExperts, r.experts));
  if (r.top_k < 1 || r.top_k > r.experts) throw bad(fmt::format("top_k must be from 1 to experts ({}), got {}", r.experts, r.top_k));
  if (r.tokens < 1 || r.tokens > kMaxRoutingTokens)
    throw bad(fmt::format("tokens must be from 1 to {}, got {}", kMaxRoutingTokens, r.tokens));
  if (r.expert_parallel < 1 || r.expert_parallel > r.experts || r.experts % r.expert_parallel != 0)
    throw bad(fmt::format("expert_parallel must divide experts ({}), got {}", r.experts, r.expert_parallel));
  if (r.counts.size() != static_cast<size_t>(r.experts))
    throw bad(fmt::format("counts has {} items, expected one per expert ({})", r.counts.size(), r.experts));
  if (!(r.capacity_factor >= 0) || !std::isfinite(r.capacity_factor))
    throw bad("capacity_factor must be a finite number >= 0");
  // Bounded above, so these products cannot overflow; checked all the same.
  const int64_t group_tokens = checked_mul(r.tokens, r.expert_parallel, where + ": tokens x expert_parallel");
  const int64_t assignments = checked_mul(group_tokens, r.top_k, where + ": tokens x expert_parallel x top_k");
  if (r.capacity < 0) throw bad(fmt::format("capacity must be >= 0, got {}", r.capacity));
  if (r.dropped < 0 || r.dropped > assignments)
    throw bad(fmt::format("dropped must be from 0 to the {} assignments, got {}", assignments, r.dropped));
  int64_t sum = 0;
  for (size_t e = 0; e < r.counts.size(); ++e) {
    if (r.counts[e] < 0 || r.counts[e] > group_tokens)
      throw bad(fmt::format("counts[{}] must be from 0 to the {} tokens of the step, got {}", e, group_tokens, r.counts[e]));
    sum = checked_add(sum, r.counts[e], where + ": the sum of counts");
  }
  if (checked_add(sum, r.dropped, where + ": counts + dropped") != assignments)
    throw bad(fmt::format("counts sum to {} and {} rows were dropped, expected tokens x expert_parallel x top_k = {}", sum,
                          r.dropped, assignments));
}

std::vector<int64_t> Routing::local_counts(int64_t rank) const {
  const int64_t l = local_experts();
  return std::vector<int64_t>(counts.begin() + rank * l, counts.begin() + (rank + 1) * l);
}

double Routing::max_over_mean() const {
  const double total = static_cast<double>(std::accumulate(counts.begin(), counts.end(), int64_t{0}));
  if (counts.empty() || total <= 0) return 0;
  return static_cast<double>(*std::max_element(counts.begin(), counts.end())) / (total / static_cast<double>(counts.size()));
}

int64_t Routing::empty_experts() const { return std::count(counts.begin(), counts.end(), int64_t{0}); }

double Routing::busiest_over_mean_rank() const {
  const double total = static_cast<double>(std::accumulate(rank_rows.begin(), rank_rows.end(), int64_t{0}));
  if (rank_rows.empty() || total <= 0) return 0;
  return static_cast<double>(rank_rows[static_cast<size_t>(busiest_rank)]) / (total / static_cast<double>(rank_rows.size()));
}

Routing route(const RoutingSpec& spec, int64_t experts, int64_t top_k, int64_t tokens, int64_t ep, uint64_t seed,
              double capacity_factor) {
  if (experts < 1 || top_k < 1 || top_k > experts || tokens < 1 || ep < 1 || experts % ep != 0)
    throw UsageError(fmt::format("routing: bad sizes (experts {}, top-k {}, tokens {}, expert parallel {})", experts, top_k,
                                 tokens, ep));
  const double assignments_d = static_cast<double>(tokens) * static_cast<double>(ep) * static_cast<double>(top_k);
  if (assignments_d > 0x1.0p40)
    throw UsageError(fmt::format("routing: {} x {} ranks x top-k {} expert assignments is too many", tokens, ep, top_k));
  Routing r;
  r.spec = spec;
  r.seed = seed;
  r.experts = experts;
  r.top_k = top_k;
  r.tokens = tokens;
  r.expert_parallel = ep;
  r.capacity_factor = capacity_factor;
  const int64_t group_tokens = tokens * ep;  // one row per token at most, per expert
  const int64_t total = r.assignments();
  const size_t n = static_cast<size_t>(experts);
  Rng rng{seed ^ 0x6d6f652d726f7574ULL};  // a stream of its own, not the operands'
  switch (spec.kind) {
    case RoutingKind::Balanced:
      r.counts = apportion(std::vector<double>(n, 1.0), total, group_tokens);
      break;
    case RoutingKind::Random: {
      // 2^26 draws take about half a second; the plan of any accepted input stays fast.
      if (total > kMaxRandomDraws)
        throw UsageError(fmt::format("--routing random draws every token ({} assignments, limit 2^26 = {}): use balanced "
                                     "or lognormal:SIGMA for a batch this large", total, kMaxRandomDraws));
      r.counts.assign(n, 0);
      std::vector<int64_t> perm(n);
      std::iota(perm.begin(), perm.end(), 0);
      // Partial Fisher-Yates per token: top_k distinct experts, uniform.
      for (int64_t t = 0; t < group_tokens; ++t)
        for (int64_t i = 0; i < top_k; ++i) {
          const size_t j = static_cast<size_t>(i) + static_cast<size_t>(rng.below(static_cast<uint64_t>(experts - i)));
          std::swap(perm[static_cast<size_t>(i)], perm[j]);
          ++r.counts[static_cast<size_t>(perm[static_cast<size_t>(i)])];
        }
      break;
    }
    case RoutingKind::LogNormal: {
      std::vector<double> w(n);
      for (double& x : w) x = std::exp(spec.param * rng.normal());
      r.counts = apportion(w, total, group_tokens);
      break;
    }
    case RoutingKind::Hot: {
      const size_t hot = static_cast<size_t>(rng.below(static_cast<uint64_t>(experts)));
      const int64_t hot_rows = std::min<int64_t>(group_tokens, std::llround(spec.param * static_cast<double>(group_tokens)));
      const int64_t rest = total - hot_rows;
      if (rest > (experts - 1) * group_tokens || (experts == 1 && rest != 0))
        throw UsageError(fmt::format("--routing {}: with top-k {} of {} experts every expert gets at least {:.3g} of the "
                                     "tokens; the hot fraction is too small",
                                     spec.text(), top_k, experts,
                                     static_cast<double>(total - (experts - 1) * group_tokens) / static_cast<double>(group_tokens)));
      std::vector<double> w(n - 1, 1.0);
      const std::vector<int64_t> others = apportion(w, rest, group_tokens);
      r.counts.clear();
      for (size_t e = 0, o = 0; e < n; ++e) r.counts.push_back(e == hot ? hot_rows : others[o++]);
      break;
    }
    case RoutingKind::File: {
      const std::string path = clip_text(spec.path, 80);  // as messages quote it
      r.counts = read_routing_file(spec.path);
      if (r.counts.size() != n)
        throw UsageError(fmt::format("routing file '{}' has {} counts, expected one per expert ({})", path,
                                     r.counts.size(), experts));
      int64_t sum = 0;
      for (size_t e = 0; e < n; ++e) {
        if (r.counts[e] > group_tokens)
          throw UsageError(fmt::format("routing file '{}': expert {} has {} tokens, more than the {} tokens of the step",
                                       path, e, r.counts[e], group_tokens));
        sum = checked_add(sum, r.counts[e], fmt::format("routing file '{}': the sum of counts", path));
      }
      if (sum != total)
        throw UsageError(fmt::format("routing file '{}': counts sum to {}, expected tokens x top-k = {} x {}{} = {}",
                                     path, sum, group_tokens, top_k,
                                     ep > 1 ? fmt::format(" (tokens of {} expert-parallel ranks)", ep) : "", total));
      break;
    }
  }
  if (capacity_factor > 0) {
    // Megatron's capacity: ceil(assignments / experts x capacity factor) per expert.
    r.capacity = static_cast<int64_t>(std::ceil(static_cast<double>(total) / static_cast<double>(experts) * capacity_factor));
    for (int64_t& c : r.counts)
      if (c > r.capacity) {
        r.dropped += c - r.capacity;
        c = r.capacity;
      }
  }
  const int64_t l = r.local_experts();
  r.rank_rows.assign(static_cast<size_t>(ep), 0);
  for (int64_t e = 0; e < experts; ++e) r.rank_rows[static_cast<size_t>(e / l)] += r.counts[static_cast<size_t>(e)];
  r.busiest_rank = std::max_element(r.rank_rows.begin(), r.rank_rows.end()) - r.rank_rows.begin();
  return r;
}

}  // namespace gs
