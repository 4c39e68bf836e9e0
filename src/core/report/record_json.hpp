// The records of a run in the result JSON (docs/json-schema.md, "records"), both directions: a
// record is its key by name (kind, item, pass, mode, precision, provider, rank, source) and its
// value, a cell, described field by field in one table (cell_fields(), core/io/json_fields.hpp)
// that the writer and the reader share. Files of schema 1 and 2 held the GEMM cells inside each
// GEMM ("results", "provider_results", "accuracy"); read_legacy_cells reads them into the same
// records with the same cell table.
#pragma once
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "core/io/json_fields.hpp"
#include "core/results/results.hpp"

namespace gs {

// A cell's fields beyond "status" and "reason": times, clock, grouped and repeat fields, the
// predicted band, kernel records (kernel_fields()), named values.
const json_fields::Fields<Cell>& cell_fields();

// A cell object: {"status": "n/a", "reason"} or {"status": "ok", fields...}. `timed`: the record's
// kind has times (an accuracy record has none), so an ok cell has a positive mean_ms.
nlohmann::json cell_json(const Cell& c, bool timed);
Cell read_cell(const nlohmann::json& c, const std::string& where, bool timed);

// "records": every record of `r` in table order.
nlohmann::json records_json(const RunResult& r);
// Reads "records" into r.records; r's axes (plan, modes, precisions, providers, ranks, items,
// accuracy precisions) are read already. `name` names the file.
void read_records(const nlohmann::json* records, RunResult& r, const std::string& name);
// Schema 1 and 2: the cells inside each GEMM. `mode_names` and `precision_names` as the file spells
// them (the keys of its cells).
void read_legacy_cells(const nlohmann::json& gemms, RunResult& r, const std::string& name,
                       const std::vector<std::string>& mode_names, const std::vector<std::string>& precision_names);

}  // namespace gs
