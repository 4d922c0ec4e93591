// profile-report's analysis of one run directory: the run's identity, throughput and
// step-time statistics (warm-up vs steady state), the time breakdown by training phase with the
// bottleneck named, memory growth with leak suspicion, the top operators of the trace(s), and
// findings carrying the profiling guides' advice. Rendered as text or JSON (report_format.h) and plotted
// (plots.h).
//
// Inputs are the files the trainer writes (docs/cli.md "Run directory"): training_summary.json
// (required), timing_profile.json, memory_profile.json, profiler_traces/*.pt.trace.json[.gz] (else
// profile_step_<N>.json), config.toml and the TensorBoard events file (rt_tensorboard's reader).
// analyse_run loads them (run_files.h), then judges what was loaded (findings.h).
#pragma once

#include <cstdint>
#include <filesystem>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "profiling/report/series_stats.h"
#include "profiling/report/trace_ops.h"
#include "util/json.h"

namespace rt::report {

struct ReportOptions {
  int top_ops = 10;
  LeakOptions leak;
};

// Seconds per step spent in one phase (the built-in timers of profiling/timers.h).
struct PhaseTime {
  std::string key;    // data | forward | loss | backward | optimizer | other
  std::string label;  // "data loading", "forward", ...
  double seconds = 0;
  double share = 0;  // of the step time
};

// One conclusion with the guides' advice. severity: "warning" or "info".
struct Finding {
  std::string code;  // data_bound, backward_dominated, loss_dominated, forward_dominated,
                     // optimizer_heavy, low_throughput, slow_start, jitter, fragmentation,
                     // memory_growth, high_ram, status, top_operator, missing_profile,
                     // comm_exposed, straggler
  std::string severity;
  std::string message;
  std::string advice;
};

// One rank of a data-parallel run (training_summary.json "distributed"."per_rank"): its mean
// step time over the training loop, its throughput, and the shares of its step time during
// which collectives ran (may overlap backward) and during which it waited for them.
struct RankFigures {
  int rank = 0;
  int64_t steps = 0;
  double step_time = 0, examples_per_second = 0, comm_busy_share = 0, comm_wait_share = 0;
};

// The largest value a memory quantity reached, as recorded by what measured it (the allocator's
// peak_bytes_in_use, the kernel's VmHWM), not the largest of the samples, which misses what
// was allocated and freed between two samples.
struct MemoryPeak {
  std::string name;    // the series it belongs to: "cpu bytes_in_use", "rss", "cuda:0 reserved"
  std::string source;  // the field it was read from
  double bytes = 0;
};

struct RunAnalysis {
  std::filesystem::path run_dir;
  std::string name;  // the run directory's name
  // Identity (training_summary.json; "" / 0 when absent). config: the config file's stem
  // ("tiny_rave"); run_name: train.name (--name).
  std::string model, model_family, config, run_name, device, status, sample_unit;
  int64_t threads = 0, batch = 0, total_steps = 0, first_step = 0, last_step = -1;
  double total_time_s = 0, steps_per_second = 0, samples_per_second = 0;
  std::map<std::string, std::string> settings;  // data.workers, data.prefetch, ... from config.toml
  std::vector<std::string> files;               // the files found, relative to run_dir
  // The last validation's metrics (training_summary.json "metrics"): val/loss, val/r2,
  // val/r2_<dim>, val/r2_group_<session> (SSM); validation (RAVE).
  std::map<std::string, double> validation;

  // Step times (seconds) per recorded step.
  std::string
      step_time_source;  // "timing_profile.json", "tfevents train/step_time, means per log interval" or ""
  std::vector<double> steps, step_times, data_times;
  int64_t warmup_steps = 0;  // leading entries counted as warm-up
  Distribution step_time, warmup_step_time, steady_step_time;
  Distribution steady_examples_per_second, steady_samples_per_second;

  // Phase breakdown.
  std::string phase_source;  // "timing_profile.json (steady state)", "training_summary.json timers" or ""
  double phase_step_seconds = 0;
  std::vector<PhaseTime> phases;
  std::string bottleneck;  // a PhaseTime::key; "" when there is no breakdown

  // Memory (bytes), sampled every profiling.memory_every steps.
  std::vector<double> memory_steps;
  std::map<std::string, std::vector<double>>
      memory_series;  // "rss", "cpu bytes_in_use", "cuda:0 reserved", ...
  std::vector<MemoryTrend> memory_trends;
  std::vector<MemoryPeak> memory_peaks;  // true peaks, in the order first found
  double peak_cpu_memory_percent = 0;
  // Memory by category (memory_profile.json "categories"; empty for profiles without them):
  // bytes per category name at each sample, and the largest "interval_peak" with its composition.
  std::map<std::string, std::vector<double>> category_series;
  double category_peak_bytes = 0, category_peak_step = -1;
  std::map<std::string, double> category_peak;
  double gpu_allocated_peak_bytes = 0, gpu_reserved_peak_bytes = 0, gpu_fragmentation_bytes = 0;

  // Data parallelism (training_summary.json "distributed"; world_size 1 and no ranks otherwise).
  int64_t world_size = 1;
  std::string backend;
  std::string wait_policy;         // "active" | "passive" (train.distributed.wait); empty in older runs
  std::vector<RankFigures> ranks;  // empty when the ranks did not finish together
  double step_time_skew = 1.0;     // slowest rank's mean step / fastest's

  TraceOps ops;
  std::vector<Finding> findings;
  std::vector<std::string> warnings;  // files that could not be read, and why
};

// Reads and analyses `run_dir` (a run directory or the <out_path>/latest pointer). Throws rt::Error
// naming the path when it is not a directory or holds no training_summary.json,
// timing_profile.json or memory_profile.json. Damaged optional files become `warnings`.
RunAnalysis analyse_run(const std::filesystem::path& run_dir, const ReportOptions& options = {});

// Short label of a phase key ("data" → "data loading").
std::string phase_label(const std::string& key);

// The true peak recorded for `series` (MemoryPeak), or null.
const MemoryPeak* find_memory_peak(const RunAnalysis& a, const std::string& series);
// What samples_per_second counts ("audio samples", "time bins"; "samples" when unknown).
std::string sample_unit_of(const RunAnalysis& a);

}  // namespace rt::report
