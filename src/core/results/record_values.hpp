// A record's named values (Cell::values) as a JSON object and back, so that a field table
// (core/io/json_fields.hpp) describes the values of a record kind: the step kernels' spec
// (step_kernel_records.hpp), the step context's figures (step_context_records.hpp).
#pragma once
#include <nlohmann/json.hpp>

#include "core/results/cell.hpp"

namespace gs {

// {"name": value, ...} of c's named values.
nlohmann::json values_object(const Cell& c);
// Sets c's named values from the members of `o` (true/false, strings; anything else as a number).
void set_values(Cell& c, const nlohmann::json& o);

}  // namespace gs
