#include "core/compare.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <map>
#include <sstream>

#include "core/error.hpp"

namespace gs {

using nlohmann::json;

namespace {

constexpr const char* kSchema = "gemmscope.result/1";

bool is_positive_int(const json& v) {
  return (v.is_number_unsigned() || v.is_number_integer()) && v.get<long long>() > 0;
}

bool is_positive_number(const json& v) { return v.is_number() && std::isfinite(v.get<double>()) && v.get<double>() > 0; }

const json* find(const json& obj, const char* key) {
  if (!obj.is_object()) return nullptr;
  auto it = obj.find(key);
  return it == obj.end() ? nullptr : &*it;
}

std::vector<std::string> string_list(const json& doc, const char* key, const std::string& name) {
  const json* v = find(doc, key);
  if (!v || !v->is_array() || v->empty())
    throw UsageError(fmt::format("{}: \"{}\" must be a non-empty list of strings", name, key));
  std::vector<std::string> out;
  for (const json& s : *v) {
    if (!s.is_string()) throw UsageError(fmt::format("{}: \"{}\" must be a non-empty list of strings", name, key));
    out.push_back(s.get<std::string>());
  }
  return out;
}

std::string str_or(const json& obj, const char* key, const std::string& dflt) {
  const json* v = find(obj, key);
  return v && v->is_string() ? v->get<std::string>() : dflt;
}

std::string gemm_key(const json& g) {
  return fmt::format("{} {} {}x{}x{}", g["pass"].get<std::string>(), g["op"].get<std::string>(), g["m"].get<long long>(),
                     g["k"].get<long long>(), g["n"].get<long long>());
}

// mean_ms of a cell, nullopt for n/a or a missing cell.
std::optional<double> cell_ms(const json& g, const std::string& mode, const std::string& prec) {
  const json* res = find(g, "results");
  if (!res) return std::nullopt;
  const json* m = find(*res, mode.c_str());
  if (!m) return std::nullopt;
  const json* c = find(*m, prec.c_str());
  if (!c || str_or(*c, "status", "") != "ok") return std::nullopt;
  return (*c)["mean_ms"].get<double>();
}

std::optional<double> summary_value(const json& doc, const std::string& mode, const char* section, const char* sub,
                                    const std::string& prec) {
  const json* s = find(doc, "summary");
  if (!s) return std::nullopt;
  const json* m = find(*s, mode.c_str());
  if (!m) return std::nullopt;
  const json* sec = find(*m, section);
  if (!sec) return std::nullopt;
  if (sub) sec = find(*sec, sub);
  if (!sec) return std::nullopt;
  const json* v = find(*sec, prec.c_str());
  if (!v || !v->is_number()) return std::nullopt;
  return v->get<double>();
}

bool has_summary(const json& doc, const std::string& mode) {
  const json* s = find(doc, "summary");
  return s && find(*s, mode.c_str()) != nullptr;
}

CompareCell make_cell(const std::string& prec, std::optional<double> a, std::optional<double> b, double t) {
  CompareCell c;
  c.precision = prec;
  c.a_ms = a;
  c.b_ms = b;
  if (a && b) {
    c.ratio = *b / *a;
    if (*c.ratio > 1.0 + t)
      c.verdict = Verdict::Regression;
    else if (*a / *b > 1.0 + t)
      c.verdict = Verdict::Improvement;
    else
      c.verdict = Verdict::Same;
  } else if (a && !b) {
    c.verdict = Verdict::Regression;
  } else if (!a && b) {
    c.verdict = Verdict::Improvement;
  } else {
    c.verdict = Verdict::BothNA;
  }
  return c;
}

std::vector<std::string> intersect(const std::vector<std::string>& a, const std::vector<std::string>& b) {
  std::vector<std::string> out;
  for (const auto& x : a)
    if (std::find(b.begin(), b.end(), x) != b.end()) out.push_back(x);
  return out;
}

std::vector<std::string> minus(const std::vector<std::string>& a, const std::vector<std::string>& b) {
  std::vector<std::string> out;
  for (const auto& x : a)
    if (std::find(b.begin(), b.end(), x) == b.end()) out.push_back(x);
  return out;
}

std::string join(const std::vector<std::string>& v, const char* sep = ", ") {
  std::string out;
  for (size_t i = 0; i < v.size(); ++i) out += (i ? sep : "") + v[i];
  return out;
}

std::string fmt_ms(double v) { return fmt::format("{:.3f}", v); }

std::string pct(double ratio) { return fmt::format("{:+.1f}%", (ratio - 1.0) * 100.0); }

// Text of a cell in the per-GEMM tables (ratio B/A and a flag).
std::string cell_text(const CompareCell& c, bool markdown) {
  std::string s;
  if (c.ratio)
    s = fmt::format("{:.3f}", *c.ratio);
  else if (c.verdict == Verdict::BothNA)
    s = "n/a";
  else if (c.a_ms)
    s = "ok->n/a";
  else
    s = "n/a->ok";
  if (markdown) {
    if (c.verdict == Verdict::Regression) return "**" + s + " slower**";
    if (c.verdict == Verdict::Improvement) return "_" + s + " faster_";
    return s;
  }
  if (c.verdict == Verdict::Regression) return s + " R";
  if (c.verdict == Verdict::Improvement) return s + " I";
  return s;
}

std::string describe_change(const CompareCell& c) {
  if (c.a_ms && c.b_ms) return fmt::format("{} -> {} ms ({})", fmt_ms(*c.a_ms), fmt_ms(*c.b_ms), pct(*c.ratio));
  if (c.a_ms) return fmt::format("{} ms -> n/a", fmt_ms(*c.a_ms));
  return fmt::format("n/a -> {} ms", fmt_ms(*c.b_ms));
}

std::string gemm_name(const CompareGemmRow& g) {
  return fmt::format("{} {} {}x{}x{}", g.pass, g.label, g.m, g.k, g.n);
}

struct Flagged {
  std::string where;  // "autocast FP8Current fprop QKV Proj 15872x4096x12288"
  std::string change;
};

void collect(const CompareResult& r, Verdict v, std::vector<Flagged>& out) {
  for (const CompareMode& m : r.modes) {
    for (const CompareTotalRow& t : m.totals)
      for (const CompareCell& c : t.cells)
        if (c.verdict == v) out.push_back({fmt::format("{} {} {}", m.mode, c.precision, t.what), describe_change(c)});
    for (const CompareGemmRow& g : m.gemms)
      for (const CompareCell& c : g.cells)
        if (c.verdict == v) out.push_back({fmt::format("{} {} {}", m.mode, c.precision, gemm_name(g)), describe_change(c)});
  }
}

// Left-aligned first `left` columns, right-aligned others.
std::string render_table(const std::vector<std::vector<std::string>>& rows, size_t left) {
  std::vector<size_t> w;
  for (const auto& row : rows) {
    if (w.size() < row.size()) w.resize(row.size(), 0);
    for (size_t i = 0; i < row.size(); ++i) w[i] = std::max(w[i], row[i].size());
  }
  std::string out;
  for (size_t r = 0; r < rows.size(); ++r) {
    std::string line = "  ";
    for (size_t i = 0; i < rows[r].size(); ++i) {
      if (i) line += "  ";
      if (i < left)
        line += fmt::format("{:<{}}", rows[r][i], w[i]);
      else
        line += fmt::format("{:>{}}", rows[r][i], w[i]);
    }
    while (!line.empty() && line.back() == ' ') line.pop_back();
    out += line + "\n";
    if (r == 0) {
      size_t total = 2;
      for (size_t i = 0; i < w.size(); ++i) total += w[i] + (i ? 2 : 0);
      out += "  " + std::string(total - 2, '-') + "\n";
    }
  }
  return out;
}

std::string md_row(const std::vector<std::string>& cells) {
  std::string s = "|";
  for (const auto& c : cells) s += " " + c + " |";
  return s + "\n";
}

std::string md_align(size_t left, size_t n) {
  std::string s = "|";
  for (size_t i = 0; i < n; ++i) s += i < left ? "---|" : "---:|";
  return s + "\n";
}

std::string file_line(const std::string& path, const std::string& dev, const std::string& created) {
  std::string s = path.empty() ? "(in memory)" : path;
  std::vector<std::string> bits;
  if (!dev.empty()) bits.push_back(dev);
  if (!created.empty()) bits.push_back(created);
  if (!bits.empty()) s += " (" + join(bits) + ")";
  return s;
}

std::string threshold_line(double t) {
  return fmt::format("threshold {:.1f}%: B/A > {:.3f} is a regression, B/A < {:.3f} an improvement", t * 100.0, 1.0 + t,
                     1.0 / (1.0 + t));
}

}  // namespace

const char* to_string(Verdict v) {
  switch (v) {
    case Verdict::Same: return "same";
    case Verdict::Regression: return "regression";
    case Verdict::Improvement: return "improvement";
    case Verdict::BothNA: return "n/a";
  }
  return "?";
}

void validate_result_json(const json& doc, const std::string& name) {
  if (!doc.is_object()) throw UsageError(fmt::format("{} is not a gemmscope result (top level is not an object)", name));
  const json* schema = find(doc, "schema");
  if (!schema || !schema->is_string() || schema->get<std::string>() != kSchema)
    throw UsageError(fmt::format("{} has schema {}, expected \"{}\"", name, schema ? schema->dump() : "(none)", kSchema));
  const std::string kind = str_or(doc, "kind", "");
  if (kind != "model" && kind != "shapes")
    throw UsageError(fmt::format("{}: \"kind\" must be \"model\" or \"shapes\"", name));
  const json* dry = find(doc, "dry_run");
  if (dry && dry->is_boolean() && dry->get<bool>())
    throw UsageError(fmt::format("{} is a dry run: it holds no results to compare", name));
  const auto modes = string_list(doc, "modes", name);
  string_list(doc, "precisions", name);
  const json* gemms = find(doc, "gemms");
  if (!gemms || !gemms->is_array() || gemms->empty())
    throw UsageError(fmt::format("{}: \"gemms\" must be a non-empty list", name));
  for (size_t i = 0; i < gemms->size(); ++i) {
    const json& g = (*gemms)[i];
    const std::string where = fmt::format("{}: gemms[{}]", name, i);
    if (!g.is_object()) throw UsageError(where + " is not an object");
    for (const char* key : {"pass", "op"})
      if (!find(g, key) || !g[key].is_string()) throw UsageError(fmt::format("{}: \"{}\" must be a string", where, key));
    for (const char* key : {"m", "k", "n"})
      if (!find(g, key) || !is_positive_int(g[key]))
        throw UsageError(fmt::format("{}: \"{}\" must be a positive integer", where, key));
    const json* res = find(g, "results");
    if (!res || !res->is_object())
      throw UsageError(fmt::format("{} has no \"results\" (not a measured run?)", where));
    for (const std::string& mode : modes) {
      const json* cells = find(*res, mode.c_str());
      if (!cells || !cells->is_object())
        throw UsageError(fmt::format("{}.results has no object for mode \"{}\"", where, mode));
      for (auto it = cells->begin(); it != cells->end(); ++it) {
        const std::string cw = fmt::format("{}.results.{}.{}", where, mode, it.key());
        const std::string status = str_or(it.value(), "status", "");
        if (status != "ok" && status != "n/a")
          throw UsageError(cw + ": a cell must be an object with status \"ok\" or \"n/a\"");
        if (status == "ok" && (!find(it.value(), "mean_ms") || !is_positive_number(it.value()["mean_ms"])))
          throw UsageError(cw + ": status \"ok\" needs a positive number mean_ms");
      }
    }
  }
}

json load_result_json(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw UsageError(fmt::format("cannot read {}: {}", path, std::strerror(errno)));
  std::stringstream ss;
  ss << in.rdbuf();
  json doc;
  try {
    doc = json::parse(ss.str());
  } catch (const json::parse_error& e) {
    // e.what() is "[json.exception.parse_error.101] parse error at line 1, column 1: ..."
    std::string msg = e.what();
    const auto p = msg.find("] ");
    if (p != std::string::npos) msg = msg.substr(p + 2);
    throw UsageError(fmt::format("{} is not JSON: {}", path, msg));
  }
  validate_result_json(doc, path);
  return doc;
}

CompareResult compare_results(const json& a, const json& b, const CompareOptions& opt) {
  validate_result_json(a, "A");
  validate_result_json(b, "B");
  if (!(opt.threshold >= 0.0) || opt.threshold >= 1.0)
    throw UsageError(fmt::format("threshold must be in [0, 1) (got {})", opt.threshold));
  CompareResult r;
  r.threshold = opt.threshold;
  r.kind = a["kind"].get<std::string>();
  const std::string kind_b = b["kind"].get<std::string>();
  if (r.kind != kind_b)
    throw UsageError(fmt::format("cannot compare a \"{}\" result with a \"{}\" result", r.kind, kind_b));
  if (const json* d = find(a, "device")) r.a_device = str_or(*d, "name", "");
  if (const json* d = find(b, "device")) r.b_device = str_or(*d, "name", "");
  r.a_created = str_or(a, "created", "");
  r.b_created = str_or(b, "created", "");

  const auto modes_a = string_list(a, "modes", "A"), modes_b = string_list(b, "modes", "B");
  std::vector<std::string> modes = intersect(modes_a, modes_b);
  r.only_a_modes = minus(modes_a, modes_b);
  r.only_b_modes = minus(modes_b, modes_a);
  if (!opt.mode.empty()) {
    const bool in_a = std::find(modes_a.begin(), modes_a.end(), opt.mode) != modes_a.end();
    const bool in_b = std::find(modes_b.begin(), modes_b.end(), opt.mode) != modes_b.end();
    if (!in_a || !in_b)
      throw UsageError(fmt::format("mode \"{}\" is not in {} (modes of A: {}; of B: {})", opt.mode,
                                   !in_a && !in_b ? "either file" : !in_a ? "A" : "B", join(modes_a), join(modes_b)));
    modes = {opt.mode};
  }
  if (modes.empty())
    throw UsageError(fmt::format("the files have no mode in common (A: {}; B: {})", join(modes_a), join(modes_b)));

  const auto precs_a = string_list(a, "precisions", "A"), precs_b = string_list(b, "precisions", "B");
  r.precisions = intersect(precs_a, precs_b);
  r.only_a_precisions = minus(precs_a, precs_b);
  r.only_b_precisions = minus(precs_b, precs_a);
  if (r.precisions.empty())
    throw UsageError(
        fmt::format("the files have no precision in common (A: {}; B: {})", join(precs_a), join(precs_b)));

  // Match GEMMs by (pass, op, m, k, n); repeated keys pair up in file order.
  std::map<std::string, std::vector<size_t>> b_by_key;
  const json& ga = a["gemms"];
  const json& gb = b["gemms"];
  for (size_t j = 0; j < gb.size(); ++j) b_by_key[gemm_key(gb[j])].push_back(j);
  std::vector<std::pair<size_t, size_t>> pairs;
  std::vector<bool> b_used(gb.size(), false);
  for (size_t i = 0; i < ga.size(); ++i) {
    auto& cand = b_by_key[gemm_key(ga[i])];
    if (cand.empty()) {
      r.unmatched_a.push_back(gemm_key(ga[i]));
      continue;
    }
    pairs.emplace_back(i, cand.front());
    b_used[cand.front()] = true;
    cand.erase(cand.begin());
  }
  for (size_t j = 0; j < gb.size(); ++j)
    if (!b_used[j]) r.unmatched_b.push_back(gemm_key(gb[j]));
  if (pairs.empty()) throw UsageError("the files have no GEMM in common (matched by pass, op, m, k, n)");

  const double t = opt.threshold;
  for (const std::string& mode : modes) {
    CompareMode cm;
    cm.mode = mode;
    for (const auto& [i, j] : pairs) {
      const json& x = ga[i];
      CompareGemmRow row;
      row.pass = x["pass"].get<std::string>();
      row.op = x["op"].get<std::string>();
      row.label = str_or(x, "label", row.op);
      row.m = x["m"].get<long long>();
      row.k = x["k"].get<long long>();
      row.n = x["n"].get<long long>();
      for (const std::string& p : r.precisions) row.cells.push_back(make_cell(p, cell_ms(x, mode, p), cell_ms(gb[j], mode, p), t));
      cm.gemms.push_back(std::move(row));
    }
    if (has_summary(a, mode) && has_summary(b, mode)) {
      CompareTotalRow layer{"per-layer total", {}}, full{"full model", {}};
      for (const std::string& p : r.precisions) {
        layer.cells.push_back(make_cell(p, summary_value(a, mode, "per_layer", "total", p),
                                        summary_value(b, mode, "per_layer", "total", p), t));
        full.cells.push_back(make_cell(p, summary_value(a, mode, "full_model", nullptr, p),
                                       summary_value(b, mode, "full_model", nullptr, p), t));
      }
      cm.totals.push_back(std::move(layer));
      cm.totals.push_back(std::move(full));
    }
    r.modes.push_back(std::move(cm));
  }
  for (const CompareMode& m : r.modes) {
    for (const auto& g : m.gemms)
      for (const auto& c : g.cells) {
        r.regressions += c.verdict == Verdict::Regression;
        r.improvements += c.verdict == Verdict::Improvement;
      }
    for (const auto& tr : m.totals)
      for (const auto& c : tr.cells) {
        r.regressions += c.verdict == Verdict::Regression;
        r.improvements += c.verdict == Verdict::Improvement;
      }
  }
  return r;
}

CompareResult compare_files(const std::string& a_path, const std::string& b_path, const CompareOptions& opt) {
  const json a = load_result_json(a_path);
  const json b = load_result_json(b_path);
  CompareResult r = compare_results(a, b, opt);
  r.a_path = a_path;
  r.b_path = b_path;
  return r;
}

double parse_threshold(const std::string& text) {
  std::string s = text;
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.back()))) s.pop_back();
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.front()))) s.erase(s.begin());
  bool percent = false;
  if (!s.empty() && s.back() == '%') {
    percent = true;
    s.pop_back();
  }
  const auto bad = [&] {
    return UsageError(fmt::format("bad threshold '{}': use a percentage (5%) or a fraction (0.05) below 100%", text));
  };
  if (s.empty()) throw bad();
  errno = 0;
  char* end = nullptr;
  const double v = std::strtod(s.c_str(), &end);
  if (errno != 0 || end != s.c_str() + s.size() || !std::isfinite(v) || v < 0) throw bad();
  const double frac = (percent || v >= 1.0) ? v / 100.0 : v;
  if (frac >= 1.0) throw bad();
  return frac;
}

