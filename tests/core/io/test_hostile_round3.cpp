// Hostile input, round 3 (issue 43): one regression test (or a few) per class of the third
// campaign, each generating its reproducer. Classes: 1 the JIT cache's trust, 2 terminal escapes
// on stdout, 3 modes kept and the plot's private copy, 4 non-UTF-8 paths, 5 outputs against
// inputs, 6 a probe that never touches the target's name, 7 checked sizes in --comm, 8 the plot
// script's tracebacks, 9 temporary files and fatal signals, 10 bounded "did you mean", 11 fleet
// summaries computed once, 12 an environment-named plot script, 13 physical GPU specs and finite
// predictions, 14/15 one short refusal line.
#include <fcntl.h>
#include <fmt/format.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/inotify.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <nlohmann/json.hpp>
#include <set>
#include <string>
#include <vector>

#include "core/gpu/gpu_spec.hpp"
#include "core/io/input_file.hpp"
#include "core/io/json_text.hpp"
#include "core/io/output_paths.hpp"
#include "core/io/temp_files.hpp"
#include "core/model/model_config.hpp"
#include "core/model/moe_config.hpp"
#include "core/node/collectives.hpp"
#include "core/node/fleet.hpp"
#include "core/plan/plan.hpp"
#include "core/providers/jit_cache.hpp"
#include "core/recipes/recipe.hpp"
#include "core/report/report.hpp"
#include "core/util/error.hpp"
#include "core/util/suggest.hpp"
#include "core/util/text_util.hpp"
#include "test_util.hpp"

namespace {

namespace fs = std::filesystem;
using nlohmann::json;
using gs::test::Out;

constexpr double kSlow = gs::test::kSanitizerSlowdown;
const std::string kData = GS_TEST_DATA_DIR;
const std::string kScript = std::string(GS_SOURCE_DIR) + "/tools/gemmscope_plot.py";

fs::path scratch() {
  static const fs::path d = gs::test::scratch_dir_removed_at_exit("hostile3_test");
  return d;
}

// A new empty folder under the scratch folder (0700: the cache's rules want it private).
fs::path fresh_dir(const std::string& name) {
  const fs::path d = scratch() / name;
  std::error_code ec;
  fs::remove_all(d, ec);
  fs::create_directories(d);
  ::chmod(d.c_str(), 0700);
  ::chmod(scratch().c_str(), 0700);
  return d;
}

fs::path write(const fs::path& p, const std::string& bytes) {
  std::ofstream(p, std::ios::binary) << bytes;
  return p;
}

std::string q(const std::string& s) {
  std::string out = "'";
  for (char c : s) out += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return out + "'";
}

Out sh(const std::string& cmd, const fs::path& dir) { return gs::test::run_shell(cmd, dir); }
Out gemmscope(const std::string& args, const fs::path& dir) { return gs::test::run_gemmscope(args, dir); }

json load(const std::string& name) { return gs::read_json_file(kData + "/" + name, "test data"); }

std::string error_of(const std::function<void()>& f) { return gs::test::usage_error_of(f); }
double seconds_of(const std::function<void()>& f) { return gs::test::seconds_of(f); }

// One refusal line: exactly one newline, at most about 400 bytes, no control bytes.
void expect_one_short_line(const std::string& err) {
  EXPECT_EQ(std::count(err.begin(), err.end(), '\n'), 1) << err.substr(0, 300);
  EXPECT_LE(err.size(), 420u) << err.substr(0, 300);
  for (char c : err) EXPECT_TRUE(c == '\n' || static_cast<unsigned char>(c) >= 0x20) << err.substr(0, 300);
}

std::vector<std::string> temp_files_in(const fs::path& dir) {
  std::vector<std::string> out;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(dir, ec))
    if (e.path().filename().string().find(".tmp-") != std::string::npos) out.push_back(e.path().filename().string());
  return out;
}

bool have_python() { return std::system("python3 -c '' >/dev/null 2>&1") == 0; }

// The bytes a terminal would act on: ESC, BEL, other C0 controls but newline and tab, DEL, C1.
// Bytes that are not UTF-8 count too (a raw 0x9b is CSI to an 8-bit terminal).
bool has_terminal_controls(const std::string& s) {
  if (!gs::valid_utf8(s)) return true;
  for (size_t i = 0; i < s.size(); ++i) {
    const auto c = static_cast<unsigned char>(s[i]);
    if ((c < 0x20 && c != '\n' && c != '\t') || c == 0x7f) return true;
    if (c == 0xc2 && i + 1 < s.size() && static_cast<unsigned char>(s[i + 1]) <= 0x9f) return true;  // U+0080-U+009F
  }
  return false;
}

}  // namespace

// ---- class 1: the JIT cache trusts nothing it did not write ----

namespace {

gs::jit::CacheKey cache_key() {
  gs::jit::CacheKey k;
  k.kernel = "sm90_fp8_gemm_1d2d";
  k.source = "#include <x>\n&f<1, 2>";
  k.commit = "54e2261";
  k.header_hash = 0x1234;
  k.nvrtc_major = 13;
  k.arch = "sm_90a";
  k.options = {"-std=c++20"};
  return k;
}

// Runs `f` in a child process and says whether it finished within `seconds` (a FIFO or
// /dev/zero read by the old cache blocked or grew forever).
bool finishes_within(double seconds, const std::function<void()>& f) {
  const pid_t pid = ::fork();
  if (pid == 0) {
    f();
    std::_Exit(0);
  }
  const auto t0 = std::chrono::steady_clock::now();
  int st = 0;
  while (::waitpid(pid, &st, WNOHANG) == 0) {
    if (std::chrono::steady_clock::now() - t0 > std::chrono::duration<double>(seconds)) {
      ::kill(pid, SIGKILL);
      ::waitpid(pid, &st, 0);
      return false;
    }
    ::usleep(2000);
  }
  return WIFEXITED(st) && WEXITSTATUS(st) == 0;
}

}  // namespace

