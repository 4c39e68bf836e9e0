// Temporary files that must not outlive the process, whatever ends it: the temporary file an
// output is written through (write_file_atomic), the copy of a result `gemmscope plot` hands the
// chart script. A TempFile is removed by its destructor (a return or an exception) and, while it
// lives, by a handler of the signals that end a process by default and can be sent by a user, a
// terminal or the system: SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGALRM, SIGUSR1, SIGUSR2, SIGPIPE,
// SIGVTALRM and SIGPROF. The handler removes every live temporary file, passes the signal on to the
// child set with forward_signals_to() (the chart script), then lets the signal end the process as
// it would have (status 128 + signal in a shell). A signal whose disposition is not the default
// (ignored under nohup, or handled by the program) is left alone.
// While a TempFile lives, SIGXFSZ (a write beyond `ulimit -f`) is ignored when it had its
// default action (which ends the process silently with a core dump, status 153): the write fails
// with EFBIG instead, which the writer reports ("File too large") after removing its temporary file.
#pragma once
#include <sys/types.h>

#include <functional>
#include <optional>
#include <string>

namespace gs {

class TempFile {
 public:
  // Takes `name` (a file the caller has just created, with O_EXCL) into the set removed on a
  // fatal signal. Call it with those signals blocked between the creation and here
  // (BlockFatalSignals), so none lands in between.
  explicit TempFile(std::string name);
  ~TempFile();  // removes the file unless released
  TempFile(const TempFile&) = delete;
  TempFile& operator=(const TempFile&) = delete;

  const std::string& name() const { return name_; }
  // The file is no longer ours to remove (renamed over its target): forget it.
  void release();

 private:
  std::string name_;
  int slot_ = -1;
};

// The fatal signals above blocked for the lifetime of this object (creating a file and taking it
// into a TempFile, with nothing in between).
class BlockFatalSignals {
 public:
  BlockFatalSignals();
  ~BlockFatalSignals();
  BlockFatalSignals(const BlockFatalSignals&) = delete;
  BlockFatalSignals& operator=(const BlockFatalSignals&) = delete;

 private:
  unsigned char old_[128];  // a sigset_t, kept opaque here
};

// Creates a file with `create` (which makes it exclusively, puts its name in the string it is
// given and returns its descriptor, or -1 with errno set) with the fatal signals blocked, and takes
// it into `guard` when it succeeded, so no signal lands between the two. Returns the descriptor,
// or -1 with errno as `create` left it.
int create_guarded(const std::function<int(std::string& name)>& create, std::optional<TempFile>& guard);

// While a TempFile lives, a fatal signal is also sent to process `pid` (0: none), so that a
// child started to use the temporary file does not outlive it.
void forward_signals_to(pid_t pid);

}  // namespace gs
