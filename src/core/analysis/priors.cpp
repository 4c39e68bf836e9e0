#include "core/analysis/priors.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <limits>

#include "core/io/input_file.hpp"
#include "core/util/error.hpp"
#include "core/util/text_util.hpp"

namespace gs {

using nlohmann::json;

const char* to_string(PriorFormat f) {
  switch (f) {
    case PriorFormat::BF16: return "BF16";
    case PriorFormat::FP8: return "FP8";
    case PriorFormat::FP8Block: return "FP8Block";
    case PriorFormat::MXFP8: return "MXFP8";
    case PriorFormat::NVFP4: return "NVFP4";
  }
  return "?";
}

PriorFormat prior_format(Precision kernel, const ArchPolicy& a) {
  switch (kernel) {
    case Precision::BF16: return PriorFormat::BF16;
    case Precision::FP8Current:
    case Precision::FP8Delayed: return PriorFormat::FP8;
    case Precision::FP8Block: return a.fp8_block_via_mxfp8() ? PriorFormat::MXFP8 : PriorFormat::FP8Block;
    case Precision::MXFP8: return PriorFormat::MXFP8;
    case Precision::NVFP4: return PriorFormat::NVFP4;
  }
  return PriorFormat::BF16;
}

int size_class(double x) {
  for (int i = 0; i < kSizeClasses - 1; ++i)
    if (x < kSizeClassEdges[i]) return i;
  return kSizeClasses - 1;
}

const char* size_class_name(int cls) {
  static const char* names[kSizeClasses] = {"near-ridge", "low", "mid", "high"};
  return cls >= 0 && cls < kSizeClasses ? names[cls] : "?";
}

std::string size_class_range(int cls) {
  if (cls <= 0) return fmt::format("x < {:g}", kSizeClassEdges[0]);
  if (cls >= kSizeClasses - 1) return fmt::format("x >= {:g}", kSizeClassEdges[kSizeClasses - 2]);
  return fmt::format("{:g} <= x < {:g}", kSizeClassEdges[cls - 1], kSizeClassEdges[cls]);
}

double ridge_ratio(double flops, double bytes, double peak_tflops, double bandwidth_gbs) {
  if (!(flops > 0) || !(bytes > 0) || !(peak_tflops > 0) || !(bandwidth_gbs > 0)) return 0;
  return (flops / bytes) / (peak_tflops * 1e12 / (bandwidth_gbs * 1e9));
}

double size_x(const Gemm& g, Precision kernel, const RecipeOptions& o, const GpuSpec& spec) {
  const auto& peak = spec.peak(spec.arch_policy().peak_format(kernel));
  if (!peak || !spec.bandwidth_gbs) return 0;
  const double bytes = byte_count(make_recipe(kernel, g, o), g, QuantWork::None, QuantWork::None).gemm;
  return ridge_ratio(g.flops(), bytes, peak->value, spec.bandwidth_gbs->value);
}

namespace {

constexpr size_t kMaxPoints = 10000;
constexpr double kMaxReach = 2.0;  // how far in x beyond the outermost class centre a prior reaches
constexpr int64_t kMaxDim = int64_t{1} << 24;
constexpr double kMinFraction = 1e-4;  // of the dense peak: below it a published point is a typo

// Bytes per element of a published point's operands (data plus block scales) and of its output.
double operand_bytes(PriorFormat f) {
  switch (f) {
    case PriorFormat::BF16: return 2.0;
    case PriorFormat::FP8: return 1.0;
    case PriorFormat::FP8Block: return 1.0 + 4.0 / 128;  // an FP32 scale per 128 (the 1x128 side)
    case PriorFormat::MXFP8: return 1.0 + 1.0 / 32;      // an E8M0 scale per 32
    case PriorFormat::NVFP4: return 0.5 + 1.0 / 16;      // an E4M3 scale per 16
  }
  return 2.0;
}

double output_bytes_of(const std::string& output, const std::string& where) {
  if (output == "BF16" || output == "FP16") return 2.0;
  if (output == "FP32") return 4.0;
  throw UsageError(fmt::format("{}.output must be BF16, FP16 or FP32, got {}", where, json_value_hint(json(output))));
}

PriorFormat format_of(const std::string& s, const std::string& where) {
  for (PriorFormat f : kAllPriorFormats)
    if (s == to_string(f)) return f;
  throw UsageError(fmt::format("{}.format must be one of BF16, FP8, FP8Block, MXFP8, NVFP4, got {}", where, json_value_hint(json(s))));
}

const json& member(const json& obj, const char* key, const std::string& where) {
  const auto it = obj.find(key);
  if (it == obj.end()) throw UsageError(fmt::format("{} has no \"{}\"", where, key));
  return *it;
}

std::string text_member(const json& obj, const char* key, const std::string& where, bool required = true) {
  const auto it = obj.find(key);
  if (it == obj.end() && !required) return "";
  const json& v = member(obj, key, where);
  if (!v.is_string() || v.get<std::string>().empty())
    throw UsageError(fmt::format("{}.{} must be a non-empty string", where, key));
  return v.get<std::string>();
}

int64_t dim_member(const json& obj, const char* key, const std::string& where) {
  const json& v = member(obj, key, where);
  if (!v.is_number_integer() || v.get<int64_t>() < 1 || v.get<int64_t>() > kMaxDim)
    throw UsageError(fmt::format("{}.{} must be an integer in 1..{}, got {}", where, key, kMaxDim, json_value_hint(v)));
  return v.get<int64_t>();
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n == 0 ? 0 : n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

// The prior of `classes` (sorted by x_center) at x, and the classes it used; found = false (with
// why) outside one class beyond the measured ones.
struct Interpolated {
  bool found = false;
  double fraction = 0;
  int points = 0;
  std::string how;
};
Interpolated interpolate(const std::vector<ClassPrior>& classes, double x) {
  Interpolated out;
  if (classes.empty()) return out;
  const ClassPrior& first = classes.front();
  const ClassPrior& last = classes.back();
  const auto one = [&](const ClassPrior& cp, const char* where) {
    out.found = true;
    out.fraction = cp.fraction;
    out.points = static_cast<int>(cp.points.size());
    out.how = fmt::format("{} class {}", where, size_class_name(cp.size_class));
  };
  // Beyond the measured class centres: the nearest class within a factor of kMaxReach in x, no
  // prior further out (an intensity far from every published point is not extrapolated).
  if (x <= first.x_center) {
    if (first.x_center / x > kMaxReach) return out;
    one(first, size_class(x) == first.size_class ? "the" : "the nearest measured,");
    return out;
  }
  if (x >= last.x_center) {
    if (x / last.x_center > kMaxReach) return out;
    one(last, size_class(x) == last.size_class ? "the" : "the nearest measured,");
    return out;
  }
  for (size_t i = 0; i + 1 < classes.size(); ++i) {
    const ClassPrior& a = classes[i];
    const ClassPrior& b = classes[i + 1];
    if (x < a.x_center || x > b.x_center) continue;
    const double u = std::log(x / a.x_center) / std::log(b.x_center / a.x_center);
    out.found = true;
    out.fraction = a.fraction + u * (b.fraction - a.fraction);
    out.points = static_cast<int>(a.points.size() + b.points.size());
    out.how = fmt::format("between classes {} and {}", size_class_name(a.size_class), size_class_name(b.size_class));
    return out;
  }
  return out;
}

// The relative spread of `pts` around the prior at each point's own x: (largest shortfall, largest
// excess) of fraction / prior - 1.
// Each (format, generation)'s class priors are computed once: per point they made the spread
// quadratic in the file's points (10,000 points: minutes per prediction).
std::pair<double, double> spread_of(const PriorDb& db, const std::vector<const PriorPoint*>& pts) {
  double lo = 0, hi = 0;
  std::vector<std::pair<std::pair<PriorFormat, std::string>, std::vector<ClassPrior>>> classes_of;
  const auto classes = [&](const PriorPoint& p) -> const std::vector<ClassPrior>& {
    for (const auto& [key, cs] : classes_of)
      if (key.first == p.format && key.second == p.arch) return cs;
    classes_of.push_back({{p.format, p.arch}, class_priors(db, p.format, p.arch)});
    return classes_of.back().second;
  };
  for (const PriorPoint* p : pts) {
    const Interpolated at = interpolate(classes(*p), p->x);
    if (!at.found || !(at.fraction > 0)) continue;
    const double r = p->fraction / at.fraction - 1;
    lo = std::max(lo, -r);
    hi = std::max(hi, r);
  }
  return {lo, hi};
}

}  // namespace

PriorDb parse_priors(const json& doc, const std::string& where, const GpuDb& gpus) {
  if (!doc.is_object() || !doc.contains("schema") || !doc["schema"].is_string() ||
      doc["schema"].get<std::string>() != "gemmscope.priors/1")
    throw UsageError(fmt::format("{} is not a gemmscope priors file (schema \"gemmscope.priors/1\")", where));
  const auto pts = doc.find("points");
  if (pts == doc.end() || !pts->is_array() || pts->empty())
    throw UsageError(fmt::format("{}: \"points\" must be a non-empty list", where));
  if (pts->size() > kMaxPoints)
    throw UsageError(fmt::format("{}: \"points\" lists {} points, more than the {} a priors file may hold", where, pts->size(), kMaxPoints));
  PriorDb db;
  db.path = where;
  for (size_t i = 0; i < pts->size(); ++i) {
    const json& j = (*pts)[i];
    const std::string w = fmt::format("{}: points[{}]", where, i);
    if (!j.is_object()) throw UsageError(w + " is not an object");
    PriorPoint p;
    p.gpu = text_member(j, "gpu", w);
    p.format = format_of(text_member(j, "format", w), w);
    p.m = dim_member(j, "m", w);
    p.n = dim_member(j, "n", w);
    p.k = dim_member(j, "k", w);
    const json& tf = member(j, "tflops", w);
    if (!tf.is_number() || !std::isfinite(tf.get<double>()) || !(tf.get<double>() > 0))
      throw UsageError(fmt::format("{}.tflops must be a positive number, got {}", w, json_value_hint(tf)));
    p.tflops = tf.get<double>();
    p.output = text_member(j, "output", w);
    p.library = text_member(j, "library", w);
    p.source = text_member(j, "source", w);
    p.note = text_member(j, "note", w, false);
    const GpuSpec* spec = nullptr;
    for (const GpuSpec& s : gpus.gpus)
      if (s.key == p.gpu) spec = &s;
    if (!spec) throw UsageError(fmt::format("{}.gpu {} is not a key of the GPU spec database", w, json_value_hint(json(p.gpu))));
    const PeakFormat pf = p.format == PriorFormat::FP8Block ? PeakFormat::FP8
                          : p.format == PriorFormat::MXFP8  ? PeakFormat::MXFP8
                          : p.format == PriorFormat::NVFP4  ? PeakFormat::NVFP4
                          : p.format == PriorFormat::FP8    ? PeakFormat::FP8
                                                            : PeakFormat::BF16;
    if (!spec->peak(pf))
      throw UsageError(fmt::format("{}: GPU {} has no dense {} peak in the GPU spec database", w, p.gpu, to_string(pf)));
    p.arch = spec->arch;
    const double peak = spec->peak(pf)->value;
    p.fraction = p.tflops / peak;
    if (p.fraction > 1.5)
      throw UsageError(fmt::format("{}: {} TFLOP/s is {:.0f}% of {}'s dense {} peak (a sparse peak, or a wrong GPU?)", w,
                                   p.tflops, 100 * p.fraction, p.gpu, to_string(pf)));
    if (!(p.fraction >= kMinFraction))  // 5e-324 TFLOP/s: a fraction of 0, an infinite predicted time
      throw UsageError(fmt::format("{}: {:.3g} TFLOP/s is under 0.01% of {}'s dense {} peak", w, p.tflops, p.gpu, to_string(pf)));
    const double mk = static_cast<double>(p.m) * static_cast<double>(p.k), kn = static_cast<double>(p.k) * static_cast<double>(p.n);
    const double bytes = (mk + kn) * operand_bytes(p.format) +
                         static_cast<double>(p.m) * static_cast<double>(p.n) * output_bytes_of(p.output, w);
    p.x = ridge_ratio(2.0 * static_cast<double>(p.m) * static_cast<double>(p.n) * static_cast<double>(p.k), bytes, peak,
                      spec->bandwidth_gbs->value);
    db.points.push_back(std::move(p));
  }
  return db;
}

PriorDb read_priors_file(const std::string& path, const GpuDb& gpus) {
  return parse_priors(read_json_file(path, "priors file"), clip_text(path), gpus);
}

std::vector<ClassPrior> class_priors(const PriorDb& db, PriorFormat f, const std::string& arch) {
  std::vector<ClassPrior> out;
  for (int c = 0; c < kSizeClasses; ++c) {
    ClassPrior cp;
    cp.size_class = c;
    std::vector<double> fr, lx;
    for (const PriorPoint& p : db.points)
      if (p.format == f && p.arch == arch && size_class(p.x) == c) {
        cp.points.push_back(&p);
        fr.push_back(p.fraction);
        lx.push_back(std::log(p.x));
      }
    if (cp.points.empty()) continue;
    cp.fraction = median(fr);
    cp.x_center = std::exp(median(lx));
    out.push_back(std::move(cp));
  }
  return out;
}

Prior lookup_prior(const PriorDb& db, PriorFormat f, const std::string& arch, double x) {
  Prior out;
  const std::vector<ClassPrior> classes = class_priors(db, f, arch);
  if (classes.empty()) {
    out.why_not = fmt::format("no published {} GEMM measurement on a {} GPU", to_string(f), arch);
    return out;
  }
  if (!(x > 0)) {
    out.why_not = "the GEMM's size class cannot be computed (no peak or bandwidth)";
    return out;
  }
  const Interpolated at = interpolate(classes, x);
  if (!at.found) {
    std::string measured;
    for (const ClassPrior& c : classes) measured += (measured.empty() ? "" : ", ") + std::string(size_class_name(c.size_class));
    out.why_not = fmt::format("{} on {} is published only in size classes {}, more than 2x in x from this GEMM's {} (x {:.2f})",
                              to_string(f), arch, measured, size_class_name(size_class(x)), x);
    return out;
  }
  out.found = true;
  out.fraction = at.fraction;
  out.points = at.points;
  // Spread: of the points of the classes the prior came from; with fewer than 3, of every format's
  // points in those size classes on this generation.
  std::vector<int> used;
  for (const ClassPrior& c : classes)
    if (at.how.find(size_class_name(c.size_class)) != std::string::npos) used.push_back(c.size_class);
  std::vector<const PriorPoint*> own, gen;
  for (const PriorPoint& p : db.points) {
    if (p.arch != arch || std::find(used.begin(), used.end(), size_class(p.x)) == used.end()) continue;
    gen.push_back(&p);
    if (p.format == f) own.push_back(&p);
  }
  std::tie(out.spread_lo, out.spread_hi) = spread_of(db, own.size() >= 3 ? own : gen);
  out.basis = fmt::format("{} on {}, {} (x {:.2f}): {:.1f}% of peak ({}, {} published point{})", to_string(f), arch,
                          size_class_name(size_class(x)), x, 100 * out.fraction, at.how, at.points, at.points == 1 ? "" : "s");
  return out;
}

std::string missing_prior_bias(PriorFormat target, PriorFormat source) {
  if (target == source)
    return "the source's measured fraction of peak is carried unchanged (no known direction of bias within a format)";
  switch (target) {
    case PriorFormat::NVFP4:
      return "the measured FP8 fraction of peak is carried to the FP4 peak: likely too fast (FP4 kernels keep a smaller "
             "fraction of a 2-3x higher peak; carried from an H100 FP8 run to the B300 it read 41-45% fast)";
    case PriorFormat::MXFP8:
      return "the measured FP8 per-tensor fraction is carried to MXFP8: likely somewhat too fast (block scales cost kernel "
             "time; carried from an H100 FP8 run to the B300 it read 7-16% fast)";
    case PriorFormat::FP8Block:
      return "the measured FP8 per-tensor fraction is carried to FP8 block scaling: likely too fast (block scaling ran "
             "20-23% slower than per-tensor FP8, pre-quantized, in gemmscope's H100 runs of the 5B and Qwen2.5-7B layers)";
    default: return "the measured fraction of another format is carried: no known direction of bias";
  }
}

CarriedEfficiency carry_efficiency(double measured_source, const Prior& source, const Prior& target) {
  CarriedEfficiency out;
  if (!target.found) return out;
  out.ratio = source.found && source.fraction > 0 && measured_source > 0 ? measured_source / source.fraction : 1.0;
  const double half = std::pow(out.ratio, kCarryExponent);
  out.efficiency = target.fraction * half;
  // Time goes as 1 / efficiency: carrying all of the ratio or none of it moves the time by a factor
  // of half or 1 / half.
  const double up = std::max(half, 1 / half), down = std::min(half, 1 / half);
  out.lo = 1 - down;
  out.hi = up - 1;
  return out;
}

}  // namespace gs
