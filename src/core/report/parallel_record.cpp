// The "parallel" section of a result document (parallel_record.hpp).
#include "core/report/parallel_record.hpp"

#include <fmt/format.h>

#include "core/io/json_fields.hpp"
#include "core/util/error.hpp"

namespace gs {

using nlohmann::json;
using namespace json_fields;

namespace {

constexpr size_t kMaxNotes = 64;
constexpr size_t kMaxNoteChars = 2000;

// A size of the layout: a positive integer (etp and global_batch may be 0: "as tp", "one
// micro-batch per data-parallel rank").
template <class At>
Field<ParallelLayout> size(const char* key, At at, int64_t lo = 1) {
  return custom<ParallelLayout>(
      key, [=](const ParallelLayout& l, json& o) { o[key] = at(l); },
      [=](const json& o, ParallelLayout& l, const std::string& where) {
        const int64_t v = need<int64_t>(o, key, where);
        if (v < lo || v > (int64_t{1} << 30))
          throw UsageError(fmt::format("{}.{} must be an integer from {} to 2^30, got {}", where, key, lo, v));
        at(l) = v;
      });
}

const Fields<ParallelLayout>& layout_fields() {
  static const Fields<ParallelLayout> t = {
      derived<ParallelLayout>("layout", [](const ParallelLayout& l) -> std::optional<json> { return to_string(l); }),
      size("tp", [](auto& l) -> auto& { return l.tp; }),
      size("pp", [](auto& l) -> auto& { return l.pp; }),
      size("vpp", [](auto& l) -> auto& { return l.vpp; }),
      size("cp", [](auto& l) -> auto& { return l.cp; }),
      size("ep", [](auto& l) -> auto& { return l.ep; }),
      size("etp", [](auto& l) -> auto& { return l.etp; }, 0),
      size("dp", [](auto& l) -> auto& { return l.dp; }),
      size("micro_batch", [](auto& l) -> auto& { return l.micro_batch; }),
      size("global_batch", [](auto& l) -> auto& { return l.global_batch; }, 0),
      flag<ParallelLayout>("sequence_parallel", [](auto& l) -> auto& { return l.sequence_parallel; }),
      choice<ParallelLayout>("sharding", [](auto& l) -> auto& { return l.sharding; }, dp_sharding_names()),
      choice<ParallelLayout>("cp_comm", [](auto& l) -> auto& { return l.cp_comm; }, cp_comm_names()),
      choice<ParallelLayout>("recompute", [](auto& l) -> auto& { return l.recompute; }, recompute_names()),
      flag<ParallelLayout>("tp_comm_overlap", [](auto& l) -> auto& { return l.tp_comm_overlap; }),
      flag<ParallelLayout>("overlap_grad_reduce", [](auto& l) -> auto& { return l.overlap_grad_reduce; }),
      flag<ParallelLayout>("overlap_param_gather", [](auto& l) -> auto& { return l.overlap_param_gather; }),
      flag<ParallelLayout>("ep_comm_overlap", [](auto& l) -> auto& { return l.ep_comm_overlap; }),
      flag<ParallelLayout>("uneven_pipeline", [](auto& l) -> auto& { return l.uneven_pipeline; }),
  };
  return t;
}

// A list of notes (strings), at most kMaxNotes of kMaxNoteChars.
template <class T, class At>
Field<T> notes(const char* key, At at) {
  return custom<T>(
      key, [=](const T& v, json& o) { o[key] = at(v); },
      [=](const json& o, T& v, const std::string& where) {
        const json* x = find(o, key);
        if (!x || x->is_null()) return;
        if (!x->is_array() || x->size() > kMaxNotes)
          throw UsageError(fmt::format("{}.{} must be a list of at most {} strings", where, key, kMaxNotes));
        auto& out = at(v);
        out.clear();
        for (size_t i = 0; i < x->size(); ++i)
          out.push_back(clip_text(as<std::string>((*x)[i], fmt::format("{}.{}[{}]", where, key, i)), kMaxNoteChars));
      });
}

template <class T, class At>
Field<T> precision(const char* key, At at) {
  return custom<T>(
      key, [=](const T& v, json& o) { o[key] = to_string(at(v)); },
      [=](const json& o, T& v, const std::string& where) {
        at(v) = parsed_at(where + "." + key, need<std::string>(o, key, where), precision_from_string);
      });
}

const Fields<ParallelJobInfo>& job_fields() {
  static const Fields<ParallelJobInfo> t = {
      text<ParallelJobInfo>("model", [](auto& j) -> auto& { return j.model; }, {}, 200),
      text<ParallelJobInfo>("gpu", [](auto& j) -> auto& { return j.gpu_key; }, {}, 200),
      text<ParallelJobInfo>("gpu_name", [](auto& j) -> auto& { return j.gpu_name; }, {}, 200),
      text<ParallelJobInfo>("cluster", [](auto& j) -> auto& { return j.cluster_key; }, {}, 200),
      text<ParallelJobInfo>("cluster_name", [](auto& j) -> auto& { return j.cluster_name; }, {}, 200),
      text<ParallelJobInfo>("cluster_note", [](auto& j) -> auto& { return j.cluster_note; }, {}, kMaxNoteChars),
      custom<ParallelJobInfo>(
          "gpus_per_node", [](const ParallelJobInfo& j, json& o) { o["gpus_per_node"] = j.gpus_per_node; },
          [](const json& o, ParallelJobInfo& j, const std::string& where) {
            const int64_t v = need<int64_t>(o, "gpus_per_node", where);
            if (v < 1 || v > 1 << 20) throw UsageError(fmt::format("{}.gpus_per_node must be from 1 to 2^20, got {}", where, v));
            j.gpus_per_node = v;
          }),
      choice<ParallelJobInfo>("framework", [](auto& j) -> auto& { return j.framework; }, step_context_names()),
      // Written only when on (absent: off, as files from before it read).
      flag<ParallelJobInfo>("fp8_param_gather", [](auto& j) -> auto& { return j.fp8_param_gather; },
                            [](const ParallelJobInfo& j) { return j.fp8_param_gather; }),
  };
  return t;
}

const Fields<ParallelStepInfo>& step_info_fields() {
  static const Fields<ParallelStepInfo> t = {
      precision<ParallelStepInfo>("precision", [](auto& s) -> auto& { return s.precision; }),
      text<ParallelStepInfo>("basis", [](auto& s) -> auto& { return s.basis; }, {}, kMaxNoteChars),
      notes<ParallelStepInfo>("notes", [](auto& s) -> auto& { return s.notes; }),
  };
  return t;
}

// The refused layouts: {"rule": count}.
Field<LayoutSearchInfo> refused_field() {
  return custom<LayoutSearchInfo>(
      "refused", [](const LayoutSearchInfo& s, json& o) { o["refused"] = s.refused; },
      [](const json& o, LayoutSearchInfo& s, const std::string& where) {
        const json* x = find(o, "refused");
        if (!x || x->is_null()) return;
        if (!x->is_object() || x->size() > kMaxNotes)
          throw UsageError(fmt::format("{}.refused must be an object of at most {} rules", where, kMaxNotes));
        for (const auto& [rule, n] : x->items()) {
          const int64_t c = as<int64_t>(n, fmt::format("{}.refused.{}", where, clip_text(rule, 80)));
          if (c < 0) throw UsageError(fmt::format("{}.refused counts must be >= 0", where));
          s.refused[clip_text(rule, kMaxNoteChars)] = c;
        }
      });
}

// A count of the search: a non-negative integer.
template <class At>
Field<LayoutSearchInfo> count(const char* key, At at) {
  return custom<LayoutSearchInfo>(
      key, [=](const LayoutSearchInfo& s, json& o) { o[key] = at(s); },
      [=](const json& o, LayoutSearchInfo& s, const std::string& where) {
        const int64_t v = need<int64_t>(o, key, where);
        if (v < 0 || v > (int64_t{1} << 40)) throw UsageError(fmt::format("{}.{} must be from 0 to 2^40, got {}", where, key, v));
        at(s) = v;
      });
}

const Fields<LayoutSearchInfo>& search_fields() {
  static const Fields<LayoutSearchInfo> t = {
      count("gpus", [](auto& s) -> auto& { return s.gpus; }),
      count("global_batch", [](auto& s) -> auto& { return s.global_batch; }),
      precision<LayoutSearchInfo>("precision", [](auto& s) -> auto& { return s.precision; }),
      count("candidates", [](auto& s) -> auto& { return s.candidates; }),
      count("top", [](auto& s) -> auto& { return s.top; }),
      text<LayoutSearchInfo>("basis", [](auto& s) -> auto& { return s.basis; }, {}, kMaxNoteChars),
      refused_field(),
  };
  return t;
}

const Fields<ParallelRun>& section_fields() {
  static const Fields<ParallelRun> t = {
      object<ParallelRun>("job", [](auto& p) -> auto& { return p.job; }, job_fields()),
      object<ParallelRun>("layout", [](auto& p) -> auto& { return p.layout; }, layout_fields()),
      list<ParallelRun>("steps", [](auto& p) -> auto& { return p.steps; }, step_info_fields(), 16),
      object<ParallelRun>("search", [](auto& p) -> auto& { return p.search; }, search_fields()),
      notes<ParallelRun>("notes", [](auto& p) -> auto& { return p.notes; }),
  };
  return t;
}

}  // namespace

json parallel_section_json(const ParallelRun& p) {
  json j = json::object();
  write_fields(section_fields(), p, j);
  return j;
}

void read_parallel_section(const json* j, const std::string& where, RunResult& r) {
  r.parallel.reset();
  if (!j || j->is_null()) return;
  if (!j->is_object()) throw UsageError(where + " must be an object");
  for (const char* key : {"job", "layout"})
    if (const json* x = find(*j, key); !x || !x->is_object()) throw UsageError(fmt::format("{} has no object '{}'", where, key));
  ParallelRun p;
  read_fields(section_fields(), *j, p, where);
  r.parallel = std::move(p);
}

}  // namespace gs
