// A record's named values as a JSON object and back (record_values.hpp).
#include "core/results/record_values.hpp"

#include <variant>

namespace gs {

using nlohmann::json;

json values_object(const Cell& c) {
  json o = json::object();
  for (const NamedValue& v : c.values) std::visit([&](const auto& x) { o[v.name] = x; }, v.value);
  return o;
}

void set_values(Cell& c, const json& o) {
  for (const auto& [name, v] : o.items()) {
    if (v.is_boolean()) c.set(name, v.get<bool>());
    else if (v.is_string()) c.set(name, v.get<std::string>());
    else c.set(name, v.get<double>());
  }
}

}  // namespace gs
