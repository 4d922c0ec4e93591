#include "util/profile_export.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <string_view>
#include <utility>

#include "util/error.h"
#include "util/json.h"
#include "util/profile_files.h"
#include "util/write_failure.h"

namespace rt {
namespace {

namespace fs = std::filesystem;

// "<out>.tmp.<pid>", written in blocks, fsynced and renamed over `out` by commit(); removed by
// the destructor when not committed.
class TemporaryFile {
 public:
  explicit TemporaryFile(fs::path out)
      : out_(std::move(out)), tmp_(out_.string() + ".tmp." + std::to_string(::getpid())) {
    std::error_code ec;
    if (!out_.parent_path().empty()) fs::create_directories(out_.parent_path(), ec);
    fd_ = ::open(tmp_.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd_ < 0) throw Error(write_failure_message(out_, "create", errno));
  }
  TemporaryFile(const TemporaryFile&) = delete;
  TemporaryFile& operator=(const TemporaryFile&) = delete;
  ~TemporaryFile() {
    if (fd_ >= 0) ::close(fd_);
    if (!committed_) ::unlink(tmp_.c_str());
  }

  void append(std::string_view text) {
    buffer_ += text;
    size_ += static_cast<int64_t>(text.size());
    if (buffer_.size() >= (1u << 20)) write_buffer();
  }

  // The bytes appended so far; rewind(size()) later drops what was appended since.
  int64_t size() const { return size_; }
  void rewind(int64_t size) {
    write_buffer();
    if (::ftruncate(fd_, static_cast<off_t>(size)) != 0 ||
        ::lseek(fd_, static_cast<off_t>(size), SEEK_SET) < 0) {
      throw Error(write_failure_message(out_, "truncate", errno));
    }
    size_ = size;
  }

  void commit() {
    write_buffer();
    if (::fsync(fd_) != 0) throw Error(write_failure_message(out_, "fsync", errno));
    const int fd = fd_;
    fd_ = -1;
    if (::close(fd) != 0) throw Error(write_failure_message(out_, "close", errno));
    if (::rename(tmp_.c_str(), out_.c_str()) != 0) throw Error(write_failure_message(out_, "rename", errno));
    committed_ = true;
    const fs::path dir = out_.parent_path().empty() ? fs::path(".") : out_.parent_path();
    const int dir_fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (dir_fd >= 0) {
      ::fsync(dir_fd);
      ::close(dir_fd);
    }
  }

 private:
  void write_buffer() {
    size_t done = 0;
    while (done < buffer_.size()) {
      const ssize_t n = ::write(fd_, buffer_.data() + done, buffer_.size() - done);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) throw Error(write_failure_message(out_, "write", n < 0 ? errno : EIO));
      done += static_cast<size_t>(n);
    }
    buffer_.clear();
  }

  fs::path out_, tmp_;
  int fd_ = -1;
  int64_t size_ = 0;
  bool committed_ = false;
  std::string buffer_;
};

// The list being written: "[\n", entries joined by ",\n", "\n]\n" ("[]\n" when none).
class ListWriter {
 public:
  explicit ListWriter(TemporaryFile& tmp) : tmp_(tmp) {}
  void entry(std::string_view text) {
    tmp_.append(entries_ == 0 ? "[\n  " : ",\n  ");
    tmp_.append(text);
    ++entries_;
  }
  void finish() { tmp_.append(entries_ == 0 ? "[]\n" : "\n]\n"); }
  int64_t entries() const { return entries_; }
  // Where the list stands, to go back to (the file's bytes and the entry count).
  std::pair<int64_t, int64_t> mark() const { return {tmp_.size(), entries_}; }
  void rewind(const std::pair<int64_t, int64_t>& m) {
    tmp_.rewind(m.first);
    entries_ = m.second;
  }

 private:
  TemporaryFile& tmp_;
  int64_t entries_ = 0;
};

// Copies the entry lines of one list file, as the writer wrote them ("  {…}," or "  {…}"), into
// `list` one line at a time; false at the first line that is neither an entry nor a bracket of
// the list (a line cut short, or a file in another layout), the caller then rewinds.
bool copy_entry_lines(const fs::path& file, ListWriter& list) {
  std::ifstream in(file, std::ios::binary);
  if (!in) throw Error("cannot read '" + file.string() + "': " + std::strerror(errno));
  std::string line;
  while (std::getline(in, line)) {
    const size_t first = line.find_first_not_of(" \t\r");
    if (first == std::string::npos) continue;
    const size_t last = line.find_last_not_of(" \t\r,");
    const std::string_view entry(line.data() + first,
                                 last == std::string::npos || last < first ? 0 : last - first + 1);
    if (entry == "[" || entry == "]" || entry == "[]") continue;
    try {
      if (entry.empty() || entry.front() != '{' || !Json::parse(entry).is_object()) return false;
    } catch (const std::exception&) {
      return false;
    }
    list.entry(entry);
  }
  if (in.bad()) throw Error("cannot read '" + file.string() + "': " + std::strerror(errno));
  return true;
}

}  // namespace

ProfileListExport export_profile_list(const fs::path& profile, const fs::path& out,
                                      std::vector<std::string>* notes) {
  std::vector<fs::path> files = profile_parts(profile);
  std::error_code ec;
  if (fs::exists(profile, ec)) files.push_back(profile);
  if (files.empty()) throw Error("'" + profile.string() + "' does not exist, nor any part of it");
  for (const auto& f : files) {
    if (!fs::is_regular_file(f, ec)) throw Error("cannot read '" + f.string() + "': not a file");
    if (fs::equivalent(f, out, ec)) {
      throw Error("cannot export '" + profile.string() + "' to '" + out.string() +
                  "': it is one of the profile's own files");
    }
  }
  ProfileListExport done;
  done.written = out;
  TemporaryFile tmp(out);
  ListWriter list(tmp);
  for (const auto& f : files) {
    const auto mark = list.mark();
    if (!copy_entry_lines(f, list)) {
      // Not one entry per line: what this file added goes, and the reader that takes any JSON
      // list, or the complete lines of one cut short (naming it in `notes`), reads it whole.
      list.rewind(mark);
      for (const Json& e : read_profile_list_file(f, notes)) {
        list.entry(e.dump(-1, ' ', false, Json::error_handler_t::replace));
      }
    }
    ++done.files;
  }
  list.finish();
  tmp.commit();
  done.entries = list.entries();
  return done;
}

}  // namespace rt
