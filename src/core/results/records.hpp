// The record table: every measured, modelled or predicted quantity of a run is one record, a key
// and a value (a Cell). The key says what the quantity is (kind, item, pass, precision, mode,
// provider, rank) and where it comes from (source); the value holds the times and everything
// measured with them. A run declares its axes (RunResult: the plan's GEMMs and the other kinds'
// items, modes, precisions, providers, ranks) and holds the records; the grid views the code reads
// (RunResult::cell, provider_cell) look records up through the table's index in O(1).
//
// A new kind of quantity is a RecordKind (and its name below), its items, the code that adds its
// records and the presentation that reads them: the JSON writer and reader, compare and the
// charts walk records without knowing kinds (docs/architecture.md, "A record kind").
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "core/plan/plan.hpp"
#include "core/recipes/modes.hpp"
#include "core/recipes/recipe.hpp"
#include "core/results/cell.hpp"
#include "core/util/text_util.hpp"

namespace gs {

// What a record measures. Extensible: append a value and its name (record_kind_names()).
enum class RecordKind {
  Gemm,         // a dense GEMM of the plan (item: its index in Plan::gemms)
  GroupedGemm,  // a grouped (MoE expert) GEMM of the plan (item: its index in Plan::gemms)
  Accuracy,     // --accuracy: a GEMM's relative error against FP32 (item: its index in Plan::gemms)
  Attention,    // fused attention of one layer (pass: fprop forward, dgrad backward)
  StepWork,     // memory-bound work of a training step between its GEMMs
  Collective,   // a collective of the parallel layout in one wire type (pass: fprop forward, dgrad backward)
  Optimizer,    // the optimizer step
  Loss,         // the loss and its gradient
  Embedding,    // the embedding lookup and its gradient
  Host,         // host-side cost (launches, Python)
  Step,         // a whole training step or a group of it
  ParallelStep, // the parallel step of a layout (items: "step", the job's; "stage N", a rank of pipeline stage N)
  Layout,       // gemmscope layouts: one candidate layout of the search (item: its layout string)
};
const EnumNames<RecordKind>& record_kind_names();  // "gemm", "grouped-gemm", "accuracy", ...
const char* to_string(RecordKind k);
bool is_gemm_kind(RecordKind k);             // Gemm, GroupedGemm: items are Plan::gemms
bool items_are_gemms(RecordKind k);          // is_gemm_kind, and Accuracy
RecordKind gemm_kind(const Gemm& g);         // GroupedGemm for a grouped GEMM, else Gemm
// Whether a kind's cells hold times (Cell::stats, mean_ms); accuracy and collective records hold
// named values instead (a relative error; a collective's median, bandwidth and overlap figures; a
// parallel step's or a layout's time, throughput and memory).
bool kind_has_times(RecordKind k);

// Where a value comes from. Reports label every number by it. Given: the user's own figure
// (--step-other-ms), neither measured nor modelled by gemmscope.
enum class Source { Measured, Modelled, Predicted, Emulated, Given };
const EnumNames<Source>& source_names();     // "measured", "modelled", "predicted", "emulated", "given"
const char* to_string(Source s);

// A record's key. Axes that do not apply to a kind are empty (a collective has no mode); mode and
// precision are the values themselves, provider an index into the run's providers, item an index
// into the kind's items, rank the process's rank (0 for a single-GPU run).
struct RecordKey {
  RecordKind kind = RecordKind::Gemm;
  uint32_t item = 0;
  std::optional<Pass> pass;
  std::optional<Precision> precision;
  std::optional<Mode> mode;
  std::optional<uint32_t> provider;
  uint32_t rank = 0;
  Source source = Source::Measured;

  // Written out (not `= default`): the CUDA units include this header at C++17.
  bool operator==(const RecordKey& o) const {
    return kind == o.kind && item == o.item && pass == o.pass && precision == o.precision && mode == o.mode &&
           provider == o.provider && rank == o.rank && source == o.source;
  }
  // The key in 64 bits, the index's hash key; std::out_of_range when a field exceeds its bits
  // (items and ranks up to 2^20, providers up to 63).
  uint64_t packed() const;
  // "gemm 3 fprop BF16 training cublaslt rank 0 measured"-like text for messages.
  std::string describe() const;
};
constexpr uint32_t kMaxRecordItems = 1u << 20;
constexpr uint32_t kMaxRecordRanks = 1u << 20;
constexpr uint32_t kMaxRecordProviders = 63;

struct Record {
  RecordKey key;
  Cell value;
};

// The records of a run, in the order they were added, with an index by key: one value per key.
class RecordTable {
 public:
  // Adds a record; std::logic_error when the key is already there.
  Record& add(const RecordKey& key, Cell value);
  // Adds the record, or replaces the value of the one with this key.
  Record& put(const RecordKey& key, Cell value);
  const Record* find(const RecordKey& key) const;
  Record* find(const RecordKey& key);
  // The value of `key`; std::out_of_range naming the key when the table has none.
  const Cell& at(const RecordKey& key) const;
  Cell& at(const RecordKey& key);

  size_t size() const { return records_.size(); }
  bool empty() const { return records_.empty(); }
  void clear();
  void reserve(size_t n);
  const Record& operator[](size_t i) const { return records_[i]; }
  Cell& value(size_t i) { return records_[i].value; }  // keys are not changed in place (the index holds them)
  std::vector<Record>::const_iterator begin() const { return records_.begin(); }
  std::vector<Record>::const_iterator end() const { return records_.end(); }

 private:
  std::vector<Record> records_;
  std::unordered_map<uint64_t, uint32_t> index_;  // packed key -> position in records_
};

}  // namespace gs
