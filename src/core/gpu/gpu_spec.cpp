#include "core/gpu/gpu_spec.hpp"

#include <fmt/format.h>

#include <cctype>
#include <cmath>
#include <cstdio>
#include <set>
#include <tuple>

#include "core/util/error.hpp"
#include "core/io/input_file.hpp"
#include "core/util/suggest.hpp"
#include "core/util/text_util.hpp"

namespace gs {

using nlohmann::json;

std::string cannot_run(const GpuSpec& s, Precision p) {
  const ArchPolicy a = s.arch_policy();
  if (!a.times(p))
    return fmt::format("{} needs compute capability {}; {} is {}", to_string(p), ArchPolicy(ArchPolicy::min_cc(p)).cc_text(),
                       s.key, a.cc_text());
  const PeakFormat f = a.peak_format(p);
  if (!s.peak(f)) return fmt::format("no sourced dense {} peak for {} in the GPU spec database", to_string(f), s.key);
  return "";
}

namespace {

// A spec database lists tens of GPUs; these bounds keep any file's checks cheap and its
// messages short.
constexpr size_t kMaxGpus = 4096;
constexpr size_t kMaxGpuKeyChars = 64;

std::string lower(std::string_view s) { return ascii_lower(s); }

bool alnum(char c) { return std::isalnum(static_cast<unsigned char>(c)) != 0; }

// `word` occurs in `text` with no letter or digit right before or after it (both lower-case).
bool has_word(const std::string& text, const std::string& word) {
  if (word.empty()) return false;
  for (size_t pos = text.find(word); pos != std::string::npos; pos = text.find(word, pos + 1)) {
    const bool left = pos == 0 || !alnum(text[pos - 1]);
    const size_t end = pos + word.size();
    const bool right = end >= text.size() || !alnum(text[end]);
    if (left && right) return true;
  }
  return false;
}

std::vector<std::string> strings(const json& obj, const char* key, const std::string& where, bool required) {
  const auto it = obj.find(key);
  std::vector<std::string> out;
  if (it == obj.end()) {
    if (required) throw UsageError(fmt::format("{} has no \"{}\"", where, key));
    return out;
  }
  if (!it->is_array()) throw UsageError(fmt::format("{}.{} must be a list of strings", where, key));
  for (const json& s : *it) {
    if (!s.is_string() || s.get<std::string>().empty())
      throw UsageError(fmt::format("{}.{} must be a list of non-empty strings", where, key));
    out.push_back(s.get<std::string>());
  }
  if (required && out.empty()) throw UsageError(fmt::format("{}.{} is empty", where, key));
  return out;
}

}  // namespace

std::optional<Sourced> read_sourced(const json& obj, const char* key, const std::string& where, SourcedRange range) {
  const auto it = obj.find(key);
  if (it == obj.end()) throw UsageError(fmt::format("{} has no \"{}\" (null when not sourced)", where, key));
  if (it->is_null()) return std::nullopt;
  const std::string w = fmt::format("{}.{}", where, key);
  if (!it->is_object()) throw UsageError(w + " must be an object {\"value\", \"source\"} or null");
  const auto v = it->find("value");
  if (v == it->end() || !v->is_number() || !std::isfinite(v->get<double>()) || !(v->get<double>() > 0))
    throw UsageError(w + ".value must be a positive number");
  if (const double x = v->get<double>(); x < range.lo || x > range.hi)
    throw UsageError(fmt::format("{}.value must be from {:g} to {:g}{}, got {:g}", w, range.lo, range.hi, range.unit, x));
  const auto s = it->find("source");
  if (s == it->end() || !s->is_string() || s->get<std::string>().empty())
    throw UsageError(w + " has a value but no \"source\"");
  return Sourced{v->get<double>(), s->get<std::string>()};
}

Sourced need_sourced(const json& obj, const char* key, const std::string& where, SourcedRange range) {
  std::optional<Sourced> s = read_sourced(obj, key, where, range);
  if (!s) throw UsageError(fmt::format("{}.{} is needed (null is not allowed)", where, key));
  return std::move(*s);
}

std::string datasheet_text(const json& obj, const char* key, const std::string& where, size_t max_chars) {
  const auto it = obj.find(key);
  if (it == obj.end() || !it->is_string() || it->get<std::string>().empty())
    throw UsageError(fmt::format("{}.{} must be a non-empty string", where, key));
  std::string v = it->get<std::string>();
  if (v.size() > max_chars)
    throw UsageError(fmt::format("{}.{} must be at most {} characters, got {}", where, key, max_chars, json_value_hint(*it)));
  return v;
}

std::string datasheet_key(const std::string& key) {
  std::string out;
  for (char c : lower(key)) out += (c == '_' || c == ' ') ? '-' : c;
  return out;
}

void for_each_datasheet_entry(const json& doc, const DatasheetSchema& schema, const std::string& where,
                              const std::function<void(const json&, const DatasheetEntry&)>& f) {
  const json* s = doc.is_object() && doc.contains("schema") ? &doc["schema"] : nullptr;
  if (!s || !s->is_string() || s->get<std::string>() != schema.schema)
    throw UsageError(fmt::format("{} is not a gemmscope {} (schema \"{}\")", where, schema.kind, schema.schema));
  const auto list = doc.find(schema.list);
  if (list == doc.end() || !list->is_array() || list->empty())
    throw UsageError(fmt::format("{}: \"{}\" must be a non-empty list", where, schema.list));
  if (list->size() > schema.max_entries)
    throw UsageError(fmt::format("{}: \"{}\" lists {} {}, more than the {} a spec file may hold", where, schema.list,
                                 list->size(), schema.noun, schema.max_entries));
  std::set<std::string> seen;
  for (size_t i = 0; i < list->size(); ++i) {
    const json& entry = (*list)[i];
    const std::string at = fmt::format("{}: {}[{}]", where, schema.list, i);
    if (!entry.is_object()) throw UsageError(at + " is not an object");
    DatasheetEntry e;
    e.key = datasheet_text(entry, "key", at, schema.max_key_chars);
    e.where = fmt::format("{}: {}", where, printable(e.key));
    if (!seen.insert(datasheet_key(e.key)).second) throw UsageError(fmt::format("{}: key {} twice", where, printable(e.key)));
    f(entry, e);
  }
}

GpuDb parse_gpu_db(const json& doc, const std::string& where) {
  GpuDb db;
  db.path = where;
  const DatasheetSchema schema{"gemmscope.gpus/1", "gpus", kMaxGpus, "GPU spec file", "GPUs", kMaxGpuKeyChars};
  for_each_datasheet_entry(doc, schema, where, [&](const json& g, const DatasheetEntry& e) {
    GpuSpec s;
    s.key = e.key;
    const std::string& w = e.where;
    s.name = datasheet_text(g, "name", w);
    s.arch = datasheet_text(g, "arch", w);
    s.match = strings(g, "match", w, true);
    s.exclude = strings(g, "exclude", w, false);
    const std::string cc = datasheet_text(g, "compute_capability", w);
    // The result files' version parser: digits only, bounded (sscanf's %d overflowed, and so did
    // compute_capability()'s major * 10). The minor part is one digit: 12.1 is 121.
    std::tie(s.cc_major, s.cc_minor) = parse_version_xy(cc, w + ".compute_capability", 99, 9);
    if (s.cc_major < 1) throw UsageError(fmt::format("{}.compute_capability must be at least 1.0, got {}", w, json_value_hint(json(cc))));
    s.sm_count = read_sourced(g, "sm_count", w, {1, 1e5, " SMs"});
    s.boost_clock_mhz = read_sourced(g, "boost_clock_mhz", w, {100, 1e4, " MHz"});
    s.bandwidth_gbs = read_sourced(g, "memory_bandwidth_gbs", w, {1, 1e6, " GB/s"});
    s.l2_bytes = read_sourced(g, "l2_bytes", w, {1024, 1e12, " bytes"});
    s.memory_bytes = read_sourced(g, "memory_bytes", w, {1e6, 1e15, " bytes"});
    s.tdp_w = read_sourced(g, "tdp_w", w, {1, 1e5, " W"});
    const auto tf = g.find("tflops");
    if (tf == g.end() || !tf->is_object()) throw UsageError(w + ".tflops must be an object");
    for (PeakFormat f : kAllPeakFormats)
      s.tflops[static_cast<int>(f)] = read_sourced(*tf, to_string(f), w + ".tflops", {0.01, 1e6, " TFLOP/s"});
    if (!s.bandwidth_gbs) throw UsageError(w + ": memory_bandwidth_gbs is needed (every roofline has a memory roof)");
    s.notes = strings(g, "notes", w, false);
    db.gpus.push_back(std::move(s));
  });
  return db;
}

GpuDb read_gpu_db_file(const std::string& path) {
  return parse_gpu_db(read_json_file(path, "GPU spec file"), clip_text(path));
}

const GpuSpec* GpuDb::match_device(const std::string& device_name) const {
  const std::string n = lower(device_name);
  for (const GpuSpec& s : gpus) {
    bool ok = true;
    for (const std::string& m : s.match) ok = ok && has_word(n, lower(m));
    for (const std::string& x : s.exclude) ok = ok && !has_word(n, lower(x));
    if (ok) return &s;
  }
  return nullptr;
}

std::string GpuDb::known_keys() const {
  std::string out;
  for (const GpuSpec& s : gpus) {
    if (out.size() > 200) return out + ", ...";  // messages list the first few
    out += (out.empty() ? "" : ", ") + printable(s.key);
  }
  return out;
}

const GpuSpec& GpuDb::find(const std::string& name) const {
  for (const GpuSpec& s : gpus)
    if (datasheet_key(s.key) == datasheet_key(name)) return s;
  if (const GpuSpec* s = match_device(name)) return *s;
  std::vector<std::string> keys;
  for (const GpuSpec& s : gpus) keys.push_back(s.key);
  throw UsageError(fmt::format("unknown GPU '{}'{} (known: {})", clip_text(name, 80), did_you_mean(name, keys), known_keys()));
}

}  // namespace gs
