// Shared helpers of the end-to-end tests: they run the real `preprocess` and `train` binaries
// on a demo database made inside the test's scratch directory, then read what the run wrote.
#pragma once

#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <torch/script.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <sstream>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "support/test_support.h"
#include "tensorboard/tfevents.h"
#include "util/json.h"

namespace rt::e2e {

namespace fs = std::filesystem;
using rt::testing::bin_path;
using rt::testing::CommandResult;
using rt::testing::run_command;
using rt::testing::ScratchDir;

inline std::string quote(const std::string& s) { return "'" + s + "'"; }

// Builds <dir>/db from the built-in demo audio (a few seconds per file) with chunks of
// 2 × num_signal samples. Fails the test when either command fails.
inline fs::path make_demo_db(const fs::path& dir, double seconds_per_file = 3.0, int64_t num_signal = 8192) {
  const fs::path audio = dir / "audio", db = dir / "db";
  auto g = run_command(bin_path("preprocess") + " --generate_demo " + quote(audio.string()) +
                       " --demo_seconds " + std::to_string(seconds_per_file) + " --seed 1");
  EXPECT_EQ(g.exit_code, 0) << g.output;
  auto p = run_command(bin_path("preprocess") + " --input_path " + quote(audio.string()) + " --output_path " +
                       quote(db.string()) + " --num_signal " + std::to_string(num_signal));
  EXPECT_EQ(p.exit_code, 0) << p.output;
  return db;
}

// Recorded speech, for the checks that need a voice rather than tones: the eight spoken channel
// names that alsa-utils installs for speaker-test (/usr/share/sounds/alsa/{Front,Rear,Side}_*.wav,
// 48 kHz mono, about 11 s together), joined by sox into <dir>/speech.wav. scripts/setup.sh
// installs both. Fails the test, naming the package, when they are missing.
inline fs::path speech_fixture(const fs::path& dir) {
  const fs::path sounds = "/usr/share/sounds/alsa", out = dir / "speech.wav";
  std::string inputs;
  for (const char* name : {"Front_Left", "Front_Center", "Front_Right", "Side_Left", "Side_Right",
                           "Rear_Left", "Rear_Center", "Rear_Right"}) {
    const fs::path f = sounds / (std::string(name) + ".wav");
    EXPECT_TRUE(fs::is_regular_file(f))
        << f << " is missing: the speech fixture comes from Debian's alsa-utils "
        << "(scripts/setup.sh installs it)";
    inputs += " " + quote(f.string());
  }
  auto r = run_command("sox" + inputs + " " + quote(out.string()) + " 2>&1");
  EXPECT_EQ(r.exit_code, 0) << r.output;
  return out;
}

// Builds <dir>/db from synthetic reaching trials (`preprocess --generate_neural_demo <dir>/h5
// <demo_args>`, e.g. "--groups 1 --units 182 --trials 64 --seed 7", then the import). Fails the
// test when either command fails.
inline fs::path make_neural_db(const fs::path& dir, const std::string& demo_args) {
  const fs::path h5 = dir / "h5", db = dir / "db";
  auto g =
      run_command(bin_path("preprocess") + " --generate_neural_demo " + quote(h5.string()) + " " + demo_args);
  EXPECT_EQ(g.exit_code, 0) << g.output;
  auto i = run_command(bin_path("preprocess") + " --kind neural --input_path " + quote(h5.string()) +
                       " --output_path " + quote(db.string()));
  EXPECT_EQ(i.exit_code, 0) << i.output;
  return db;
}

// `train --config tiny_rave --db_path DB --out_path OUT --threads 1 <extra>`.
inline std::string tiny_train_command(const fs::path& db, const fs::path& out, const std::string& extra) {
  return bin_path("train") + " --config tiny_rave --db_path " + quote(db.string()) + " --out_path " +
         quote(out.string()) + " --threads 1 " + extra;
}

// The run directory a `train` process printed ("run directory: <path>"); empty if none.
inline fs::path run_dir_from_output(const std::string& output) {
  const std::string marker = "run directory: ";
  auto pos = output.rfind(marker);
  if (pos == std::string::npos) return {};
  auto end = output.find('\n', pos);
  return fs::path(output.substr(pos + marker.size(),
                                end == std::string::npos ? std::string::npos : end - pos - marker.size()));
}

// Every scalar of every events file in `run_dir`: tag → [(step, value)] in file order.
inline std::map<std::string, std::vector<std::pair<int64_t, float>>> read_scalars(const fs::path& run_dir) {
  std::map<std::string, std::vector<std::pair<int64_t, float>>> out;
  std::vector<fs::path> files;
  for (const auto& e : fs::directory_iterator(run_dir)) {
    if (e.path().filename().string().rfind("events.out.tfevents.", 0) == 0) files.push_back(e.path());
  }
  std::sort(files.begin(), files.end());
  for (const auto& f : files) {
    for (const auto& r : read_tfevents(f)) {
      if (r.kind == TbRecord::Kind::Scalar) out[r.tag].emplace_back(r.step, r.value);
    }
  }
  return out;
}

// All tensors (parameters and buffers, recursively) of a checkpoint file, by name.
inline std::map<std::string, torch::Tensor> checkpoint_tensors(const fs::path& path) {
  auto module = torch::jit::load(path.string());
  std::map<std::string, torch::Tensor> out;
  for (const auto& p : module.named_parameters(/*recurse=*/true)) out[p.name] = p.value;
  for (const auto& b : module.named_buffers(/*recurse=*/true)) out[b.name] = b.value;
  return out;
}

// A `train` process started in the background with its output in a log file.
class BackgroundProcess {
 public:
  BackgroundProcess(const std::string& command, const fs::path& log) : log_(log) {
    const std::string full = "exec " + command + " > " + quote(log.string()) + " 2>&1";
    pid_ = ::fork();
    if (pid_ == 0) {
      ::execl("/bin/sh", "sh", "-c", full.c_str(), static_cast<char*>(nullptr));
      ::_exit(127);
    }
  }
  ~BackgroundProcess() {
    if (pid_ > 0 && !reaped_) {
      ::kill(pid_, SIGKILL);
      ::waitpid(pid_, nullptr, 0);
    }
  }
  BackgroundProcess(const BackgroundProcess&) = delete;
  BackgroundProcess& operator=(const BackgroundProcess&) = delete;