std::string format_compare_text(const CompareResult& r) {
  std::string out;
  out += "gemmscope compare (ratio B/A of mean GEMM time: above 1 means B is slower)\n";
  out += "  A: " + file_line(r.a_path, r.a_device, r.a_created) + "\n";
  out += "  B: " + file_line(r.b_path, r.b_device, r.b_created) + "\n";
  out += "  kind " + r.kind + ", " + threshold_line(r.threshold) + "\n";
  out += "  precisions compared: " + join(r.precisions) + "\n";
  if (!r.only_a_precisions.empty()) out += "  precisions only in A (not compared): " + join(r.only_a_precisions) + "\n";
  if (!r.only_b_precisions.empty()) out += "  precisions only in B (not compared): " + join(r.only_b_precisions) + "\n";
  if (!r.only_a_modes.empty()) out += "  modes only in A (not compared): " + join(r.only_a_modes) + "\n";
  if (!r.only_b_modes.empty()) out += "  modes only in B (not compared): " + join(r.only_b_modes) + "\n";

  for (const CompareMode& m : r.modes) {
    out += fmt::format("\nMode {}: B/A per GEMM (R = regression, I = improvement)\n", m.mode);
    std::vector<std::vector<std::string>> rows;
    std::vector<std::string> head = {"Pass", "Op", "Shape (MxKxN)"};
    for (const auto& p : r.precisions) head.push_back(p);
    rows.push_back(head);
    for (const auto& g : m.gemms) {
      std::vector<std::string> row = {g.pass, g.label, fmt::format("{}x{}x{}", g.m, g.k, g.n)};
      for (const auto& c : g.cells) row.push_back(cell_text(c, false));
      rows.push_back(row);
    }
    out += render_table(rows, 3);
    if (!m.totals.empty()) {
      out += fmt::format("\nMode {}: totals\n", m.mode);
      std::vector<std::vector<std::string>> t = {{"Total", "Precision", "A ms", "B ms", "B/A"}};
      for (const auto& tr : m.totals)
        for (const auto& c : tr.cells)
          t.push_back({tr.what, c.precision, c.a_ms ? fmt_ms(*c.a_ms) : "n/a", c.b_ms ? fmt_ms(*c.b_ms) : "n/a",
                       cell_text(c, false)});
      out += render_table(t, 2);
    }
  }

  if (!r.unmatched_a.empty() || !r.unmatched_b.empty()) {
    out += "\nUnmatched GEMMs (not compared):\n";
    for (const auto& s : r.unmatched_a) out += "  only in A: " + s + "\n";
    for (const auto& s : r.unmatched_b) out += "  only in B: " + s + "\n";
  }
  for (Verdict v : {Verdict::Regression, Verdict::Improvement}) {
    std::vector<Flagged> f;
    collect(r, v, f);
    if (f.empty()) continue;
    out += fmt::format("\n{} ({}): {}\n", v == Verdict::Regression ? "Regressions" : "Improvements", f.size(),
                       v == Verdict::Regression
                           ? fmt::format("B slower than A by more than {:.1f}%, or n/a in B only", r.threshold * 100)
                           : fmt::format("A slower than B by more than {:.1f}%, or n/a in A only", r.threshold * 100));
    for (const auto& x : f) out += "  " + x.where + ": " + x.change + "\n";
  }
  out += fmt::format("\nResult: {} regression{}, {} improvement{}\n", r.regressions, r.regressions == 1 ? "" : "s",
                     r.improvements, r.improvements == 1 ? "" : "s");
  return out;
}

