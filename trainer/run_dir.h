// The run directory: <out_path>/<name>_<YYYY-MM-DD>_<6 hex>/, the <out_path>/latest pointer
// to it (a file naming it, util/run_pointer.h), config.toml, and resuming a run from its checkpoint.
#pragma once

#include <cstdint>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "config/config.h"
#include "config/run_keys.h"
#include "training/checkpoint.h"

namespace rt {

// An exclusive flock(2) on <run_dir>/train.lock, held while the object lives: one writer per
// run directory. The holder's pid is written into the file so that a refused writer can name it.
// The lock goes with the process (kill -9 included): a file left behind locks nothing.
class RunDirLock {
 public:
  // Throws rt::Error naming the run directory and the holder's pid when another process holds
  // the lock, or naming the lock file when it cannot be opened. Writes nothing when refused.
  explicit RunDirLock(const std::filesystem::path& run_dir);
  ~RunDirLock();
  RunDirLock(const RunDirLock&) = delete;
  RunDirLock& operator=(const RunDirLock&) = delete;

 private:
  int fd_ = -1;
};

struct RunDir {
  std::filesystem::path path;             // the run directory
  std::filesystem::path checkpoint;       // checkpoint to resume from; empty for a fresh run
  bool resumed = false;                   // true when `path` is an existing run reopened for resuming
  std::shared_ptr<RunDirLock> lock;       // held by the writer for the whole run
  std::filesystem::path previous_config;  // config.<step>.toml kept by this resume; empty if none
};

// Creates <out_path>/<name>_<YYYY-MM-DD (local date)>_<6 random hex>/ (and out_path), retrying
// with new hex digits if the name is taken, locks it (RunDirLock), then points <out_path>/latest
// at it (write_latest_pointer) unless `point_latest` is false (a --smoke_test run: `--ckpt last`
// keeps naming the real run).
// REQUIRES: `name` non-empty, without '/'. Throws rt::Error naming the path on failure.
RunDir create_run_dir(const std::filesystem::path& out_path, const std::string& name,
                      bool point_latest = true);

// Reuses an existing run directory (resuming): locks it first (RunDirLock: a second writer is
// refused before anything is written), checks that it and its checkpoints/ are writable
// (check_writable_dir), then points <out_path>/latest at it unless latest names it already (so
// a read-only out_path does not block `--ckpt last`).
// Throws rt::Error when `run_dir` is not a directory or another process holds it.
RunDir open_run_dir(const std::filesystem::path& run_dir, const std::filesystem::path& out_path);

// train.ckpt → checkpoint file: "" → empty path; "last" → checkpoints/last.ckpt of the run that
// <out_path>/latest names (util/run_pointer.h), made canonical; a path → that path. Throws
// rt::Error naming the path when the file does not exist.
std::filesystem::path resolve_checkpoint(const std::string& ckpt, const std::filesystem::path& out_path);

// What `train` does: with train.ckpt inside a run directory, reopen that directory; otherwise
// create a new one named train.name under train.out_path. Writes config.toml in both cases.
// Reopening removes the temporary files an interrupted writer left (remove_stale_temporaries).
RunDir prepare_run_dir(const Config& config);
// The same with the checkpoint already resolved (train resolves and loads it first).
RunDir prepare_run_dir(const Config& config, const std::filesystem::path& checkpoint);
// The same for a resume at `resume_step` (the checkpoint's step; -1: not known): a config.toml
// that differs from `config` is kept as config.<resume_step>.toml first (keep_previous_config).
RunDir prepare_run_dir(const Config& config, const std::filesystem::path& checkpoint, int64_t resume_step);

// Removes "<file>.tmp.<pid>" files under `run_dir` whose writer is no longer running (kill -9
// during a checkpoint or profile write), saying so on stderr; returns what it removed.
std::vector<std::filesystem::path> remove_stale_temporaries(const std::filesystem::path& run_dir);

// Creates `dir` if needed and proves it writable by creating and removing a file in it (root
// and read-only mounts included). Throws rt::Error naming `role` and `dir` and why. The trainer
// checks every folder the run will write into (the run directory, checkpoints/, the profiles'
// folder) before its first step: before, a read-only checkpoints/ was found at the first save.
void check_writable_dir(const std::filesystem::path& dir, const std::string& role);

// Where this rank writes its profiles: profiling.output_dir, or the run directory. Ranks on
// other machines write into the same path there, so every rank but rank 0 (`writer`), and any
// rank when a profile is asked for, proves the folder writable now (check_writable_dir).
std::filesystem::path profile_dir(const ProfilingKeys& keys, const std::filesystem::path& run_dir,
                                  bool writer);

// Writes <run_dir>/config.toml (config.to_toml()) with write_file_atomic.
void write_run_config(const std::filesystem::path& run_dir, const Config& config);

}  // namespace rt
