// The GPU spec database built into the binary (core/gpu/gpu_spec.hpp: embedded_gpu_db_text, from
// data/gpus.json at build time by cmake/embed_gpus.cmake): the file as it is, parsed by the same
// rules; a gpus.json file overrides it.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include <nlohmann/json.hpp>

#include "core/gpu/gpu_spec.hpp"
#include "test_util.hpp"

using namespace gs;

TEST(GpuSpecEmbedded, IsDataGpusJsonByteForByte) {
  const std::string file = test::slurp(std::string(GS_SOURCE_DIR) + "/data/gpus.json");
  ASSERT_FALSE(file.empty());
  EXPECT_EQ(std::string(embedded_gpu_db_text()), file);
  const GpuDb built_in = embedded_gpu_db();
  const GpuDb read = read_gpu_db_file(std::string(GS_SOURCE_DIR) + "/data/gpus.json");
  ASSERT_EQ(built_in.gpus.size(), read.gpus.size());
  for (size_t i = 0; i < read.gpus.size(); ++i) EXPECT_EQ(built_in.gpus[i].key, read.gpus[i].key);
  EXPECT_EQ(built_in.path, kEmbeddedGpuDbName);
  EXPECT_NE(built_in.match_device("NVIDIA H100 80GB HBM3"), nullptr);
}

#ifdef GS_BINARY
// The binary copied alone to another folder (a GPU node with only the driver) still predicts; a
// gpus.json beside it, or named by $GEMMSCOPE_GPU_SPECS, is read instead; a named file that does
// not exist is an error, never the built-in copy in its place.
TEST(GpuSpecEmbedded, BinaryCopiedAloneStillHasItsDatasheets) {
  namespace fs = std::filesystem;
  const fs::path dir = test::scratch_dir("gpu_spec_alone");
  const fs::path bin = dir / "gemmscope";
  fs::copy_file(GS_BINARY, bin, fs::copy_options::overwrite_existing);
  fs::remove(dir / "gpus.json");
  test::Out r = test::run_shell(bin.string() + " predict --gpu H100 --model llama-3-8b", dir);
  EXPECT_EQ(r.rc, 0) << r.err;
  EXPECT_NE(r.out.find("PREDICTED"), std::string::npos) << r.out;
  // A gpus.json next to it with one entry overrides the built-in database.
  const std::string one = test::slurp(std::string(GS_SOURCE_DIR) + "/data/gpus.json");
  nlohmann::json db = nlohmann::json::parse(one);
  nlohmann::json only = nlohmann::json::array();
  for (const auto& g : db["gpus"])
    if (g["key"] == "H100") only.push_back(g);
  db["gpus"] = only;
  std::ofstream(dir / "gpus.json") << db.dump(2);
  r = test::run_shell(bin.string() + " predict --gpu B200 --model llama-3-8b", dir);
  EXPECT_EQ(r.rc, 2) << r.out;
  EXPECT_NE(r.err.find("unknown GPU 'B200'"), std::string::npos) << r.err;
  fs::remove(dir / "gpus.json");
  r = test::run_shell("GEMMSCOPE_GPU_SPECS=" + (dir / "missing.json").string() + " " + bin.string() +
                          " predict --gpu H100 --model llama-3-8b",
                      dir);
  EXPECT_EQ(r.rc, 2) << r.out;
  EXPECT_NE(r.err.find("GEMMSCOPE_GPU_SPECS names"), std::string::npos) << r.err;
  fs::remove(bin);
}
#endif
