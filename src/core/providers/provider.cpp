#include "core/providers/provider.hpp"
#include "core/util/text_util.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>

#include "core/util/error.hpp"
#include "core/util/printer.hpp"
#include "core/util/suggest.hpp"

namespace gs {

const std::vector<std::string>& known_providers() {
  static const std::vector<std::string> names{kProviderCublasLt, kProviderCutlass, kProviderDeepGemm};
  return names;
}

bool is_known_provider(const std::string& name) {
  const auto& k = known_providers();
  return std::find(k.begin(), k.end(), name) != k.end();
}

std::string provider_note(const std::string& name) {
  if (name == kProviderCutlass)
    return "cutlass: CUTLASS 4.2.1 sm90 ptr-array grouped kernels (TMA warp-specialized cooperative, cluster 1x1; "
           "tiles 128x256 for BF16 and FP8 Fprop where built (GEMMSCOPE_CUTLASS_WIDE_TILES), else 128x128; FP8Block "
           "blockwise 128x128x128; on the recipe's own quantization): "
           "a grouped GEMM is one launch for all experts (Wgrad: each expert's tokens as its K, into FP32 main gradients "
           "with beta 1 or BF16 as --wgrad-output says), a dense GEMM one launch of one group; no dense-equivalent time "
           "for its grouped cells";
  if (name == kProviderDeepGemm)
    return "deepgemm: DeepGEMM's sm90 kernels, compiled with NVRTC at prepare time (never in a timed loop) and "
           "cached on disk. FP8Block (DeepSeek's recipe: 1x128 activations/gradients, 128x128 weights, E4M3): "
           "Fprop/Dgrad gemm_fp8_fp8_bf16_nt (grouped: the M-grouped contiguous kernel, each expert's rows padded to "
           "128), Wgrad wgrad_gemm_fp8_fp8_fp32_nt into the FP32 main gradient (grouped: one K-grouped launch, each "
           "expert's tokens padded to 128). BF16: its BF16 GEMM, dense, M-grouped and K-grouped. Timed: the kernel "
           "only in pre-quantized mode; in per-gemm/training modes the engine's FP8Block quantization of the "
           "operands the mode quantizes (as the cuBLASLt cell), the scale-layout conversion DeepGEMM needs, then the "
           "kernel. The other recipes: N/A";
  return {};
}

namespace {

std::string lower_trim(const std::string& s) {
  size_t a = 0, b = s.size();
  while (a < b && std::isspace(static_cast<unsigned char>(s[a]))) ++a;
  while (b > a && std::isspace(static_cast<unsigned char>(s[b - 1]))) --b;
  return ascii_lower(s.substr(a, b - a));
}

std::string known_list() {
  std::string out;
  for (const std::string& n : known_providers()) out += n + "|";
  return out + "all";
}

}  // namespace

std::vector<std::string> parse_provider_option(const std::string& v) {
  if (v.size() > 256) throw UsageError("--provider: the value is longer than 256 characters");
  std::vector<std::string> out;
  size_t start = 0;
  while (true) {
    const size_t comma = v.find(',', start);
    const std::string item = lower_trim(v.substr(start, comma == std::string::npos ? std::string::npos : comma - start));
    if (item.empty()) throw UsageError(fmt::format("--provider: an empty item in '{}' (use {})", v, known_list()));
    std::vector<std::string> add;
    if (item == "all") add = known_providers();
    else if (is_known_provider(item)) add = {item};
    else {
      std::vector<std::string> names = known_providers();
      names.push_back("all");
      throw UsageError(fmt::format("--provider: unknown provider '{}'{} (use {})", item, did_you_mean(item, names), known_list()));
    }
    for (std::string& a : add) {
      if (std::find(out.begin(), out.end(), a) != out.end())
        throw UsageError(fmt::format("--provider: {} is named twice", a));
      out.push_back(std::move(a));
    }
    if (comma == std::string::npos) break;
    start = comma + 1;
  }
  return out;
}

std::string provider_option_string(const std::vector<std::string>& providers) {
  std::string out;
  for (size_t i = 0; i < providers.size(); ++i) out += (i ? "," : "") + providers[i];
  return out;
}

std::optional<double> best_provider_ms(const RunResult& r, size_t mode, size_t gemm, size_t prec, size_t* provider) {
  std::optional<double> best;
  for (size_t i = 0; i < r.providers.size(); ++i) {
    const Cell& c = r.provider_cell(i, mode, gemm, prec);
    if (c.ok && (!best || c.stats.mean_ms < *best)) {
      best = c.stats.mean_ms;
      if (provider) *provider = i;
    }
  }
  return best;
}

ProviderSums summarize_providers(const RunResult& r, size_t mode) {
  ProviderSums s;
  for (size_t i = 0; i < r.providers.size(); ++i) {
    std::vector<PrecisionSums> row;
    for (size_t p = 0; p < r.precisions.size(); ++p)
      row.push_back(sum_precision(r.plan, [&](size_t g) -> std::optional<double> {
        const Cell& c = r.provider_cell(i, mode, g, p);
        return c.ok ? std::optional<double>(c.stats.mean_ms) : std::nullopt;
      }));
    s.per_provider.push_back(std::move(row));
  }
  for (size_t p = 0; p < r.precisions.size(); ++p)
    s.best.push_back(sum_precision(r.plan, [&](size_t g) { return best_provider_ms(r, mode, g, p); }));
  return s;
}

void add_provider_block(print::Document& d, const RunResult& r, size_t mode) {
  if (r.providers.size() < 2 || !r.has_cells() || mode >= r.modes.size()) return;
  std::vector<std::string> notes;  // footnotes of N/A cells
  auto note = [&](const std::string& why) {
    auto it = std::find(notes.begin(), notes.end(), why);
    if (it == notes.end()) { notes.push_back(why); return notes.size(); }
    return static_cast<size_t>(it - notes.begin()) + 1;
  };
  using print::Align;
  d.title(fmt::format("Providers ({}): ms per GEMM, the best available marked *", to_string(r.modes[mode])));
  // Columns one space apart: each width holds the space after a label column, before a number column.
  std::vector<print::Column> cols = {{"Pass", Align::Left, 9}, {"GEMM", Align::Left, 15}, {"Precision", Align::Left, 11}};
  for (const std::string& p : r.providers) cols.push_back({p, Align::Right, 15});
  cols.push_back({"best", Align::Right, 15});
  print::Table t(std::move(cols), print::Table::Layout::Fixed);
  t.add_header();
  for (size_t g = 0; g < r.plan.gemms.size(); ++g) {
    const Gemm& x = r.plan.gemms[g];
    for (size_t p = 0; p < r.precisions.size(); ++p) {
      size_t win = 0;
      const std::optional<double> best = best_provider_ms(r, mode, g, p, &win);
      std::vector<print::Cell> row = {pass_label(x.pass), x.label(), to_string(r.precisions[p])};
      for (size_t i = 0; i < r.providers.size(); ++i) {
        const Cell& c = r.provider_cell(i, mode, g, p);
        row.emplace_back(c.ok ? fmt::format("{:.3f}{}", c.stats.mean_ms, best && win == i ? "*" : " ")
                              : fmt::format("N/A[{}]", note(c.reason)));
      }
      row.emplace_back(print::format_ms(best));
      t.add_row(std::move(row));
    }
  }
  d.table(std::move(t));
  if (r.plan.model_mode) {
    const ProviderSums s = summarize_providers(r, mode);
    // The full model, as the report's lead: every GEMM of one training step.
    d.title("Full model by provider (every GEMM of one training step, ms; N/A where any GEMM of that provider is N/A):");
    std::vector<print::Column> tc = {{"", Align::Left, 16}};
    for (Precision p : r.precisions) tc.push_back({to_string(p), Align::Right, 15});
    print::Table totals(std::move(tc), print::Table::Layout::Fixed);
    totals.add_header();
    auto row = [&](const std::string& label, const std::vector<PrecisionSums>& sums) {
      std::vector<print::Cell> cells = {label};
      for (const PrecisionSums& ps : sums) cells.emplace_back(print::format_ms(ps.full_model));
      totals.add_row(std::move(cells));
    };
    for (size_t i = 0; i < r.providers.size(); ++i) row(r.providers[i], s.per_provider[i]);
    row("best available", s.best);
    d.table(std::move(totals));
    // The best-available speedups against BF16, beside the first provider's.
    const auto bf = std::find(r.precisions.begin(), r.precisions.end(), Precision::BF16);
    if (bf != r.precisions.end()) {
      const size_t b = static_cast<size_t>(bf - r.precisions.begin());
      for (size_t p = 0; p < r.precisions.size(); ++p) {
        if (p == b) continue;
        auto sp = [&](const std::vector<PrecisionSums>& sums) -> std::optional<double> {
          const auto num = sums[p].full_model;
          const auto den = sums[b].full_model;
          if (!num || !den || *num <= 0) return std::nullopt;
          return *den / *num;
        };
        const auto first = sp(s.per_provider[0]);
        const auto best = sp(s.best);
        d.line(fmt::format("{} vs BF16, the full model's GEMMs: {} {}, best available {}", to_string(r.precisions[p]), r.providers[0],
                           first ? print::format_speedup(*first) : "N/A", best ? print::format_speedup(*best) : "N/A"));
      }
    }
  }
  std::vector<print::Item> items;
  for (size_t i = 0; i < notes.size(); ++i) items.emplace_back(fmt::format("[{}] {}", i + 1, notes[i]));
  d.list(std::move(items));
}

std::string render_provider_block(const RunResult& r, size_t mode) {
  print::Document d;
  add_provider_block(d, r, mode);
  return print::render(d, print::Format::Text);
}

}  // namespace gs
