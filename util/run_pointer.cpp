#include "util/run_pointer.h"

#include <fstream>
#include <string>

#include "util/atomic_file.h"

namespace rt {

namespace fs = std::filesystem;

void write_latest_pointer(const fs::path& out_path, const fs::path& run_dir) {
  std::error_code ec;
  const fs::path base = fs::weakly_canonical(out_path, ec);
  const fs::path target_abs = fs::weakly_canonical(run_dir, ec);
  fs::path target = target_abs.lexically_relative(base);
  // A run outside out_path (resumed from elsewhere) is named by its absolute path.
  if (target.empty() || *target.begin() == "..") target = target_abs;
  const fs::path latest = out_path / "latest";
  // rename(2) would replace a symlink to a directory by the file, but not a real directory.
  if (fs::is_symlink(latest, ec)) fs::remove(latest, ec);
  write_file_atomic(latest, target.string() + "\n");
}

namespace {

// The path a pointer file names (existing or not), or empty when `path` is no pointer file.
fs::path pointer_target(const fs::path& path) {
  std::error_code ec;
  if (fs::is_directory(path, ec) || !fs::is_regular_file(path, ec)) return {};
  // A pointer is one short line; anything larger is some other file.
  if (fs::file_size(path, ec) > 4096 || ec) return {};
  std::ifstream in(path);
  std::string line, rest;
  if (!std::getline(in, line) || line.empty() || (std::getline(in, rest) && !rest.empty())) return {};
  return fs::path(line).is_absolute() ? fs::path(line) : path.parent_path() / line;
}

}  // namespace

fs::path resolve_run_pointer(const fs::path& path) {
  std::error_code ec;
  const fs::path target = pointer_target(path);
  return !target.empty() && fs::is_directory(target, ec) ? target : path;
}

fs::path dangling_run_pointer(const fs::path& path) {
  if (path.filename() != "latest") return {};
  const fs::path target = pointer_target(path);
  std::error_code ec;
  if (target.empty() || fs::exists(target, ec)) return {};
  // A pointer's line is a path: printable text without NUL (a binary file is no pointer).
  for (const char c : target.string()) {
    if (static_cast<unsigned char>(c) < 0x20) return {};
  }
  return target;
}

}  // namespace rt