// A symlink planted at the old predictable temporary name (<stem>.cubin.tmp<PID>) or at the
// entry itself is never written through; a symlinked entry is never loaded.
TEST(JitCacheTrust, PlantedSymlinksAreNeverFollowed) {
  const fs::path d = fresh_dir("jit_symlinks");
  const fs::path cache_dir = d / "cache";
  fs::create_directory(cache_dir);
  ::chmod(cache_dir.c_str(), 0700);
  const fs::path victim = write(d / "victim", "precious");
  const gs::jit::DiskCache cache(cache_dir.string());
  const auto k = cache_key();
  const std::string entry = cache.path_for(k);
  fs::create_symlink(victim, entry + ".tmp" + std::to_string(::getpid()));
  std::string why;
  ASSERT_TRUE(cache.store(k, "cubin", why)) << why;
  EXPECT_EQ(gs::test::slurp(victim), "precious");
  EXPECT_FALSE(fs::is_symlink(entry));
  ASSERT_TRUE(cache.load(k).has_value());
  EXPECT_EQ(*cache.load(k), "cubin");
  // An entry replaced by a symlink to a file holding a valid entry: a miss, not a hit.
  write(d / "planted", gs::test::slurp(entry));
  fs::remove(entry);
  fs::create_symlink(d / "planted", entry);
  std::string miss;
  EXPECT_FALSE(cache.load(k, &miss).has_value());
  EXPECT_FALSE(miss.empty());
  // A store replaces the symlink itself; its target is untouched.
  ASSERT_TRUE(cache.store(k, "fresh", why)) << why;
  EXPECT_FALSE(fs::is_symlink(entry));
  EXPECT_EQ(*cache.load(k), "fresh");
  EXPECT_TRUE(temp_files_in(cache_dir).empty());
}

