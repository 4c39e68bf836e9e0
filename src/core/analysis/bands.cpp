#include "core/analysis/bands.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <set>

#include "core/analysis/priors.hpp"
#include "core/io/input_file.hpp"
#include "core/util/error.hpp"

namespace gs {

using nlohmann::json;

const char* to_string(Transfer t) {
  switch (t) {
    case Transfer::SameGpu: return "same-gpu";
    case Transfer::SameArch: return "same-arch";
    case Transfer::OtherArch: return "other-arch";
    case Transfer::DatasheetOnly: return "datasheet-only";
  }
  return "?";
}

namespace {

constexpr size_t kMaxSamples = 1000000;

Transfer transfer_of(const std::string& s, const std::string& where) {
  for (Transfer t : {Transfer::SameGpu, Transfer::SameArch, Transfer::OtherArch, Transfer::DatasheetOnly})
    if (s == to_string(t)) return t;
  throw UsageError(fmt::format("{}.transfer must be same-gpu, same-arch, other-arch or datasheet-only, got {}", where,
                               json_value_hint(json(s))));
}

std::string text_of(const json& j, const char* key, const std::string& where) {
  const auto it = j.find(key);
  if (it == j.end() || !it->is_string() || it->get<std::string>().empty())
    throw UsageError(fmt::format("{}.{} must be a non-empty string", where, key));
  return it->get<std::string>();
}

// The deviations of `pick`ed samples as a band containing 0.
RelBand band_of(const std::vector<const ErrorSample*>& pick, const std::string& basis) {
  RelBand b;
  if (pick.empty()) return b;
  double lo = 0, hi = 0;
  for (const ErrorSample* s : pick) {
    lo = std::max(lo, -s->deviation);
    hi = std::max(hi, s->deviation);
  }
  b.lo = lo;
  b.hi = hi;
  b.samples = static_cast<int>(pick.size());
  b.basis = basis;
  return b;
}

}  // namespace

ErrorSet parse_error_set(const json& doc, const std::string& where) {
  if (!doc.is_object() || !doc.contains("schema") || !doc["schema"].is_string() ||
      doc["schema"].get<std::string>() != "gemmscope.predict_errors/1")
    throw UsageError(fmt::format("{} is not a gemmscope prediction-error file (schema \"gemmscope.predict_errors/1\")", where));
  ErrorSet set;
  set.path = where;
  if (const auto src = doc.find("sources"); src != doc.end()) {
    if (!src->is_array()) throw UsageError(where + ": \"sources\" must be a list of strings");
    for (const json& s : *src) {
      if (!s.is_string()) throw UsageError(where + ": \"sources\" must be a list of strings");
      set.sources.push_back(s.get<std::string>());
    }
  }
  const auto samples = doc.find("samples");
  if (samples == doc.end() || !samples->is_array()) throw UsageError(where + ": \"samples\" must be a list");
  if (samples->size() > kMaxSamples)
    throw UsageError(fmt::format("{}: \"samples\" lists {} samples, more than the {} a file may hold", where, samples->size(), kMaxSamples));
  for (size_t i = 0; i < samples->size(); ++i) {
    const json& j = (*samples)[i];
    const std::string w = fmt::format("{}: samples[{}]", where, i);
    if (!j.is_object()) throw UsageError(w + " is not an object");
    ErrorSample s;
    s.model = text_of(j, "model", w);
    s.arch = text_of(j, "arch", w);
    s.transfer = transfer_of(text_of(j, "transfer", w), w);
    s.precision = parsed_at(w + ".precision", text_of(j, "precision", w), precision_from_string);
    s.mode = text_of(j, "mode", w);
    const auto c = j.find("size_class");
    if (c == j.end() || !c->is_number_integer() || c->get<int64_t>() < 0 || c->get<int64_t>() >= kSizeClasses)
      throw UsageError(fmt::format("{}.size_class must be an integer in 0..{}", w, kSizeClasses - 1));
    s.size_class = static_cast<int>(c->get<int64_t>());
    const auto d = j.find("deviation");
    if (d == j.end() || !d->is_number() || !std::isfinite(d->get<double>()) || d->get<double>() <= -1 || d->get<double>() > 100)
      throw UsageError(fmt::format("{}.deviation must be a number above -1 (measured / predicted - 1)", w));
    s.deviation = d->get<double>();
    set.samples.push_back(std::move(s));
  }
  return set;
}

ErrorSet read_error_set_file(const std::string& path) {
  return parse_error_set(read_json_file(path, "prediction-error file"), clip_text(path));
}

RelBand measured_band(const ErrorSet& set, Transfer t, Precision p, int cls, const std::string& arch) {
  std::vector<const ErrorSample*> same_class, same_precision, same_transfer;
  bool any_arch = false;
  for (const ErrorSample& s : set.samples) any_arch |= s.transfer == t && s.arch == arch;
  for (const ErrorSample& s : set.samples) {
    if (s.transfer != t || (any_arch && s.arch != arch)) continue;
    same_transfer.push_back(&s);
    if (s.precision != p) continue;
    same_precision.push_back(&s);
    if (s.size_class == cls) same_class.push_back(&s);
  }
  const auto label = [&](const std::vector<const ErrorSample*>& v, const std::string& which) {
    std::set<std::string> m, a;
    for (const ErrorSample* s : v) {
      m.insert(s->model);
      a.insert(s->arch);
    }
    std::string archs;
    for (const std::string& x : a) archs += (archs.empty() ? "" : "/") + x;
    return fmt::format("measured {} errors: {} {} cell{} of {} model{} on {}", to_string(t), v.size(), which,
                       v.size() == 1 ? "" : "s", m.size(), m.size() == 1 ? "" : "s", archs);
  };
  RelBand b = same_class.size() >= static_cast<size_t>(kMinSamples)
                  ? band_of(same_class, label(same_class, fmt::format("{} size-class-{}", to_string(p), size_class_name(cls))))
              : same_precision.size() >= static_cast<size_t>(kMinSamples)
                  ? band_of(same_precision, label(same_precision, fmt::format("{} (all size classes)", to_string(p))))
                  : band_of(same_transfer, label(same_transfer, "(all precisions)"));
  b.arch_matched = any_arch;
  return b;
}

RelBand band_from_efficiency_spread(double shortfall, double excess, const std::string& basis) {
  RelBand b;
  // time / predicted time = prior / efficiency: an efficiency (1 + excess) x the prior is
  // 1 / (1 + excess) of the time, one (1 - shortfall) x is 1 / (1 - shortfall) of it.
  b.lo = excess > 0 ? 1 - 1 / (1 + excess) : 0;
  b.hi = shortfall > 0 ? (shortfall < 0.95 ? 1 / (1 - shortfall) - 1 : 19.0) : 0;
  b.basis = basis;
  return b;
}

RelBand combine(std::initializer_list<RelBand> terms) {
  RelBand out;
  double lo = 0, hi = 0;
  for (const RelBand& t : terms) {
    lo += t.lo * t.lo;
    hi += t.hi * t.hi;
    out.samples += t.samples;
    if (!t.basis.empty()) out.basis += (out.basis.empty() ? "" : " + ") + t.basis;
  }
  out.lo = std::min(0.95, std::sqrt(lo));
  out.hi = std::sqrt(hi);
  return out;
}

std::pair<double, double> band_range_ms(double ms, const RelBand& b) {
  return {ms * (1 - std::min(b.lo, 0.95)), ms * (1 + b.hi)};
}

}  // namespace gs
