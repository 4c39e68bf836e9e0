// The text of every JSON document gemmscope writes (--json, --comm-json, fleet files, predict
// --json, a rank's report, the plot's copy). JSON text is UTF-8; a string of outside origin may
// not be (a file name from the command line such as "r\xff.json", stored as config.source or in a
// "file:PATH" routing spec), and nlohmann's dump() throws on it (type_error 316), which used to end
// a measured run as an "internal error" with nothing written.
#pragma once
#include <nlohmann/json.hpp>
#include <string>

namespace gs {

// `doc` serialised as dump(indent) does, never throwing for an encoding: every string and key that
// is not well-formed UTF-8 is written utf8_escaped() (core/util/text_util.hpp: each stray byte as
// "\xHH", backslashes doubled), so no byte of it is lost.
std::string json_text(const nlohmann::json& doc, int indent = -1);

}  // namespace gs
