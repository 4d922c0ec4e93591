#include "util/path_kind.h"

#include <system_error>

namespace rt {
namespace fs = std::filesystem;
namespace {

// The status of `path` (links followed), or why it cannot be read.
std::string examine(const fs::path& path, fs::file_status& status) {
  std::error_code ec;
  status = fs::status(path, ec);
  if (ec && ec != std::errc::no_such_file_or_directory && ec != std::errc::not_a_directory) {
    return "cannot be examined: " + ec.message();
  }
  if (!fs::exists(status)) {
    std::error_code lec;
    return fs::is_symlink(fs::symlink_status(path, lec))
               ? "does not exist (a symbolic link to a missing file)"
               : "does not exist";
  }
  return "";
}

}  // namespace

std::string file_kind_text(const fs::file_status& status) {
  switch (status.type()) {
    case fs::file_type::regular:
      return "a regular file";
    case fs::file_type::directory:
      return "a folder";
    case fs::file_type::fifo:
      return "a FIFO";
    case fs::file_type::character:
      return "a character device";
    case fs::file_type::block:
      return "a block device";
    case fs::file_type::socket:
      return "a socket";
    case fs::file_type::symlink:
      return "a symbolic link";
    case fs::file_type::not_found:
    case fs::file_type::none:
      return "nothing (it does not exist)";
    default:
      return "something else";
  }
}

std::string not_a_regular_file(const fs::path& path) {
  fs::file_status status;
  if (std::string why = examine(path, status); !why.empty()) return why;
  if (fs::is_regular_file(status)) return "";
  return "is " + file_kind_text(status) + ", not a file";
}

bool something_is_at(const fs::path& path) {
  std::error_code ec;
  return fs::exists(fs::symlink_status(path, ec));
}

std::string not_a_folder(const fs::path& path) {
  fs::file_status status;
  if (std::string why = examine(path, status); !why.empty()) return why;
  if (fs::is_directory(status)) return "";
  return "is " + file_kind_text(status) + ", not a folder";
}

}  // namespace rt
