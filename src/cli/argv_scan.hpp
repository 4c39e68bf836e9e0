// Hand-scanned arguments of the commands that pass the rest of their command line on to worker
// runs (--all-gpus: one process per GPU, cmd_fleet.cpp; MPI: one run per rank, cmd_mpi.cpp): the
// one scanner for both, the few flags they read themselves, the ones they refuse, the rest passed
// on; and dispatch()'s question whether a flag is on the command line at all.
#pragma once
#include <fmt/format.h>

#include <optional>
#include <string>
#include <vector>

#include "core/util/error.hpp"
#include "core/io/input_file.hpp"
#include "core/io/output_paths.hpp"
#include "core/util/text_util.hpp"

namespace gs::cli {

// "--name VALUE" or "--name=VALUE" at argv[i]: the value (i advanced past it), or nullopt.
inline std::optional<std::string> take_value(int argc, char** argv, int& i, const std::string& name) {
  const std::string a = argv[i];
  if (a == name) {
    if (i + 1 >= argc) throw UsageError(name + " needs a value");
    return std::string(argv[++i]);
  }
  if (a.rfind(name + "=", 0) == 0) return a.substr(name.size() + 1);
  return std::nullopt;
}

// --fleet-threshold: a fraction ("0.03") or a percentage ("3%"), above 0 and below 10.
inline double parse_fleet_threshold(const std::string& v) {
  std::string t = trim(v);
  const bool pct = !t.empty() && t.back() == '%';
  if (pct) t.pop_back();
  const double x = parse_decimal_number(t, "--fleet-threshold");
  const double threshold = pct ? x / 100 : x;
  if (!(threshold > 0) || threshold >= 10)
    throw UsageError(fmt::format("--fleet-threshold must be above 0 (a fraction or a percentage), got '{}'",
                                 clip_text(printable(v), 40)));
  return threshold;
}

// What a worker-running command takes from its command line.
struct WorkerArgs {
  std::vector<std::string> pass;  // passed on to every worker run
  std::string json;               // --json: the fleet file
  std::string comm_json;          // --comm-json, where the command takes it itself
  double threshold = 0.03;        // --fleet-threshold
};

// How a worker-running command reads its command line.
struct WorkerScan {
  const char* self;                   // the flag that chose the command ("--all-gpus", "--mpi"): dropped
  std::vector<const char*> refused;   // flags it cannot be combined with
  const char* refused_why;            // "X cannot be combined with <refused_why>"
  bool takes_comm_json = false;       // --comm-json is its own (MPI: rank 0 writes it), not passed on
};

// argv[1..]: -q/--quiet and `self` dropped (every worker runs quiet), --fleet-threshold, --json and
// (takes_comm_json) --comm-json taken, a refused flag a UsageError, everything else passed on.
inline WorkerArgs scan_worker_args(int argc, char** argv, const WorkerScan& how) {
  WorkerArgs f;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == how.self || a == "-q" || a == "--quiet") continue;
    if (auto v = take_value(argc, argv, i, "--fleet-threshold")) {
      f.threshold = parse_fleet_threshold(*v);
      continue;
    }
    if (auto v = take_value(argc, argv, i, "--json")) {
      if (v->empty()) throw UsageError("--json is empty");
      f.json = *v;
      continue;
    }
    if (how.takes_comm_json)
      if (auto v = take_value(argc, argv, i, "--comm-json")) {
        if (v->empty()) throw UsageError("--comm-json is empty");
        f.comm_json = *v;
        continue;
      }
    for (const char* refused : how.refused)
      if (a == refused || a.rfind(std::string(refused) + "=", 0) == 0)
        throw UsageError(fmt::format("{} cannot be combined with {}", refused, how.refused_why));
    f.pass.push_back(a);
  }
  return f;
}

// Whether `flag` is one of the words of argv[1..].
inline bool has_flag(int argc, char** argv, const char* flag) {
  for (int i = 1; i < argc; ++i)
    if (std::string(argv[i]) == flag) return true;
  return false;
}

// The files a run of this command line reads (--config, a --routing file:PATH, the GPU spec
// database `spec_db` when not empty): what the commands that write files of their own (the fleet
// and MPI files) check their outputs against (check_distinct_files).
inline std::vector<NamedFile> run_inputs(int argc, char** argv, const std::string& spec_db) {
  std::vector<NamedFile> ins;
  for (int i = 1; i < argc; ++i) {
    if (auto v = take_value(argc, argv, i, "--config")) {
      ins.push_back({*v, "--config file"});
    } else if (auto r = take_value(argc, argv, i, "--routing")) {
      if (r->size() > 5 && iequals(r->substr(0, 5), "file:")) ins.push_back({r->substr(5), "--routing file"});
    }
  }
  if (!spec_db.empty()) ins.push_back({spec_db, "GPU spec database"});
  return ins;
}

}  // namespace gs::cli
