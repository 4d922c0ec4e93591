// Loading a run directory for profile-report: the files the trainer writes (docs/cli.md
// "Run directory") read into a RunAnalysis — the settings of config.toml, training_summary.json,
// timing_profile.json, memory_profile.json, the traces' top operators and, without a timing
// profile, train/step_time from the TensorBoard events file. Loading only: what the figures
// mean (memory growth, the bottleneck, the advice) is judged by findings.h.
#pragma once

#include "profiling/report/run_report.h"

namespace rt::report {

// Fills `a` from the files under a.run_dir: identity and throughput, step times and their
// statistics, the phase breakdown (seconds; shares are left to find_bottleneck), memory series
// and peaks, the operator totals of the traces and the list of files found. Profiles are read
// from profiling.output_dir when config.toml sets it to an existing directory.
// REQUIRES: a.run_dir is a directory. Throws rt::Error naming it when it holds none of
// training_summary.json, timing_profile.json, memory_profile.json. Damaged optional files
// become a.warnings.
void load_run_files(RunAnalysis& a);

}  // namespace rt::report
