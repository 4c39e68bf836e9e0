// Records in the result JSON, both directions (record_json.hpp, docs/json-schema.md).
#include "core/report/record_json.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <map>

#include "core/util/error.hpp"
#include "core/util/text_util.hpp"

namespace gs {

using nlohmann::json;
using namespace json_fields;

namespace {

constexpr size_t kMaxRepeats = 1000;      // --repeats' range; also what a result file may hold
constexpr size_t kMaxNamedValues = 64;    // per record
constexpr Range kStdevMs{0.0, 1e9, " ms"};

const Fields<ClockSample>& clock_fields() {
  static const Fields<ClockSample> t = {
      integer<ClockSample>("sm_mhz", [](auto& c) -> auto& { return c.sm_mhz; }),
      integer<ClockSample>("max_sm_mhz", [](auto& c) -> auto& { return c.max_sm_mhz; }),
      integer<ClockSample>("reasons", [](auto& c) -> auto& { return c.reasons; }),
      custom<ClockSample>(
          "temp_c", [](const ClockSample& c, json& o) { if (c.temp_c) o["temp_c"] = *c.temp_c; },
          [](const json& o, ClockSample& c, const std::string& w) {
            if (find(o, "temp_c")) c.temp_c = static_cast<int>(number_in(o, "temp_c", w, 0, {-50, 200, " C"}));
          }),
      number<ClockSample>("power_w", [](auto& c) -> auto& { return c.power_w; }, {0, 100000, " W"}),
  };
  return t;
}

// --repeats: each repeat's mean, bounded like mean_ms (a denormal time would make interval ratios
// infinite).
Field<Cell> repeat_field() {
  return custom<Cell>(
      "repeat_ms", [](const Cell& c, json& o) { if (!c.repeat_ms.empty()) o["repeat_ms"] = c.repeat_ms; },
      [](const json& o, Cell& c, const std::string& where) {
        const json* rep = find(o, "repeat_ms");
        if (!rep || rep->is_null()) return;
        if (!rep->is_array() || rep->size() > kMaxRepeats)
          throw UsageError(fmt::format("{}.repeat_ms must be a list of at most {} times", where, kMaxRepeats));
        for (const json& x : *rep) {
          if (!x.is_number() || !(x.get<double>() >= kTimeMs.lo && x.get<double>() <= kTimeMs.hi))
            throw UsageError(fmt::format("{}.repeat_ms must hold times from {:g} to {:g} ms", where, kTimeMs.lo, kTimeMs.hi));
          c.repeat_ms.push_back(x.get<double>());
        }
      });
}

// A predicted cell's band (low_ms <= mean_ms <= high_ms), marked "predicted": true. min_ms /
// max_ms hold it too, and stand in for a file without low_ms / high_ms.
Field<Cell> band_field() {
  return custom<Cell>(
      "predicted",
      [](const Cell& c, json& o) {
        if (!c.band) return;
        o["predicted"] = true;
        o["low_ms"] = c.band->low_ms;
        o["high_ms"] = c.band->high_ms;
      },
      [](const json& o, Cell& c, const std::string& where) {
        const json* pr = find(o, "predicted");
        if (!pr || pr->is_null()) return;
        if (!pr->is_boolean()) throw UsageError(where + ".predicted must be true or false");
        if (!pr->get<bool>()) return;
        TimeBand b;
        b.low_ms = number_in(o, "low_ms", where, c.stats.min_ms, kTimeMs);
        b.high_ms = number_in(o, "high_ms", where, c.stats.max_ms, kTimeMs);
        if (!b.contains(c.stats.mean_ms))
          throw UsageError(fmt::format("{}: a predicted cell's band low_ms..high_ms ({}..{}) must hold its mean_ms ({})",
                                       where, b.low_ms, b.high_ms, c.stats.mean_ms));
        c.band = b;
      });
}

// Named values: {"name": number | true/false | "text"}, at most kMaxNamedValues of them.
Field<Cell> values_field() {
  return custom<Cell>(
      "values",
      [](const Cell& c, json& o) {
        if (c.values.empty()) return;
        json v = json::object();
        for (const NamedValue& n : c.values) std::visit([&](const auto& x) { v[n.name] = x; }, n.value);
        o["values"] = std::move(v);
      },
      [](const json& o, Cell& c, const std::string& where) {
        const json* v = find(o, "values");
        if (!v || v->is_null()) return;
        const std::string w = where + ".values";
        if (!v->is_object() || v->size() > kMaxNamedValues)
          throw UsageError(fmt::format("{} must be an object of at most {} named values", w, kMaxNamedValues));
        for (const auto& [key, x] : v->items()) {
          const std::string wk = fmt::format("{}.{}", w, clip_text(key, 64));
          if (key.empty() || key.size() > 64 || printable(key) != key)
            throw UsageError(wk + ": a value's name must be 1 to 64 printable characters");
          if (x.is_boolean())
            c.set(key, x.get<bool>());
          else if (x.is_string())
            c.set(key, clip_text(x.get<std::string>(), 400));
          else
            c.set(key, as<double>(x, wk));
        }
      });
}

}  // namespace

const Fields<Cell>& cell_fields() {
  static const Fields<Cell> t = [] {
    Fields<Cell> f = {
        number<Cell>("median_ms", [](auto& c) -> auto& { return c.stats.median_ms; }, kTimeMs,
                     [](const Cell& c) { return c.stats.mean_ms; }),
        number<Cell>("min_ms", [](auto& c) -> auto& { return c.stats.min_ms; }, kTimeMs,
                     [](const Cell& c) { return c.stats.mean_ms; }),
        number<Cell>("max_ms", [](auto& c) -> auto& { return c.stats.max_ms; }, kTimeMs,
                     [](const Cell& c) { return c.stats.mean_ms; }),
        number<Cell>("stdev_ms", [](auto& c) -> auto& { return c.stats.stdev_ms; }, kStdevMs),
        integer<Cell>("iters", [](auto& c) -> auto& { return c.stats.iters; }),
        object<Cell>("clock", [](auto& c) -> auto& { return c.clock; }, clock_fields()),
        number<Cell>("dense_equiv_ms", [](auto& c) -> auto& { return c.dense_equiv_ms; }, kTimeMs),
        derived<Cell>("grouping_efficiency",
                      [](const Cell& c) -> std::optional<json> {
                        if (!c.dense_equiv_ms) return std::nullopt;
                        return *c.dense_equiv_ms / c.stats.mean_ms;
                      }),
        repeat_field(),
        flag<Cell>("gate_timed_out", [](auto& c) -> auto& { return c.gate_timed_out; },
                   [](const Cell& c) { return c.gate_timed_out; }),
        band_field(),
        values_field(),
    };
    // The kernel records (core/results/kernels.hpp): their own table, on the cell object.
    for (const Field<CellKernels>& k : kernel_fields())
      f.push_back({k.key, [w = k.write](const Cell& c, json& o) { w(c.kernels, o); },
                   [r = k.read](const json& o, Cell& c, const std::string& where) {
                     if (r) r(o, c.kernels, where);
                   }});
    return f;
  }();
  return t;
}

json cell_json(const Cell& c, bool timed) {
  if (!c.ok) {
    json j = {{"status", "n/a"}, {"reason", c.reason}};
    if (!c.values.empty()) values_field().write(c, j);
    return j;
  }
  json j = {{"status", "ok"}};
  if (timed) {
    j["mean_ms"] = c.stats.mean_ms;
    write_fields(cell_fields(), c, j);
  } else {
    values_field().write(c, j);
  }
  return j;
}

Cell read_cell(const json& c, const std::string& where, bool timed) {
  const json* status = find(c, "status");
  const std::string s = status && status->is_string() ? status->get<std::string>() : "";
  if (s != "ok" && s != "n/a") throw UsageError(where + ": a cell must be an object with status \"ok\" or \"n/a\"");
  if (s == "n/a") {
    Cell na = Cell::na(get_or<std::string>(c, "reason", where, "n/a"));
    values_field().read(c, na, where);
    return na;
  }
  Cell cell;
  cell.ok = true;
  if (!timed) {
    values_field().read(c, cell, where);
    return cell;
  }
  const json* mean = find(c, "mean_ms");
  if (!mean || !mean->is_number() || !std::isfinite(mean->get<double>()) || !(mean->get<double>() > 0))
    throw UsageError(where + ": status \"ok\" needs a positive number mean_ms");
  cell.stats.mean_ms = number_in(c, "mean_ms", where, 0, kTimeMs);
  read_fields(cell_fields(), c, cell, where);
  return cell;
}

// ---- records ----------------------------------------------------------------------------

namespace {

// The items a kind's records may name (their count).
size_t item_count(const RunResult& r, RecordKind k) {
  if (items_are_gemms(k)) return r.plan.gemms.size();
  const auto it = r.item_names.find(k);
  return it == r.item_names.end() ? 0 : it->second.size();
}

// Rules of a kind beyond the cell's: an accuracy record's relative error.
void check_kind(const Record& rec, const std::string& where) {
  if (rec.key.kind == RecordKind::Accuracy && rec.value.ok) {
    const std::optional<double> e = rec.value.number("rel_error");
    if (!e) throw UsageError(where + ": an ok accuracy record needs values.rel_error");
    if (!(*e >= 0)) throw UsageError(fmt::format("{}.values.rel_error must be >= 0, got {}", where, *e));
  }
}

// --repeats: a cell's repeats are the run's.
void check_repeats(const Cell& c, const RunResult& r, const std::string& where) {
  if (!c.repeat_ms.empty() && c.repeat_ms.size() != static_cast<size_t>(r.timing.repeats))
    throw UsageError(fmt::format("{}.repeat_ms has {} times but timing.repeats is {}", where, c.repeat_ms.size(),
                                 r.timing.repeats));
}

template <class E>
E named(const json& rec, const char* key, const std::string& where, const EnumNames<E>& names) {
  const std::string s = need<std::string>(rec, key, where);
  if (const std::optional<E> v = names.find(s)) return *v;
  throw UsageError(fmt::format("{}.{}: unknown {} '{}' ({})", where, key, key, clip_text(s, 80), names_list(names.canonical())));
}

RecordKey read_key(const json& j, const RunResult& r, const std::string& where) {
  RecordKey k;
  k.kind = named(j, "kind", where, record_kind_names());
  k.source = named(j, "source", where, source_names());
  const size_t items = item_count(r, k.kind);
  const uint32_t item = need<uint32_t>(j, "item", where);
  if (item >= items)
    throw UsageError(fmt::format("{}.item must be below {} (the {} items of the file), got {}", where, items,
                                 to_string(k.kind), item));
  k.item = item;
  k.rank = get_or<uint32_t>(j, "rank", where, 0);
  const size_t ranks = std::max<size_t>(1, r.ranks.size());
  if (k.rank >= ranks) throw UsageError(fmt::format("{}.rank must be below {}, got {}", where, ranks, k.rank));
  if (const json* p = find(j, "pass"); p && !p->is_null())
    k.pass = parsed_at(where + ".pass", as<std::string>(*p, where + ".pass"), pass_from_string);
  if (const json* m = find(j, "mode"); m && !m->is_null()) {
    k.mode = parsed_at(where + ".mode", as<std::string>(*m, where + ".mode"), mode_from_string);
    if (std::find(r.modes.begin(), r.modes.end(), *k.mode) == r.modes.end())
      throw UsageError(fmt::format("{}.mode {} is not in the file's \"modes\"", where, to_string(*k.mode)));
  }
  if (const json* p = find(j, "precision"); p && !p->is_null()) {
    k.precision = parsed_at(where + ".precision", as<std::string>(*p, where + ".precision"), precision_from_string);
    // The GEMM grid's records and the accuracy records name a precision of their axis; the other
    // kinds any recipe (the parallel step compares BF16 with an FP8 recipe whatever was timed).
    const std::vector<Precision>& axis = k.kind == RecordKind::Accuracy ? r.accuracy_precisions : r.precisions;
    if (items_are_gemms(k.kind) && std::find(axis.begin(), axis.end(), *k.precision) == axis.end())
      throw UsageError(fmt::format("{}.precision {} is not in the file's {}", where, to_string(*k.precision),
                                   k.kind == RecordKind::Accuracy ? "accuracy.precisions" : "\"precisions\""));
  }
  if (const json* p = find(j, "provider"); p && !p->is_null()) {
    const std::string name = as<std::string>(*p, where + ".provider");
    const auto it = std::find(r.providers.begin(), r.providers.end(), name);
    if (it == r.providers.end())
      throw UsageError(fmt::format("{}.provider '{}' is not in the file's \"providers\"", where, clip_text(name, 80)));
    k.provider = static_cast<uint32_t>(it - r.providers.begin());
  }
  if (items_are_gemms(k.kind)) {
    // A GEMM's records name it as the plan does, and every axis of its grid.
    const Gemm& g = r.plan.gemms[k.item];
    if (k.kind != RecordKind::Accuracy && k.kind != gemm_kind(g))
      throw UsageError(fmt::format("{}.kind must be {} for gemms[{}]", where, to_string(gemm_kind(g)), k.item));
    if (k.pass != g.pass)
      throw UsageError(fmt::format("{}.pass must be {} (gemms[{}]'s)", where, to_string(g.pass), k.item));
    if (!k.precision) throw UsageError(where + " has no precision");
    if (k.kind != RecordKind::Accuracy && (!k.mode || !k.provider))
      throw UsageError(where + " needs a mode and a provider (a GEMM's time)");
  }
  return k;
}

}  // namespace

json records_json(const RunResult& r) {
  json out = json::array();
  for (const Record& rec : r.records) {
    const RecordKey& k = rec.key;
    if (r.dry_run && is_gemm_kind(k.kind)) continue;  // a dry run's grid is "not run" placeholders
    json j = cell_json(rec.value, kind_has_times(k.kind));
    j["kind"] = to_string(k.kind);
    j["item"] = k.item;
    if (k.pass) j["pass"] = to_string(*k.pass);
    if (k.mode) j["mode"] = to_string(*k.mode);
    if (k.precision) j["precision"] = to_string(*k.precision);
    if (k.provider) j["provider"] = r.providers.at(*k.provider);
    j["rank"] = k.rank;
    j["source"] = to_string(k.source);
    // Derived for the charts: a GEMM's throughput.
    if (is_gemm_kind(k.kind) && rec.value.ok) j["tflops"] = tflops(r.plan.gemms[k.item], rec.value.stats.mean_ms);
    out.push_back(std::move(j));
  }
  return out;
}

void read_records(const json* records, RunResult& r, const std::string& name) {
  if (!records || !records->is_array()) throw UsageError(fmt::format("{}: \"records\" must be a list", name));
  r.records.reserve(records->size());
  for (size_t i = 0; i < records->size(); ++i) {
    const json& j = (*records)[i];
    const std::string where = fmt::format("{}: records[{}]", name, i);
    if (!j.is_object()) throw UsageError(where + " is not an object");
    const RecordKey key = read_key(j, r, where);
    Cell c = read_cell(j, where, kind_has_times(key.kind));
    if (key.provider) c.kernels.provider = r.providers[*key.provider];
    // A predicted GEMM holds its band (docs/predict.md, "Error band"); a band is a prediction's only.
    // The step kernels of a step carried to another GPU are predicted without one: no band has been
    // measured for them, and none is printed.
    if (c.band && key.source != Source::Predicted)
      throw UsageError(where + ": a band (\"predicted\": true, low_ms, high_ms) belongs to a predicted record only");
    if (c.ok && is_gemm_kind(key.kind) && key.source == Source::Predicted && !c.band)
      throw UsageError(where + ": a predicted GEMM record holds its band (\"predicted\": true, low_ms, high_ms)");
    check_repeats(c, r, where);
    if (r.records.find(key)) throw UsageError(fmt::format("{} repeats the key of an earlier record", where));
    check_kind(r.records.add(key, std::move(c)), where);
  }
  // A measured run holds every cell of its GEMM grid, and an accuracy pass every GEMM's errors.
  const auto gemm_name = [&](size_t g) {
    const Gemm& x = r.plan.gemms[g];
    return fmt::format("gemms[{}] ({} {})", g, to_string(x.pass), x.label());
  };
  const uint32_t ranks = static_cast<uint32_t>(std::max<size_t>(1, r.ranks.size()));
  if (!r.dry_run)
    for (uint32_t rank = 0; rank < ranks; ++rank)
      for (size_t g = 0; g < r.plan.gemms.size(); ++g)
        for (size_t v = 0; v < r.providers.size(); ++v)
          for (size_t m = 0; m < r.modes.size(); ++m)
            for (size_t p = 0; p < r.precisions.size(); ++p)
              if (!r.records.find(r.gemm_key(v, m, g, p, rank)))
                throw UsageError(fmt::format("{}: \"records\" hold no {} {} {} cell of {}{}", name, to_string(r.modes[m]),
                                             to_string(r.precisions[p]), r.providers[v], gemm_name(g),
                                             r.ranks.empty() ? std::string() : fmt::format(" for rank {}", rank)));
  if (r.has_accuracy)
    for (size_t g = 0; g < r.plan.gemms.size(); ++g)
      for (size_t p = 0; p < r.accuracy_precisions.size(); ++p)
        if (!r.accuracy_record(g, p))
          throw UsageError(fmt::format("{}: \"records\" hold no {} accuracy of {}", name,
                                       to_string(r.accuracy_precisions[p]), gemm_name(g)));
}

void read_legacy_cells(const json& gemms, RunResult& r, const std::string& name,
                       const std::vector<std::string>& mode_names, const std::vector<std::string>& precision_names) {
  // One mode's cells of one GEMM, in "precisions" order. Every cell in the object is checked, also
  // those of precisions the file does not list; the listed ones are read.
  const auto read_row = [&](const json& cells, const std::string& where, size_t v, size_t m, size_t g) {
    std::map<std::string, Cell> by_precision;
    for (auto it = cells.begin(); it != cells.end(); ++it) {
      const std::string cw = fmt::format("{}.{}", where, clip_text(it.key(), 80));
      Cell c = read_cell(it.value(), cw, true);
      if (const json* pv = find(it.value(), "provider")) c.kernels.provider = as<std::string>(*pv, cw + ".provider");
      by_precision.emplace(it.key(), std::move(c));
    }
    for (size_t p = 0; p < precision_names.size(); ++p) {
      const auto c = by_precision.find(precision_names[p]);
      if (c == by_precision.end()) throw UsageError(fmt::format("{} has no {} cell", where, precision_names[p]));
      check_repeats(c->second, r, fmt::format("{}.{}", where, precision_names[p]));
      r.records.add(r.gemm_key(v, m, g, p), std::move(c->second));
    }
  };
  for (size_t gi = 0; gi < gemms.size(); ++gi) {
    const json& g = gemms[gi];
    const std::string where = fmt::format("{}: gemms[{}]", name, gi);
    if (!r.dry_run) {
      // One object per mode, keyed by the mode as "modes" spells it.
      const json* res = find(g, "results");
      if (!res || (!r.modes.empty() && !res->is_object()))
        throw UsageError(fmt::format("{} has no \"results\" (not a measured run?)", where));
      for (size_t mi = 0; mi < r.modes.size(); ++mi) {
        const json* cells = find(*res, mode_names[mi].c_str());
        if (!cells || !cells->is_object())
          throw UsageError(fmt::format("{}.results has no object for mode \"{}\"", where, mode_names[mi]));
        read_row(*cells, where + ".results." + mode_names[mi], 0, mi, gi);
      }
      // providers[1..]: "provider_results" holds their cells, shaped as "results".
      if (r.providers.size() > 1) {
        const json* pr = find(g, "provider_results");
        if (!pr || !pr->is_object()) throw UsageError(fmt::format("{} has no \"provider_results\" object", where));
        for (size_t v = 1; v < r.providers.size(); ++v) {
          const std::string pw = fmt::format("{}.provider_results.{}", where, r.providers[v]);
          const json* pm = find(*pr, r.providers[v].c_str());
          if (!pm || !pm->is_object()) throw UsageError(pw + " must be an object");
          for (size_t mi = 0; mi < r.modes.size(); ++mi) {
            const json* cells = find(*pm, mode_names[mi].c_str());
            if (!cells || !cells->is_object())
              throw UsageError(fmt::format("{} has no object for mode \"{}\"", pw, mode_names[mi]));
            read_row(*cells, pw + "." + mode_names[mi], v, mi, gi);
          }
        }
      }
    }
    if (r.has_accuracy) {
      const std::string aw = where + ".accuracy";
      const json* acc = find(g, "accuracy");
      if (!acc) throw UsageError(fmt::format("{} has no accuracy", where));
      for (size_t p = 0; p < r.accuracy_precisions.size(); ++p) {
        const json* c = find(*acc, to_string(r.accuracy_precisions[p]));
        if (!c) throw UsageError(fmt::format("{} has no {} cell", aw, to_string(r.accuracy_precisions[p])));
        const std::string cw = fmt::format("{}.{}", aw, to_string(r.accuracy_precisions[p]));
        if (!c->is_object()) throw UsageError(cw + " must be an object");
        AccuracyCell a;
        if (get_or<std::string>(*c, "status", cw, "") == "ok") {
          a.ok = true;
          a.rel_error = need<double>(*c, "rel_error", cw);
          if (!(a.rel_error >= 0)) throw UsageError(fmt::format("{}.rel_error must be >= 0, got {}", cw, a.rel_error));
          a.emulated = get_or<bool>(*c, "emulated", cw, false);
        } else {
          a.reason = get_or<std::string>(*c, "reason", cw, "n/a");
        }
        r.set_accuracy(gi, p, a);
      }
    }
  }
}

}  // namespace gs
