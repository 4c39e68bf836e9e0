#include "core/results/kernels.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <limits>
#include <map>

#include "core/io/input_file.hpp"
#include "core/util/error.hpp"
#include "core/util/suggest.hpp"
#include "core/results/results.hpp"
#include "core/util/text_util.hpp"

namespace gs {

using nlohmann::json;

const char* to_string(KernelClass c) {
  switch (c) {
    case KernelClass::Gemm: return "gemm";
    case KernelClass::Quantize: return "quantize";
    case KernelClass::Other: return "other";
  }
  return "?";
}

KernelClass kernel_class_from_string(const std::string& s) {
  for (KernelClass c : {KernelClass::Gemm, KernelClass::Quantize, KernelClass::Other})
    if (s == to_string(c)) return c;
  throw UsageError(fmt::format("unknown kernel class '{}' (known: gemm, quantize, other)", clip_text(s, 80)));
}

const char* to_string(KernelInputs k) {
  switch (k) {
    case KernelInputs::BF16: return "BF16";
    case KernelInputs::FP16: return "FP16";
    case KernelInputs::FP32: return "FP32";
    case KernelInputs::FP8: return "FP8";
    case KernelInputs::FP4: return "FP4";
    case KernelInputs::Unknown: return "unknown";
  }
  return "?";
}

namespace {

std::string lower(std::string_view s) { return ascii_lower(s); }

bool has(const std::string& s, const char* part) { return s.find(part) != std::string::npos; }

bool is_gemm_name(const std::string& l) {
  return has(l, "nvjet") || has(l, "cutlass") || has(l, "gemm") || has(l, "xmma") || has(l, "splitkreduce") ||
         has(l, "matmul");
}

}  // namespace

KernelClass classify_kernel(std::string_view name) {
  const std::string l = lower(name);
  // gemmscope's own kernels first: their namespace says it (demangled "gs::cuda::", mangled
  // "_ZN2gs4cuda"; the DeepGEMM provider's scale-layout conversions "gs::dg::"). The launch gate and the operand fills are not quantization.
  const bool ours = has(l, "gs::cuda::") || has(l, "_zn2gs4cuda") || has(l, "gs::dg::") || has(l, "_zn2gs2dg");
  if (ours) {
    // The launch gate, the fills, and the step's own kernels (cuda/stepwork/: optimizer, loss,
    // embedding) are not quantization.
    if (has(l, "gate_kernel") || has(l, "fill_kernel") || has(l, "error_kernel") || has(l, "stepwork"))
      return KernelClass::Other;
    return KernelClass::Quantize;
  }
  if (is_gemm_name(l)) return KernelClass::Gemm;
  for (const char* q : {"amax", "quantize", "cast", "transpose", "scale", "hadamard", "rht", "nvfp4", "mxfp8", "fp8"})
    if (has(l, q)) return KernelClass::Quantize;
  return KernelClass::Other;
}

KernelInputs gemm_kernel_inputs(std::string_view name) {
  const std::string l = lower(name);
  // nvjet_<arch>_<types>_...: the types token's first letter is the A operand's type.
  if (const auto p = l.find("nvjet_sm"); p != std::string::npos) {
    const auto t0 = l.find('_', p + 6);  // after "nvjet_smNN"
    if (t0 != std::string::npos && t0 + 1 < l.size()) {
      switch (l[t0 + 1]) {
        case 't': return KernelInputs::BF16;
        case 'h': return KernelInputs::FP16;
        case 's': return KernelInputs::FP32;
        case 'q':
        case 'r': return KernelInputs::FP8;
        default: break;
      }
    }
    return KernelInputs::Unknown;
  }
  if (has(l, "e4m3") || has(l, "e5m2") || has(l, "fp8") || has(l, "f8f6f4")) return KernelInputs::FP8;
  if (has(l, "e2m1") || has(l, "fp4") || has(l, "nvf4")) return KernelInputs::FP4;
  if (has(l, "bf16") || has(l, "bfloat16")) return KernelInputs::BF16;  // CUTLASS: cutlass::bfloat16_t
  return KernelInputs::Unknown;
}

std::vector<KernelStat> aggregate_launches(const std::vector<KernelLaunch>& launches, int iters) {
  std::vector<KernelStat> out;
  std::map<std::string, size_t> index;
  std::vector<double> total_ns;
  std::vector<int64_t> n;
  for (const KernelLaunch& l : launches) {
    auto [it, fresh] = index.try_emplace(l.name, out.size());
    if (fresh) {
      KernelStat s;
      s.name = l.name;
      s.cls = classify_kernel(l.name);
      out.push_back(s);
      total_ns.push_back(0);
      n.push_back(0);
    }
    total_ns[it->second] += l.ns;
    ++n[it->second];
  }
  for (size_t i = 0; i < out.size(); ++i) {
    out[i].mean_us = total_ns[i] / static_cast<double>(n[i]) / 1000.0;
    out[i].count = iters > 0 ? static_cast<double>(n[i]) / iters : static_cast<double>(n[i]);
  }
  return out;
}

double CellKernels::class_us(KernelClass c) const {
  double s = 0;
  for (const KernelStat& k : kernels)
    if (k.cls == c) s += k.mean_us * k.count;
  return s;
}

std::string AlgoRecord::summary() const {
  auto named = [](const std::string& name, int v) { return name.empty() ? fmt::format("#{}", v) : name; };
  return fmt::format("algo {} tile {} stages {} splitK {} swizzle {} cluster {}", id, named(tile_name, tile),
                     named(stages_name, stages), split_k, swizzle, named(cluster_name, cluster));
}

std::string kernel_flag(Precision p, const std::vector<KernelStat>& kernels) {
  std::vector<const KernelStat*> gemms;
  for (const KernelStat& k : kernels)
    if (k.cls == KernelClass::Gemm && lower(k.name).find("splitkreduce") == std::string::npos) gemms.push_back(&k);
  if (gemms.empty()) return fmt::format("no GEMM kernel seen in a {} cell", to_string(p));
  KernelInputs want = KernelInputs::FP8;
  if (p == Precision::BF16) want = KernelInputs::BF16;
  if (p == Precision::NVFP4) want = KernelInputs::FP4;
  for (const KernelStat* k : gemms) {
    const KernelInputs got = gemm_kernel_inputs(k->name);
    if (got == KernelInputs::Unknown || got == want) continue;
    return fmt::format("GEMM kernel {} reads {} inputs in a {} cell (a silent fallback?)", k->name, to_string(got),
                       to_string(p));
  }
  return {};
}

void parse_algo_option(const std::string& v, GemmOptions& o) {
  if (v == "heuristic") {
    o.algo = AlgoChoice::Heuristic;
    return;
  }
  for (const auto& [name, choice] : {std::pair{std::string("autotune"), AlgoChoice::Autotune},
                                     std::pair{std::string("search"), AlgoChoice::Search}}) {
    if (v == name) {
      o.algo = choice;
      return;
    }
    if (v.rfind(name + ":", 0) == 0) {
      const std::string k = v.substr(name.size() + 1);
      const int64_t n = parse_decimal_int(k, "--algo " + name + ":K");
      if (n < 1 || n > 64) throw UsageError(fmt::format("--algo {}:K needs K from 1 to 64, got {}", name, clip_text(k, 80)));
      o.algo = choice;
      o.autotune_k = static_cast<int>(n);
      return;
    }
  }
  throw UsageError(fmt::format("--algo must be heuristic, autotune[:K] or search[:K], got '{}'{}", clip_text(v, 80),
                               did_you_mean(v.substr(0, v.find(':')), {"heuristic", "autotune", "search"})));
}

std::string algo_option_string(const GemmOptions& o) {
  switch (o.algo) {
    case AlgoChoice::Heuristic: return "heuristic";
    case AlgoChoice::Autotune: return fmt::format("autotune:{}", o.autotune_k);
    case AlgoChoice::Search: return fmt::format("search:{}", o.autotune_k);
  }
  return "heuristic";
}

// ---- JSON: one table per record, both directions (core/io/json_fields.hpp) ------------------

namespace {

using namespace json_fields;

// Any finite number (kernel times and counts are the backend's, not bounded further).
constexpr Range kAnyFinite{-std::numeric_limits<double>::max(), std::numeric_limits<double>::max()};
constexpr size_t kMaxKernelRows = 4096;  // kernels of one cell's iteration

const Fields<AlgoRecord>& algo_fields() {
  static const Fields<AlgoRecord> t = {
      integer<AlgoRecord>("id", [](auto& a) -> auto& { return a.id; }),
      integer<AlgoRecord>("tile", [](auto& a) -> auto& { return a.tile; }),
      text<AlgoRecord>("tile_name", [](auto& a) -> auto& { return a.tile_name; }),
      integer<AlgoRecord>("stages", [](auto& a) -> auto& { return a.stages; }),
      text<AlgoRecord>("stages_name", [](auto& a) -> auto& { return a.stages_name; }),
      integer<AlgoRecord>("split_k", [](auto& a) -> auto& { return a.split_k; }),
      integer<AlgoRecord>("reduction", [](auto& a) -> auto& { return a.reduction; }),
      integer<AlgoRecord>("swizzle", [](auto& a) -> auto& { return a.swizzle; }),
      integer<AlgoRecord>("custom", [](auto& a) -> auto& { return a.custom; }),
      integer<AlgoRecord>("cluster", [](auto& a) -> auto& { return a.cluster; }),
      text<AlgoRecord>("cluster_name", [](auto& a) -> auto& { return a.cluster_name; }),
      integer<AlgoRecord>("rank", [](auto& a) -> auto& { return a.rank; }),
  };
  return t;
}

const Fields<AutotuneRecord>& autotune_fields() {
  static const Fields<AutotuneRecord> t = {
      integer<AutotuneRecord>("k", [](auto& a) -> auto& { return a.k; }),
      integer<AutotuneRecord>("tried", [](auto& a) -> auto& { return a.tried; }),
      number<AutotuneRecord>("heuristic_us", [](auto& a) -> auto& { return a.heuristic_us; }, kAnyFinite),
      number<AutotuneRecord>("chosen_us", [](auto& a) -> auto& { return a.chosen_us; }, kAnyFinite),
      derived<AutotuneRecord>("gain", [](const AutotuneRecord& a) -> std::optional<json> { return a.gain(); }),
      flag<AutotuneRecord>("confirmed", [](auto& a) -> auto& { return a.confirmed; }),
      object<AutotuneRecord>("heuristic_algo", [](auto& a) -> auto& { return a.heuristic; }, algo_fields()),
      integer<AutotuneRecord>("searched", [](auto& a) -> auto& { return a.searched; },
                              [](const AutotuneRecord& a) { return a.searched > 0; }),
      integer<AutotuneRecord>("screen_faster", [](auto& a) -> auto& { return a.screen_faster; },
                              [](const AutotuneRecord& a) { return a.searched > 0; }),
      number<AutotuneRecord>("output_rel_diff", [](auto& a) -> auto& { return a.output_rel_diff; }, kAnyFinite, {},
                             [](const AutotuneRecord& a) { return a.output_rel_diff >= 0; }),
  };
  return t;
}

const Fields<KernelStat>& kernel_stat_fields() {
  static const Fields<KernelStat> t = {
      text<KernelStat>("name", [](auto& s) -> auto& { return s.name; }),
      number<KernelStat>("mean_us", [](auto& s) -> auto& { return s.mean_us; }, kAnyFinite),
      number<KernelStat>("count", [](auto& s) -> auto& { return s.count; }, kAnyFinite),
      // Absent in a file: classified from the name (read before it).
      custom<KernelStat>(
          "class", [](const KernelStat& s, json& o) { o["class"] = to_string(s.cls); },
          [](const json& o, KernelStat& s, const std::string& w) {
            const std::string c = get_or<std::string>(o, "class", w, "");
            s.cls = c.empty() ? classify_kernel(s.name) : kernel_class_from_string(c);
          }),
  };
  return t;
}

bool traced(const CellKernels& k) { return k.traced; }

}  // namespace

const Fields<CellKernels>& kernel_fields() {
  static const Fields<CellKernels> t = [] {
    // A traced cell has "kernels" (also an empty list); reading it marks the cell traced.
    Field<CellKernels> rows = list<CellKernels>("kernels", [](auto& k) -> auto& { return k.kernels; },
                                                kernel_stat_fields(), kMaxKernelRows, traced);
    rows.read = [inner = rows.read](const json& o, CellKernels& k, const std::string& w) {
      if (!find(o, "kernels")) return;
      k.traced = true;
      inner(o, k, w);
    };
    return Fields<CellKernels>{
        text<CellKernels>("kernel_config", [](auto& k) -> auto& { return k.config; },
                          [](const CellKernels& k) { return !k.config.empty(); }),
        rows,
        integer<CellKernels>("kernel_trace_iters", [](auto& k) -> auto& { return k.trace_iters; }, traced),
        derived<CellKernels>("kernel_time_us",
                             [](const CellKernels& k) -> std::optional<json> {
                               if (!k.traced) return std::nullopt;
                               return json{{"gemm", k.class_us(KernelClass::Gemm)},
                                           {"quantize", k.class_us(KernelClass::Quantize)},
                                           {"other", k.class_us(KernelClass::Other)}};
                             }),
        custom<CellKernels>(
            "kernel_flag",
            [](const CellKernels& k, json& o) {
              if (k.traced) o["kernel_flag"] = k.flag.empty() ? json(nullptr) : json(k.flag);
            },
            [](const json& o, CellKernels& k, const std::string& w) {
              if (const json* f = find(o, "kernel_flag"); f && !f->is_null()) k.flag = as<std::string>(*f, w + ".kernel_flag");
            }),
        text<CellKernels>("kernel_trace_note", [](auto& k) -> auto& { return k.trace_note; },
                          [](const CellKernels& k) { return !k.traced && !k.trace_note.empty(); }),
        object<CellKernels>("algo", [](auto& k) -> auto& { return k.algo; }, algo_fields()),
        object<CellKernels>("autotune", [](auto& k) -> auto& { return k.autotune; }, autotune_fields()),
    };
  }();
  return t;
}


std::string cell_range_name(Mode m, const Gemm& g, Precision p) {
  return fmt::format("gemmscope/{}/{}/{}/{}", to_string(m), to_string(g.pass), to_string(g.op), to_string(p));
}

// ---- after a run ----------------------------------------------------------------------------

void finish_kernel_records(RunResult& r) {
  const GemmOptions& o = r.gemm_options;
  if (o.num_sms > 0)
    r.notes.push_back(fmt::format("--num-sms {}: every timed dense GEMM is limited to {} SMs (cuBLASLt SM_COUNT_TARGET), "
                                  "as when communication kernels hold the rest; quantization kernels and grouped expert "
                                  "GEMMs still use all SMs",
                                  o.num_sms, o.num_sms));
  if (o.algo == AlgoChoice::Search)
    r.notes.push_back(fmt::format("--algo search:{}: per GEMM and recipe, cuBLASLt's top {} candidates and the "
                                  "other configurations that cuBLASLt accepts (other tiles, stages, cluster shapes and "
                                  "options, other algorithms) are screened, the best {} of those timed beside the "
                                  "heuristic's and the fastest kept if its output matches the heuristic's; the default "
                                  "(heuristic) runs cuBLASLt's first choice, as Transformer Engine does. --kernels shows "
                                  "the gain per GEMM",
                                  o.autotune_k, o.autotune_k, o.autotune_k));
  if (o.algo == AlgoChoice::Autotune)
    r.notes.push_back(fmt::format("--algo autotune:{}: per GEMM and recipe, cuBLASLt's top {} candidates are timed "
                                  "(GEMM only) and the fastest is kept; the default (heuristic) runs cuBLASLt's first "
                                  "choice, as Transformer Engine does. --kernels shows the gain per GEMM",
                                  o.autotune_k, o.autotune_k));
  std::string untraced;
  for (size_t m = 0; r.has_cells() && m < r.modes.size(); ++m)  // the main provider's cells
    for (size_t g = 0; g < r.plan.gemms.size(); ++g)
      for (size_t p = 0; p < r.precisions.size(); ++p) {
        const Cell& c = r.cell(m, g, p);
        if (c.ok && !c.kernels.traced && untraced.empty()) untraced = c.kernels.trace_note;
      }
  judge_kernel_checks(r);
  if (!untraced.empty()) r.notes.push_back("kernel records: " + untraced);
}

void judge_kernel_checks(RunResult& r) {
  constexpr std::string_view kCheck = "KERNEL CHECK ";
  // Where the checks stand among the notes: in place of the first earlier one, else at the end.
  auto first = std::find_if(r.notes.begin(), r.notes.end(), [&](const std::string& n) { return n.starts_with(kCheck); });
  const size_t at = static_cast<size_t>(first - r.notes.begin());
  std::erase_if(r.notes, [&](const std::string& n) { return n.starts_with(kCheck); });
  std::vector<std::string> checks;
  for (size_t m = 0; r.has_cells() && m < r.modes.size(); ++m)  // the main provider's cells
    for (size_t g = 0; g < r.plan.gemms.size(); ++g)
      for (size_t p = 0; p < r.precisions.size(); ++p) {
        Cell& c = r.cell(m, g, p);
        if (!c.ok || !c.kernels.traced) continue;
        // Against the precision the GEMM is meant to run in: the router (and the LM head under
        // --lm-head-precision bf16) run BF16 kernels in every column by design.
        const Gemm& x = r.plan.gemms[g];
        const Precision intended = make_recipe(r.precisions[p], x, r.recipe_options).precision;
        c.kernels.flag = kernel_flag(intended, c.kernels.kernels);
        if (!c.kernels.flag.empty())
          checks.push_back(fmt::format("{}{} {} {} {}: {}", kCheck, to_string(r.modes[m]), pass_label(x.pass), x.label(),
                                       to_string(r.precisions[p]), c.kernels.flag));
      }
  r.notes.insert(r.notes.begin() + static_cast<std::ptrdiff_t>(std::min(at, r.notes.size())), checks.begin(), checks.end());
}

// ---- --kernels table --------------------------------------------------------------------------

std::string render_kernel_table(const RunResult& r) {
  std::string out = "\nKernels per iteration (CUPTI; mean GPU time per launch, launches per iteration)\n";
  constexpr size_t kNameWidth = 72;
  auto shorten = [&](const std::string& n) {
    return n.size() <= kNameWidth ? n : n.substr(0, kNameWidth - 3) + "...";
  };
  for (size_t m = 0; m < r.modes.size(); ++m)
    for (size_t g = 0; g < r.plan.gemms.size(); ++g)
      for (size_t p = 0; p < r.precisions.size(); ++p) {
        const Cell& c = r.cell(m, g, p);
        if (!c.ok) continue;
        const Gemm& x = r.plan.gemms[g];
        const std::string what = x.label() == x.shape() ? x.shape() : x.label() + " " + x.shape();
        out += fmt::format("\n{} {} {} {}: {:.1f} us measured\n", to_string(r.modes[m]), pass_label(x.pass), what,
                           to_string(r.precisions[p]), c.stats.mean_ms * 1000.0);
        const CellKernels& k = c.kernels;
        if (k.traced) {
          for (const KernelStat& s : k.kernels)
            out += fmt::format("  {:<8} {:>5.2f}x {:>10.2f} us  {}\n", to_string(s.cls), s.count, s.mean_us,
                               shorten(s.name));
          out += fmt::format("  GEMM {:.1f} us, quantize {:.1f} us, other {:.1f} us\n", k.class_us(KernelClass::Gemm),
                             k.class_us(KernelClass::Quantize), k.class_us(KernelClass::Other));
          if (!k.flag.empty()) out += fmt::format("  KERNEL CHECK: {}\n", k.flag);
        } else if (!k.trace_note.empty()) {
          out += fmt::format("  (no kernel trace: {})\n", k.trace_note);
        }
        if (k.algo)
          out += k.algo->rank >= 0 ? fmt::format("  cuBLASLt {} (heuristic rank {})\n", k.algo->summary(), k.algo->rank)
                                   : fmt::format("  cuBLASLt {} (found by search)\n", k.algo->summary());
        if (k.autotune) {
          const AutotuneRecord& t = *k.autotune;
          out += fmt::format("  autotune: {} candidates ran (K {}{}); heuristic {:.1f} us, chosen {:.1f} us: {:.3f}x\n",
                             t.tried, t.k,
                             t.searched > 0 ? fmt::format("; {} searched configurations screened, {} beat the "
                                                          "heuristic's by 1% there",
                                                          t.searched, t.screen_faster)
                                            : "",
                             t.heuristic_us, t.chosen_us, t.gain());
          if (t.output_rel_diff >= 0)
            out += fmt::format("  output vs the heuristic's: relative difference {:.1e}\n", t.output_rel_diff);
        }
      }
  return out;
}

std::string render_autotune_table(const RunResult& r) {
  std::string rows;
  for (size_t m = 0; m < r.modes.size(); ++m)
    for (size_t g = 0; g < r.plan.gemms.size(); ++g)
      for (size_t p = 0; p < r.precisions.size(); ++p) {
        const Cell& c = r.cell(m, g, p);
        if (!c.ok || !c.kernels.autotune) continue;
        const AutotuneRecord& t = *c.kernels.autotune;
        const Gemm& x = r.plan.gemms[g];
        rows += fmt::format("  {:<14} {:<6} {:<14} {:<10} {:>11.1f} {:>11.1f} {:>7.3f}x  {}/{}\n", to_string(r.modes[m]),
                            pass_label(x.pass), x.label(), to_string(r.precisions[p]), t.heuristic_us, t.chosen_us,
                            t.gain(), t.tried, t.k);
      }
  if (rows.empty()) return {};
  return fmt::format("\nAutotune: GEMM-only time of cuBLASLt's first choice vs the kept algorithm (us)\n"
                     "  {:<14} {:<6} {:<14} {:<10} {:>11} {:>11} {:>8}  ran/K\n",
                     "mode", "pass", "GEMM", "precision", "heuristic", "autotuned", "gain") +
         rows;
}

}  // namespace gs
