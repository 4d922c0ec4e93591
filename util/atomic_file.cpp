#include "util/atomic_file.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <sstream>
#include <string>

#include "util/error.h"
#include "util/write_failure.h"

namespace rt {

std::string write_failure_message(const std::filesystem::path& path, const char* call, int err) {
  const std::string why = std::strerror(err);
  std::string what;
  if (err == ENOSPC || err == EDQUOT) {
    what = "disk full while writing '" + path.string() + "' (" + why + ")";
  } else if (err == EFBIG) {
    what = "file size limit reached while writing '" + path.string() + "' (" + why + "; see ulimit -f)";
  } else {
    what = "cannot " + std::string(call) + " '" + path.string() + "': " + why;
  }
  return what + "; the previous file, if any, is unchanged";
}

namespace {

std::string errno_text() { return std::strerror(errno); }

void fsync_directory(const std::filesystem::path& dir) {
  int fd = ::open(dir.empty() ? "." : dir.c_str(), O_RDONLY | O_DIRECTORY);
  if (fd < 0) return;  // Best effort: some filesystems refuse O_DIRECTORY opens.
  ::fsync(fd);
  ::close(fd);
}

}  // namespace

void write_file_atomic(const std::filesystem::path& path, std::string_view contents) {
  namespace fs = std::filesystem;
  const fs::path parent = path.parent_path();
  if (!parent.empty()) {
    std::error_code ec;
    fs::create_directories(parent, ec);
    if (ec) throw Error("cannot create directory '" + parent.string() + "': " + ec.message());
  }
  const fs::path tmp = path.string() + ".tmp." + std::to_string(::getpid());
  int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) throw Error("cannot create '" + tmp.string() + "': " + errno_text());
  const char* p = contents.data();
  size_t left = contents.size();
  while (left > 0) {
    ssize_t n = ::write(fd, p, left);
    if (n < 0) {
      if (errno == EINTR) continue;
      const int err = errno;
      ::close(fd);
      ::unlink(tmp.c_str());
      throw Error(write_failure_message(path, "write", err));
    }
    p += n;
    left -= static_cast<size_t>(n);
  }
  if (::fsync(fd) != 0) {
    const int err = errno;
    ::close(fd);
    ::unlink(tmp.c_str());
    throw Error(write_failure_message(path, "flush", err));
  }
  if (::close(fd) != 0) {
    const int err = errno;
    ::unlink(tmp.c_str());
    throw Error(write_failure_message(path, "flush", err));
  }
  if (::rename(tmp.c_str(), path.c_str()) != 0) {
    std::string why = errno_text();
    ::unlink(tmp.c_str());
    throw Error("cannot rename '" + tmp.string() + "' to '" + path.string() + "': " + why);
  }
  fsync_directory(parent);
}

void link_file_atomic(const std::filesystem::path& target, const std::filesystem::path& path) {
  namespace fs = std::filesystem;
  const fs::path tmp = path.string() + ".tmp." + std::to_string(::getpid());
  ::unlink(tmp.c_str());
  if (::link(target.c_str(), tmp.c_str()) != 0) {
    const std::string hard_why = errno_text();
    std::error_code ec;
    const fs::path relative =
        fs::relative(target, path.parent_path().empty() ? fs::path(".") : path.parent_path(), ec);
    if (ec || ::symlink((relative.empty() ? target : relative).c_str(), tmp.c_str()) != 0) {
      throw Error("cannot link '" + path.string() + "' to '" + target.string() + "': " + hard_why +
                  " (hard link), " + errno_text() + " (symbolic link)");
    }
  }
  if (::rename(tmp.c_str(), path.c_str()) != 0) {
    const std::string why = errno_text();
    ::unlink(tmp.c_str());
    throw Error("cannot rename '" + tmp.string() + "' to '" + path.string() + "': " + why);
  }
  fsync_directory(path.parent_path());
}

bool overwrite_file_in_place(const std::filesystem::path& path, std::string_view contents) {
  int fd = ::open(path.c_str(), O_WRONLY | O_CLOEXEC);
  if (fd < 0) return false;
  const off_t size = ::lseek(fd, 0, SEEK_END);
  bool ok = size >= static_cast<off_t>(contents.size());
  size_t done = 0;
  while (ok && done < contents.size()) {
    const ssize_t n = ::pwrite(fd, contents.data() + done, contents.size() - done, static_cast<off_t>(done));
    if (n < 0 && errno == EINTR) continue;
    ok = n > 0;
    if (ok) done += static_cast<size_t>(n);
  }
  ok = ok && ::ftruncate(fd, static_cast<off_t>(contents.size())) == 0 && ::fsync(fd) == 0;
  return ::close(fd) == 0 && ok;
}

ScratchSibling::ScratchSibling(const std::filesystem::path& path, const std::string& what)
    : scratch_(path.parent_path() /
               ("." + path.filename().string() + "." + what + "." + std::to_string(::getpid()))) {}

ScratchSibling::~ScratchSibling() {
  std::error_code ec;
  std::filesystem::remove(scratch_, ec);
}

std::string read_file(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw Error("cannot open '" + path.string() + "': " + errno_text());
  std::ostringstream ss;
  ss << in.rdbuf();
  if (in.bad()) throw Error("cannot read '" + path.string() + "'");
  return ss.str();
}

}  // namespace rt
