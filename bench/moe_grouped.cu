// moe_grouped: gemmscope's grouped (MoE expert) GEMM measurement for explicit per-expert routed
// counts, through the same engine as `gemmscope` (CudaEngine::measure), without a model plan.
// bench/moe_peer.py drives it to compare against torch._grouped_mm with the same counts.
//
//   build/moe_grouped SPEC.json OUT.json
//
// SPEC: {"iters": 100, "warmup": 10, "gpu_warmup_s": 2, "streams": [4, 0],
//        "cases": [{"name": "...", "pass": "fprop|dgrad|wgrad", "in": 7168, "out": 4096,
//                   "counts": [...], "precisions": ["BF16", "FP8Current"],
//                   "modes": ["per-gemm", "pre-quantized"]}],
//        "providers": ["cublaslt", "cutlass"], "wgrad_fp32_accumulate": true}  (old name "autocast" accepted; providers default
//        cublaslt; a provider other than cuBLASLt runs once, under the first "streams" entry,
//        which only cuBLASLt's per-expert GEMMs use)
// One linear layer per case, Y[T,out] = X[T,in] W[out,in]^T, as core/plan/plan.cpp lays it out:
// Fprop and Dgrad grouped along M (counts = rows per expert), Wgrad along K (tokens per expert).
// OUT: one record per (case, streams, precision, mode) with the cell's times, the dense-equivalent
// time, the gate flag and TFLOP/s over the real (unpadded) tokens.
#include <fmt/format.h>

#include <cstdio>
#include <fstream>
#include <nlohmann/json.hpp>
#include <numeric>
#include <string>
#include <vector>

#include "core/recipes/grouped.hpp"
#include "core/plan/plan.hpp"
#include "core/recipes/recipe.hpp"
#include "cuda/engine_cuda.hpp"

using nlohmann::json;

namespace {

gs::Gemm make_gemm(const std::string& pass, int64_t in, int64_t out, const std::vector<int64_t>& counts) {
  const int64_t t = std::accumulate(counts.begin(), counts.end(), int64_t{0});
  using gs::Role;
  gs::Gemm g{};
  if (pass == "fprop") g = {gs::Pass::Fprop, gs::Op::ExpertUp, gs::Scope::Layer, t, in, out, {Role::Activation, true}, {Role::Weight, true}};
  else if (pass == "dgrad") g = {gs::Pass::Dgrad, gs::Op::ExpertUp, gs::Scope::Layer, t, out, in, {Role::Grad, true}, {Role::Weight, false}};
  else if (pass == "wgrad") g = {gs::Pass::Wgrad, gs::Op::ExpertUp, gs::Scope::Layer, in, t, out, {Role::Activation, false}, {Role::Grad, false}};
  else throw std::invalid_argument("pass must be fprop, dgrad or wgrad, got " + pass);
  g.group_dim = pass == "wgrad" ? gs::GroupDim::K : gs::GroupDim::M;
  g.group = counts;
  return g;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 3) {
    std::fprintf(stderr, "usage: moe_grouped SPEC.json OUT.json\n");
    return 2;
  }
  try {
    std::ifstream f(argv[1]);
    const json spec = json::parse(f);
    json out = json::array();
    const auto providers = spec.value("providers", std::vector<std::string>{"cublaslt"});
    const auto all_streams = spec.value("streams", std::vector<int>{4});
    for (int streams : all_streams) {
      gs::EngineOptions o;
      o.timing.iters = spec.value("iters", 100);
      o.timing.warmup = spec.value("warmup", 10);
      o.grouped_streams = streams;
      o.recipe.wgrad_fp32_accumulate = spec.value("wgrad_fp32_accumulate", o.recipe.wgrad_fp32_accumulate);
      std::string why;
      auto engine = gs::cuda::make_engine(o, why);
      if (!engine) {
        std::fprintf(stderr, "moe_grouped: no GPU: %s\n", why.c_str());
        return 1;
      }
      engine->gpu_warmup(spec.value("gpu_warmup_s", 2.0));
      for (const json& c : spec.at("cases")) {
        const auto counts = c.at("counts").get<std::vector<int64_t>>();
        const gs::Gemm g = make_gemm(c.at("pass").get<std::string>(), c.at("in").get<int64_t>(),
                                     c.at("out").get<int64_t>(), counts);
        for (const std::string& ps : c.value("precisions", std::vector<std::string>{"BF16"}))
          for (const std::string& ms : c.value("modes", std::vector<std::string>{"per-gemm"}))
            for (const std::string& pv : providers) {
            if (pv != "cublaslt" && streams != all_streams.front()) continue;
            const gs::Precision p = gs::precision_from_string(ps);
            const gs::Mode m = gs::mode_from_string(ms);
            const gs::Cell cell = engine->measure(g, p, m, pv);
            json r = {{"name", c.at("name")}, {"pass", c.at("pass")}, {"streams", streams}, {"provider", pv},
                      {"precision", gs::to_string(p)}, {"mode", gs::to_string(m)}, {"experts", counts.size()},
                      {"rows", g.group_dim == gs::GroupDim::M ? g.m : g.k}, {"flops", g.flops()},
                      {"padded_waste_rows", gs::padded_waste(g, p)}, {"ok", cell.ok}};
            if (!cell.ok) r["reason"] = cell.reason;
            if (cell.ok) {
              r["mean_ms"] = cell.stats.mean_ms;
              r["median_ms"] = cell.stats.median_ms;
              r["min_ms"] = cell.stats.min_ms;
              r["stdev_ms"] = cell.stats.stdev_ms;
              r["tflops"] = g.flops() / (cell.stats.mean_ms * 1e-3) / 1e12;
              r["gate_timed_out"] = cell.gate_timed_out;
              if (cell.dense_equiv_ms) r["dense_equiv_ms"] = *cell.dense_equiv_ms;
              if (cell.clock) r["sm_mhz"] = cell.clock->sm_mhz;
              if (!cell.kernels.config.empty()) r["kernel_config"] = cell.kernels.config;
            }
            std::fprintf(stderr, "moe_grouped: %s %s streams %d %s %s %s: %s\n", c.at("name").get<std::string>().c_str(),
                         c.at("pass").get<std::string>().c_str(), streams, pv.c_str(), ps.c_str(), ms.c_str(),
                         cell.ok ? fmt::format("{:.3f} ms", cell.stats.mean_ms).c_str() : cell.reason.c_str());
            out.push_back(r);
          }
      }
    }
    const gs::DeviceInfo d = [&] {
      gs::EngineOptions o;
      std::string why;
      return gs::cuda::make_engine(o, why)->device_info();
    }();
    std::ofstream(argv[2]) << json{{"device", d.name}, {"cublaslt_version", d.cublaslt_version}, {"results", out}}.dump(2)
                           << "\n";
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "moe_grouped: %s\n", e.what());
    return 2;
  }
}
