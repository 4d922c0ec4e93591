// The keys every run reads whatever its family, bound once by tables (config/options_table.h)
// to the structs the trainer and the commands take: the run directory, the schedule, the device
// and its math, the loader, the seed (RunKeys); the profilers (ProfilingKeys); the process group
// (DistributedKeys). config/config_schema.cpp declares the keys; these tables read them. A run
// reads each struct once, when it starts (trainer/job_start.h keeps them in its JobStart), and
// nothing outside config/ looks a key up by its name (scripts/check_key_lookups.py).
//
// A run directory's stored config.toml, read by profile-report for the settings its advice
// names, is here too (StoredSettings): the file may come from another version of the program,
// so it is read as TOML, key by key, without the schema's checks.
#pragma once

#include <cstdint>
#include <filesystem>
#include <map>
#include <string>
#include <vector>

#include "config/options_table.h"

namespace rt {

class Config;

// Each struct's members are its keys' values, read from a Config (whose schema holds the
// defaults); a struct made without a Config holds zeros and empty strings.
struct RunKeys {
  std::string family;  // model.family
  // The run directory (trainer/run_dir.h).
  std::string name;      // train.name ("" = the config file's stem)
  std::string out_path;  // train.out_path
  std::string ckpt;      // train.ckpt (a path, "last" or "")
  // The schedule.
  int64_t max_steps = 0;
  int64_t batch = 0;
  int64_t val_every = 0;
  int64_t save_every = 0;
  int64_t log_every = 0;
  bool progress = false;
  bool smoke_test = false;
  double smoke_test_memory_gib = 0;
  // The process: device, math, precision, threads, heap, seed.
  std::string device;
  std::string precision;
  bool tf32 = false;
  bool cudnn_benchmark = false;
  int64_t threads = 0;
  bool retain_freed_memory = false;
  int64_t seed = 0;
  // The loader, and the database (data.db_path) commands other than train name in messages.
  std::string db_path;
  int64_t workers = 0;
  int64_t prefetch = 0;
};

struct ProfilingKeys {
  bool timing = false;   // profiling.timing: timing_profile.json
  bool memory = false;   // profiling.memory: memory_profile.json
  bool enabled = false;  // profiling.enabled: the detailed trace
  std::string output_dir;
  int64_t log_every = 0;  // 0 = train.log_every
  int64_t timing_every = 0;
  int64_t memory_every = 0;
  int64_t profile_part_mb = 0;
  int64_t profile_parts = 0;
  // The trace's schedule (finalize() has written --profile_steps and the aliases into these).
  int64_t wait = 0;
  int64_t warmup = 0;
  int64_t active = 0;
  int64_t repeat = 0;
  int64_t skip_first = 0;
  bool record_shapes = false;
  bool profile_memory = false;
  bool with_stack = false;
  bool with_modules = false;
  std::string sort_by;
  int64_t row_limit = 0;
  bool gzip = false;
  bool whole_us_timestamps = false;
  int64_t memory_snapshot_step = 0;
  bool memory_snapshot_on_oom = false;
  int64_t memory_snapshot_entries = 0;

  // Whether memory is tracked at all: the memory profile, or the trace's allocations. The
  // trainer then opens a MemoryTrackingScope before it builds the model, so that the
  // parameters' blocks are counted ones the memory categories recognise.
  bool tracks_memory() const { return memory || (enabled && profile_memory); }
  // Whether any per-run profile file is written.
  bool any() const { return timing || memory || enabled; }
};

struct DistributedKeys {
  std::string backend;  // dist::Backend's names
  std::string wait;     // dist::WaitPolicy's names
  std::string gloo_loop;
  int64_t timeout_s = 0;
  int64_t small_all_reduce_kib = 0;
  double bucket_mb = 0;
  double first_bucket_mb = 0;
};

const OptionsTable<RunKeys>& run_keys_table();
const OptionsTable<ProfilingKeys>& profiling_keys_table();
const OptionsTable<DistributedKeys>& distributed_keys_table();

RunKeys run_keys(const Config& config);
ProfilingKeys profiling_keys(const Config& config);
DistributedKeys distributed_keys(const Config& config);

// The settings of a run's stored config.toml that profile-report's advice names
// (stored_setting_keys()), each as its TOML text ("2", "v2", "runs/x"); a key the file lacks is
// absent. A file that does not parse gives no settings and `error` says why.
struct StoredSettings {
  std::map<std::string, std::string> text;
  std::string error;
  // profiling.output_dir as stored; "" when unset or absent.
  std::string output_dir() const;
};
const std::vector<std::string>& stored_setting_keys();
StoredSettings read_stored_settings(const std::filesystem::path& config_toml);

}  // namespace rt
