// The report's block for records no other block presents: any record kind beyond the GEMM grid,
// the accuracy table and the collectives (whose table the communication section prints), one row
// per record with its key and value, walked without knowing the kind (a new kind shows in the
// report before it has a block of its own).
#pragma once
#include "core/results/results.hpp"
#include "core/util/printer.hpp"

namespace gs {

// Whether a kind has a block of its own in the run report (GEMMs, grouped GEMMs, accuracy,
// collectives).
bool kind_has_report_block(RecordKind k);

// "Other records:" and a table (kind, item, pass, mode, precision, rank, source, time, values);
// nothing when every record of the run has a block of its own.
void add_other_records(print::Document& d, const RunResult& r);

}  // namespace gs
