// The architecture policy (arch_policy.hpp).
#include "core/gpu/arch_policy.hpp"

#include "core/plan/step_model.hpp"

#include <fmt/format.h>

namespace gs {

const char* to_string(PeakFormat f) {
  switch (f) {
    case PeakFormat::BF16: return "BF16";
    case PeakFormat::FP8: return "FP8";
    case PeakFormat::MXFP8: return "MXFP8";
    case PeakFormat::NVFP4: return "NVFP4";
  }
  return "?";
}

std::string ArchPolicy::cc_text() const { return fmt::format("{}.{}", cc_ / 10, cc_ % 10); }

int ArchPolicy::min_cc(Precision p) {
  switch (p) {
    case Precision::BF16: return 80;
    case Precision::FP8Current:
    case Precision::FP8Delayed: return 89;
    case Precision::FP8Block: return 90;
    case Precision::MXFP8:
    case Precision::NVFP4: return 100;
  }
  return 0;
}

std::string ArchPolicy::why_not(Precision p) const {
  if (times(p)) return {};
  return fmt::format("needs compute capability >= {} (device is {})", ArchPolicy(min_cc(p)).cc_text(), cc_text());
}

PeakFormat ArchPolicy::peak_format(Precision p) const {
  switch (p) {
    case Precision::BF16: return PeakFormat::BF16;
    case Precision::FP8Current:
    case Precision::FP8Delayed: return PeakFormat::FP8;
    case Precision::FP8Block: return fp8_block_via_mxfp8() ? PeakFormat::MXFP8 : PeakFormat::FP8;
    case Precision::MXFP8: return PeakFormat::MXFP8;
    case Precision::NVFP4: return PeakFormat::NVFP4;
  }
  return PeakFormat::BF16;
}

double ArchPolicy::flash_attention_peak_fraction(bool cudnn) const {
  if (cc_ < 90) return 0.62;
  return cudnn ? kAttentionPeakFraction : 0.33;
}

const KernelTarget& ArchPolicy::arch_kernels_target() {
  static const KernelTarget t{90, "sm_90a", "90a-real", "cutlass::arch::Sm90", "Hopper"};
  return t;
}

std::optional<KernelTarget> ArchPolicy::kernel_target() const {
  if (cc_ == arch_kernels_target().cc) return arch_kernels_target();
  return std::nullopt;
}

bool ArchPolicy::runs_code_built_for(const std::string& cmake_arch) const {
  std::string a = cmake_arch;
  std::string kind;  // "real", "virtual" or "" (both)
  if (const size_t dash = a.find('-'); dash != std::string::npos) {
    kind = a.substr(dash + 1);
    a = a.substr(0, dash);
    if (kind != "real" && kind != "virtual") return false;
  }
  // "a": architecture-specific (that compute capability only); "f": family-specific (the same
  // major, a minor at least its own).
  const char suffix = !a.empty() && (a.back() == 'a' || a.back() == 'f') ? a.back() : '\0';
  if (suffix) a.pop_back();
  if (a.size() < 2 || a.size() > 3 || a.find_first_not_of("0123456789") != std::string::npos) return false;
  const int cc = std::stoi(a);
  const bool same_family = cc_ / 10 == cc / 10 && cc_ % 10 >= cc % 10;
  if (suffix == 'a') return cc_ == cc;
  if (suffix == 'f') return same_family;
  return (kind != "virtual" && same_family) || (kind != "real" && cc_ >= cc);
}

ArchPolicy ArchPolicy::newest() { return ArchPolicy(100); }

int ArchPolicy::bf16_dense_flops_per_sm_clock() const {
  if (cc_ >= 100 && cc_ < 110) return 8192;
  if (cc_ >= 90 && cc_ < 100) return 4096;
  if (cc_ == 80 || cc_ == 87) return 2048;
  return 1024;
}

}  // namespace gs
