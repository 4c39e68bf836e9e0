// Checks on the files a run writes (--json, --csv, -o), made before anything is measured so a
// long run never ends in an unwritable or clobbered file. Shared by `gemmscope` and `gemmscope plot`.
#pragma once
#include <string>

namespace gs {

// The rule for chart files, the same for `gemmscope -o` and `gemmscope plot -o` (and what
// gemmscope_plot.py accepts): the file name ends in .png, .svg or .pdf, in any case, after a
// non-empty stem; leading dots do not count as a stem (".png" and "..png" are refused, as Python's
// os.path.splitext sees no extension there). Returns "" when the path is fine, else the reason.
std::string chart_path_problem(const std::string& path);
// UsageError "{flag} {path}: {reason}" when chart_path_problem finds one.
void check_chart_path(const std::string& path, const std::string& flag);

// UsageError "{flag} {path}: ..." unless `path` can be written as a file: it must not end in '/',
// not be an existing directory or other non-regular file, and a probe file must be creatable in
// its directory (created with O_CREAT|O_EXCL under a unique name, then removed): a real test of
// the directory, which access(W_OK) is not (root passes it for /proc).
// The exact names are then proved creatable: the file itself when it does not exist yet, and
// its temporary name (temp_output_path) -- each created with O_EXCL and removed -- so a name too
// long for the file system is refused before the run, not after the report is printed.
void check_output_path(const std::string& path, const std::string& flag);

// The template of the temporary files `path` is written through: "PATH.tmp-XXXXXX", the X's
// replaced by mkstemp (created with O_EXCL: never an existing file, never through a symlink).
std::string temp_output_path(const std::string& path);

// Writes `text` to `path` atomically and safely: into a new temporary file in the same
// directory (temp_output_path, created exclusively), then renamed over `path`, so a reader never
// sees a half-written file, a failed write never clobbers the old one, and a symlink planted at
// any name is never followed. A write error names its reason ("cannot write 'x.json': No space
// left on device") and removes the temporary file; so does SIGINT or SIGTERM during the write
// (the signal then ends the process as it would have).
void write_file_atomic(const std::string& path, const std::string& text);

// Whether two output paths name the same file: compared absolute and normalised, with symlinks
// resolved in the part that exists ("x.json", "./x.json" and "d/../x.json" are the same file).
bool same_output_path(const std::string& a, const std::string& b);

}  // namespace gs
