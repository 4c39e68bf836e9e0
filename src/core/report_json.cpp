#include <fmt/format.h>

#include <cstdio>
#include <fstream>
#include <sstream>

#include "core/error.hpp"
#include "core/report.hpp"

namespace gs {

using nlohmann::json;

namespace {

json opt(const std::optional<double>& v) { return v ? json(*v) : json(nullptr); }

json config_json(const ModelConfig& c) {
  return {{"name", c.name},
          {"hidden_size", c.hidden_size},
          {"intermediate_size", c.intermediate_size},
          {"num_attention_heads", c.num_attention_heads},
          {"num_key_value_heads", c.kv_heads()},
          {"head_dim", c.head_dimension()},
          {"num_hidden_layers", c.num_hidden_layers},
          {"micro_batch_size", c.micro_batch_size},
          {"sequence_length", c.sequence_length},
          {"vocab_size", c.vocab_size},
          {"gated_mlp", c.gated_mlp},
          {"tensor_parallel", c.tensor_parallel},
          {"tokens", c.tokens()}};
}

json cell_json(const Cell& c, const Gemm& g) {
  if (!c.ok) return {{"status", "n/a"}, {"reason", c.reason}};
  return {{"status", "ok"},          {"mean_ms", c.stats.mean_ms},   {"median_ms", c.stats.median_ms},
          {"min_ms", c.stats.min_ms}, {"max_ms", c.stats.max_ms},     {"stdev_ms", c.stats.stdev_ms},
          {"iters", c.stats.iters},   {"tflops", tflops(g, c.stats.mean_ms)}};
}

template <class T>
T need(const json& j, const char* key, const char* where) {
  if (!j.contains(key)) throw UsageError(fmt::format("result JSON: {} has no '{}'", where, key));
  try {
    return j.at(key).get<T>();
  } catch (const json::exception&) {
    throw UsageError(fmt::format("result JSON: {}.{} has the wrong type", where, key));
  }
}

}  // namespace

json to_json(const RunResult& r) {
  json j;
  j["schema"] = "gemmscope.result/1";
  j["tool"] = {{"name", "gemmscope"}, {"version", GEMMSCOPE_VERSION}};
  j["created"] = r.created;
  j["kind"] = r.plan.model_mode ? "model" : "shapes";
  j["dry_run"] = r.dry_run;
  if (r.device) {
    const DeviceInfo& d = *r.device;
    j["device"] = {{"name", d.name},
                   {"compute_capability", fmt::format("{}.{}", d.cc_major, d.cc_minor)},
                   {"sm_count", d.sm_count},
                   {"memory_bytes", d.memory_bytes},
                   {"l2_bytes", d.l2_bytes},
                   {"driver_version", fmt::format("{}.{}", d.driver_version / 1000, (d.driver_version % 1000) / 10)},
                   {"runtime_version", fmt::format("{}.{}", d.runtime_version / 1000, (d.runtime_version % 1000) / 10)},
                   {"cublaslt_version", d.cublaslt_version}};
  } else {
    j["device"] = nullptr;
  }
  j["timing"] = {{"method", r.timing.method}, {"warmup", r.timing.warmup}, {"iters", r.timing.iters},
                 {"gpu_warmup_s", r.timing.gpu_warmup_s}};
  const RecipeOptions& o = r.recipe_options;
  j["recipe_options"] = {
      {"fp8_format", o.fp8_format == Fp8Format::Hybrid ? "hybrid" : "e4m3"},
      {"fp8_accumulation", o.fp8_accum == Accumulation::Auto ? "auto" : o.fp8_accum == Accumulation::Fast ? "fast" : "split"},
      {"amax_history_len", o.amax_history_len},
      {"nvfp4_2d_weights", o.nvfp4_2d_weights},
      {"nvfp4_rht", o.nvfp4_rht},
      {"nvfp4_stochastic_rounding", o.nvfp4_stochastic_rounding},
      {"producer_amax", o.producer_amax},
      {"fp8_block_via_mxfp8", o.fp8_block_via_mxfp8}};
  j["modes"] = json::array();
  for (Mode m : r.modes) j["modes"].push_back(to_string(m));
  j["precisions"] = json::array();
  for (Precision p : r.precisions) j["precisions"].push_back(to_string(p));
  j["config"] = r.plan.config ? config_json(*r.plan.config) : json(nullptr);
  j["gemms"] = json::array();
  for (size_t g = 0; g < r.plan.gemms.size(); ++g) {
    const Gemm& x = r.plan.gemms[g];
    json jg = {{"id", g},
               {"pass", to_string(x.pass)},
               {"op", to_string(x.op)},
               {"label", x.label()},
               {"scope", to_string(x.scope)},
               {"m", x.m},
               {"k", x.k},
               {"n", x.n},
               {"flops", x.flops()},
               {"a", {{"role", to_string(x.a.role)}, {"k_major", x.a.k_major}}},
               {"b", {{"role", to_string(x.b.role)}, {"k_major", x.b.k_major}}}};
    json bytes;
    for (Precision p : kAllPrecisions) {
      const Recipe rec = make_recipe(p, x, o);
      const ByteCount bc = byte_count(rec, x);
      const ByteCount sh = byte_count(rec, x, operand_work(Mode::AutocastShared, x, Side::Left, rec, o),
                                      operand_work(Mode::AutocastShared, x, Side::Right, rec, o));
      bytes[to_string(p)] = {{"gemm", bc.gemm}, {"quantize", bc.quantize}, {"quantize_shared", sh.quantize}};
    }
    jg["bytes"] = bytes;
    if (!r.dry_run) {
      json res;
      for (size_t m = 0; m < r.modes.size(); ++m) {
        json jm = json::object();
        for (size_t p = 0; p < r.precisions.size(); ++p) jm[to_string(r.precisions[p])] = cell_json(r.cell(m, g, p), x);
        res[to_string(r.modes[m])] = jm;
      }
      jg["results"] = res;
    }
    if (r.has_accuracy) {
      json acc = json::object();
      for (size_t p = 0; p < r.accuracy_precisions.size(); ++p) {
        const AccuracyCell& c = r.accuracy[g][p];
        acc[to_string(r.accuracy_precisions[p])] =
            c.ok ? json{{"status", "ok"}, {"rel_error", c.rel_error}, {"emulated", c.emulated}}
                 : json{{"status", "n/a"}, {"reason", c.reason}};
      }
      jg["accuracy"] = acc;
    }
    j["gemms"].push_back(jg);
  }
  if (r.has_accuracy) {
    j["accuracy"] = {{"dist", to_string(r.accuracy_dist)},
                     {"metric", "relative Frobenius error vs FP32 GEMM of the BF16 inputs"},
                     {"precisions", json::array()}};
    for (Precision p : r.accuracy_precisions) j["accuracy"]["precisions"].push_back(to_string(p));
  }
  if (r.plan.model_mode && !r.dry_run) {
    json sum;
    for (size_t m = 0; m < r.modes.size(); ++m) {
      const ModeSummary s = summarize_mode(r, m);
      json pl, once, full;
      for (const char* k : {"fprop", "dgrad", "fprop_dgrad", "wgrad", "total"}) pl[k] = json::object();
      for (size_t p = 0; p < r.precisions.size(); ++p) {
        const char* name = to_string(r.precisions[p]);
        const PrecisionSums& ps = s.sums[p];
        pl["fprop"][name] = opt(ps.fprop);
        pl["dgrad"][name] = opt(ps.dgrad);
        pl["fprop_dgrad"][name] = opt(ps.fprop_dgrad);
        pl["wgrad"][name] = opt(ps.wgrad);
        pl["total"][name] = opt(ps.total);
        once[name] = opt(ps.model_once);
        full[name] = opt(ps.full_model);
      }
      json sp = json::array();
      for (const Speedup& x : s.speedups)
        sp.push_back({{"name", x.name()}, {"num", to_string(x.num)}, {"den", to_string(x.den)}, {"value", opt(x.value)}});
      sum[to_string(r.modes[m])] = {{"per_layer", pl}, {"model_once", once}, {"full_model", full}, {"speedups", sp}};
    }
    j["summary"] = sum;
  }
  const PlanFlops f = plan_flops(r.plan);
  j["plan"] = {{"flops_per_layer", {{"fprop", f.fprop}, {"dgrad", f.dgrad}, {"wgrad", f.wgrad}, {"total", f.per_layer()}}},
               {"flops_model_once", f.model_once},
               {"flops_full_model", r.plan.model_mode ? f.full_model(r.plan.layers()) : f.per_layer()}};
  if (!r.plan.model_mode) {
    double tot = 0;
    for (const Gemm& g : r.plan.gemms) tot += g.flops();
    j["plan"]["flops_full_model"] = tot;
  }
  j["notes"] = r.notes;
  return j;
}

RunResult from_json(const json& j) {
  if (!j.is_object()) throw UsageError("result JSON: not an object");
  if (j.value("schema", std::string()) != "gemmscope.result/1")
    throw UsageError("result JSON: schema is not 'gemmscope.result/1'");
  RunResult r;
  r.created = j.value("created", std::string());
  r.dry_run = j.value("dry_run", false);
  const std::string kind = need<std::string>(j, "kind", "top level");
  if (kind != "model" && kind != "shapes") throw UsageError(fmt::format("result JSON: unknown kind '{}'", kind));
  r.plan.model_mode = kind == "model";
  if (j.contains("device") && j["device"].is_object()) {
    const json& d = j["device"];
    DeviceInfo di;
    di.name = need<std::string>(d, "name", "device");
    std::string cc = d.value("compute_capability", std::string("0.0"));
    if (std::sscanf(cc.c_str(), "%d.%d", &di.cc_major, &di.cc_minor) != 2)
      throw UsageError("result JSON: device.compute_capability is not 'X.Y'");
    di.sm_count = d.value("sm_count", 0);
    di.memory_bytes = d.value("memory_bytes", int64_t{0});
    di.l2_bytes = d.value("l2_bytes", int64_t{0});
    auto ver = [](const std::string& s) { int a = 0, b = 0; std::sscanf(s.c_str(), "%d.%d", &a, &b); return a * 1000 + b * 10; };
    di.driver_version = ver(d.value("driver_version", std::string("0.0")));
    di.runtime_version = ver(d.value("runtime_version", std::string("0.0")));
    di.cublaslt_version = d.value("cublaslt_version", int64_t{0});
    r.device = di;
  }
  if (j.contains("timing") && j["timing"].is_object()) {
    const json& t = j["timing"];
    r.timing.method = t.value("method", r.timing.method);
    r.timing.warmup = t.value("warmup", r.timing.warmup);
    r.timing.iters = t.value("iters", r.timing.iters);
    r.timing.gpu_warmup_s = t.value("gpu_warmup_s", r.timing.gpu_warmup_s);
  }
  if (j.contains("recipe_options") && j["recipe_options"].is_object()) {
    const json& o = j["recipe_options"];
    r.recipe_options.fp8_format = o.value("fp8_format", std::string("hybrid")) == "e4m3" ? Fp8Format::E4M3 : Fp8Format::Hybrid;
    std::string acc = o.value("fp8_accumulation", std::string("auto"));
    r.recipe_options.fp8_accum = acc == "fast" ? Accumulation::Fast : acc == "split" ? Accumulation::Split : Accumulation::Auto;
    r.recipe_options.amax_history_len = o.value("amax_history_len", 1024);
    r.recipe_options.nvfp4_2d_weights = o.value("nvfp4_2d_weights", true);
    r.recipe_options.nvfp4_rht = o.value("nvfp4_rht", true);
    r.recipe_options.nvfp4_stochastic_rounding = o.value("nvfp4_stochastic_rounding", true);
    r.recipe_options.producer_amax = o.value("producer_amax", true);
    r.recipe_options.fp8_block_via_mxfp8 = o.value("fp8_block_via_mxfp8", false);
  }
  for (const auto& m : need<std::vector<std::string>>(j, "modes", "top level")) r.modes.push_back(mode_from_string(m));
  for (const auto& p : need<std::vector<std::string>>(j, "precisions", "top level"))
    r.precisions.push_back(precision_from_string(p));
  if (r.plan.model_mode) {
    if (!j.contains("config") || !j["config"].is_object()) throw UsageError("result JSON: model run without 'config'");
    const json& c = j["config"];
    ModelConfig mc;
    mc.name = c.value("name", std::string("custom"));
    mc.hidden_size = need<int64_t>(c, "hidden_size", "config");
    mc.intermediate_size = need<int64_t>(c, "intermediate_size", "config");
    mc.num_attention_heads = need<int64_t>(c, "num_attention_heads", "config");
    mc.num_key_value_heads = c.value("num_key_value_heads", int64_t{0});
    mc.head_dim = c.value("head_dim", int64_t{0});
    mc.num_hidden_layers = need<int64_t>(c, "num_hidden_layers", "config");
    mc.micro_batch_size = need<int64_t>(c, "micro_batch_size", "config");
    mc.sequence_length = need<int64_t>(c, "sequence_length", "config");
    mc.vocab_size = c.value("vocab_size", int64_t{0});
    mc.gated_mlp = c.value("gated_mlp", false);
    mc.tensor_parallel = c.value("tensor_parallel", int64_t{1});
    r.plan.config = mc;
  }
  if (!j.contains("gemms") || !j["gemms"].is_array()) throw UsageError("result JSON: no 'gemms' array");
  for (const json& g : j["gemms"]) {
    Gemm x{pass_from_string(need<std::string>(g, "pass", "gemm")), op_from_string(need<std::string>(g, "op", "gemm")),
           scope_from_string(need<std::string>(g, "scope", "gemm")), need<int64_t>(g, "m", "gemm"),
           need<int64_t>(g, "k", "gemm"), need<int64_t>(g, "n", "gemm"),
           {Role::Activation, true}, {Role::Weight, true}};
    if (g.contains("a")) x.a = {role_from_string(need<std::string>(g["a"], "role", "gemm.a")), g["a"].value("k_major", true)};
    if (g.contains("b")) x.b = {role_from_string(need<std::string>(g["b"], "role", "gemm.b")), g["b"].value("k_major", true)};
    r.plan.gemms.push_back(x);
  }
  r.allocate_cells();
  if (!r.dry_run) {
    for (size_t gi = 0; gi < r.plan.gemms.size(); ++gi) {
      const json& g = j["gemms"][gi];
      if (!g.contains("results")) throw UsageError(fmt::format("result JSON: gemm {} has no results", gi));
      for (size_t m = 0; m < r.modes.size(); ++m) {
        const char* mname = to_string(r.modes[m]);
        if (!g["results"].contains(mname)) throw UsageError(fmt::format("result JSON: gemm {} has no '{}' results", gi, mname));
        const json& jm = g["results"][mname];
        for (size_t p = 0; p < r.precisions.size(); ++p) {
          const char* pname = to_string(r.precisions[p]);
          if (!jm.contains(pname)) throw UsageError(fmt::format("result JSON: gemm {} {} has no {} cell", gi, mname, pname));
          const json& c = jm[pname];
          if (c.value("status", std::string()) == "ok") {
            Stats s;
            s.mean_ms = need<double>(c, "mean_ms", "cell");
            s.median_ms = c.value("median_ms", s.mean_ms);
            s.min_ms = c.value("min_ms", s.mean_ms);
            s.max_ms = c.value("max_ms", s.mean_ms);
            s.stdev_ms = c.value("stdev_ms", 0.0);
            s.iters = c.value("iters", 0);
            r.cells[m][gi][p] = Cell::measured(s);
          } else {
            r.cells[m][gi][p] = Cell::na(c.value("reason", std::string("n/a")));
          }
        }
      }
    }
  }
  if (j.contains("accuracy") && j["accuracy"].is_object()) {
    r.has_accuracy = true;
    r.accuracy_dist = dist_from_string(j["accuracy"].value("dist", std::string("normal")));
    for (const auto& p : need<std::vector<std::string>>(j["accuracy"], "precisions", "accuracy"))
      r.accuracy_precisions.push_back(precision_from_string(p));
    r.accuracy.assign(r.plan.gemms.size(), std::vector<AccuracyCell>(r.accuracy_precisions.size()));
    for (size_t gi = 0; gi < r.plan.gemms.size(); ++gi) {
      const json& g = j["gemms"][gi];
      if (!g.contains("accuracy")) throw UsageError(fmt::format("result JSON: gemm {} has no accuracy", gi));
      for (size_t p = 0; p < r.accuracy_precisions.size(); ++p) {
        const json& c = g["accuracy"].at(to_string(r.accuracy_precisions[p]));
        AccuracyCell& a = r.accuracy[gi][p];
        if (c.value("status", std::string()) == "ok") {
          a.ok = true;
          a.rel_error = need<double>(c, "rel_error", "accuracy cell");
          a.emulated = c.value("emulated", false);
        } else {
          a.reason = c.value("reason", std::string("n/a"));
        }
      }
    }
  }
  if (j.contains("notes") && j["notes"].is_array())
    for (const auto& n : j["notes"]) r.notes.push_back(n.get<std::string>());
  return r;
}

std::string render_csv(const RunResult& r) {
  std::string out = "mode,pass,op,scope,m,k,n,flops,precision,status,mean_ms,median_ms,min_ms,max_ms,stdev_ms,iters,tflops,reason\n";
  auto quote = [](const std::string& s) {
    std::string q = "\"";
    for (char ch : s) q += ch == '"' ? std::string("\"\"") : std::string(1, ch);
    return q + "\"";
  };
  for (size_t m = 0; m < r.modes.size(); ++m)
    for (size_t g = 0; g < r.plan.gemms.size(); ++g)
      for (size_t p = 0; p < r.precisions.size(); ++p) {
        const Gemm& x = r.plan.gemms[g];
        const Cell& c = r.cell(m, g, p);
        out += fmt::format("{},{},{},{},{},{},{},{:.0f},{},", to_string(r.modes[m]), to_string(x.pass), to_string(x.op),
                           to_string(x.scope), x.m, x.k, x.n, x.flops(), to_string(r.precisions[p]));
        if (c.ok)
          out += fmt::format("ok,{:.6f},{:.6f},{:.6f},{:.6f},{:.6f},{},{:.2f},\n", c.stats.mean_ms, c.stats.median_ms,
                             c.stats.min_ms, c.stats.max_ms, c.stats.stdev_ms, c.stats.iters, tflops(x, c.stats.mean_ms));
        else
          out += fmt::format("n/a,,,,,,,,{}\n", quote(c.reason));
      }
  return out;
}

void write_file_atomic(const std::string& path, const std::string& text) {
  const std::string tmp = path + ".tmp";
  {
    std::ofstream f(tmp, std::ios::binary | std::ios::trunc);
    if (!f) throw UsageError(fmt::format("cannot write '{}'", path));
    f << text;
    if (!f.flush()) {
      std::remove(tmp.c_str());
      throw UsageError(fmt::format("cannot write '{}'", path));
    }
  }
  if (std::rename(tmp.c_str(), path.c_str()) != 0) {
    std::remove(tmp.c_str());
    throw UsageError(fmt::format("cannot write '{}'", path));
  }
}

}  // namespace gs
