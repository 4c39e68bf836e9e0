#include "core/results/records.hpp"

#include <fmt/format.h>

#include <stdexcept>

namespace gs {

const EnumNames<RecordKind>& record_kind_names() {
  static const EnumNames<RecordKind> names{{{RecordKind::Gemm, {"gemm"}},
                                            {RecordKind::GroupedGemm, {"grouped-gemm"}},
                                            {RecordKind::Accuracy, {"accuracy"}},
                                            {RecordKind::Attention, {"attention"}},
                                            {RecordKind::StepWork, {"step-work"}},
                                            {RecordKind::Collective, {"collective"}},
                                            {RecordKind::Optimizer, {"optimizer"}},
                                            {RecordKind::Loss, {"loss"}},
                                            {RecordKind::Embedding, {"embedding"}},
                                            {RecordKind::Host, {"host"}},
                                            {RecordKind::Step, {"step"}},
                                            {RecordKind::ParallelStep, {"parallel-step"}},
                                            {RecordKind::Layout, {"layout"}}}};
  return names;
}
const char* to_string(RecordKind k) { return record_kind_names().name(k); }
bool is_gemm_kind(RecordKind k) { return k == RecordKind::Gemm || k == RecordKind::GroupedGemm; }
bool items_are_gemms(RecordKind k) { return is_gemm_kind(k) || k == RecordKind::Accuracy; }
RecordKind gemm_kind(const Gemm& g) { return g.grouped() ? RecordKind::GroupedGemm : RecordKind::Gemm; }
bool kind_has_times(RecordKind k) {
  return k != RecordKind::Accuracy && k != RecordKind::Collective && k != RecordKind::ParallelStep && k != RecordKind::Layout;
}

const EnumNames<Source>& source_names() {
  static const EnumNames<Source> names{{{Source::Measured, {"measured"}},
                                        {Source::Modelled, {"modelled", "modeled"}},
                                        {Source::Predicted, {"predicted"}},
                                        {Source::Emulated, {"emulated"}},
                                        {Source::Given, {"given"}}}};
  return names;
}
const char* to_string(Source s) { return source_names().name(s); }

namespace {

// Packs `v` into `bits` bits at `shift` (0 is "none" for the optional fields, which store v + 1).
void pack(uint64_t& out, int& shift, uint64_t v, int bits, const char* what) {
  if (v >= (uint64_t{1} << bits)) throw std::out_of_range(fmt::format("record key: {} {} does not fit", what, v));
  out |= v << shift;
  shift += bits;
}
template <class E>
uint64_t opt(const std::optional<E>& e) {
  return e ? static_cast<uint64_t>(*e) + 1 : 0;
}

}  // namespace

uint64_t RecordKey::packed() const {
  uint64_t k = 0;
  int shift = 0;
  pack(k, shift, static_cast<uint64_t>(kind), 5, "kind");
  pack(k, shift, static_cast<uint64_t>(source), 3, "source");
  pack(k, shift, opt(pass), 3, "pass");
  pack(k, shift, opt(precision), 4, "precision");
  pack(k, shift, opt(mode), 3, "mode");
  pack(k, shift, opt(provider), 6, "provider");
  pack(k, shift, item, 20, "item");
  pack(k, shift, rank, 20, "rank");
  return k;
}

std::string RecordKey::describe() const {
  std::string s = fmt::format("{} {}", to_string(kind), item);
  if (pass) s += fmt::format(" {}", to_string(*pass));
  if (mode) s += fmt::format(" {}", to_string(*mode));
  if (precision) s += fmt::format(" {}", to_string(*precision));
  if (provider) s += fmt::format(" provider {}", *provider);
  return s + fmt::format(" rank {} {}", rank, to_string(source));
}

Record& RecordTable::add(const RecordKey& key, Cell value) {
  const auto [it, fresh] = index_.emplace(key.packed(), static_cast<uint32_t>(records_.size()));
  if (!fresh) throw std::logic_error("record table: a second record for " + key.describe());
  records_.push_back({key, std::move(value)});
  return records_.back();
}

Record& RecordTable::put(const RecordKey& key, Cell value) {
  if (Record* r = find(key)) {
    r->value = std::move(value);
    return *r;
  }
  return add(key, std::move(value));
}

const Record* RecordTable::find(const RecordKey& key) const {
  const auto it = index_.find(key.packed());
  return it == index_.end() ? nullptr : &records_[it->second];
}

Record* RecordTable::find(const RecordKey& key) {
  const auto it = index_.find(key.packed());
  return it == index_.end() ? nullptr : &records_[it->second];
}

const Cell& RecordTable::at(const RecordKey& key) const {
  if (const Record* r = find(key)) return r->value;
  throw std::out_of_range("record table: no record for " + key.describe());
}

Cell& RecordTable::at(const RecordKey& key) {
  if (Record* r = find(key)) return r->value;
  throw std::out_of_range("record table: no record for " + key.describe());
}

void RecordTable::clear() {
  records_.clear();
  index_.clear();
}

void RecordTable::reserve(size_t n) {
  records_.reserve(n);
  index_.reserve(n);
}

}  // namespace gs
