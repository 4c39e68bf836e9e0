#include <fmt/format.h>

#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <map>
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
  json j = {{"status", "ok"},          {"mean_ms", c.stats.mean_ms},   {"median_ms", c.stats.median_ms},
            {"min_ms", c.stats.min_ms}, {"max_ms", c.stats.max_ms},     {"stdev_ms", c.stats.stdev_ms},
            {"iters", c.stats.iters},   {"tflops", tflops(g, c.stats.mean_ms)}};
  if (c.clock)
    j["clock"] = {{"sm_mhz", c.clock->sm_mhz}, {"max_sm_mhz", c.clock->max_sm_mhz}, {"reasons", c.clock->reasons}};
  return j;
}

constexpr const char* kSchema = "gemmscope.result/1";

// nlohmann's message without its "[json.exception.type_error.302] " prefix.
std::string json_error_text(const json::exception& e) {
  std::string msg = e.what();
  const auto p = msg.find("] ");
  return p == std::string::npos ? msg : msg.substr(p + 2);
}

const json* find(const json& obj, const char* key) {
  if (!obj.is_object()) return nullptr;
  const auto it = obj.find(key);
  return it == obj.end() ? nullptr : &*it;
}

// `where` names the document and the object: "a.json: config".
template <class T>
T need(const json& j, const char* key, const std::string& where) {
  if (!j.contains(key)) throw UsageError(fmt::format("{} has no '{}'", where, key));
  try {
    return j.at(key).get<T>();
  } catch (const json::exception&) {
    throw UsageError(fmt::format("{}.{} has the wrong type", where, key));
  }
}

// parse(text), with `where` in front of the UsageError it throws ("a.json: \"modes\": unknown mode ...").
template <class Parse>
auto parsed_at(const std::string& where, const std::string& text, Parse parse) {
  try {
    return parse(text);
  } catch (const UsageError& e) {
    throw UsageError(fmt::format("{}: {}", where, e.what()));
  }
}

// The strings of list `key`; it may be empty (an --accuracy-only run has no modes).
std::vector<std::string> string_list(const json& j, const char* key, const std::string& name) {
  const json* v = find(j, key);
  const auto bad = [&] { return UsageError(fmt::format("{}: \"{}\" must be a list of strings", name, key)); };
  if (!v || !v->is_array()) throw bad();
  std::vector<std::string> out;
  for (const json& s : *v) {
    if (!s.is_string()) throw bad();
    out.push_back(s.get<std::string>());
  }
  return out;
}

bool is_positive_int(const json& v) {
  return (v.is_number_unsigned() || v.is_number_integer()) && v.get<int64_t>() > 0;
}

