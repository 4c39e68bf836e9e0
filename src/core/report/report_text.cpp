#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <map>

#include "core/report/report.hpp"
#include "core/report/report_attention.hpp"
#include "core/report/report_step.hpp"
#include "core/report/report_whole_step.hpp"
#include "core/providers/provider.hpp"
#include "core/report/report_moe.hpp"
#include "core/report/report_records.hpp"
#include "core/recipes/grouped.hpp"

#include "core/results/clocks.hpp"
#include "core/util/printer.hpp"
#include "core/results/repeats.hpp"

namespace gs {

namespace {

std::string device_name(const RunResult& r) { return r.device ? r.device->name : "(no GPU)"; }

// Collects N/A reasons so that each distinct reason gets one footnote number.
struct Footnotes {
  std::vector<std::string> items;
  int index(const std::string& reason) {
    auto it = std::find(items.begin(), items.end(), reason);
    if (it != items.end()) return static_cast<int>(it - items.begin()) + 1;
    items.push_back(reason);
    return static_cast<int>(items.size());
  }
};

// The run report's tables: the printer's fixed layout (core/util/printer.hpp), the first two columns
// left-aligned labels (a long label runs into the empty cells after it), the others right-aligned
// numbers, rules as wide as the rows can be and at least the report's width.
print::Table report_table(const std::vector<int>& widths, const std::vector<std::string>& headers = {}) {
  print::Table t;
  t.layout = print::Table::Layout::Fixed;
  t.min_rule = print::kReportWidth;
  for (size_t i = 0; i < widths.size(); ++i)
    t.columns.push_back({i < headers.size() ? headers[i] : std::string(), i < 2 ? print::Align::Left : print::Align::Right,
                         widths[i]});
  return t;
}

std::vector<print::Cell> cells(const std::vector<std::string>& v) { return {v.begin(), v.end()}; }

std::string text(const print::Document& d) { return print::render(d, print::Format::Text); }

// A blank line between the report's parts (markdown separates its blocks anyway).
void blank(print::Document& d) { d.line("", 0, print::Only::Text); }

// Plan-table numbers: one decimal, but three significant digits below 1 (tiny shapes are not 0.0).
std::string plan_number(double v) { return v >= 1.0 || v == 0.0 ? fmt::format("{:.1f}", v) : fmt::format("{:.3g}", v); }

std::string cell_ms(const Cell& c, Footnotes& fn) {
  if (c.ok) return fmt::format("{:.3f}", c.stats.mean_ms);
  return fmt::format("N/A[{}]", fn.index(c.reason));
}

std::vector<std::string> prec_headers(const RunResult& r, const char* unit) {
  std::vector<std::string> h;
  for (Precision p : r.precisions) h.push_back(fmt::format("{} {}", to_string(p), unit));
  return h;
}

int prec_width(const RunResult& r) {
  size_t w = 9;
  for (Precision p : r.precisions) w = std::max(w, std::string(to_string(p)).size() + 4);
  return static_cast<int>(w + 2);
}

// The tokens line, where each batch number came from, the config file and what reading it filled in.
void add_tokens(print::Document& d, const ModelConfig& c) {
  std::string out = fmt::format("Tokens per step: M = {} x {} = {}", c.micro_batch_size, c.sequence_length,
                                format_thousands(c.tokens()));
  if (!c.micro_batch_from.empty() && c.micro_batch_from == c.sequence_from)
    out += fmt::format(" (micro-batch and sequence: {})", c.micro_batch_from);
  else if (!c.micro_batch_from.empty() || !c.sequence_from.empty())
    out += fmt::format(" (micro-batch: {}; sequence: {})", c.micro_batch_from.empty() ? "?" : c.micro_batch_from,
                       c.sequence_from.empty() ? "?" : c.sequence_from);
  d.line(out);
  if (!c.source.empty()) d.line(fmt::format("Config file: {}", c.source));
  for (const std::string& n : c.notes) d.line(fmt::format("Config note: {}", n));
}

std::string tokens_line(const ModelConfig& c) {
  print::Document d;
  add_tokens(d, c);
  return text(d);
}

// How Wgrad writes its output and how grouped operands are quantized (model plans only).
void add_execution(print::Document& d, const RunResult& r) {
  if (!r.plan.model_mode) return;
  d.line(r.recipe_options.wgrad_fp32_accumulate
             ? "Wgrad output: accumulated into FP32 main gradients (beta 1), as Megatron-LM with TE"
             : "Wgrad output: BF16, beta 0 (--wgrad-output bf16)");
  const bool grouped = std::any_of(r.plan.gemms.begin(), r.plan.gemms.end(), [](const Gemm& g) { return g.grouped(); });
  if (grouped)
    d.line(r.recipe_options.grouped_quant_fused
               ? "Expert quantization: fused (a few multi-tensor launches per grouped GEMM, as TE GroupedLinear)"
               : "Expert quantization: per expert (--grouped-quant per-expert: amax/cast launches per expert)");
}

std::string execution_lines(const RunResult& r) {
  print::Document d;
  add_execution(d, r);
  return text(d);
}

void add_header(print::Document& d, const RunResult& r, size_t mode) {
  d.title(fmt::format("GEMM Benchmark ({}) on {}", r.plan.model_mode ? "Model Config Mode" : "Shape Mode", device_name(r)),
          2);
  d.line(fmt::format("Timing method: CUDA events around each iteration, mean of {} iterations "
                     "(median/min/stdev in JSON/CSV)", r.timing.iters));
  d.line(fmt::format("Warmup iterations: {}, Timed iterations: {}", r.timing.warmup, r.timing.iters));
  if (r.timing.l2_cold()) d.line("L2: cold (flushed between iterations, outside the timed samples)");
  add_step_context(d, r);
  d.line(fmt::format("Mode: {}", mode_description(r.modes[mode])));
  add_execution(d, r);
  if (r.plan.model_mode) {
    const ModelConfig& c = *r.plan.config;
    d.rule('=', print::kReportWidth);
    std::string extra;
    if (c.gated_mlp) extra += ", gated MLP";
    if (c.vocab_size) extra += ", " + vocab_text(c);
    if (c.tensor_parallel > 1) extra += fmt::format(", tensor parallel={} (per-rank shapes)", c.tensor_parallel);
    d.line(fmt::format("Model Config ({}): hidden={}, intermediate={}, {}, layers={}{}", c.name, c.hidden_size,
                       c.intermediate_size, heads_text(c, false), c.num_hidden_layers, extra));
    add_tokens(d, c);
    add_moe_config(d, c);
    add_moe_routing(d, r);
  }
  d.rule('=', print::kReportWidth);
}

// The layers of a model plan, as the full model's labels name them: "24 layers", "3 dense + 58 MoE
// layers", "48 MoE layers".
std::string layers_text(const Plan& p) {
  const int64_t n_moe = p.moe_layers();
  if (n_moe == 0) return fmt::format("{} layers", p.layers());
  if (p.dense_layers() == 0) return fmt::format("{} MoE layers", n_moe);
  return fmt::format("{} dense + {} MoE layers", p.dense_layers(), n_moe);
}

// The Op column of a model plan's tables: the router is marked as BF16 in every column.
std::string op_cell(const Gemm& x) {
  if (x.scope == Scope::Model) return std::string(op_label(x.op)) + "*";
  if (x.op == Op::Router) return "Router (BF16)";
  return x.label();
}

void add_model(print::Document& d, const RunResult& r, size_t mode, Footnotes& fn) {
  const ModeSummary s = summarize_mode(r, mode);
  const bool moe = r.plan.has_moe();
  const int64_t n_moe = r.plan.moe_layers(), n_dense = r.plan.dense_layers();
  // The summary first: the full model's and its layers' time, the measured speedups.
  std::vector<int> sw = {22, 0};
  for (size_t i = 0; i < r.precisions.size(); ++i) sw.push_back(prec_width(r));
  std::vector<std::string> head = {"", ""};
  for (auto& h : prec_headers(r, "ms")) head.push_back(h);
  print::Table st = report_table(sw, head);
  auto sums_row = [&](const std::string& label, auto field) {
    std::vector<print::Cell> row = {label, ""};
    for (const auto& ps : s.sums) row.push_back(print::format_ms(field(ps)));
    st.add_row(std::move(row));
  };
  // Each section of rows under its label: one table each (markdown repeats the columns' headers),
  // printed as the rows of one table in text. A table holding only the header line is text's only.
  auto section = [&](const std::string& label) {
    const bool rows = std::any_of(st.lines.begin(), st.lines.end(),
                                  [](const print::Table::Line& l) { return l.kind == print::Table::Line::Kind::Row; });
    d.table(std::move(st), rows ? print::Only::Both : print::Only::Text);
    st = report_table(sw, head);
    d.line(label);
  };
  // The lead: the full model (every GEMM of one training step), then its layers. In a MoE model a
  // dense layer's sum is not the model's: the average layer (experts included) comes first.
  d.title(fmt::format("GEMM Time of One Training Step ({} mode): the full model, then per layer:", to_string(r.modes[mode])));
  st.add_header();
  section(fmt::format("Full Model ({}{}):", layers_text(r.plan), s.has_model_once ? " + LM head" : ""));
  sums_row("Total GEMM time (ms):", [](const PrecisionSums& p) { return p.full_model; });
  if (moe && n_dense > 0) {
    section(fmt::format("Average layer ({} layers, experts included; LM head not included):", r.plan.layers()));
    sums_row("Per-layer total:", [](const PrecisionSums& p) { return p.average_layer; });
  }
  if (!moe || n_dense > 0) {
    section(moe ? fmt::format("Dense layer ({} of {}):", n_dense, r.plan.layers()) : std::string("Per layer (every layer alike):"));
    sums_row("Fprop:", [](const PrecisionSums& p) { return p.fprop; });
    sums_row("Dgrad:", [](const PrecisionSums& p) { return p.dgrad; });
    sums_row("Fprop + Dgrad:", [](const PrecisionSums& p) { return p.fprop_dgrad; });
    sums_row("Wgrad:", [](const PrecisionSums& p) { return p.wgrad; });
    sums_row("Per-layer total:", [](const PrecisionSums& p) { return p.total; });
  }
  if (moe) {
    section(fmt::format("MoE layer ({} of {}):", n_moe, r.plan.layers()));
    sums_row("Fprop:", [](const PrecisionSums& p) { return p.moe_fprop; });
    sums_row("Dgrad:", [](const PrecisionSums& p) { return p.moe_dgrad; });
    sums_row("Wgrad:", [](const PrecisionSums& p) { return p.moe_wgrad; });
    sums_row("Per-layer total:", [](const PrecisionSums& p) { return p.moe_total; });
    section("Per layer, 3 passes:");
    sums_row("Attention projections:", [](const PrecisionSums& p) { return p.attention; });
    if (n_dense > 0) sums_row("Dense MLP:", [](const PrecisionSums& p) { return p.dense_mlp; });
    sums_row("Router (BF16):", [](const PrecisionSums& p) { return p.router; });
    sums_row("Routed experts:", [](const PrecisionSums& p) { return p.routed_experts; });
    if (r.plan.config->moe.shared_experts > 0)
      sums_row("Shared experts:", [](const PrecisionSums& p) { return p.shared_experts; });
  }
  if (s.has_model_once) {
    section("Once per step:");
    sums_row("LM Head (3 passes):", [](const PrecisionSums& p) { return p.model_once; });
  }
  d.table(std::move(st));
  d.title(fmt::format("Measured GEMM Speedups (full model: every GEMM of one training step, {} mode):",
                      to_string(r.modes[mode])));
  for (const Speedup& sp : s.speedups)
    d.line(sp.value ? fmt::format("{}: {:.2f}x", sp.name(), *sp.value) : fmt::format("{}: N/A", sp.name()));
  if (s.has_model_once && r.recipe_options.lm_head_bf16)
    d.line("LM Head: BF16 in every column (--lm-head-precision bf16, as Megatron and Transformer Engine keep the "
           "output layer out of FP8)");
  // Then the per-GEMM detail.
  int op_width = 10;
  for (const Gemm& x : r.plan.gemms) op_width = std::max(op_width, static_cast<int>(op_cell(x).size()) + 1);
  std::vector<int> pw = {op_width, 20};
  for (size_t i = 0; i < r.precisions.size(); ++i) pw.push_back(prec_width(r));
  std::vector<std::string> ph = {"Op", "Shape"};
  for (auto& h : prec_headers(r, "ms")) ph.push_back(h);
  // One table per pass, each under its title (a heading in markdown), after one heavy rule.
  print::Table top = report_table(pw, ph);
  top.add_rule('=');
  d.table(std::move(top), print::Only::Text);
  for (Pass pass : {Pass::Fprop, Pass::Dgrad, Pass::Wgrad}) {
    d.title(fmt::format("{} Shapes:", pass_label(pass)));
    print::Table t = report_table(pw, ph);
    t.add_rule('-');
    t.add_header();
    t.add_rule('-');
    bool lm = false;
    for (size_t g = 0; g < r.plan.gemms.size(); ++g) {
      const Gemm& x = r.plan.gemms[g];
      if (x.pass != pass) continue;
      lm |= x.scope == Scope::Model;
      std::vector<print::Cell> row = {op_cell(x), x.shape()};
      for (size_t p = 0; p < r.precisions.size(); ++p) row.push_back(cell_ms(r.cell(mode, g, p), fn));
      t.add_row(std::move(row));
    }
    t.add_rule('-');
    if (!moe) {
      std::vector<std::string> sum = {fmt::format("{} sum (ms):", pass_label(pass)), ""};
      for (size_t p = 0; p < r.precisions.size(); ++p) {
        const auto& ps = s.sums[p];
        sum.push_back(print::format_ms(pass == Pass::Fprop ? ps.fprop : pass == Pass::Dgrad ? ps.dgrad : ps.wgrad));
      }
      t.add_row(cells(sum));
    } else {
      // One sum per kind of layer: a dense layer (attention + dense MLP), a MoE layer (attention +
      // router + experts).
      if (n_dense > 0) {
        std::vector<std::string> sum = {fmt::format("{} sum, dense layer (ms):", pass_label(pass)), ""};
        for (const auto& ps : s.sums) sum.push_back(print::format_ms(pass == Pass::Fprop ? ps.fprop : pass == Pass::Dgrad ? ps.dgrad : ps.wgrad));
        t.add_row(cells(sum));
      }
      std::vector<std::string> sum = {fmt::format("{} sum, MoE layer (ms):", pass_label(pass)), ""};
      for (const auto& ps : s.sums)
        sum.push_back(print::format_ms(pass == Pass::Fprop ? ps.moe_fprop : pass == Pass::Dgrad ? ps.moe_dgrad : ps.moe_wgrad));
      t.add_row(cells(sum));
      t.add_note(fmt::format("MLP rows run in the {} dense layers only; Router, Expert and Shared rows in the {} MoE layers "
                             "only; the others in every layer.", n_dense, n_moe));
    }
    if (lm) t.add_note("* LM Head runs once per step, not per layer; it is not in the per-layer sums.");
    t.add_rule('=');
    d.table(std::move(t));
  }
  // Throughput of every GEMM: the first number a CUTLASS or nvbench user looks for.
  std::vector<int> tw = {op_width + 8, 20};
  for (size_t i = 0; i < r.precisions.size(); ++i) tw.push_back(prec_width(r) + 3);
  std::vector<std::string> th = {"Pass Op", "Shape"};
  for (Precision p : r.precisions) th.push_back(fmt::format("{} TF/s", to_string(p)));
  print::Table tt = report_table(tw, th);
  d.title("Throughput per GEMM (TFLOP/s):");
  tt.add_rule('-');
  tt.add_header();
  tt.add_rule('-');
  for (size_t g = 0; g < r.plan.gemms.size(); ++g) {
    const Gemm& x = r.plan.gemms[g];
    std::vector<print::Cell> row = {fmt::format("{} {}", pass_label(x.pass), op_cell(x)), x.shape()};
    for (size_t p = 0; p < r.precisions.size(); ++p) {
      const Cell& c = r.cell(mode, g, p);
      row.push_back(c.ok ? fmt::format("{:.1f}", tflops(x, c.stats.mean_ms)) : fmt::format("N/A[{}]", fn.index(c.reason)));
    }
    tt.add_row(std::move(row));
  }
  tt.add_rule('=');
  d.table(std::move(tt));
  add_step_estimate(d, r, mode);
  if (mode == step_block_mode(r)) add_step_groups(d, r, mode);
  if (moe) add_moe_grouped(d, r, mode);
}

void add_shapes(print::Document& d, const RunResult& r, size_t mode, Footnotes& fn) {
  std::vector<int> widths = {22, 0};
  // Wide enough for the longest header ("FP8Current TFLOP/s") plus a gap.
  for (size_t i = 0; i < r.precisions.size(); ++i) widths.push_back(prec_width(r) + 7);
  auto table = [&](const char* title, const char* unit, auto value) {
    d.title(fmt::format("{}:", title));
    std::vector<std::string> head = {"Shape (MxKxN)", ""};
    for (auto& h : prec_headers(r, unit)) head.push_back(h);
    print::Table t = report_table(widths, head);
    t.add_rule('-');
    t.add_header();
    t.add_rule('-');
    for (size_t g = 0; g < r.plan.gemms.size(); ++g) {
      std::vector<print::Cell> row = {r.plan.gemms[g].shape(), ""};
      for (size_t p = 0; p < r.precisions.size(); ++p) row.push_back(value(g, p));
      t.add_row(std::move(row));
    }
    t.add_rule('=');
    d.table(std::move(t));
  };
  table("Time per GEMM", "ms", [&](size_t g, size_t p) { return cell_ms(r.cell(mode, g, p), fn); });
  table("Throughput", "TFLOP/s", [&](size_t g, size_t p) {
    const Cell& c = r.cell(mode, g, p);
    return c.ok ? fmt::format("{:.1f}", tflops(r.plan.gemms[g], c.stats.mean_ms)) : fmt::format("N/A[{}]", fn.index(c.reason));
  });
  auto bf = std::find(r.precisions.begin(), r.precisions.end(), Precision::BF16);
  if (bf != r.precisions.end() && r.precisions.size() > 1) {
    const size_t b = static_cast<size_t>(bf - r.precisions.begin());
    table("Speedup vs BF16", "x", [&](size_t g, size_t p) {
      const Cell& c = r.cell(mode, g, p);
      const Cell& base = r.cell(mode, g, b);
      if (!c.ok || !base.ok) return std::string("N/A");
      return print::format_speedup(base.stats.mean_ms / c.stats.mean_ms);
    });
  }
}

// The modes side by side (model mode: the full model, every GEMM of one training step; shapes: the
// sum over shapes): time per mode, the quantization overhead of each quantizing mode over
// pre-quantized, speedups vs BF16. The lead table of a multi-mode report.
void add_modes(print::Document& d, const RunResult& r) {
  std::optional<size_t> pq;
  for (size_t i = 0; i < r.modes.size(); ++i)
    if (r.modes[i] == Mode::PreQuantized) pq = i;
  std::vector<size_t> quantizing;  // the quantizing modes, compared with pre-quantized
  for (size_t i = 0; i < r.modes.size(); ++i)
    if (r.modes[i] != Mode::PreQuantized && pq) quantizing.push_back(i);
  std::string title;
  for (size_t i = 0; i < r.modes.size(); ++i) {
    std::string name = to_string(r.modes[i]);
    name[0] = static_cast<char>(std::toupper(static_cast<unsigned char>(name[0])));
    title += (i ? " vs " : "") + name;
  }
  std::string scope = "sum over shapes";
  if (r.plan.model_mode) {
    const bool lm = std::any_of(r.plan.gemms.begin(), r.plan.gemms.end(), [](const Gemm& g) { return g.scope == Scope::Model; });
    scope = fmt::format("full model: every GEMM of one training step, {}{}", layers_text(r.plan), lm ? " + LM head" : "");
  }
  d.title(fmt::format("{} ({}):", title, scope));
  std::vector<std::string> head = {"Precision", ""};
  std::vector<int> widths = {14, 0};
  for (Mode m : r.modes) {
    head.push_back(fmt::format("{} ms", mode_short(m)));
    widths.push_back(m == Mode::PreQuantized ? 16 : 14);
  }
  const bool one = quantizing.size() == 1;
  for (size_t i : quantizing) {
    const std::string pre = one ? "Quant" : mode_short(r.modes[i]);
    head.push_back(pre + " ovh ms");
    head.push_back(one ? "Ovh %" : pre + " ovh %");
    widths.push_back(16);
    widths.push_back(one ? 12 : 16);
  }
  for (Mode m : r.modes) {
    head.push_back(m == Mode::PreQuantized ? "Spd pre-q" : fmt::format("Spd {}", m == Mode::PerGemm ? "per-GEMM" : "training"));
    widths.push_back(14);
  }
  print::Table t = report_table(widths, head);
  t.add_header();
  t.add_rule('-');
  // Summaries once per mode (model mode), not once per precision.
  std::vector<ModeSummary> sums;
  if (r.plan.model_mode)
    for (size_t m = 0; m < r.modes.size(); ++m) sums.push_back(summarize_mode(r, m));
  auto total = [&](size_t mode, size_t p) -> std::optional<double> {
    if (r.plan.model_mode) return sums[mode].sums[p].full_model;
    double s = 0;
    for (size_t g = 0; g < r.plan.gemms.size(); ++g) {
      if (!r.cell(mode, g, p).ok) return std::nullopt;
      s += r.cell(mode, g, p).stats.mean_ms;
    }
    return s;
  };
  auto bf = std::find(r.precisions.begin(), r.precisions.end(), Precision::BF16);
  for (size_t p = 0; p < r.precisions.size(); ++p) {
    std::vector<std::string> row = {to_string(r.precisions[p]), ""};
    for (size_t m = 0; m < r.modes.size(); ++m) row.push_back(print::format_ms(total(m, p)));
    for (size_t i : quantizing) {
      auto a = total(i, p), q = total(*pq, p);
      row.push_back(a && q ? fmt::format("{:.3f}", *a - *q) : "N/A");
      row.push_back(a && q && *a > 0 ? fmt::format("{:.1f}%", 100.0 * (*a - *q) / *a) : "N/A");
    }
    for (size_t m = 0; m < r.modes.size(); ++m) {
      std::string sp = "N/A";
      if (bf != r.precisions.end()) {
        auto a = total(m, p), b = total(m, static_cast<size_t>(bf - r.precisions.begin()));
        if (a && b) sp = print::format_speedup(*b / *a);
      }
      row.push_back(sp);
    }
    t.add_row(cells(row));
  }
  if (pq && bf != r.precisions.end()) t.add_note("BF16 quantizes nothing: its differences between modes are measurement noise.");
  t.add_note(fmt::format("Spd = {} speedup vs BF16 in that mode.{}",
                         r.plan.model_mode ? "the full model's GEMM" : "the shapes' summed GEMM",
                         !pq ? std::string()
                         : one ? fmt::format(" Quant ovh = {} - pre-quantized.", to_string(r.modes[quantizing[0]]))
                               : std::string(" <Mode> ovh = that mode - pre-quantized.")));
  t.add_rule('=');
  d.table(std::move(t));
}

void add_accuracy(print::Document& d, const RunResult& r, Footnotes& fn) {
  d.title(fmt::format("Accuracy (relative Frobenius error vs an FP32 GEMM of the BF16 inputs; {} inputs{}):",
                      to_string(r.accuracy_dist),
                      r.accuracy_dist == Dist::Outliers ? ": 0.1% of activation/gradient elements x50" : ""));
  std::vector<int> widths = {16, 20};
  for (size_t i = 0; i < r.accuracy_precisions.size(); ++i) widths.push_back(13);
  std::vector<std::string> head = {"Pass Op", "Shape"};
  for (Precision p : r.accuracy_precisions) head.push_back(to_string(p));
  print::Table t = report_table(widths, head);
  t.add_rule('-');
  t.add_header();
  t.add_rule('-');
  bool any_emulated = false;
  for (size_t g = 0; g < r.plan.gemms.size(); ++g) {
    const Gemm& x = r.plan.gemms[g];
    std::vector<print::Cell> row = {x.scope == Scope::Shape ? "-" : fmt::format("{} {}", pass_label(x.pass), x.label()),
                                    x.shape()};
    for (size_t p = 0; p < r.accuracy_precisions.size(); ++p) {
      const AccuracyCell c = r.accuracy_cell(g, p);
      any_emulated |= c.ok && c.emulated;
      row.push_back(c.ok ? fmt::format("{:.2e}{}", c.rel_error, c.emulated ? "*" : "") : fmt::format("N/A[{}]", fn.index(c.reason)));
    }
    t.add_row(std::move(row));
  }
  t.add_rule('-');
  if (any_emulated) t.add_note("* emulated: our quantization, dequantized, BF16 GEMM with FP32 accumulation (no native kernel on this GPU)");
  t.add_rule('=');
  d.table(std::move(t));
}

// The SM clock samples of the measured cells: range, and how many ran power-capped or
// thermally slowed (the reason a cell can read slow without anything being wrong with it).
void add_clock(print::Document& d, const RunResult& r) {
  int lo = 0, hi = 0, max_mhz = 0, n = 0, ok = 0, capped = 0, thermal = 0;
  for (size_t m = 0; r.has_cells() && m < r.modes.size(); ++m)
    for (size_t g = 0; g < r.plan.gemms.size(); ++g)
      for (size_t p = 0; p < r.precisions.size(); ++p) {
        const Cell& c = r.cell(m, g, p);
        if (!c.ok) continue;
        ++ok;
        if (!c.clock) continue;
        const ClockSample& s = *c.clock;
        lo = n ? std::min(lo, s.sm_mhz) : s.sm_mhz;
        hi = n ? std::max(hi, s.sm_mhz) : s.sm_mhz;
        max_mhz = std::max(max_mhz, s.max_sm_mhz);
        capped += s.power_capped();
        thermal += s.thermal();
        ++n;
      }
  if (ok == 0) return;
  if (n == 0) {
    d.line("SM clock: not sampled (NVML not available)");
    return;
  }
  d.line(fmt::format("SM clock (mean of 3 samples per cell, {} of {} cells): {}-{} MHz, device max {} MHz; power cap active in {}, "
                                "thermal slowdown in {}",
                     n, ok, lo, hi, max_mhz, capped, thermal));
  const ClockSummary s = summarize_clocks(r);
  std::string means;
  for (size_t p = 0; p < r.precisions.size(); ++p)
    if (s.precision_mean_mhz[p])
      means += fmt::format("{}{} {:.0f}", means.empty() ? "" : ", ", to_string(r.precisions[p]), *s.precision_mean_mhz[p]);
  if (!means.empty()) d.line(fmt::format("SM clock, time-weighted mean per recipe (MHz): {}", means));
}

// --repeats N >= 3: the per-layer totals and speedups of each mode as median [95% interval].
void add_repeats(print::Document& d, const RunResult& r) {
  const std::vector<RepeatSummary> rs = summarize_repeats(r);
  if (rs.empty()) {
    if (r.timing.repeats > 1)
      d.line(fmt::format("Repeats: {} (interleaved GEMM-major; cells pool them); intervals need --repeats >= 3", r.timing.repeats));
    return;
  }
  d.line(fmt::format("Repeats: {} (interleaved GEMM-major); median [95% interval, bootstrap of the median]",
                     r.timing.repeats));
  for (size_t m = 0; m < r.modes.size() && m < rs.size(); ++m) {
    std::string totals, speedups;
    for (size_t p = 0; p < r.precisions.size(); ++p)
      if (const auto& iv = rs[m].per_layer_total[p])
        totals += fmt::format("  {} {:.3f} [{:.3f}, {:.3f}]", to_string(r.precisions[p]), iv->median, iv->lo, iv->hi);
    const ModeSummary ms = summarize_mode(r, m);
    for (size_t i = 0; i < rs[m].speedups.size() && i < ms.speedups.size(); ++i)
      if (const auto& iv = rs[m].speedups[i])
        speedups += fmt::format("  {} {:.2f}x [{:.2f}, {:.2f}]", ms.speedups[i].name(), iv->median, iv->lo, iv->hi);
    if (!totals.empty())
      d.line(fmt::format("{}: per-layer total (ms; {}){}", to_string(r.modes[m]),
                         r.plan.has_moe() ? "the average layer, experts included" : "every layer alike", totals),
             2);
    if (!speedups.empty()) d.line(fmt::format("{}: speedups (the full model's GEMMs){}", to_string(r.modes[m]), speedups), 2);
  }
}

}  // namespace

print::Document report_document(const RunResult& r) {
  print::Document d;
  Footnotes fn;
  // A model run leads with its whole training step (core/report/report_whole_step.hpp).
  if (r.plan.model_mode && r.step && r.step->timed) {
    add_step_block(d, r);
    blank(d);
  }
  // Several modes: the side-by-side summary first, then each mode in detail.
  if (r.modes.size() >= 2) {
    d.title(fmt::format("GEMM Benchmark ({}) on {}: {} modes, side by side first, then each in detail",
                        r.plan.model_mode ? "Model Config Mode" : "Shape Mode", device_name(r), r.modes.size()),
            2);
    add_modes(d, r);
    blank(d);
  }
  for (size_t m = 0; m < r.modes.size(); ++m) {
    if (m) blank(d);
    add_header(d, r, m);
    if (r.providers.size() != 1 || r.providers[0] != kProviderCublasLt)
      d.line(fmt::format("Kernel providers: {} (the tables below show {})", provider_option_string(r.providers),
                         r.providers[0]));
    if (r.plan.model_mode)
      add_model(d, r, m, fn);
    else
      add_shapes(d, r, m, fn);
    add_provider_block(d, r, m);
  }
  // Attention's own matmuls once for all modes: not GEMM rows, timed (if at all) by the step context.
  if (r.plan.model_mode && !r.modes.empty()) add_attention_matmuls(d, r);
  // Spread of the per-iteration times behind the means (full statistics are in JSON/CSV).
  double worst_cv = -1, worst_gap = 0;
  std::string worst_where;
  for (size_t m = 0; m < r.modes.size(); ++m)
    for (size_t g = 0; g < r.plan.gemms.size(); ++g)
      for (size_t p = 0; p < r.precisions.size(); ++p) {
        const Cell& c = r.cell(m, g, p);
        if (!c.ok || c.stats.mean_ms <= 0) continue;
        worst_gap = std::max(worst_gap, std::abs(c.stats.median_ms - c.stats.mean_ms) / c.stats.mean_ms);
        const double cv = c.stats.stdev_ms / c.stats.mean_ms;
        if (cv > worst_cv) {
          worst_cv = cv;
          worst_where = fmt::format("{} {} {} {}", to_string(r.modes[m]), pass_label(r.plan.gemms[g].pass),
                                    r.plan.gemms[g].label(), to_string(r.precisions[p]));
        }
      }
  if (worst_cv >= 0) {
    d.line(fmt::format("Timing spread: largest stdev {:.1f}% of mean ({}); median within {:.1f}% of mean everywhere",
                       100 * worst_cv, worst_where, 100 * worst_gap));
    add_clock(d, r);
    if (r.plan.model_mode) add_repeats(d, r);
  }
  if (r.has_accuracy) {
    if (r.modes.empty()) {
      d.title(fmt::format("GEMM Accuracy ({}) on {}", r.plan.model_mode ? "Model Config Mode" : "Shape Mode", device_name(r)),
              2);
      d.rule('=', print::kReportWidth);
    }
    add_accuracy(d, r, fn);
  }
  add_other_records(d, r);  // records of kinds without a block of their own (report_records.hpp)
  if (!fn.items.empty() || !r.notes.empty()) {
    d.title("Notes:");
    std::vector<print::Item> items;
    for (size_t i = 0; i < fn.items.size(); ++i) items.emplace_back(fmt::format("[{}] {}", i + 1, fn.items[i]));
    for (const auto& n : r.notes) items.emplace_back(print::Text::split("- " + n, n));
    d.list(std::move(items));
  }
  return d;
}

std::string render_text(const RunResult& r) { return text(report_document(r)); }

std::string render_markdown(const RunResult& r) { return print::render(report_document(r), print::Format::Markdown); }

std::vector<std::string> predicted_na(const RunResult& r) {
  // The CPU shape rules (shape_constraint) decide these before any GPU is rented. One line per
  // rule and set of GEMMs, naming the precisions it hits: "FP8Current, FP8Delayed: 2 of 15 GEMMs,
  // FP8 GEMMs need M, K and N multiples of 16: Fprop LM Head 4096x4096x50257, ...".
  struct Group {
    std::string rule, gemms;
    size_t count = 0;
    std::string precisions;
  };
  std::vector<Group> groups;
  for (Precision p : r.precisions) {
    std::vector<std::pair<std::string, std::string>> hits;  // rule (without "(got ...)"), GEMM
    for (const Gemm& g : r.plan.gemms) {
      std::string why = cell_shape_problem(g, p, r.recipe_options);  // the engine's rule, per padded expert
      if (why.empty()) continue;
      if (const size_t got = why.find(" (got "); got != std::string::npos) why.erase(got);
      hits.emplace_back(why, g.scope == Scope::Shape ? g.shape()
                                                     : fmt::format("{} {} {}", pass_label(g.pass), g.label(), g.shape()));
    }
    std::vector<std::string> rules;
    for (const auto& h : hits)
      if (std::find(rules.begin(), rules.end(), h.first) == rules.end()) rules.push_back(h.first);
    for (const std::string& rule : rules) {
      Group x{rule, "", 0, to_string(p)};
      for (const auto& h : hits)
        if (h.first == rule) x.gemms += (x.count++ ? ", " : "") + h.second;
      auto same = std::find_if(groups.begin(), groups.end(),
                               [&](const Group& y) { return y.rule == x.rule && y.gemms == x.gemms; });
      if (same != groups.end()) same->precisions += ", " + x.precisions;
      else groups.push_back(x);
    }
  }
  std::vector<std::string> out;
  for (const Group& x : groups)
    out.push_back(fmt::format("{}: {} of {} GEMMs, {}: {}", x.precisions, x.count, r.plan.gemms.size(), x.rule, x.gemms));
  return out;
}

std::string render_plan_text(const RunResult& r) {
  std::string out;
  const char* kind = r.plan.model_mode ? "Model Config Mode" : "Shape Mode";
  if (r.dry_run_requested || r.why_not_measured.empty())
    out += fmt::format("GEMM Plan ({}) -- dry run, no GPU touched\n", kind);
  else  // not asked for: the plan is all there is
    out += fmt::format("GEMM Plan ({}) -- NOT a measurement: nothing could be measured ({}), so this is the plan only\n",
                       kind, r.why_not_measured);
  if (r.plan.model_mode) {
    const ModelConfig& c = *r.plan.config;
    out += fmt::format("Model Config ({}): hidden={}, intermediate={}, {}, layers={}{}{}{}\n",
                       c.name, c.hidden_size, c.intermediate_size, heads_text(c, true), c.num_hidden_layers,
                       c.gated_mlp ? ", gated MLP" : "",
                       c.vocab_size ? ", " + vocab_text(c) : "",
                       c.tensor_parallel > 1 ? fmt::format(", tensor parallel={} (per-rank shapes)", c.tensor_parallel) : "");
    out += tokens_line(c);
    out += moe_config_text(c);
    out += moe_routing_text(r);
    out += step_plan_text(r);  // the whole step's groups (core/report/report_whole_step.hpp)
  }
  if (!r.precisions.empty() && !r.modes.empty()) {
    std::string precs, modes;
    for (Precision p : r.precisions) precs += (precs.empty() ? "" : ", ") + std::string(to_string(p));
    for (Mode m : r.modes) modes += (modes.empty() ? "" : ", ") + std::string(to_string(m));
    const bool blackwell = std::any_of(r.precisions.begin(), r.precisions.end(), [](Precision p) {
      return p == Precision::MXFP8 || p == Precision::NVFP4;
    });
    out += fmt::format("A measurement would time: {} in {} mode{}{}\n", precs, modes, r.modes.size() > 1 ? "s" : "",
                       blackwell ? " (MXFP8/NVFP4 only on compute capability >= 10.0)" : "");
    out += step_context_lines(r);
    out += execution_lines(r);
    if (r.plan.model_mode && r.plan.config->vocab_size > 0)
      out += r.recipe_options.lm_head_bf16
                 ? "LM Head: BF16 in every column (--lm-head-precision bf16; 'same' runs it in the column's precision)\n"
                 : "LM Head: in the column's precision (--lm-head-precision same)\n";
    const std::vector<std::string> na = predicted_na(r);
    if (na.empty()) out += "Predicted N/A cells: none (every selected precision can run every GEMM's shape)\n";
    for (const std::string& line : na) out += "Predicted N/A: " + line + "\n";
  }
  // Model plans: a last column says where each row runs (every layer, the dense or the MoE layers
  // only, once per step), so the sums below can be read off the table.
  const bool scoped = r.plan.model_mode;
  const size_t width = scoped ? 125 : 110;
  out += std::string(width, '=') + "\n";
  std::vector<std::string> head = {"Pass", "Op", "Shape", "GFLOP", "A (m x k)", "B (k x n)", "BF16 MB", "FP8 MB", "NVFP4 MB"};
  if (scoped) head.push_back("Runs in");
  const std::vector<int> widths = {7, 10, 20, 12, 14, 14, 11, 11, 11, 15};
  print::Table t = report_table({widths.begin(), widths.begin() + static_cast<std::ptrdiff_t>(head.size())}, head);
  t.add_header();
  t.add_note("  (MB = bytes the GEMM kernel reads + writes: operands in that format with scales; output BF16, Wgrad FP32 r+w)");
  t.add_note(std::string(width, '-'));  // the plan's own rules, wider than its columns
  auto mb = [&](Precision p, const Gemm& g) {
    return plan_number(byte_count(make_recipe(p, g, r.recipe_options), g).gemm / 1e6);
  };
  auto opnd = [](const Operand& o) { return fmt::format("{}{}", to_string(o.role), o.k_major ? "" : "^T"); };
  for (const Gemm& g : r.plan.gemms) {
    std::vector<print::Cell> row = {g.scope == Scope::Shape ? "-" : pass_label(g.pass),
                                    g.scope == Scope::Shape ? "-" : g.label(),
                                    g.shape(), plan_number(g.flops() / 1e9), opnd(g.a), opnd(g.b),
                                    mb(Precision::BF16, g), mb(Precision::FP8Current, g), mb(Precision::NVFP4, g)};
    if (scoped) row.push_back(scope_text(g));
    t.add_row(std::move(row));
  }
  t.add_note(std::string(width, '-'));
  out += print::render_table(t, print::Format::Text);
  out += "  ^T: operand stored with the contraction dimension strided (FP8 on Hopper needs a transposed copy)\n";
  const PlanFlops f = plan_flops(r.plan);
  if (r.plan.model_mode) {
    if (f.moe_layers == 0 || f.moe_layers < r.plan.layers())
      out += fmt::format("FLOPs per {}layer: Fprop {:.2f}T + Dgrad {:.2f}T + Wgrad {:.2f}T = {:.2f}T\n",
                         f.moe_layers ? "dense " : "", f.fprop / 1e12, f.dgrad / 1e12, f.wgrad / 1e12, f.per_layer() / 1e12);
    if (f.moe_layers > 0)
      out += fmt::format("FLOPs per MoE layer (real tokens, the busiest EP rank): Fprop {:.2f}T + Dgrad {:.2f}T + Wgrad "
                         "{:.2f}T = {:.2f}T\n",
                         f.moe_fprop / 1e12, f.moe_dgrad / 1e12, f.moe_wgrad / 1e12, f.per_moe_layer() / 1e12);
    if (f.model_once > 0) out += fmt::format("FLOPs once per step (LM head, 3 passes): {:.2f}T\n", f.model_once / 1e12);
    out += fmt::format("FLOPs full model ({}{}): {:.2f}T per step, the linear layers only (attention's QK^T and PV "
                       "not included: below)\n",
                       f.moe_layers ? fmt::format("{} dense + {} MoE layers", r.plan.layers() - f.moe_layers, f.moe_layers)
                                    : fmt::format("{} layers", r.plan.layers()),
                       f.model_once > 0 ? " + LM head" : "", f.full_model(r.plan.layers()) / 1e12);
    // Attention's own matmuls: planned rows of their own, never GEMM rows (core/report/report_attention.hpp).
    out += attention_matmuls_block(r);
    // Quantization traffic model per layer: every GEMM quantizing its own operands vs each tensor
    // once (both copies), the difference between the per-gemm and training modes.
    std::vector<Precision> modelled;  // the selected precisions the traffic model covers
    for (Precision p : {Precision::FP8Current, Precision::FP8Delayed, Precision::FP8Block})
      if (r.precisions.empty() || std::find(r.precisions.begin(), r.precisions.end(), p) != r.precisions.end())
        modelled.push_back(p);
    const bool quantizes = r.modes.empty() || std::any_of(r.modes.begin(), r.modes.end(), [](Mode m) {
                             return m != Mode::PreQuantized;
                           });
    if (modelled.empty())
      out += "Quantization traffic per layer: modelled for FP8Current, FP8Delayed and FP8Block; none selected\n";
    else
      out += fmt::format("Quantization traffic per {}layer (model; BF16 reads incl. amax pass + quantized writes){}:\n",
                         f.moe_layers ? "MoE " : "", quantizes ? "" : "; not timed in pre-quantized mode");
    for (Precision p : modelled) {
      double own = 0, shared = 0;
      for (const Gemm& g : r.plan.gemms) {
        if (g.scope != Scope::Layer && !(f.moe_layers > 0 && g.scope == Scope::MoeLayer)) continue;
        const Recipe rec = make_recipe(p, g, r.recipe_options);
        own += byte_count(rec, g).quantize;
        shared += byte_count(rec, g, operand_work(Mode::Training, g, Side::Left, rec, r.recipe_options),
                             operand_work(Mode::Training, g, Side::Right, rec, r.recipe_options)).quantize;
      }
      out += fmt::format("  {:<11} training {:.2f} GB, per-gemm {:.2f} GB\n", to_string(p), shared / 1e9, own / 1e9);
    }
  } else {
    double tot = 0;
    for (const Gemm& g : r.plan.gemms) tot += g.flops();
    out += tot >= 1e12 ? fmt::format("Total FLOPs: {:.3f}T over {} GEMMs\n", tot / 1e12, r.plan.gemms.size())
                       : fmt::format("Total FLOPs: {:.4g}G over {} GEMMs\n", tot / 1e9, r.plan.gemms.size());
  }
  for (const auto& n : r.notes) out += fmt::format("Note: {}\n", n);
  return out;
}

std::string heads_text(const ModelConfig& c, bool always) {
  if (c.mla.enabled()) {
    const MlaConfig& a = c.mla;
    return fmt::format("heads={} (MLA: qk head {} = {} nope + {} rope, v head {})", c.num_attention_heads,
                       a.qk_nope_head_dim + a.qk_rope_head_dim, a.qk_nope_head_dim, a.qk_rope_head_dim, a.v_head_dim);
  }
  std::string out = fmt::format("heads={}", c.num_attention_heads);
  if (always || c.kv_heads() != c.num_attention_heads) out += fmt::format(", kv_heads={}", c.kv_heads());
  if (always || c.head_dimension() * c.num_attention_heads != c.hidden_size)
    out += fmt::format(", head_dim={}", c.head_dimension());
  return out;
}

const char* scope_text(const Gemm& g) {
  switch (g.scope) {
    case Scope::Layer: return "every layer";
    case Scope::DenseLayer: return "dense layers";
    case Scope::MoeLayer: return "MoE layers";
    case Scope::Model: return "once per step";
    case Scope::Shape: return "-";
  }
  return "-";
}

}  // namespace gs
