#include "core/step/parallel_layout.hpp"

#include <fmt/format.h>

#include <charconv>
#include <vector>

#include "core/io/input_file.hpp"
#include "core/util/error.hpp"

namespace gs {

const EnumNames<DpSharding>& dp_sharding_names() {
  static const EnumNames<DpSharding> n{{{DpSharding::Ddp, {"ddp", "zero0"}},
                                        {DpSharding::Zero1, {"zero1", "dist-opt"}},
                                        {DpSharding::Zero2, {"zero2"}},
                                        {DpSharding::Zero3, {"zero3"}},
                                        {DpSharding::FsdpFull, {"fsdp", "full-shard", "fsdp-full"}},
                                        {DpSharding::FsdpGradOp, {"fsdp-grad-op", "shard-grad-op"}}}};
  return n;
}
const char* to_string(DpSharding s) { return dp_sharding_names().name(s); }
bool shards_parameters(DpSharding s) {
  return s == DpSharding::Zero3 || s == DpSharding::FsdpFull || s == DpSharding::FsdpGradOp;
}
bool is_fsdp(DpSharding s) { return s == DpSharding::FsdpFull || s == DpSharding::FsdpGradOp; }

const EnumNames<CpComm>& cp_comm_names() {
  static const EnumNames<CpComm> n{{{CpComm::Ring, {"ring", "p2p"}}, {CpComm::AllToAll, {"a2a", "all-to-all", "ulysses"}}}};
  return n;
}
const char* to_string(CpComm c) { return cp_comm_names().name(c); }

int64_t ParallelLayout::expert_dp() const {
  const int64_t folded = tp * cp * dp, expert = expert_tp() * ep;
  return expert > 0 && folded % expert == 0 ? folded / expert : 0;
}

int64_t ParallelLayout::micro_batches() const {
  const int64_t per_step = micro_batch * dp;
  return per_step > 0 && batch() % per_step == 0 ? batch() / per_step : 0;
}

std::string to_string(const ParallelLayout& l) {
  return fmt::format("tp{}.pp{}.vpp{}.cp{}.ep{}.etp{}.dp{}.mb{}.gb{}.{}{}", l.tp, l.pp, l.vpp, l.cp, l.ep, l.expert_tp(),
                     l.dp, l.micro_batch, l.batch(), to_string(l.sharding), l.uneven_pipeline ? ".uneven" : "");
}

std::string short_string(const ParallelLayout& l) {
  std::string s;
  auto add = [&](const char* name, int64_t v, bool always) {
    if (!always && v == 1) return;
    s += fmt::format("{}{}{}", s.empty() ? "" : ".", name, v);
  };
  add("tp", l.tp, false);
  add("pp", l.pp, false);
  add("vpp", l.vpp, false);
  add("cp", l.cp, false);
  add("ep", l.ep, false);
  if (l.expert_tp() != l.tp) s += fmt::format("{}etp{}", s.empty() ? "" : ".", l.expert_tp());
  add("dp", l.dp, true);
  add("mb", l.micro_batch, true);
  add("gb", l.batch(), true);
  if (l.uneven_pipeline) s += ".uneven";
  return s;
}

namespace {

constexpr int64_t kMaxLayoutSize = int64_t{1} << 20;

int64_t token_value(const std::string& token, size_t prefix, const std::string& what) {
  const std::string digits = token.substr(prefix);
  int64_t v = 0;
  const auto [ptr, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), v);
  if (digits.empty() || ec != std::errc() || ptr != digits.data() + digits.size() || v < 1 || v > kMaxLayoutSize)
    throw UsageError(fmt::format("{} token '{}': '{}' must be followed by an integer from 1 to {}", what,
                                 clip_text(token, 40), token.substr(0, prefix), kMaxLayoutSize));
  return v;
}

}  // namespace

LayoutTokens parse_layout(const std::string& text, ParallelLayout& l, const std::string& what) {
  LayoutTokens seen;
  if (trim(text).empty()) throw UsageError(what + " is empty");
  if (text.size() > 400) throw UsageError(fmt::format("{} is longer than 400 characters", what));
  struct Dim {
    const char* name;
    int64_t ParallelLayout::*field;
    bool LayoutTokens::*flag;
  };
  // Longest names first: "vpp" before "pp", "etp" before "tp".
  static const Dim dims[] = {{"vpp", &ParallelLayout::vpp, &LayoutTokens::vpp},
                             {"etp", &ParallelLayout::etp, &LayoutTokens::etp},
                             {"tp", &ParallelLayout::tp, &LayoutTokens::tp},
                             {"pp", &ParallelLayout::pp, &LayoutTokens::pp},
                             {"cp", &ParallelLayout::cp, &LayoutTokens::cp},
                             {"ep", &ParallelLayout::ep, &LayoutTokens::ep},
                             {"dp", &ParallelLayout::dp, &LayoutTokens::dp},
                             {"mb", &ParallelLayout::micro_batch, &LayoutTokens::mb},
                             {"gb", &ParallelLayout::global_batch, &LayoutTokens::gb}};
  for (const std::string& raw : split_list(text, '.')) {
    const std::string token = ascii_lower(trim(raw));
    if (token.empty()) throw UsageError(fmt::format("{} '{}' has an empty token", what, clip_text(printable(text), 80)));
    if (token == "uneven") {
      if (seen.uneven) throw UsageError(fmt::format("{} gives 'uneven' twice", what));
      seen.uneven = l.uneven_pipeline = true;
      continue;
    }
    if (const std::optional<DpSharding> s = dp_sharding_names().find(token)) {
      if (seen.sharding) throw UsageError(fmt::format("{} names the data-parallel sharding twice", what));
      seen.sharding = true;
      l.sharding = *s;
      continue;
    }
    bool matched = false;
    for (const Dim& d : dims) {
      const std::string name = d.name;
      if (token.rfind(name, 0) != 0 || token.size() == name.size() ||
          !(token[name.size()] >= '0' && token[name.size()] <= '9'))
        continue;
      if (seen.*d.flag) throw UsageError(fmt::format("{} gives '{}' twice", what, name));
      seen.*d.flag = true;
      l.*d.field = token_value(token, name.size(), what);
      matched = true;
      break;
    }
    if (!matched)
      throw UsageError(fmt::format("{} token '{}' is not one of tpN ppN vppN cpN epN etpN dpN mbN gbN, uneven or {}", what,
                                   clip_text(printable(token), 40), names_list(dp_sharding_names().canonical())));
  }
  return seen;
}

}  // namespace gs
