// GPU datasheet numbers (data/gpus.json): SMs, the clock the peaks assume, dense tensor TFLOP/s
// per number format, memory bandwidth, L2, memory size, TDP, each with its source. The roofline
// and `gemmscope predict` read them; nothing here measures.
//
// Matching a device name (cudaDeviceProp::name) to an entry: the first entry in file order whose
// every `match` item occurs in the name as a whole word (case-insensitive; a word boundary is any
// character that is not a letter or digit, so "H20" does not match "H200" and "B200" does not
// match "GB200") and none of whose `exclude` items occurs. The file lists specific entries first.
#pragma once
#include <nlohmann/json.hpp>

#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "core/gpu/arch_policy.hpp"
#include "core/recipes/recipe.hpp"

namespace gs {

// A datasheet number: value and where it comes from. Absent (nullopt in GpuSpec) when the file
// has null: not sourced.
struct Sourced {
  double value = 0;
  std::string source;
};
// obj[key] as a sourced number: {"value": a positive finite number, "source": a non-empty string},
// or null (nullopt: not sourced). UsageError naming `where` and the key otherwise (absent,
// malformed, a value without a source, a value outside `range`). Every datasheet file reads its
// numbers through it. The range is what any device, past or plausible, has: a value outside it is a
// broken file, not a device (5e-324 TFLOP/s predicted infinite times).
struct SourcedRange {
  double lo = 0, hi = 1e300;
  const char* unit = "";
};
std::optional<Sourced> read_sourced(const nlohmann::json& obj, const char* key, const std::string& where,
                                    SourcedRange range = {});

// obj[key] as read_sourced reads it, where the number must be given: null is refused too
// ("<where>.<key> is needed (null is not allowed)").
Sourced need_sourced(const nlohmann::json& obj, const char* key, const std::string& where, SourcedRange range);

// obj[key] as a non-empty string of at most max_chars (npos: any length). UsageError
// "<where>.<key> must be a non-empty string" / "... must be at most N characters, got ...".
std::string datasheet_text(const nlohmann::json& obj, const char* key, const std::string& where,
                           size_t max_chars = std::string::npos);

// A datasheet key as it is looked up and compared: any case, '_' and ' ' read as '-'.
std::string datasheet_key(const std::string& key);

// A datasheet file's schema (the GPU database, the cluster presets): doc["schema"] must be `schema`
// and doc[list] a non-empty list of at most `max_entries` objects, each with a "key": a non-empty
// string of at most `max_key_chars`, unique in the file by datasheet_key. UsageError naming the
// file: "x is not a gemmscope <kind> (schema \"...\")", "x: \"gpus\" must be a non-empty list",
// "x: \"gpus\" lists 300 GPUs, more than the 256 a spec file may hold", "x: gpus[3] is not an
// object", "x: gpus[3].key must be ...", "x: key \"H100\" twice".
struct DatasheetSchema {
  const char* schema;  // "gemmscope.gpus/1"
  const char* list;    // "gpus"
  size_t max_entries;
  const char* kind;    // "GPU spec file"
  const char* noun;    // "GPUs"
  size_t max_key_chars;
};
// One entry: its key, and its name for the messages about its fields: "<where>: <key>".
struct DatasheetEntry {
  std::string key;
  std::string where;
};
// The entries of `doc` (read from `where`) checked against `schema`, each handed to
// f(entry, its key and name) in file order.
void for_each_datasheet_entry(const nlohmann::json& doc, const DatasheetSchema& schema, const std::string& where,
                              const std::function<void(const nlohmann::json&, const DatasheetEntry&)>& f);

struct GpuSpec {
  std::string key;   // "H100", "B300" (what --gpu takes)
  std::string name;  // "NVIDIA H100 SXM"
  std::string arch;  // "hopper", "blackwell", ...
  std::vector<std::string> match, exclude;
  int cc_major = 0, cc_minor = 0;
  std::optional<Sourced> sm_count, boost_clock_mhz, bandwidth_gbs, l2_bytes, memory_bytes, tdp_w;
  std::optional<Sourced> tflops[4];  // indexed by PeakFormat
  std::vector<std::string> notes;
  int compute_capability() const { return cc_major * 10 + cc_minor; }
  ArchPolicy arch_policy() const { return ArchPolicy(compute_capability()); }
  const std::optional<Sourced>& peak(PeakFormat f) const { return tflops[static_cast<int>(f)]; }
};

// Why `spec` cannot run precision `p` (compute capability below the recipe's, or no datasheet
// peak for its format), or "" when it can.
std::string cannot_run(const GpuSpec& spec, Precision p);

struct GpuDb {
  std::vector<GpuSpec> gpus;
  std::string path;  // where it was read from (for notes)
  // The entry matching a cudaDeviceProp name (rules above), or nullptr.
  const GpuSpec* match_device(const std::string& device_name) const;
  // --gpu NAME: an entry's key (case-insensitive; '-', '_' and ' ' alike), else a device name
  // (match_device). UsageError "unknown GPU 'X' (known: H100, ...)" otherwise.
  const GpuSpec& find(const std::string& name) const;
  std::string known_keys() const;  // "GH200, GH200-144G, ..."
};

// Parses the spec document. UsageError (naming `where` and the entry and field) for a document
// that is not the schema, a number that is not a positive finite number, a non-null number
// without a non-empty "source", duplicate keys, an entry without "match".
GpuDb parse_gpu_db(const nlohmann::json& doc, const std::string& where);
// read_json_file(path) + parse_gpu_db; UsageError naming the file.
GpuDb read_gpu_db_file(const std::string& path);

}  // namespace gs