std::string format_compare_markdown(const CompareResult& r) {
  std::string out;
  out += "## gemmscope compare\n\n";
  out += "- **A:** " + file_line(r.a_path, r.a_device, r.a_created) + "\n";
  out += "- **B:** " + file_line(r.b_path, r.b_device, r.b_created) + "\n";
  out += "- Kind " + r.kind + ", " + threshold_line(r.threshold) + "\n";
  out += "- Cells show B/A of the mean time (above 1: B is slower).\n";
  if (!r.only_a_precisions.empty()) out += "- Precisions only in A (not compared): " + join(r.only_a_precisions) + "\n";
  if (!r.only_b_precisions.empty()) out += "- Precisions only in B (not compared): " + join(r.only_b_precisions) + "\n";
  if (!r.only_a_modes.empty()) out += "- Modes only in A (not compared): " + join(r.only_a_modes) + "\n";
  if (!r.only_b_modes.empty()) out += "- Modes only in B (not compared): " + join(r.only_b_modes) + "\n";
  out += fmt::format("\n**Result: {} regression{}, {} improvement{}.**\n", r.regressions, r.regressions == 1 ? "" : "s",
                     r.improvements, r.improvements == 1 ? "" : "s");

  for (const CompareMode& m : r.modes) {
    if (!m.totals.empty()) {
      out += fmt::format("\n### {}: totals\n\n", m.mode);
      out += md_row({"Total", "Precision", "A ms", "B ms", "B/A"});
      out += md_align(2, 5);
      for (const auto& tr : m.totals)
        for (const auto& c : tr.cells)
          out += md_row({tr.what, c.precision, c.a_ms ? fmt_ms(*c.a_ms) : "n/a", c.b_ms ? fmt_ms(*c.b_ms) : "n/a",
                         cell_text(c, true)});
    }
    out += fmt::format("\n### {}: B/A per GEMM\n\n", m.mode);
    std::vector<std::string> head = {"Pass", "Op", "Shape (MxKxN)"};
    for (const auto& p : r.precisions) head.push_back(p);
    out += md_row(head);
    out += md_align(3, head.size());
    for (const auto& g : m.gemms) {
      std::vector<std::string> row = {g.pass, g.label, fmt::format("{}x{}x{}", g.m, g.k, g.n)};
      for (const auto& c : g.cells) row.push_back(cell_text(c, true));
      out += md_row(row);
    }
  }
  if (!r.unmatched_a.empty() || !r.unmatched_b.empty()) {
    out += "\n### Unmatched GEMMs (not compared)\n\n";
    for (const auto& s : r.unmatched_a) out += "- only in A: `" + s + "`\n";
    for (const auto& s : r.unmatched_b) out += "- only in B: `" + s + "`\n";
  }
  std::vector<Flagged> f;
  collect(r, Verdict::Regression, f);
  if (!f.empty()) {
    out += fmt::format("\n### Regressions ({})\n\n", f.size());
    for (const auto& x : f) out += "- " + x.where + ": " + x.change + "\n";
  }
  return out;
}

}  // namespace gs