// A FIFO, a device and a huge file at an entry's name: a miss at once, nothing read.
TEST(JitCacheTrust, SpecialFilesAreMissesAtOnce) {
  const fs::path d = fresh_dir("jit_special");
  const gs::jit::DiskCache cache((d / "cache").string());
  const auto k = cache_key();
  std::string why;
  ASSERT_TRUE(cache.store(k, "cubin", why)) << why;  // creates the folder
  const std::string entry = cache.path_for(k);
  fs::remove(entry);
  ASSERT_EQ(::mkfifo(entry.c_str(), 0600), 0);
  EXPECT_TRUE(finishes_within(5 * kSlow, [&] { (void)cache.load(k); })) << "a FIFO entry blocked the load";
  EXPECT_FALSE(cache.load(k).has_value());
  fs::remove(entry);
  if (fs::exists("/dev/zero")) {
    fs::create_symlink("/dev/zero", entry);
    EXPECT_TRUE(finishes_within(5 * kSlow, [&] { (void)cache.load(k); })) << "/dev/zero was read";
    fs::remove(entry);
  }
  {
    const int fd = ::open(entry.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
    ASSERT_GE(fd, 0);
    ASSERT_EQ(::ftruncate(fd, static_cast<off_t>(gs::jit::kMaxCacheEntryBytes) + 1), 0);  // sparse
    ::close(fd);
  }
  EXPECT_FALSE(cache.load(k, &why).has_value());
  EXPECT_NE(why.find("larger than"), std::string::npos) << why;
}

// A folder or entry others can write, or another user's, is never used (as ssh and git treat
// their folders): a planted entry with a computable header is not a hit.
TEST(JitCacheTrust, FoldersAndEntriesOthersCanWriteAreNotUsed) {
  const fs::path d = fresh_dir("jit_owner");
  const fs::path dir = d / "cache";
  const gs::jit::DiskCache cache(dir.string());
  const auto k = cache_key();
  std::string why;
  ASSERT_TRUE(cache.store(k, "cubin", why)) << why;
  struct stat st {};
  ASSERT_EQ(::stat(dir.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0700u) << "the cache folder is created private";
  ASSERT_EQ(::stat(cache.path_for(k).c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0077, 0u) << "entries are private";
  // A folder anyone may write: not loaded from, not stored in, and the note says why.
  ::chmod(dir.c_str(), 0777);
  EXPECT_FALSE(cache.load(k).has_value());
  EXPECT_FALSE(cache.store(k, "cubin", why));
  EXPECT_NE(why.find("writable by others"), std::string::npos) << why;
  ::chmod(dir.c_str(), 0700);
  ASSERT_TRUE(cache.load(k).has_value());
  // A group-writable entry: a miss.
  ::chmod(cache.path_for(k).c_str(), 0660);
  EXPECT_FALSE(cache.load(k).has_value());
  ::chmod(cache.path_for(k).c_str(), 0600);
  // Another user's folder (a user's cache under `sudo -E`): driven by the owner the cache trusts.
  // As root the folder is given to "nobody"; otherwise the cache is told to trust another user.
  if (::geteuid() == 0) ASSERT_EQ(::chown(dir.c_str(), 65534, 65534), 0);
  const gs::jit::DiskCache strict(dir.string(), ::geteuid() == 0 ? 0 : ::geteuid() + 1);
  EXPECT_FALSE(strict.load(k).has_value());
  EXPECT_FALSE(strict.store(k, "cubin", why));
  EXPECT_NE(why.find("owned by user"), std::string::npos) << why;
}

// Entries carry the whole key and their payload's size and checksum: a truncated, extended or
// edited payload is a miss, as is an entry of another key at this name.
TEST(JitCacheTrust, EntriesAreVerifiedOnLoad) {
  const fs::path d = fresh_dir("jit_verify");
  const gs::jit::DiskCache cache((d / "cache").string());
  const auto k = cache_key();
  std::string why;
  const std::string bin(4096, 'c');
  ASSERT_TRUE(cache.store(k, bin, why)) << why;
  const std::string path = cache.path_for(k), good = gs::test::slurp(path);
  ASSERT_EQ(*cache.load(k), bin);
  for (const std::string& bad : {good.substr(0, good.size() - 1), good + "x",
                                 good.substr(0, good.size() - 10) + std::string(10, 'd')}) {
    write(path, bad);
    ::chmod(path.c_str(), 0600);
    EXPECT_FALSE(cache.load(k, &why).has_value());
    EXPECT_NE(why.find("checksum"), std::string::npos) << why;
  }
  // Every input of the compile is in the key: another NVRTC version or option is another entry.
  write(path, good);
  auto k2 = k;
  k2.nvrtc_minor = 1;
  auto k3 = k;
  k3.options.push_back("-lineinfo");
  EXPECT_NE(cache.path_for(k2), path);
  EXPECT_NE(cache.path_for(k3), path);
  // An entry of another key renamed to this name: its stored key differs.
  ASSERT_TRUE(cache.store(k2, bin, why)) << why;
  fs::rename(cache.path_for(k2), path);
  EXPECT_FALSE(cache.load(k, &why).has_value());
  EXPECT_NE(why.find("another key"), std::string::npos) << why;
}

// ---- class 2: no terminal escape of outside origin reaches stdout ----

namespace {

const std::string kEscapes = "\x1b]0;pwned\x07\x1b[2J\xc2\x9b" "1m";

// A measured result whose strings of outside origin carry terminal escapes.
fs::path escaped_result(const fs::path& d) {
  json doc = load("moe_mixtral_a.json");
  doc["device"]["name"] = "NVIDIA H100 80GB HBM3" + kEscapes;
  doc["config"]["name"] = "mixtral" + kEscapes;
  doc["config"]["source"] = "/tmp/x" + kEscapes + ".json";
  doc["notes"].push_back("FP8Current: a note" + kEscapes);
  json& cell = doc["gemms"][0]["results"]["training"]["FP8Block"];
  cell = json{{"status", "n/a"}, {"reason", "refused" + kEscapes}};
  return write(d / "escapes.json", doc.dump());
}

}  // namespace

TEST(CleanStdout, ReportAndMarkdownShowNoEscapes) {
  const fs::path d = fresh_dir("stdout_report");
  const fs::path f = escaped_result(d);
  for (const char* flags : {"", " --markdown"}) {
    SCOPED_TRACE(flags);
    const Out r = gemmscope("report " + q(f.string()) + flags, d);
    ASSERT_EQ(r.rc, 0) << r.err;
    EXPECT_NE(r.out.find("mixtral"), std::string::npos);
    EXPECT_FALSE(has_terminal_controls(r.out)) << r.out.substr(0, 400);
    EXPECT_NE(r.out.find("?]0;pwned?"), std::string::npos) << "shown, made harmless";
  }
}

TEST(CleanStdout, PredictAndDryRunHeaderShowNoEscapes) {
  const fs::path d = fresh_dir("stdout_predict");
  const Out p = gemmscope("predict " + q(escaped_result(d).string()) + " --gpu H200", d);
  ASSERT_EQ(p.rc, 0) << p.err;
  EXPECT_FALSE(has_terminal_controls(p.out)) << p.out.substr(0, 400);
  // config.json's model_type is printed in the dry run's header.
  const json cfg = {{"model_type", "llama" + kEscapes},  {"hidden_size", 512}, {"num_attention_heads", 8},
                    {"num_hidden_layers", 2}, {"intermediate_size", 1024}, {"vocab_size", 1000}};
  const fs::path c = write(d / "config.json", cfg.dump());
  const Out r = gemmscope("--config " + q(c.string()) + " --dry-run", d);
  ASSERT_EQ(r.rc, 0) << r.err;
  EXPECT_NE(r.out.find("llama"), std::string::npos);
  EXPECT_FALSE(has_terminal_controls(r.out)) << r.out.substr(0, 400);
  // One rule for both streams: stdout keeps its lines, stderr one line.
  EXPECT_EQ(gs::terminal_text("a\x1b[2Jb\n\tc\x9b"), "a?[2Jb\n\tc?");
  EXPECT_EQ(gs::printable("a\nb\xc2\x9b"), "a?b?");
}

// ---- class 3: modes kept, and the plot's copy of a result private and removed ----

TEST(ModesKept, OverwritingKeepsTheFilesMode) {
  const fs::path d = fresh_dir("modes");
  for (mode_t mode : {mode_t{0600}, mode_t{0640}, mode_t{0604}}) {
    SCOPED_TRACE(mode);
    const fs::path f = write(d / "r.json", "old");
    ASSERT_EQ(::chmod(f.c_str(), mode), 0);
    gs::write_file_atomic(f.string(), "new");
    struct stat st {};
    ASSERT_EQ(::stat(f.c_str(), &st), 0);
    EXPECT_EQ(st.st_mode & 0777, mode);
    EXPECT_EQ(gs::test::slurp(f), "new");
  }
  // The group (and, as root, the owner) where the system permits it.
  if (::geteuid() == 0) {
    const fs::path f = write(d / "owned.json", "old");
    ASSERT_EQ(::chown(f.c_str(), 65534, 65534), 0);
    gs::write_file_atomic(f.string(), "new");
    struct stat st {};
    ASSERT_EQ(::stat(f.c_str(), &st), 0);
    EXPECT_EQ(st.st_uid, 65534u);
    EXPECT_EQ(st.st_gid, 65534u);
  }
  // A new file: the umask's mode, as any program creates it.
  const mode_t old_mask = ::umask(027);
  gs::write_file_atomic((d / "new.json").string(), "x");
  ::umask(old_mask);
  struct stat st {};
  ASSERT_EQ(::stat((d / "new.json").c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0640u);
  // The CLI through the same writer.
  const fs::path j = write(d / "run.json", "old");
  ::chmod(j.c_str(), 0600);
  const Out r = gemmscope("--model llama-3-8b --dry-run --json " + q(j.string()), d);
  ASSERT_EQ(r.rc, 0) << r.err;
  ASSERT_EQ(::stat(j.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600u);
}

// `gemmscope plot` hands the script a copy of the result: 0600, and gone whatever ends the run,
// SIGTERM while the script runs included (a stand-in interpreter records the copy and waits).
TEST(ModesKept, PlotCopyIsPrivateAndRemovedOnSignals) {
  const fs::path d = fresh_dir("plot_copy");
  const fs::path fake = write(d / "fake_python.sh",
                              "#!/bin/sh\n"
                              "[ \"$1\" = -c ] && exit 0\n"  // the matplotlib probe
                              "stat -c %a \"$2\" > " + q((d / "mode").string()) + "\n"
                              "printf %s \"$2\" > " + q((d / "path.tmp").string()) + "\n"
                              "mv " + q((d / "path.tmp").string()) + " " + q((d / "path").string()) + "\n"
                              "exec sleep 30\n");
  ::chmod(fake.c_str(), 0755);
  // (SIGINT is ignored by a command a non-interactive shell starts in the background.)
  for (const char* sig : {"TERM", "HUP", "USR1"}) {
    SCOPED_TRACE(sig);
    fs::remove(d / "path");
    const Out r = sh("GEMMSCOPE_PYTHON=" + q(fake.string()) + " " + std::string(GS_BINARY) + " plot " +
                         q(kData + "/shapes_4.json") + " -o " + q((d / "chart.svg").string()) + " & pid=$!; " +
                         "for i in $(seq 400); do [ -e " + q((d / "path").string()) + " ] && break; sleep 0.05; done; " +
                         "kill -" + sig + " $pid; wait $pid",
                     d);
    const std::string copy = gs::test::slurp(d / "path");
    ASSERT_FALSE(copy.empty()) << r.err;
    EXPECT_EQ(gs::test::slurp(d / "mode"), "600\n");
    EXPECT_FALSE(fs::exists(copy)) << copy << " left behind after SIG" << sig;
    EXPECT_GE(r.rc, 128) << "ended by the signal";
  }
}

// ---- class 4: a file name that is not UTF-8 is stored, never a lost run ----

TEST(NonUtf8Paths, StoredLosslesslyInEveryJsonOutput) {
  // One place: json_text never throws for an encoding, and escapes so that nothing is lost.
  json doc = {{"path", std::string("r\xff\\x.json")}, {std::string("k\xfe"), 1}, {"ok", "caf\xc3\xa9"}};
  std::string text;
  ASSERT_NO_THROW(text = gs::json_text(doc));
  const json back = json::parse(text);
  EXPECT_EQ(back["path"], "r\\xFF\\\\x.json");
  EXPECT_EQ(back["k\\xFE"], 1);
  EXPECT_EQ(back["ok"], "caf\xc3\xa9") << "valid UTF-8 is written as it is";
  // The CLI: --config, a routing file, predict --json.
  const fs::path d = fresh_dir("non_utf8");
  const std::string bad = "c\xff";
  fs::copy_file(kData + "/configs/mixtral_8x7b.json", d / (bad + ".json"));
  Out r = gemmscope("--config " + q((d / (bad + ".json")).string()) + " --dry-run --json " + q((d / "a.json").string()), d);
  ASSERT_EQ(r.rc, 0) << r.err;
  const json a = gs::read_json_file((d / "a.json").string(), "test");
  EXPECT_NE(a.dump().find("c\\\\xFF.json"), std::string::npos) << "the path is kept, escaped";
  EXPECT_FALSE(has_terminal_controls(r.out));
  write(d / (bad + "r.json"), json(std::vector<int>(8, 8192)).dump());
  r = gemmscope("--model mixtral-8x7b --routing " + q("file:" + (d / (bad + "r.json")).string()) +
                    " --dry-run --json " + q((d / "b.json").string()),
                d);
  ASSERT_EQ(r.rc, 0) << r.err;
  EXPECT_NO_THROW(gs::read_json_file((d / "b.json").string(), "test"));
  fs::copy_file(kData + "/moe_mixtral_a.json", d / (bad + "run.json"));
  r = gemmscope("predict " + q((d / (bad + "run.json")).string()) + " --gpu H200 --json " + q((d / "p.json").string()), d);
  ASSERT_EQ(r.rc, 0) << r.err;
  EXPECT_NO_THROW(gs::read_json_file((d / "p.json").string(), "test"));
}

// ---- class 5: no output is an input or another output ----

TEST(OutputsVsInputs, EveryPairIsChecked) {
  const fs::path d = fresh_dir("aliasing");
  const std::string cfg = (d / "c.json").string();
  fs::copy_file(kData + "/configs/mixtral_8x7b.json", cfg);
  const std::string original = gs::test::slurp(cfg);
  ::link(cfg.c_str(), (d / "hard.json").c_str());
  const std::string routing = write(d / "r.json", json(std::vector<int>(8, 8192)).dump()).string();
  struct Case {
    std::string args, expect;
  };
  const std::vector<Case> cases = {
      {"--config " + q(cfg) + " --dry-run --json " + q(cfg), "is the --config file"},
      {"--config " + q(cfg) + " --dry-run --json " + q((d / "hard.json").string()), "is the --config file"},
      {"--config " + q(cfg) + " --dry-run --json " + q((d / "sub/../c.json").string()), "is the --config file"},
      {"--config " + q(cfg) + " --dry-run --csv " + q(cfg), "is the --config file"},
      {"--model mixtral-8x7b --routing " + q("file:" + routing) + " --dry-run --json " + q(routing), "is the --routing file"},
      {"--model mixtral-8x7b --dry-run --comm --expert-parallel 2 --json " + q((d / "x.json").string()) + " --comm-json " +
           q((d / "x.json").string()),
       "are the same file"},
      {"predict " + q(cfg) + " --gpu H200 --json " + q((d / "hard.json").string()), "is the run file"},
      // The whole step's Chrome trace is an output like the others.
      {"--config " + q(cfg) + " --dry-run --trace " + q(cfg), "is the --config file"},
      {"--model llama-3-8b --dry-run --json " + q((d / "t.json").string()) + " --trace " + q((d / "t.json").string()),
       "are the same file"},
  };
  fs::create_directories(d / "sub");
  for (const Case& c : cases) {
    SCOPED_TRACE(c.args);
    const Out r = gemmscope(c.args, d);
    EXPECT_EQ(r.rc, 2) << r.err;
    EXPECT_NE(r.err.find(c.expect), std::string::npos) << r.err;
    expect_one_short_line(r.err);
    EXPECT_EQ(gs::test::slurp(cfg), original);
    EXPECT_EQ(gs::test::slurp(routing), json(std::vector<int>(8, 8192)).dump());
  }
  // plot: the chart is never the result it draws.
  const std::string chart_named = (d / "r.svg").string();
  fs::copy_file(kData + "/shapes_4.json", chart_named);
  const Out p = gemmscope("plot " + q(chart_named) + " -o " + q(chart_named), d);
  EXPECT_EQ(p.rc, 2) << p.err;
  EXPECT_NE(p.err.find("is the result file"), std::string::npos) << p.err;
  EXPECT_EQ(gs::test::slurp(chart_named), gs::test::slurp(kData + "/shapes_4.json"));
  // The GPU spec database a run reads.
  const std::string db = (d / "gpus.json").string();
  fs::copy_file(std::string(GS_SOURCE_DIR) + "/data/gpus.json", db);
  const Out g2 = sh("GEMMSCOPE_GPU_SPECS=" + q(db) + " " + std::string(GS_BINARY) + " --model llama-3-8b --dry-run --json " + q(db), d);
  EXPECT_EQ(g2.rc, 2) << g2.err;
  EXPECT_NE(g2.err.find("GPU spec database"), std::string::npos) << g2.err;
  EXPECT_EQ(gs::test::slurp(db), gs::test::slurp(std::string(GS_SOURCE_DIR) + "/data/gpus.json"));
  // predict's priors and measured prediction errors, named by the environment or --band-errors.
  for (const char* name : {"priors.json", "predict_errors.json"}) {
    SCOPED_TRACE(name);
    const std::string shipped = std::string(GS_SOURCE_DIR) + "/data/" + name;
    const std::string copy = (d / name).string();
    fs::copy_file(shipped, copy, fs::copy_options::overwrite_existing);
    const bool priors = std::string(name) == "priors.json";
    const std::string env = priors ? "GEMMSCOPE_PRIORS=" + q(copy) + " " : "";
    const std::string flag = priors ? "" : " --band-errors " + q(copy);
    const Out pr = sh(env + std::string(GS_BINARY) + " predict --model llama-3-8b --gpu H200" + flag + " --json " + q(copy), d);
    EXPECT_EQ(pr.rc, 2) << pr.err;
    EXPECT_NE(pr.err.find(priors ? "is the priors file" : "is the --band-errors file"), std::string::npos) << pr.err;
    expect_one_short_line(pr.err);
    EXPECT_EQ(gs::test::slurp(copy), gs::test::slurp(shipped));
  }
}

// ---- class 6: the output check never creates or removes the target's own name ----

TEST(OutputProbe, NeverTouchesTheTargetsName) {
  const fs::path d = fresh_dir("probe");
  const int fd = ::inotify_init1(IN_NONBLOCK | IN_CLOEXEC);
  if (fd < 0) GTEST_SKIP() << "no inotify";
  ASSERT_GE(::inotify_add_watch(fd, d.c_str(), IN_CREATE | IN_DELETE | IN_MOVED_FROM | IN_MOVED_TO), 0);
  gs::check_output_path((d / "target.json").string(), "--json");
  std::vector<std::string> touched;
  alignas(struct inotify_event) char buf[65536];
  for (ssize_t n; (n = ::read(fd, buf, sizeof buf)) > 0;)
    for (char* p = buf; p < buf + n;) {
      const auto* e = reinterpret_cast<const struct inotify_event*>(p);
      if (e->len > 0) touched.emplace_back(e->name);
      p += sizeof(struct inotify_event) + e->len;
    }
  ::close(fd);
  EXPECT_FALSE(touched.empty()) << "the folder is probed";
  for (const std::string& t : touched) EXPECT_NE(t, "target.json");
  EXPECT_FALSE(fs::exists(d / "target.json"));
  EXPECT_TRUE(temp_files_in(d).empty());
}

// ---- class 7: sizes in --comm are checked, the bound named ----

TEST(CommSizes, OverflowAtTheDocumentedLimitsIsRefused) {
  // The largest plan the model checks accept (dimensions up to 2^24, 16,384 experts): the routed
  // experts' weights are 2^61 + 2^60 elements, their FP32 gradients beyond 2^63 bytes.
  gs::ModelConfig c = gs::find_preset("mixtral-8x7b").config;
  c.hidden_size = 1 << 23;
  c.moe.num_experts = 16384;
  c.moe.expert_intermediate_size = 1 << 23;
  c.moe.routing = "balanced";
  const gs::Plan p = gs::build_model_plan(c);
  const gs::CommLayout l = gs::layout_for(p, 2 * p.routing->expert_parallel, true, 1, gs::CommType::Fp32);
  const std::string err = error_of([&] { (void)gs::plan_collectives(p, l); });
  EXPECT_NE(err.find("--comm"), std::string::npos) << err;
  EXPECT_TRUE(err.find("2^53") != std::string::npos || err.find("64-bit") != std::string::npos) << err;
  // The byte count itself is checked: beyond 64 bits is a refusal, never a wrapped size.
  gs::Collective x{};
  x.what = "test rows";
  x.width = int64_t{1} << 40;
  EXPECT_NE(error_of([&] { (void)x.bytes_of_rows(int64_t{1} << 30, gs::CommType::Fp32); }).find("beyond 64-bit"),
            std::string::npos);
  // Within the bound, every size is exact and positive.
  const gs::Plan small = gs::build_model_plan(gs::find_preset("mixtral-8x7b").config);
  for (const gs::Collective& x :
       gs::plan_collectives(small, gs::layout_for(small, 2 * small.routing->expert_parallel, true, 1, gs::CommType::Fp32)))
    for (gs::CommType t : {x.type_bf16, x.type_fp8}) {
      EXPECT_GT(x.size_bytes(t), 0) << x.what;
      EXPECT_LE(x.size_bytes(t), gs::kMaxCollectiveBytes) << x.what;
    }
}

// ---- class 8: the plot script never ends in a traceback ----

TEST(PlotScript, OddInputsAreOneLineNotATraceback) {
  if (!have_python()) GTEST_SKIP() << "no python3";
  const fs::path d = fresh_dir("plot_tracebacks");
  // totals.<mode> a list (the script run alone on an edited result).
  json doc = load("shapes_4.json");
  for (const auto& mode : doc["modes"]) doc["totals"][mode.get<std::string>()] = json::array({1, 2});
  const fs::path f = write(d / "totals_list.json", doc.dump());
  Out r = sh("python3 " + q(kScript) + " " + q(f.string()) + " -o " + q((d / "c.svg").string()), d);
  EXPECT_EQ(r.rc, 2) << r.err;
  EXPECT_EQ(r.err.find("Traceback"), std::string::npos) << r.err;
  expect_one_short_line(r.err);
  // A "regular" file that reads like a device: /proc/kmsg (EAGAIN, or refused to a non-root user).
  if (fs::exists("/proc/kmsg")) {
    r = sh("python3 " + q(kScript) + " /proc/kmsg -o " + q((d / "c.svg").string()), d);
    EXPECT_EQ(r.rc, 2) << r.err;
    EXPECT_EQ(r.err.find("Traceback"), std::string::npos) << r.err;
    expect_one_short_line(r.err);
  }
  // A chart name that is not UTF-8: the "wrote" line names it without failing to encode it.
  const std::string code = R"PY(
import importlib.util, sys
spec = importlib.util.spec_from_file_location("gp", sys.argv[1]); gp = importlib.util.module_from_spec(spec); spec.loader.exec_module(gp)
sys.exit(gp._say_written("wrote %s (shapes chart)" % gp.shown(sys.argv[2])))
)PY";
  write(d / "say.py", code);
  r = sh("PYTHONIOENCODING=utf-8:strict python3 " + q((d / "say.py").string()) + " " + q(kScript) + " " +
             q((d / "c\xff.svg").string()),
         d);
  EXPECT_EQ(r.rc, 0) << r.err;
  EXPECT_NE(r.out.find("wrote "), std::string::npos) << r.out;
  EXPECT_TRUE(gs::valid_utf8(r.out));
}

// ---- class 9: every fatal signal removes the temporary file; SIGXFSZ is a message ----

namespace {

// A child writing big files over and over until `sig` ends it; whether it ended by it.
bool killed_mid_write(const fs::path& d, int sig) {
  const pid_t pid = ::fork();
  if (pid == 0) {
    const std::string text(size_t{64} << 20, 'x');
    for (int i = 0; i < 200; ++i) gs::write_file_atomic((d / "big.json").string(), text);
    std::_Exit(0);
  }
  const auto t0 = std::chrono::steady_clock::now();
  while (temp_files_in(d).empty() && std::chrono::steady_clock::now() - t0 < std::chrono::seconds(20)) ::usleep(200);
  ::kill(pid, sig);
  int st = 0;
  ::waitpid(pid, &st, 0);
  return WIFSIGNALED(st) && WTERMSIG(st) == sig;
}

}  // namespace

TEST(FatalSignals, EveryOneRemovesTheTemporaryFile) {
  for (int sig : {SIGHUP, SIGALRM, SIGUSR1, SIGUSR2}) {
    SCOPED_TRACE(strsignal(sig));
    const fs::path d = fresh_dir("fatal_signal");
    bool caught = false;
    for (int attempt = 0; attempt < 3 && !caught; ++attempt) {
      caught = killed_mid_write(d, sig);
      EXPECT_TRUE(temp_files_in(d).empty()) << temp_files_in(d).front();
    }
    EXPECT_TRUE(caught);
  }
}

// `ulimit -f`: the write fails with "File too large" (SIGXFSZ's default ended the run silently
// with status 153 and a truncated temporary file), the old file is kept.
TEST(FatalSignals, FileSizeLimitIsAMessage) {
  const fs::path d = fresh_dir("xfsz");
  const fs::path target = write(d / "r.json", "old");
  const pid_t pid = ::fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    struct rlimit rl {4096, 4096};
    ::setrlimit(RLIMIT_FSIZE, &rl);
    const std::string err = error_of([&] { gs::write_file_atomic(target.string(), std::string(1 << 20, 'x')); });
    std::_Exit(err.find(std::strerror(EFBIG)) != std::string::npos ? 0 : 1);
  }
  int st = 0;
  ::waitpid(pid, &st, 0);
  EXPECT_TRUE(WIFEXITED(st) && WEXITSTATUS(st) == 0) << "status " << st;
  EXPECT_EQ(gs::test::slurp(target), "old");
  EXPECT_TRUE(temp_files_in(d).empty());
  const Out r = sh("ulimit -f 4; " + std::string(GS_BINARY) + " --model llama-3-8b --dry-run --json " + q(target.string()), d);
  EXPECT_EQ(r.rc, 2) << r.err;
  EXPECT_NE(r.err.find(std::strerror(EFBIG)), std::string::npos) << r.err;
  EXPECT_EQ(gs::test::slurp(target), "old");
  EXPECT_TRUE(temp_files_in(d).empty());
  // A report beyond the limit on stdout: an error and 74, not a silent 153.
  const Out s = sh("ulimit -f 1; " + std::string(GS_BINARY) + " --model llama-3-8b --dry-run >" + q((d / "out.txt").string()), d);
  EXPECT_EQ(s.rc, 74) << s.err;
  EXPECT_NE(s.err.find("error writing to stdout"), std::string::npos) << s.err;
}

// ---- class 10: "did you mean" is bounded ----

TEST(DidYouMean, LongArgumentsCostNothing) {
  const std::string huge(130 << 10, 'x');
  std::vector<std::string> names;
  for (const gs::Preset& p : gs::presets()) names.push_back(p.name);
  EXPECT_LT(seconds_of([&] { EXPECT_TRUE(gs::suggestions(huge, names).empty()); }), 0.05 * kSlow);
  EXPECT_LT(seconds_of([&] { (void)error_of([&] { (void)gs::find_preset(huge); }); }), 0.05 * kSlow);
  EXPECT_LT(seconds_of([&] { (void)error_of([&] { (void)gs::precision_from_string(huge); }); }), 0.05 * kSlow);
  // The banded distance is the distance where it matters, and a bound beyond it.
  for (const auto& [a, b] : std::vector<std::pair<std::string, std::string>>{
           {"szie", "size"}, {"hidden-size", "hiden_size"}, {"", "abc"}, {"kitten", "sitting"}, {"abcdef", "badcfe"}})
    for (size_t limit = 0; limit < 8; ++limit) {
      const size_t full = gs::edit_distance(a, b);
      EXPECT_EQ(gs::bounded_edit_distance(a, b, limit), full <= limit ? full : limit + 1) << a << " " << b << " " << limit;
    }
  EXPECT_EQ(gs::suggestions("--hidden-szie", {"--hidden_size", "--hidden-size"}), std::vector<std::string>{"--hidden-size"});
  // The CLI: four unknown 120 KB options, and enum values, each refused at once in one short line.
  const fs::path d = fresh_dir("did_you_mean");
  const std::string big = "--" + std::string(120 << 10, 'q');  // one argument may hold 128 KiB
  const std::string arg = "--" + std::string(100 << 10, 'm');
  write(d / "args", big + "\n" + big + "x\n" + big + "y\n" + big + "z\n");
  for (const std::string& cmd : {std::string("$(cat args)"), "--model " + q(arg), "--mode " + q(arg), "--precisions " + q(arg),
                                 "predict --gpu " + q(arg), "plot x.json -o y.png --kind " + q(arg),
                                 "compare a.json b.json --mode " + q(arg)}) {
    SCOPED_TRACE(cmd.substr(0, 40));
    const auto t0 = std::chrono::steady_clock::now();
    const Out r = sh("cd " + q(d.string()) + " && " + std::string(GS_BINARY) + " " + cmd, d);
    EXPECT_LT(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count(), 2.0 * kSlow);
    EXPECT_EQ(r.rc, 2) << r.err.substr(0, 300);
    expect_one_short_line(r.err);
  }
}

// ---- class 11: fleet summaries are computed once ----

TEST(FleetWork, SummariesAreLinearInTheFile) {
  // Counting MoE layers walks no layer where no rule needs it; the closed form and the walk agree.
  gs::ModelConfig c = gs::find_preset("mixtral-8x7b").config;
  for (int64_t first : {0, 3, 100})
    for (const std::set<int64_t>& dense : {std::set<int64_t>{}, std::set<int64_t>{1, 5, 31, 40}})
      for (int64_t layers : {1, 32, 33}) {
        c.num_hidden_layers = layers;
        c.moe.first_dense_layers = first;
        c.moe.dense_layer_list = dense;
        int64_t walk = 0;
        for (int64_t i = 0; i < layers; ++i) walk += gs::is_moe_layer(c, i);
        EXPECT_EQ(gs::moe_layer_count(c), walk) << first << " " << layers;
      }
  // Many GPUs, each a MoE run declaring 65,536 layers: the summary was GPUs x precisions^2 x layers.
  json doc = load("moe_mixtral_a.json");
  doc["config"]["num_hidden_layers"] = 65536;
  const gs::RunResult run = gs::from_json(doc, "moe.json");
  std::vector<gs::FleetRun> runs;
  for (int g = 0; g < 1024; ++g) runs.push_back({fmt::format("GPU {}", g), run});
  gs::FleetSummary s;
  const double secs = seconds_of([&] { s = gs::summarize_fleet(runs, 0.03); });
  EXPECT_LT(secs, 0.5 * kSlow);
  ASSERT_EQ(s.gpus.size(), 1024u);
  ASSERT_TRUE(s.gpus[0].layer_ms[0].has_value());
  EXPECT_DOUBLE_EQ(*s.gpus[0].layer_ms[0], *gs::summarize_mode(run, 0).sums[0].moe_total);
}

// ---- class 12: an environment-named plot script, an interpreter that is not Python ----

TEST(PlotEnvironment, ScriptMustBeARegularFileAndTheChartMustExist) {
  const fs::path d = fresh_dir("plot_env");
  const std::string fifo = (d / "script.fifo").string();
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  fs::create_directories(d / "folder.py");
  const std::string run = std::string(GS_BINARY) + " plot " + q(kData + "/shapes_4.json") + " -o " + q((d / "c.svg").string());
  for (const auto& [script, expect] : {std::pair{fifo, "is not a regular file"}, std::pair{(d / "folder.py").string(), "is a directory"}}) {
    const auto t0 = std::chrono::steady_clock::now();
    const Out r = sh("GEMMSCOPE_PYTHON=true GEMMSCOPE_PLOT_SCRIPT=" + q(script) + " timeout 20 " + run, d);
    EXPECT_LT(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count(), 5.0);
    EXPECT_EQ(r.rc, 3) << r.err;
    EXPECT_NE(r.err.find(expect), std::string::npos) << r.err;
    expect_one_short_line(r.err);
  }
  // GEMMSCOPE_PYTHON=true "imports matplotlib" and "draws" by exiting 0: no chart, no success.
  const Out r = sh("GEMMSCOPE_PYTHON=true " + run, d);
  EXPECT_EQ(r.rc, 3) << r.err;
  EXPECT_NE(r.err.find("wrote no chart"), std::string::npos) << r.err;
  EXPECT_FALSE(fs::exists(d / "c.svg"));
  expect_one_short_line(r.err);
}

// ---- class 13: GPU specs in physical ranges; never an "ok" cell without a finite time ----

TEST(GpuSpecs, ValuesOutsidePhysicalRangesAreRefused) {
  const json db = gs::read_json_file(std::string(GS_SOURCE_DIR) + "/data/gpus.json", "test");
  ASSERT_NO_THROW((void)gs::parse_gpu_db(db, "gpus.json"));
  for (const auto& [path, value] : std::vector<std::pair<std::string, double>>{{"/gpus/0/tflops/BF16/value", 5e-324},
                                                                               {"/gpus/0/memory_bandwidth_gbs/value", 1e-300},
                                                                               {"/gpus/0/sm_count/value", 1e9},
                                                                               {"/gpus/0/boost_clock_mhz/value", 0.5}}) {
    json bad = db;
    bad[json::json_pointer(path)] = value;
    const std::string err = error_of([&] { (void)gs::parse_gpu_db(bad, "gpus.json"); });
    EXPECT_NE(err.find("must be from"), std::string::npos) << path << ": " << err;
  }
  // predict with such a file (the CLI): refused, never inf or nan printed with status 0.
  const fs::path d = fresh_dir("gpu_specs");
  json bad = db;
  for (auto& g : bad["gpus"])
    for (auto& [k, v] : g["tflops"].items())
      if (v.is_object()) v["value"] = 5e-324;
  write(d / "gpus.json", bad.dump());
  const Out r = sh("GEMMSCOPE_GPU_SPECS=" + q((d / "gpus.json").string()) + " " + std::string(GS_BINARY) +
                       " predict " + q(kData + "/moe_mixtral_a.json") + " --gpu H200 --json " + q((d / "p.json").string()),
                   d);
  EXPECT_EQ(r.rc, 2) << r.err;
  EXPECT_EQ(r.out.find("inf"), std::string::npos);
  EXPECT_FALSE(fs::exists(d / "p.json"));
}

// ---- classes 14, 15: one refusal line of at most about 400 bytes, everywhere ----

TEST(ShortLines, EveryQuotedValueIsClipped) {
  const fs::path d = fresh_dir("short_lines");
  const std::string v(100 << 10, '7');
  const std::string w = "x" + std::string(100 << 10, 'y');
  std::vector<std::string> cmds;
  for (const char* flag : {"--num-iters", "--num-warmup", "--seed", "--device", "--hidden_size", "--num_hidden_layers",
                           "--capacity-factor", "--step-other-ms", "--comm-iters", "--zero-stage", "--data-parallel"})
    for (const std::string& val : {v, w}) cmds.push_back(std::string(flag) + " " + q(val));
  cmds.push_back("--accuracy --dist " + q(w));
  cmds.push_back("--json " + q((d / std::string(255, 'n')).string()) + " --dry-run");
  cmds.push_back("--json " + q((d / std::string(250, 'n')).string()) + " --dry-run");
  cmds.push_back(q(w));
  for (const std::string& c : cmds) {
    SCOPED_TRACE(c.substr(0, 60));
    const Out r = gemmscope(c, d);
    EXPECT_EQ(r.rc, 2) << r.err.substr(0, 300);
    expect_one_short_line(r.err);
  }
  // The plot path: a dry run's 100 KB why_not_measured, a path over 4096 bytes.
  if (!have_python()) return;
  json doc = load("shapes_4.json");
  doc["dry_run"] = true;
  doc["dry_run_requested"] = false;
  doc["why_not_measured"] = std::string(100 << 10, 'w');
  const fs::path f = write(d / "dry.json", doc.dump());
  Out r = sh("python3 " + q(kScript) + " " + q(f.string()) + " -o " + q((d / "c.svg").string()), d);
  EXPECT_EQ(r.rc, 2) << r.err.substr(0, 300);
  expect_one_short_line(r.err);
  std::string deep = d.string();
  while (deep.size() < 5000) deep += "/" + std::string(200, 'p');
  r = sh("python3 " + q(kScript) + " " + q(deep + "/r.json") + " -o " + q((d / "c.svg").string()), d);
  EXPECT_EQ(r.rc, 2) << r.err.substr(0, 300);
  expect_one_short_line(r.err);
}
