// One description per JSON field, for both directions. A struct's JSON is a table of Field rows
// (key, accessor, type, bounds, when it is written, what an absent key means); write_fields and
// read_fields walk the same table, so a writer and its reader cannot drift apart, and the reader's
// checks (types, ranges, bounded lists) are the table's, not each caller's. The result JSON's
// records, clock samples, kernel records, device and step context are tables
// (core/report/record_json.cpp); the value helpers below (as, need, get_or, number_in) are what
// every reader of a gemmscope JSON file uses, with messages that name the file and the field.
#pragma once
#include <fmt/format.h>

#include <cmath>
#include <cstdint>
#include <functional>
#include <limits>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "core/io/input_file.hpp"
#include "core/util/error.hpp"
#include "core/util/text_util.hpp"

namespace gs::json_fields {

using nlohmann::json;

// obj[key], or nullptr when obj is not an object or has no such key.
const json* find(const json& obj, const char* key);

// The value `v` as a T, or a UsageError "{what} must be ...": `what` names the document and the
// field ("a.json: timing.iters"). Integers must be JSON integers (not 3.0) inside T's range;
// numbers are finite (the parser already refuses numbers that overflow a double).
template <class T>
T as(const json& v, const std::string& what) {
  if constexpr (std::is_same_v<T, std::string>) {
    if (!v.is_string()) throw UsageError(fmt::format("{} must be a string", what));
    return v.get<std::string>();
  } else if constexpr (std::is_same_v<T, bool>) {
    if (!v.is_boolean()) throw UsageError(fmt::format("{} must be true or false", what));
    return v.get<bool>();
  } else if constexpr (std::is_integral_v<T>) {
    const auto bad = [&] {
      return UsageError(fmt::format("{} must be an integer from {} to {}, got {}", what, std::numeric_limits<T>::min(),
                                    std::numeric_limits<T>::max(), json_value_hint(v)));
    };
    if (v.is_number_unsigned()) {
      const uint64_t x = v.get<uint64_t>();
      if (x > static_cast<uint64_t>(std::numeric_limits<T>::max())) throw bad();
      return static_cast<T>(x);
    }
    if (v.is_number_integer()) {
      const int64_t x = v.get<int64_t>();
      if (x < 0 ? (std::is_unsigned_v<T> || x < static_cast<int64_t>(std::numeric_limits<T>::min()))
                : static_cast<uint64_t>(x) > static_cast<uint64_t>(std::numeric_limits<T>::max()))
        throw bad();
      return static_cast<T>(x);
    }
    throw bad();
  } else {
    static_assert(std::is_same_v<T, double>);
    // The parser refuses numbers that overflow a double; a document built in memory may hold
    // NaN or infinity, which no field means.
    if (!v.is_number()) throw UsageError(fmt::format("{} must be a number", what));
    if (!std::isfinite(v.get<double>())) throw UsageError(fmt::format("{} must be a finite number", what));
    return v.get<double>();
  }
}

// obj[key] as a T (see as<T>); `where` names the document and the object: "a.json: config".
template <class T>
T need(const json& obj, const char* key, const std::string& where) {
  const json* v = find(obj, key);
  if (!v) throw UsageError(fmt::format("{} has no '{}'", where, key));
  return as<T>(*v, fmt::format("{}.{}", where, key));
}

// obj[key] as a T, or `dflt` when obj has no such key.
template <class T>
T get_or(const json& obj, const char* key, const std::string& where, T dflt) {
  const json* v = find(obj, key);
  return v ? as<T>(*v, fmt::format("{}.{}", where, key)) : dflt;
}

// The strings of list `key` of `j` (it may be empty); `name` names the document.
std::vector<std::string> string_list(const json& j, const char* key, const std::string& name);

// A number read from a file must lie in [lo, hi] (unit: " ms", " GB/s", ...): times and other
// measured values, where a value like 5e-324 ms or 1e308 ms is not a measurement (a ratio of two
// of them is inf or nan, and every verdict on it would be wrong).
struct Range {
  double lo, hi;
  const char* unit = "";
};
// obj[key] (or `dflt` when absent) as a number inside `r`.
double number_in(const json& obj, const char* key, const std::string& where, double dflt, Range r);

// Times in a result, in milliseconds: 1 ps (far below any kernel, but above the denormals whose
// ratios overflow) to about 11.6 days.
constexpr Range kTimeMs{1e-9, 1e9, " ms"};

// nlohmann's message without its "[json.exception.type_error.302] " prefix.
std::string json_error_text(const json::exception& e);

// ---- field tables ------------------------------------------------------------------------

// One field of a T in a JSON object. `write` puts obj[key] (or nothing, where the field is unset
// or `when` says so); `read` takes it from obj (absent: the table's default). A field without
// `read` is derived: written for readers of the file (charts, scripts), recomputed, never read.
template <class T>
struct Field {
  const char* key;
  std::function<void(const T&, json&)> write;
  std::function<void(const json&, T&, const std::string&)> read;
};
template <class T>
using Fields = std::vector<Field<T>>;

template <class T>
void write_fields(const Fields<T>& table, const T& v, json& obj) {
  for (const Field<T>& f : table) f.write(v, obj);
}

// `where` names the object ("a.json: records[3]"); every message names the field under it.
template <class T>
void read_fields(const Fields<T>& table, const json& obj, T& v, const std::string& where) {
  for (const Field<T>& f : table)
    if (f.read) f.read(obj, v, where);
}

// When a field is written: always, or only where the value says so (a flag that is set, a
// string that is not empty, a number above a floor: `When` predicates over the whole struct).
template <class T>
using When = std::function<bool(const T&)>;

namespace detail {
template <class X>
struct is_optional : std::false_type {};
template <class X>
struct is_optional<std::optional<X>> : std::true_type {};
inline std::string at_key(const std::string& where, const char* key) { return fmt::format("{}.{}", where, key); }
// obj[key] = m; a std::optional only when it holds a value.
template <class M>
void put(json& obj, const char* key, const M& m) {
  if constexpr (is_optional<M>::value) {
    if (m) obj[key] = *m;
  } else {
    obj[key] = m;
  }
}
// The writer of a plain member: obj[key] = at(v) (see put) where `when` allows.
template <class T, class At>
std::function<void(const T&, json&)> put_when(const char* key, At at, When<T> when) {
  return [=](const T& v, json& obj) {
    if (!when || when(v)) put(obj, key, at(v));
  };
}
}  // namespace detail

// The builders. `at` is a generic lambda that names the member once for both directions:
//   [](auto& c) -> auto& { return c.stats.mean_ms; }
// A std::optional member is written when it holds a value and read when the key is there (null
// counts as absent); any other member is written always (or as `when` says) and takes `dflt` when
// the key is absent.

// A number (double) inside `r`. dflt: the value an absent key means, from the struct read so far
// (median_ms defaults to mean_ms); empty: the member as it is.
template <class T, class At>
Field<T> number(const char* key, At at, Range r, std::function<double(const T&)> dflt = {}, When<T> when = {}) {
  using M = std::remove_cv_t<std::remove_reference_t<decltype(at(std::declval<T&>()))>>;
  Field<T> f{key, detail::put_when<T>(key, at, when), {}};
  f.read = [=](const json& obj, T& v, const std::string& where) {
    const json* x = find(obj, key);
    if constexpr (detail::is_optional<M>::value) {
      if (x && !x->is_null()) at(v) = number_in(obj, key, where, 0, r);
    } else {
      if (x)
        at(v) = number_in(obj, key, where, 0, r);
      else if (dflt)
        at(v) = dflt(v);
    }
  };
  return f;
}

// An integer member of any integral type (or std::optional of one), inside the type's range.
template <class T, class At>
Field<T> integer(const char* key, At at, When<T> when = {}) {
  using M = std::remove_cv_t<std::remove_reference_t<decltype(at(std::declval<T&>()))>>;
  Field<T> f{key, detail::put_when<T>(key, at, when), {}};
  f.read = [=](const json& obj, T& v, const std::string& where) {
    const json* x = find(obj, key);
    if (!x || (detail::is_optional<M>::value && x->is_null())) return;
    if constexpr (detail::is_optional<M>::value)
      at(v) = as<typename M::value_type>(*x, detail::at_key(where, key));
    else
      at(v) = as<M>(*x, detail::at_key(where, key));
  };
  return f;
}

// true/false. when (e.g. "written only when set"): see above.
template <class T, class At>
Field<T> flag(const char* key, At at, When<T> when = {}) {
  Field<T> f{key, {}, {}};
  f.write = [=](const T& v, json& obj) {
    if (!when || when(v)) obj[key] = static_cast<bool>(at(v));
  };
  f.read = [=](const json& obj, T& v, const std::string& where) {
    if (const json* x = find(obj, key)) at(v) = as<bool>(*x, detail::at_key(where, key));
  };
  return f;
}

// A string; read cut to `clip` characters (made printable) when clip > 0. null reads as absent.
template <class T, class At>
Field<T> text(const char* key, At at, When<T> when = {}, size_t clip = 0) {
  Field<T> f{key, {}, {}};
  f.write = [=](const T& v, json& obj) {
    if (!when || when(v)) obj[key] = at(v);
  };
  f.read = [=](const json& obj, T& v, const std::string& where) {
    const json* x = find(obj, key);
    if (!x || x->is_null()) return;
    std::string s = as<std::string>(*x, detail::at_key(where, key));
    at(v) = clip > 0 ? clip_text(s, clip) : std::move(s);
  };
  return f;
}

// A nested object described by its own table: a std::optional<S> member (written when set) or a
// plain S member (written always); read when the key is there (null counts as absent).
template <class T, class At, class S>
Field<T> object(const char* key, At at, const Fields<S>& table) {
  using M = std::remove_cv_t<std::remove_reference_t<decltype(at(std::declval<T&>()))>>;
  Field<T> f{key, {}, {}};
  f.write = [=](const T& v, json& obj) {
    const M& m = at(v);
    json o = json::object();
    if constexpr (detail::is_optional<M>::value) {
      if (!m) return;
      write_fields(table, *m, o);
    } else {
      write_fields(table, m, o);
    }
    obj[key] = std::move(o);
  };
  f.read = [=](const json& obj, T& v, const std::string& where) {
    const json* x = find(obj, key);
    if (!x || x->is_null()) return;
    const std::string w = detail::at_key(where, key);
    if (!x->is_object()) throw UsageError(w + " must be an object");
    S s{};
    read_fields(table, *x, s, w);
    at(v) = std::move(s);
  };
  return f;
}

// A list of objects described by their own table (at most `max` of them): a std::vector<S>
// member, written when `when` says so (default: always, also when empty).
template <class T, class At, class S>
Field<T> list(const char* key, At at, const Fields<S>& table, size_t max, When<T> when = {}) {
  Field<T> f{key, {}, {}};
  f.write = [=](const T& v, json& obj) {
    if (when && !when(v)) return;
    json arr = json::array();
    for (const S& s : at(v)) {
      json o = json::object();
      write_fields(table, s, o);
      arr.push_back(std::move(o));
    }
    obj[key] = std::move(arr);
  };
  f.read = [=](const json& obj, T& v, const std::string& where) {
    const json* x = find(obj, key);
    if (!x || x->is_null()) return;
    const std::string w = detail::at_key(where, key);
    if (!x->is_array() || x->size() > max) throw UsageError(fmt::format("{} must be a list of at most {} objects", w, max));
    auto& out = at(v);
    out.clear();
    for (size_t i = 0; i < x->size(); ++i) {
      const std::string wi = fmt::format("{}[{}]", w, i);
      if (!(*x)[i].is_object()) throw UsageError(wi + " must be an object");
      S s{};
      read_fields(table, (*x)[i], s, wi);
      out.push_back(std::move(s));
    }
  };
  return f;
}

// An enum by name (`names`: its spellings, the first one written): an unknown name is refused with
// the names it may be. Required: an absent key is refused too.
template <class T, class At, class E>
Field<T> choice(const char* key, At at, const EnumNames<E>& names) {
  Field<T> f{key, {}, {}};
  f.write = [=, &names](const T& v, json& obj) { obj[key] = names.name(at(v)); };
  f.read = [=, &names](const json& obj, T& v, const std::string& where) {
    const json* x = find(obj, key);
    const std::optional<E> e = x && x->is_string() ? names.find(x->template get<std::string>()) : std::nullopt;
    if (!e) throw UsageError(fmt::format("{} must be {}", detail::at_key(where, key), names_list(names.canonical(), true)));
    at(v) = *e;
  };
  return f;
}

// A value computed from the struct, written for the file's readers and never read back.
template <class T>
Field<T> derived(const char* key, std::function<std::optional<json>(const T&)> value) {
  return {key,
          [=](const T& v, json& obj) {
            if (std::optional<json> j = value(v)) obj[key] = std::move(*j);
          },
          {}};
}

// A field whose JSON is not one of the shapes above (versions as "13.0", an enum by name): both
// directions given by hand, next to each other in the table.
template <class T>
Field<T> custom(const char* key, std::function<void(const T&, json&)> write,
                std::function<void(const json&, T&, const std::string&)> read) {
  return {key, std::move(write), std::move(read)};
}

}  // namespace gs::json_fields
