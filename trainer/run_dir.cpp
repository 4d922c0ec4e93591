#include "trainer/run_dir.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <iostream>
#include <random>

#include "config/config_history.h"
#include "util/atomic_file.h"
#include "util/error.h"
#include "util/path_kind.h"
#include "util/run_pointer.h"

namespace rt {

namespace fs = std::filesystem;

namespace {

std::string today() {
  const std::time_t now = std::time(nullptr);
  std::tm local{};
  localtime_r(&now, &local);
  char buf[16];
  std::strftime(buf, sizeof buf, "%Y-%m-%d", &local);
  return buf;
}

uint32_t random_u32() {
  thread_local std::mt19937 gen{std::random_device{}() ^ static_cast<uint32_t>(::getpid())};
  return gen();
}

}  // namespace

RunDirLock::RunDirLock(const fs::path& run_dir) {
  const fs::path file = run_dir / "train.lock";
  fd_ = ::open(file.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
  if (fd_ < 0)
    throw Error("cannot open the run directory's lock '" + file.string() + "': " + std::strerror(errno));
  if (::flock(fd_, LOCK_EX | LOCK_NB) != 0) {
    const int err = errno;
    char buf[32] = {};
    const ssize_t n = ::pread(fd_, buf, sizeof buf - 1, 0);
    ::close(fd_);
    fd_ = -1;
    if (err != EWOULDBLOCK) throw Error("cannot lock '" + file.string() + "': " + std::strerror(err));
    std::string pid = n > 0 ? std::string(buf, static_cast<size_t>(n)) : "";
    pid = pid.substr(0, pid.find_first_not_of("0123456789"));
    throw Error("run directory '" + run_dir.string() + "' is in use by another train process (pid " +
                (pid.empty() ? "unknown" : pid) + ", holding '" + file.string() +
                "'); two writers would mix their checkpoints and profiles: wait for it to end, or stop it");
  }
  const std::string pid = std::to_string(::getpid()) + "\n";
  if (::ftruncate(fd_, 0) != 0 ||
      ::pwrite(fd_, pid.data(), pid.size(), 0) != static_cast<ssize_t>(pid.size())) {
    std::cerr << "warning: could not write the pid into '" << file.string() << "': " << std::strerror(errno)
              << "\n";
  }
}

RunDirLock::~RunDirLock() {
  if (fd_ >= 0) ::close(fd_);  // releases the lock
}

std::vector<fs::path> remove_stale_temporaries(const fs::path& run_dir) {
  std::vector<fs::path> removed;
  std::error_code ec;
  for (fs::recursive_directory_iterator it(run_dir, fs::directory_options::skip_permission_denied, ec), end;
       !ec && it != end; it.increment(ec)) {
    if (!it->is_regular_file(ec)) continue;
    // "<file>.tmp.<pid>": write_file_atomic's and the checkpoint writer's temporary names.
    const std::string name = it->path().filename().string();
    const size_t at = name.rfind(".tmp.");
    if (at == std::string::npos || at == 0) continue;
    const std::string digits = name.substr(at + 5);
    if (digits.empty() || digits.size() > 9 || digits.find_first_not_of("0123456789") != std::string::npos)
      continue;
    const pid_t pid = static_cast<pid_t>(std::stol(digits));
    // A live process (or one we may not signal) may still be writing it.
    if (pid == ::getpid() || ::kill(pid, 0) == 0 || errno == EPERM) continue;
    std::error_code rm;
    if (fs::remove(it->path(), rm)) {
      std::cerr << "removed '" << it->path().string() << "', a temporary file left by process " << pid
                << " (no longer running)\n";
      removed.push_back(it->path());
    }
  }
  return removed;
}

RunDir create_run_dir(const fs::path& out_path, const std::string& name, bool point_latest) {
  // The name as shown in the message, control characters escaped ("\x0a").
  std::string shown;
  bool control = false;
  for (char c : name) {
    if (static_cast<unsigned char>(c) >= 0x20 && c != 0x7f) {
      shown += c;
      continue;
    }
    control = true;
    shown += std::string("\\x") + "0123456789abcdef"[(c >> 4) & 0xf] + "0123456789abcdef"[c & 0xf];
  }
  if (name.empty() || name.find('/') != std::string::npos || control) {
    throw Error("train.name = '" + shown +
                "' cannot name a run directory; expected a non-empty name without '/' or control characters "
                "(newlines, tabs)");
  }
  std::error_code ec;
  fs::create_directories(out_path, ec);
  if (ec) throw Error("cannot create train.out_path '" + out_path.string() + "': " + ec.message());
  const std::string prefix = name + "_" + today() + "_";
  for (int attempt = 0; attempt < 100; ++attempt) {
    char hex[8];
    std::snprintf(hex, sizeof hex, "%06x", random_u32() & 0xffffffu);
    const fs::path dir = out_path / (prefix + hex);
    // mkdir fails with EEXIST when another run took the name: then draw again.
    if (::mkdir(dir.c_str(), 0755) == 0) {
      auto lock = std::make_shared<RunDirLock>(dir);
      check_writable_dir(dir / "checkpoints", "the run's checkpoints folder");
      if (point_latest) write_latest_pointer(out_path, dir);
      return RunDir{dir, {}, false, std::move(lock), {}};
    }
    if (errno != EEXIST)
      throw Error("cannot create run directory '" + dir.string() + "': " + std::strerror(errno));
  }
  throw Error("cannot create a run directory '" + (out_path / prefix).string() +
              "XXXXXX': every name tried exists");
}

fs::path profile_dir(const ProfilingKeys& keys, const fs::path& run_dir, bool writer) {
  const std::string& chosen = keys.output_dir;
  const fs::path dir = chosen.empty() ? run_dir : fs::path(chosen);
  if (keys.any() || !writer)
    check_writable_dir(dir, chosen.empty() ? "the run directory" : "profiling.output_dir");
  return dir;
}

void check_writable_dir(const fs::path& dir, const std::string& role) {
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec) throw Error("cannot create " + role + " '" + dir.string() + "': " + ec.message());
  // access(2) does not say whether root may write, nor does it see every read-only mount: a
  // file created and removed does.
  const fs::path probe = dir / (".write_probe.tmp." + std::to_string(::getpid()));
  const int fd = ::open(probe.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
  if (fd < 0) {
    throw Error("cannot write into " + role + " '" + dir.string() + "': " + std::strerror(errno) +
                "; the run writes there, so it stops before its first step (make it writable, or choose "
                "another train.out_path / profiling.output_dir)");
  }
  ::close(fd);
  ::unlink(probe.c_str());
}

RunDir open_run_dir(const fs::path& run_dir, const fs::path& out_path) {
  std::error_code ec;
  if (const std::string why = not_a_folder(run_dir); !why.empty())
    throw Error("run directory '" + run_dir.string() + "' " + why);
  auto lock = std::make_shared<RunDirLock>(run_dir);
  check_writable_dir(run_dir, "the run directory");
  check_writable_dir(run_dir / "checkpoints", "the run's checkpoints folder");
  // `latest` already naming this run needs no write: a read-only out_path still resumes.
  const fs::path named = resolve_run_pointer(out_path / "latest");
  if (!fs::equivalent(named, run_dir, ec)) {
    fs::create_directories(out_path, ec);
    write_latest_pointer(out_path, run_dir);
  }
  return RunDir{run_dir, {}, true, std::move(lock), {}};
}

fs::path resolve_checkpoint(const std::string& ckpt, const fs::path& out_path) {
  if (ckpt.empty()) return {};
  std::error_code ec;
  if (ckpt == "last") {
    if (const fs::path gone = dangling_run_pointer(out_path / "latest"); !gone.empty()) {
      throw Error("train.ckpt = \"last\": '" + (out_path / "latest").string() + "' names the run '" +
                  gone.string() + "', which no longer exists (deleted or moved): name a checkpoint file");
    }
    const fs::path p = resolve_run_pointer(out_path / "latest") / "checkpoints" / "last.ckpt";
    if (!fs::is_regular_file(p, ec)) {
      throw Error(
          "train.ckpt = \"last\": no checkpoint at '" + p.string() +
          "' (expected checkpoints/last.ckpt in the run <train.out_path>/latest names, from an earlier run)");
    }
    return fs::canonical(p);  // fixed now: the new run re-points `latest`
  }
  if (const fs::path gone = dangling_run_pointer(ckpt); !gone.empty()) {
    throw Error("train.ckpt = '" + ckpt + "' is a `latest` pointer naming the run '" + gone.string() +
                "', which no longer exists (deleted or moved): name a checkpoint file or \"last\"");
  }
  if (const std::string why = not_a_regular_file(ckpt); !why.empty()) {
    throw Error("train.ckpt = '" + ckpt + "' " + why + " (expected a checkpoint file or \"last\")");
  }
  return fs::path(ckpt);
}

RunDir prepare_run_dir(const Config& config) {
  const RunKeys keys = run_keys(config);
  return prepare_run_dir(config, resolve_checkpoint(keys.ckpt, keys.out_path));
}

RunDir prepare_run_dir(const Config& config, const fs::path& ckpt) {
  return prepare_run_dir(config, ckpt, -1);
}

RunDir prepare_run_dir(const Config& config, const fs::path& ckpt, int64_t resume_step) {
  const RunKeys keys = run_keys(config);
  const fs::path out_path = keys.out_path;
  RunDir run;
  const fs::path existing = ckpt.empty() ? fs::path() : run_dir_of_checkpoint(ckpt);
  if (!existing.empty()) {
    run = open_run_dir(existing, out_path);
    remove_stale_temporaries(run.path);
    if (resume_step >= 0) run.previous_config = keep_previous_config(run.path, resume_step, config.to_toml());
  } else {
    // A smoke run is a few steps of its own: `latest` (what --ckpt last resumes) stays with the
    // real run, whether the smoke run ends, fails or is killed.
    run = create_run_dir(out_path, keys.name, !keys.smoke_test);
  }
  run.checkpoint = ckpt;
  write_run_config(run.path, config);
  return run;
}

void write_run_config(const fs::path& run_dir, const Config& config) {
  write_file_atomic(run_dir / "config.toml", config.to_toml());
}

}  // namespace rt
