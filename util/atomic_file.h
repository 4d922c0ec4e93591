// Atomic file replacement: the one way this project writes result files: a crash leaves the old file or the
// new one, never a torn one.
//
// write_file_atomic() writes to "<path>.tmp.<pid>" in the same directory, fsyncs it, renames it
// over <path> and fsyncs the directory, so a reader (or a crash, or kill -9) only ever sees the
// previous complete file or the new complete file — never a torn one.
#pragma once

#include <filesystem>
#include <string>
#include <string_view>

namespace rt {

// Replaces `path` with `contents`. Creates missing parent directories.
// Throws rt::Error naming the path on any error ("disk full while writing '<path>'" when the
// disk or quota is full, the failing system call otherwise); on error the previous file (if
// any) is untouched and the temporary file is removed.
void write_file_atomic(const std::filesystem::path& path, std::string_view contents);

// Makes `path` name the same file as `target` (an existing file), atomically as
// write_file_atomic: a hard link (no second copy of the bytes), else — on a filesystem without
// hard links — a symbolic link holding `target` relative to `path`'s folder. A previous `path` is
// replaced. Throws rt::Error naming both paths when neither link can be made.
void link_file_atomic(const std::filesystem::path& target, const std::filesystem::path& path);

// The last resort when write_file_atomic fails for want of space: writes `contents` over the
// start of the existing file `path` and cuts it there, using only blocks the file already holds
// (a full disk still accepts this on ext4, xfs and tmpfs). Not atomic: for a small status that
// must not keep saying something false (a summary's "running"). Returns false, writing nothing,
// when `path` does not exist, is smaller than `contents`, or a call fails.
bool overwrite_file_in_place(const std::filesystem::path& path, std::string_view contents);

// A hidden sibling of `path`, ".<name>.<what>.<pid>", for a file that is written, checked and
// only then written at `path` (export loads and runs what it wrote before it replaces anything
// there): removed when the object goes (an error, a stop), whatever it holds.
class ScratchSibling {
 public:
  ScratchSibling(const std::filesystem::path& path, const std::string& what);
  ~ScratchSibling();
  ScratchSibling(const ScratchSibling&) = delete;
  ScratchSibling& operator=(const ScratchSibling&) = delete;
  const std::filesystem::path& path() const { return scratch_; }

 private:
  std::filesystem::path scratch_;
};

// Reads a whole file. Throws rt::Error naming the path when it cannot be read.
std::string read_file(const std::filesystem::path& path);

}  // namespace rt