// One timing cell; `where` names it ("a.json: gemms[2].results.autocast.BF16").
Cell read_cell(const json& c, const std::string& where) {
  const json* status = find(c, "status");
  const std::string s = status && status->is_string() ? status->get<std::string>() : "";
  if (s != "ok" && s != "n/a") throw UsageError(where + ": a cell must be an object with status \"ok\" or \"n/a\"");
  if (s == "n/a") return Cell::na(c.value("reason", std::string("n/a")));
  const json* mean = find(c, "mean_ms");
  if (!mean || !mean->is_number() || !std::isfinite(mean->get<double>()) || !(mean->get<double>() > 0))
    throw UsageError(where + ": status \"ok\" needs a positive number mean_ms");
  Stats st;
  st.mean_ms = mean->get<double>();
  st.median_ms = c.value("median_ms", st.mean_ms);
  st.min_ms = c.value("min_ms", st.mean_ms);
  st.max_ms = c.value("max_ms", st.mean_ms);
  st.stdev_ms = c.value("stdev_ms", 0.0);
  st.iters = c.value("iters", 0);
  Cell cell = Cell::measured(st);
  if (const json* ck = find(c, "clock"); ck && ck->is_object()) {
    ClockSample s;
    s.sm_mhz = ck->value("sm_mhz", 0);
    s.max_sm_mhz = ck->value("max_sm_mhz", 0);
    s.reasons = ck->value("reasons", uint64_t{0});
    cell.clock = s;
  }
  return cell;
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

namespace {

RunResult read_result(const json& j, const std::string& name) {
  if (!j.is_object()) throw UsageError(fmt::format("{} is not a gemmscope result (top level is not an object)", name));
  const json* schema = find(j, "schema");
  if (!schema || !schema->is_string() || schema->get<std::string>() != kSchema)
    throw UsageError(fmt::format("{} has schema {}, expected \"{}\"", name, schema ? schema->dump() : "(none)", kSchema));
  const json* kind = find(j, "kind");
  const std::string kind_name = kind && kind->is_string() ? kind->get<std::string>() : "";
  if (kind_name != "model" && kind_name != "shapes")
    throw UsageError(fmt::format("{}: \"kind\" must be \"model\" or \"shapes\"", name));
  RunResult r;
  r.plan.model_mode = kind_name == "model";
  r.created = j.value("created", std::string());
  r.dry_run = j.value("dry_run", false);
  if (j.contains("device") && j["device"].is_object()) {
    const json& d = j["device"];
    DeviceInfo di;
    di.name = need<std::string>(d, "name", name + ": device");
    std::string cc = d.value("compute_capability", std::string("0.0"));
    if (std::sscanf(cc.c_str(), "%d.%d", &di.cc_major, &di.cc_minor) != 2)
      throw UsageError(fmt::format("{}: device.compute_capability is not 'X.Y'", name));
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
  const std::vector<std::string> mode_names = string_list(j, "modes", name);
  for (const std::string& m : mode_names) r.modes.push_back(parsed_at(name + ": \"modes\"", m, mode_from_string));
  const std::vector<std::string> precision_names = string_list(j, "precisions", name);
  for (const std::string& p : precision_names)
    r.precisions.push_back(parsed_at(name + ": \"precisions\"", p, precision_from_string));
  if (r.plan.model_mode) {
    if (!j.contains("config") || !j["config"].is_object()) throw UsageError(fmt::format("{}: model run without 'config'", name));
    const json& c = j["config"];
    const std::string where = name + ": config";
    ModelConfig mc;
    mc.name = c.value("name", std::string("custom"));
    mc.hidden_size = need<int64_t>(c, "hidden_size", where);
    mc.intermediate_size = need<int64_t>(c, "intermediate_size", where);
    mc.num_attention_heads = need<int64_t>(c, "num_attention_heads", where);
    mc.num_key_value_heads = c.value("num_key_value_heads", int64_t{0});
    mc.head_dim = c.value("head_dim", int64_t{0});
    mc.num_hidden_layers = need<int64_t>(c, "num_hidden_layers", where);
    mc.micro_batch_size = need<int64_t>(c, "micro_batch_size", where);
    mc.sequence_length = need<int64_t>(c, "sequence_length", where);
    mc.vocab_size = c.value("vocab_size", int64_t{0});
    mc.gated_mlp = c.value("gated_mlp", false);
    mc.tensor_parallel = c.value("tensor_parallel", int64_t{1});
    r.plan.config = mc;
  }
  const json* gemms = find(j, "gemms");
  if (!gemms || !gemms->is_array() || gemms->empty())
    throw UsageError(fmt::format("{}: \"gemms\" must be a non-empty list", name));
  r.cells.assign(r.modes.size(), {});  // filled per GEMM below; a dry run gets all "not run" at the end
  for (size_t gi = 0; gi < gemms->size(); ++gi) {
    const json& g = (*gemms)[gi];
    const std::string where = fmt::format("{}: gemms[{}]", name, gi);
    if (!g.is_object()) throw UsageError(where + " is not an object");
    const auto text = [&](const char* key) {
      const json* v = find(g, key);
      if (!v || !v->is_string()) throw UsageError(fmt::format("{}: \"{}\" must be a string", where, key));
      return v->get<std::string>();
    };
    const auto dim = [&](const char* key) {
      const json* v = find(g, key);
      if (!v || !is_positive_int(*v)) throw UsageError(fmt::format("{}: \"{}\" must be a positive integer", where, key));
      return v->get<int64_t>();
    };
    const auto operand = [&](const char* side, Operand dflt) {
      const json* o = find(g, side);
      if (!o) return dflt;
      const std::string role = need<std::string>(*o, "role", fmt::format("{}.{}", where, side));
      return Operand{parsed_at(where, role, role_from_string), o->value("k_major", true)};
    };
    const std::string pass = text("pass"), op = text("op");
    const int64_t m = dim("m"), k = dim("k"), n = dim("n");
    const Gemm x{parsed_at(where, pass, pass_from_string), parsed_at(where, op, op_from_string),
                 parsed_at(where, text("scope"), scope_from_string), m, k, n,
                 operand("a", {Role::Activation, true}), operand("b", {Role::Weight, true})};
    if (!r.dry_run) {
      // One object per mode, keyed by the mode as "modes" spells it. Every cell in it is checked,
      // also those of precisions the file does not list; the listed ones are read.
      const json* res = find(g, "results");
      if (!res || (!r.modes.empty() && !res->is_object()))
        throw UsageError(fmt::format("{} has no \"results\" (not a measured run?)", where));
      for (size_t mi = 0; mi < r.modes.size(); ++mi) {
        const std::string& mname = mode_names[mi];
        const json* cells = find(*res, mname.c_str());
        if (!cells || !cells->is_object())
          throw UsageError(fmt::format("{}.results has no object for mode \"{}\"", where, mname));
        std::map<std::string, Cell> by_precision;
        for (auto it = cells->begin(); it != cells->end(); ++it)
          by_precision.emplace(it.key(), read_cell(it.value(), fmt::format("{}.results.{}.{}", where, mname, it.key())));
        std::vector<Cell> row;
        for (const std::string& pname : precision_names) {
          const auto c = by_precision.find(pname);
          if (c == by_precision.end()) throw UsageError(fmt::format("{}.results.{} has no {} cell", where, mname, pname));
          row.push_back(c->second);
        }
        r.cells[mi].push_back(std::move(row));
      }
    }
    r.plan.gemms.push_back(x);
  }
  if (r.dry_run) r.allocate_cells();
  if (j.contains("accuracy") && j["accuracy"].is_object()) {
    r.has_accuracy = true;
    r.accuracy_dist = parsed_at(name + ": accuracy", j["accuracy"].value("dist", std::string("normal")), dist_from_string);
    for (const auto& p : need<std::vector<std::string>>(j["accuracy"], "precisions", name + ": accuracy"))
      r.accuracy_precisions.push_back(parsed_at(name + ": accuracy", p, precision_from_string));
    r.accuracy.assign(r.plan.gemms.size(), std::vector<AccuracyCell>(r.accuracy_precisions.size()));
    for (size_t gi = 0; gi < r.plan.gemms.size(); ++gi) {
      const json& g = (*gemms)[gi];
      const std::string where = fmt::format("{}: gemms[{}].accuracy", name, gi);
      const json* acc = find(g, "accuracy");
      if (!acc) throw UsageError(fmt::format("{}: gemms[{}] has no accuracy", name, gi));
      for (size_t p = 0; p < r.accuracy_precisions.size(); ++p) {
        const json* c = find(*acc, to_string(r.accuracy_precisions[p]));
        if (!c) throw UsageError(fmt::format("{} has no {} cell", where, to_string(r.accuracy_precisions[p])));
        AccuracyCell& a = r.accuracy[gi][p];
        if (c->value("status", std::string()) == "ok") {
          a.ok = true;
          a.rel_error = need<double>(*c, "rel_error", fmt::format("{}.{}", where, to_string(r.accuracy_precisions[p])));
          a.emulated = c->value("emulated", false);
        } else {
          a.reason = c->value("reason", std::string("n/a"));
        }
      }
    }
  }
  if (j.contains("notes") && j["notes"].is_array())
    for (const auto& n : j["notes"]) r.notes.push_back(n.get<std::string>());
  return r;
}

}  // namespace

RunResult from_json(const json& j, const std::string& name) {
  try {
    return read_result(j, name);
  } catch (const json::exception& e) {
    // a value of the wrong type where the reader takes a default: "a.json: type must be number, but is string"
    throw UsageError(fmt::format("{}: {}", name, json_error_text(e)));
  }
}

json read_json_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw UsageError(fmt::format("cannot read {}: {}", path, std::strerror(errno)));
  std::stringstream ss;
  ss << in.rdbuf();
  try {
    return json::parse(ss.str());
  } catch (const json::parse_error& e) {
    throw UsageError(fmt::format("{} is not JSON: {}", path, json_error_text(e)));
  }
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
