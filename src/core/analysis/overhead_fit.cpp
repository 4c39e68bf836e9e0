#include "core/analysis/overhead_fit.hpp"

#include <algorithm>
#include <cmath>
#include <limits>

namespace gs {

OverheadFit fit_overhead(const std::vector<std::pair<double, double>>& points) {
  OverheadFit f;
  f.gemms = static_cast<int>(points.size());
  if (points.size() < 4) return f;
  double lo = std::numeric_limits<double>::infinity(), hi = 0, mx = 0, my = 0;
  for (const auto& [b, o] : points) {
    if (!(b > 0) || !std::isfinite(o)) return f;
    lo = std::min(lo, b);
    hi = std::max(hi, b);
    mx += b;
    my += o;
  }
  if (hi < 1.5 * lo) return f;
  mx /= static_cast<double>(points.size());
  my /= static_cast<double>(points.size());
  double sxx = 0, sxy = 0;
  for (const auto& [b, o] : points) {
    sxx += (b - mx) * (b - mx);
    sxy += (b - mx) * (o - my);
  }
  const double slope = sxy / sxx;
  if (!(slope > 0)) return f;
  double smallest = std::numeric_limits<double>::infinity();
  for (const auto& [b, o] : points)
    if (o > 0) smallest = std::min(smallest, o);
  f.fitted = true;
  f.per_byte_s = slope;
  f.fixed_s = std::clamp(my - slope * mx, 0.0, std::isfinite(smallest) ? smallest : 0.0);
  return f;
}

double transfer_overhead(const OverheadFit& fit, double ov_src, double bytes_ratio, double bandwidth_ratio) {
  if (!(ov_src > 0)) return ov_src * bytes_ratio * bandwidth_ratio;
  const double fixed = fit.fitted ? std::min(fit.fixed_s, ov_src) : 0.0;
  return fixed + (ov_src - fixed) * bytes_ratio * bandwidth_ratio;
}

}  // namespace gs
