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

fs::path resolve_run_pointer(const fs::path& path) {
  std::error_code ec;
  if (fs::is_directory(path, ec) || !fs::is_regular_file(path, ec)) return path;
  // A pointer is one short line; anything larger is some other file.
  if (fs::file_size(path, ec) > 4096 || ec) return path;
  std::ifstream in(path);
  std::string line, rest;
  if (!std::getline(in, line) || line.empty() || (std::getline(in, rest) && !rest.empty())) return path;
  const fs::path target = fs::path(line).is_absolute() ? fs::path(line) : path.parent_path() / line;
  return fs::is_directory(target, ec) ? target : path;
}

}  // namespace rt