  std::string log() const {
    std::ifstream in(log_);
    std::stringstream s;
    s << in.rdbuf();
    return s.str();
  }
  // Polls `done` every 50 ms until it holds (true) or the process ends / time runs out (false).
  bool wait_until(const std::function<bool()>& done, double timeout_s) {
    const auto t0 = std::chrono::steady_clock::now();
    while (std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() < timeout_s) {
      if (done()) return true;
      int status = 0;
      if (!reaped_ && ::waitpid(pid_, &status, WNOHANG) == pid_) {
        reaped_ = true;
        status_ = status;
        return done();
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    return false;
  }
  void signal(int sig) { ::kill(pid_, sig); }
  pid_t pid() const { return pid_; }
  // Waits for the process; its exit code, or 128 + signal when a signal killed it; -1 on timeout.
  int wait_exit(double timeout_s) {
    const auto t0 = std::chrono::steady_clock::now();
    while (!reaped_) {
      int status = 0;
      if (::waitpid(pid_, &status, WNOHANG) == pid_) {
        reaped_ = true;
        status_ = status;
        break;
      }
      if (std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() > timeout_s) return -1;
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    if (WIFEXITED(status_)) return WEXITSTATUS(status_);
    if (WIFSIGNALED(status_)) return 128 + WTERMSIG(status_);
    return -1;
  }

 private:
  fs::path log_;
  pid_t pid_ = -1;
  bool reaped_ = false;
  int status_ = 0;
};

// The highest N of the "step N/" progress lines in `log` (0 when none yet).
inline int64_t last_logged_step(const std::string& log) {
  int64_t last = 0;
  std::istringstream in(log);
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("step ", 0) != 0) continue;
    try {
      last = std::max<int64_t>(last, std::stoll(line.substr(5)));
    } catch (...) {
    }
  }
  return last;
}

}  // namespace rt::e2e
