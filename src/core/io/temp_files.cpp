#include "core/io/temp_files.hpp"

#include <signal.h>
#include <unistd.h>

#include <cstring>
#include <stdexcept>

namespace gs {

namespace {

// Everything the handler reads is fixed storage (nothing in a handler may allocate): a few slots
// of names, each live only while its name is a file of ours.
constexpr int kSlots = 8;
constexpr size_t kNameBytes = 8192;
char g_names[kSlots][kNameBytes];
volatile sig_atomic_t g_live[kSlots] = {};  // read by the handler: the name is a file to remove
bool g_used[kSlots] = {};                    // the slot belongs to a TempFile
volatile sig_atomic_t g_child = 0;

constexpr int kFatal[] = {SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGALRM, SIGUSR1, SIGUSR2, SIGPIPE, SIGVTALRM, SIGPROF};
constexpr int kNumFatal = sizeof kFatal / sizeof kFatal[0];

// Handlers are installed while any TempFile lives (`g_users`), and the previous dispositions
// restored after the last one.
int g_users = 0;
struct sigaction g_old[kNumFatal];
bool g_installed[kNumFatal] = {};
struct sigaction g_old_xfsz;
bool g_xfsz_ignored = false;

extern "C" void remove_temps_and_reraise(int sig) {
  const int saved = errno;
  for (int i = 0; i < kSlots; ++i)
    if (g_live[i]) ::unlink(g_names[i]);  // async-signal-safe
  if (g_child > 0) ::kill(static_cast<pid_t>(g_child), sig);
  // The default action, so the process ends as the signal meant (status 128 + sig in a shell):
  // the signal is blocked while this handler runs and is delivered when it returns.
  ::signal(sig, SIG_DFL);
  ::raise(sig);
  errno = saved;
}

void fatal_set(sigset_t& set) {
  sigemptyset(&set);
  for (int s : kFatal) sigaddset(&set, s);
}

void install() {
  struct sigaction sa {};
  sa.sa_handler = remove_temps_and_reraise;
  fatal_set(sa.sa_mask);  // one handler at a time
  for (int i = 0; i < kNumFatal; ++i) {
    struct sigaction cur {};
    g_installed[i] = false;
    if (::sigaction(kFatal[i], nullptr, &cur) != 0 || cur.sa_handler != SIG_DFL || (cur.sa_flags & SA_SIGINFO)) continue;
    g_installed[i] = ::sigaction(kFatal[i], &sa, &g_old[i]) == 0;
  }
  struct sigaction cur {};
  g_xfsz_ignored = false;
  if (::sigaction(SIGXFSZ, nullptr, &cur) == 0 && cur.sa_handler == SIG_DFL && !(cur.sa_flags & SA_SIGINFO)) {
    struct sigaction ign {};
    ign.sa_handler = SIG_IGN;
    sigemptyset(&ign.sa_mask);
    g_xfsz_ignored = ::sigaction(SIGXFSZ, &ign, &g_old_xfsz) == 0;
  }
}

void uninstall() {
  for (int i = 0; i < kNumFatal; ++i)
    if (g_installed[i]) ::sigaction(kFatal[i], &g_old[i], nullptr);
  if (g_xfsz_ignored) ::sigaction(SIGXFSZ, &g_old_xfsz, nullptr);
  g_child = 0;
}

}  // namespace

BlockFatalSignals::BlockFatalSignals() {
  static_assert(sizeof(sigset_t) <= sizeof old_, "sigset_t does not fit");
  sigset_t set;
  fatal_set(set);
  ::sigprocmask(SIG_BLOCK, &set, reinterpret_cast<sigset_t*>(old_));
}

BlockFatalSignals::~BlockFatalSignals() { ::sigprocmask(SIG_SETMASK, reinterpret_cast<sigset_t*>(old_), nullptr); }

TempFile::TempFile(std::string name) : name_(std::move(name)) {
  BlockFatalSignals block;  // the slots and handlers change with no handler running
  for (int i = 0; i < kSlots; ++i)
    if (!g_used[i]) {
      slot_ = i;
      g_used[i] = true;
      break;
    }
  if (slot_ < 0) throw std::logic_error("more than 8 temporary files at once");
  const size_t n = std::min(name_.size(), kNameBytes - 1);
  std::memcpy(g_names[slot_], name_.data(), n);
  g_names[slot_][n] = '\0';
  if (g_users++ == 0) install();
  g_live[slot_] = name_.size() < kNameBytes;  // a longer name cannot be a path open() accepted
}

void TempFile::release() {
  if (slot_ < 0) return;
  BlockFatalSignals block;
  g_live[slot_] = 0;
  g_used[slot_] = false;
  slot_ = -1;
  if (--g_users == 0) uninstall();
}

TempFile::~TempFile() {
  if (slot_ < 0) return;
  ::unlink(name_.c_str());
  release();
}

int create_guarded(const std::function<int(std::string& name)>& create, std::optional<TempFile>& guard) {
  BlockFatalSignals block;
  std::string name;
  const int fd = create(name);
  const int err = errno;
  if (fd >= 0) guard.emplace(name);
  errno = err;
  return fd;
}

void forward_signals_to(pid_t pid) { g_child = static_cast<sig_atomic_t>(pid); }

}  // namespace gs
