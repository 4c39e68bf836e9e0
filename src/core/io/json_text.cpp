#include "core/io/json_text.hpp"

#include <utility>

#include "core/util/text_util.hpp"

namespace gs {

namespace {

using nlohmann::json;

// A copy of `v` with every string and key utf8_escaped(). Documents written here are gemmscope's
// own (a few levels deep) or were read under the input policy (at most 64 levels): the recursion
// is bounded.
json escaped(const json& v) {
  switch (v.type()) {
    case json::value_t::string: return utf8_escaped(v.get_ref<const std::string&>());
    case json::value_t::array: {
      json out = json::array();
      for (const json& x : v) out.push_back(escaped(x));
      return out;
    }
    case json::value_t::object: {
      json out = json::object();
      for (auto it = v.begin(); it != v.end(); ++it) out[utf8_escaped(it.key())] = escaped(it.value());
      return out;
    }
    default: return v;
  }
}

}  // namespace

std::string json_text(const json& doc, int indent) {
  try {
    return doc.dump(indent);
  } catch (const json::type_error&) {  // 316: a string that is not UTF-8 (the only way dump throws)
    return escaped(doc).dump(indent);
  }
}

}  // namespace gs
