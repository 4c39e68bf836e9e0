// The data files built into the binary (core/io/embedded_data.hpp, from data/ at build time by
// cmake/embed_data.cmake): each file as it is, parsed by the same rules; a file overrides it.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include <nlohmann/json.hpp>

#include "core/gpu/gpu_spec.hpp"
#include "core/io/embedded_data.hpp"
#include "core/io/input_file.hpp"
#include "test_util.hpp"

using namespace gs;

TEST(EmbeddedData, IsEachDataFileByteForByte) {
  for (const char* name : {"gpus.json", "priors.json", "predict_errors.json"}) {
    const std::string file = test::slurp(std::string(GS_SOURCE_DIR) + "/data/" + name);
    ASSERT_FALSE(file.empty()) << name;
    const std::optional<std::string_view> built_in = embedded_data(name);
    ASSERT_TRUE(built_in) << name;
    EXPECT_EQ(std::string(*built_in), file) << name;
  }
  EXPECT_FALSE(embedded_data("other.json"));
  const GpuDb built_in = parse_gpu_db(parse_json_text(*embedded_data("gpus.json"), embedded_data_name("gpus.json")),
                                      embedded_data_name("gpus.json"));
  const GpuDb read = read_gpu_db_file(std::string(GS_SOURCE_DIR) + "/data/gpus.json");
  ASSERT_EQ(built_in.gpus.size(), read.gpus.size());
  for (size_t i = 0; i < read.gpus.size(); ++i) EXPECT_EQ(built_in.gpus[i].key, read.gpus[i].key);
  EXPECT_EQ(built_in.path, "the built-in copy of data/gpus.json");
  EXPECT_NE(built_in.match_device("NVIDIA H100 80GB HBM3"), nullptr);
}

#ifdef GS_BINARY
// The binary copied alone to another folder (a GPU node with only the driver) still predicts, from
// its built-in datasheets, priors and errors; a gpus.json beside it, or named by
// $GEMMSCOPE_GPU_SPECS, is read instead; a named file that does not exist is an error, never the
// built-in copy in its place.
TEST(EmbeddedData, BinaryCopiedAloneStillPredicts) {
  namespace fs = std::filesystem;
  const fs::path dir = test::scratch_dir("gpu_spec_alone");
  const fs::path bin = dir / "gemmscope";
  fs::copy_file(GS_BINARY, bin, fs::copy_options::overwrite_existing);
  fs::remove(dir / "gpus.json");
  test::Out r = test::run_shell(bin.string() + " predict --gpu H100 --model llama-3-8b", dir);
  EXPECT_EQ(r.rc, 0) << r.err;
  EXPECT_NE(r.out.find("PREDICTED"), std::string::npos) << r.out;
  r = test::run_shell(bin.string() + " predict --gpu L40S --model llama-3-8b", dir);
  EXPECT_EQ(r.rc, 0) << r.err;
  // A gpus.json next to it without one GPU (L40S: no prior names it) overrides the built-in database.
  const std::string all = test::slurp(std::string(GS_SOURCE_DIR) + "/data/gpus.json");
  nlohmann::json db = nlohmann::json::parse(all);
  nlohmann::json kept = nlohmann::json::array();
  for (const auto& g : db["gpus"])
    if (g["key"] != "L40S") kept.push_back(g);
  ASSERT_EQ(kept.size() + 1, db["gpus"].size());
  db["gpus"] = kept;
  std::ofstream(dir / "gpus.json") << db.dump(2);
  r = test::run_shell(bin.string() + " predict --gpu L40S --model llama-3-8b", dir);
  EXPECT_EQ(r.rc, 2) << r.out;
  EXPECT_NE(r.err.find("unknown GPU 'L40S'"), std::string::npos) << r.err;
  fs::remove(dir / "gpus.json");
  r = test::run_shell("GEMMSCOPE_GPU_SPECS=" + (dir / "missing.json").string() + " " + bin.string() +
                          " predict --gpu H100 --model llama-3-8b",
                      dir);
  EXPECT_EQ(r.rc, 2) << r.out;
  EXPECT_NE(r.err.find("GEMMSCOPE_GPU_SPECS names"), std::string::npos) << r.err;
  fs::remove(bin);
}
#endif
