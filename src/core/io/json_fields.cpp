#include "core/io/json_fields.hpp"

namespace gs::json_fields {

const json* find(const json& obj, const char* key) {
  if (!obj.is_object()) return nullptr;
  const auto it = obj.find(key);
  return it == obj.end() ? nullptr : &*it;
}

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

double number_in(const json& obj, const char* key, const std::string& where, double dflt, Range r) {
  const std::string what = fmt::format("{}.{}", where, key);
  const json* x = find(obj, key);
  const double v = x ? as<double>(*x, what) : dflt;
  if (!(v >= r.lo && v <= r.hi))
    throw UsageError(fmt::format("{} must be from {:g} to {:g}{}, got {}", what, r.lo, r.hi, r.unit, json(v).dump()));
  return v;
}

std::string json_error_text(const json::exception& e) {
  std::string msg = e.what();
  const auto p = msg.find("] ");
  return p == std::string::npos ? msg : msg.substr(p + 2);
}

}  // namespace gs::json_fields
