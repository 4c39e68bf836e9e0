// The shipped data files the predict tests read: the GPU spec database, the published priors and
// the measured prediction errors (data/), and the test fixtures' result files.
#pragma once
#include <string>

#include "core/analysis/bands.hpp"
#include "core/analysis/priors.hpp"
#include "core/io/input_file.hpp"
#include "core/report/report.hpp"

namespace gs::test {

inline const GpuDb& shipped_gpus() {
  static const GpuDb d = read_gpu_db_file(std::string(GS_SOURCE_DIR) + "/data/gpus.json");
  return d;
}
inline const PriorDb& shipped_priors() {
  static const PriorDb p = read_priors_file(std::string(GS_SOURCE_DIR) + "/data/priors.json", shipped_gpus());
  return p;
}
inline const ErrorSet& shipped_errors() {
  static const ErrorSet e = read_error_set_file(std::string(GS_SOURCE_DIR) + "/data/predict_errors.json");
  return e;
}
inline RunResult fixture_run(const std::string& name) {
  return from_json(read_json_file(std::string(GS_TEST_DATA_DIR) + "/" + name), name);
}

}  // namespace gs::test
