#include "core/results/cell.hpp"

#include <algorithm>
#include <cmath>
#include <stdexcept>

namespace gs {

Stats summarize(const std::vector<double>& v) {
  if (v.empty()) throw std::invalid_argument("summarize: no samples");
  Stats s;
  s.iters = static_cast<int>(v.size());
  std::vector<double> sorted = v;
  std::sort(sorted.begin(), sorted.end());
  const size_t n = sorted.size();
  s.min_ms = sorted.front();
  s.max_ms = sorted.back();
  s.median_ms = n % 2 ? sorted[n / 2] : 0.5 * (sorted[n / 2 - 1] + sorted[n / 2]);
  double sum = 0;
  for (double x : v) sum += x;
  s.mean_ms = sum / static_cast<double>(n);
  double ss = 0;
  for (double x : v) ss += (x - s.mean_ms) * (x - s.mean_ms);
  s.stdev_ms = n > 1 ? std::sqrt(ss / static_cast<double>(n - 1)) : 0.0;
  return s;
}

const Value* Cell::value(std::string_view name) const {
  for (const NamedValue& v : values)
    if (v.name == name) return &v.value;
  return nullptr;
}

std::optional<double> Cell::number(std::string_view name) const {
  const Value* v = value(name);
  if (!v || !std::holds_alternative<double>(*v)) return std::nullopt;
  return std::get<double>(*v);
}

void Cell::set(std::string_view name, Value v) {
  for (NamedValue& x : values)
    if (x.name == name) {
      x.value = std::move(v);
      return;
    }
  values.push_back({std::string(name), std::move(v)});
}

}  // namespace gs
