// Checks on the files a run writes (--json, --csv, -o), made before anything is measured so a
// long run never ends in an unwritable or clobbered file. Shared by `gemmscope` and `gemmscope plot`.
#pragma once
#include <string>
#include <string_view>
#include <vector>

namespace gs {

// The rule for chart files, the same for `gemmscope -o` and `gemmscope plot -o` (and what
// gemmscope_plot.py accepts): the file name ends in .png, .svg or .pdf, in any case, after a
// non-empty stem; leading dots do not count as a stem (".png" and "..png" are refused, as Python's
// os.path.splitext sees no extension there). Returns "" when the path is fine, else the reason.
std::string chart_path_problem(const std::string& path);
// UsageError "{flag} {path}: {reason}" when chart_path_problem finds one.
void check_chart_path(const std::string& path, const std::string& flag);

// UsageError "{flag} {path}: ..." unless `path` can be written as a file: it must not end in '/',
// not be an existing directory or other non-regular file, and its temporary file
// (temp_output_path: a random name beside it, created with O_EXCL) must be creatable, then it is
// removed: a real test of the folder, which access(W_OK) is not (root passes it for /proc), and
// of the name's length (the temporary name is the longer), so a name too long for the file system
// is refused before the run, not after the report is printed. The target's own name is never
// created or removed (a concurrent run may be renaming its finished file onto it).
void check_output_path(const std::string& path, const std::string& flag);

// The template of the temporary files `path` is written through: "PATH.tmp-XXXXXX", the X's
// replaced by mkstemp (created with O_EXCL: never an existing file, never through a symlink).
std::string temp_output_path(const std::string& path);

// Writes `text` to `path` atomically and safely: into a new temporary file in the same
// directory (temp_output_path, created exclusively), then renamed over `path`, so a reader never
// sees a half-written file, a failed write never clobbers the old one, and a symlink planted at
// any name is never followed. A write error names its reason ("cannot write 'x.json': No space
// left on device") and removes the temporary file; so does SIGINT or SIGTERM during the write
// (the signal then ends the process as it would have) and the other fatal signals of
// core/io/temp_files.hpp; a write beyond `ulimit -f` fails with "File too large".
// An existing file keeps its permission bits, and its group (its owner too when run as root) where
// the system permits; a new one gets 0666 less the umask.
void write_file_atomic(const std::string& path, const std::string& text);

// Writes all of `text` to descriptor `fd` (retrying short writes and EINTR): 0, or the errno.
int write_all(int fd, std::string_view text);

// Whether two output paths name the same file: compared absolute and normalised, with symlinks
// resolved in the part that exists ("x.json", "./x.json" and "d/../x.json" are the same file).
bool same_output_path(const std::string& a, const std::string& b);

// Whether two paths are one file: the same device and inode when both exist (hard links and
// symlinks included), else same_output_path().
bool same_file(const std::string& a, const std::string& b);

// A file a command reads or writes, and what messages call it ("--json", "--config file").
struct NamedFile {
  std::string path, what;
};
// UsageError when an output is one of the inputs ("--json c.json is the --config file c.json: an
// output never replaces an input") or two outputs are one file ("--json x and --comm-json x are
// the same file"): every pair, by same_file(). Empty paths are skipped.
void check_distinct_files(const std::vector<NamedFile>& outputs, const std::vector<NamedFile>& inputs);

}  // namespace gs
