// The parallel step's and the layout search's section of a result document (JSON "parallel",
// docs/json-schema.md), both directions through one field table (core/io/json_fields.hpp): the
// job (model, GPU, cluster, framework), the layout with every choice it holds, each precision's
// basis and notes, the search's counts. The quantities are records (kinds parallel-step,
// collective, layout), written and read with every other record (record_json.hpp).
#pragma once
#include <nlohmann/json.hpp>
#include <string>

#include "core/results/results.hpp"

namespace gs {

nlohmann::json parallel_section_json(const ParallelRun& p);
// `j` is the document's "parallel" value (nullptr or null: none). UsageError naming `where`.
void read_parallel_section(const nlohmann::json* j, const std::string& where, RunResult& r);

}  // namespace gs
