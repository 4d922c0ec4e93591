// Helpers shared by every test binary: scratch directories and running our executables.
#pragma once

#include <filesystem>
#include <string>
#include <vector>

namespace rt::testing {

// A fresh directory under the system temp dir, removed (recursively) on destruction unless
// RT_KEEP_TEST_DIRS is set in the environment.
class ScratchDir {
 public:
  explicit ScratchDir(const std::string& prefix = "rt_test");
  ~ScratchDir();
  ScratchDir(const ScratchDir&) = delete;
  ScratchDir& operator=(const ScratchDir&) = delete;
  const std::filesystem::path& path() const { return path_; }
  std::filesystem::path operator/(const std::string& name) const { return path_ / name; }

 private:
  std::filesystem::path path_;
};

struct CommandResult {
  int exit_code = -1;  // 128 + signal when the process was killed by a signal.
  std::string output;  // stdout and stderr together.
};

// Runs `command` through /bin/sh and captures its combined output.
CommandResult run_command(const std::string& command);

// Why torchrun cannot start ranks here ("" when it can): not installed (python3-torch), or its
// elastic agent cannot create its store — Debian 13's torch 2.6 is built without libuv while its
// rendezvous asks for a libuv TCPStore whatever USE_LIBUV says ("use_libuv was requested but
// PyTorch was build without libuv support"). Probed once per process with a 1-rank /bin/true.
std::string torchrun_unusable_reason();

// Sends `sig` to this process the way a terminal or a launcher does (kill(2): the signal
// thread of util/signals.h takes it; raise(3) would leave it pending in a thread that blocks
// it) and returns once it was taken (false after 30 s). With the stop handlers installed.
bool signal_this_process(int sig);

// Path of one of our built executables (train, preprocess, profile-report).
std::string bin_path(const std::string& name);

// Path inside the source tree.
std::filesystem::path source_path(const std::string& relative);

// A whole file's contents ("" when it cannot be read).
std::string read_text(const std::filesystem::path& p);

// Whether `part` occurs in `text` (a command's output, a file's contents).
inline bool contains(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

}  // namespace rt::testing
