// The keys of the run directory's JSON profiles (docs/cli.md "Run directory"), named once for
// their writers (profiling/profile_writers.cpp, trainer/run_profilers.cpp, the trainer's
// training_summary.json fields) and their readers (profiling/report/run_files.cpp:
// profile-report; JsonListFile::continue_from: a resumed run). A key written or read anywhere
// in the code is one of these constants, never a literal of its own.
//
// The names are the files' public format: the profiling guides' scripts and users' tools read
// them, and tests/e2e and tests/profiling check them as literals. Renaming one here renames it
// in the files.
//
// Here, not in profiling/: profile-report (rt_report) reads the files without LibTorch and
// links rt_util, not rt_profiling.
#pragma once

namespace rt::profile_schema {

// Bytes per "GB" in the *_gb fields: GiB, as torch.cuda.memory_allocated() / 1024**3.
inline constexpr double kBytesPerGb = 1024.0 * 1024.0 * 1024.0;

// ---- timing_profile.json and memory_profile.json: a JSON list, one object per recorded step --
// Keys both per-step profiles share.
namespace entry {
inline constexpr const char* kStep = "step";           // int: the optimisation step (0-based)
inline constexpr const char* kBatchIdx = "batch_idx";  // int: the batch's index in its epoch
}  // namespace entry

// ---- timing_profile.json ------------------------------------------------------------------
// One entry per step kept (step % profiling.timing_every == 0); times in seconds (float).
namespace timing {
using entry::kBatchIdx;
using entry::kStep;
inline constexpr const char* kTotalBatchTime = "total_batch_time";  // s: the whole step
inline constexpr const char* kSamplesPerSecond =
    "samples_per_second";  // float: the model's unit (audio samples, SSM time bins)
inline constexpr const char* kExamplesPerSecond = "examples_per_second";  // float: batch elements
inline constexpr const char* kDataTime = "data_time";                     // s: waiting for the batch
inline constexpr const char* kForwardTime = "forward_time";               // s
inline constexpr const char* kBackwardTime = "backward_time";             // s
inline constexpr const char* kOptimizerTime = "optimizer_time";           // s
// Added by the trainer (TimingEntry::extra):
inline constexpr const char* kLossTime = "loss_time";           // s: the loss computation
inline constexpr const char* kMakeStepTime = "make_step_time";  // s: the model family's whole make_step
inline constexpr const char* kLoss = "loss";  // float: the step's loss (absent when not read)
}  // namespace timing

// ---- memory_profile.json ------------------------------------------------------------------
// One entry per step kept (step % profiling.memory_every == 0). Bytes are int; GB fields are
// GiB (kBytesPerGb) as float, 0 on CPU runs.
namespace memory {
using entry::kBatchIdx;
using entry::kStep;
inline constexpr const char* kCpuMemoryPercent = "cpu_memory_percent";  // float, 0–100: system RAM in use
inline constexpr const char* kGpuMemoryAllocatedGb =
    "gpu_memory_allocated_gb";  // GiB: CUDA allocator's allocated
inline constexpr const char* kGpuMemoryReservedGb =
    "gpu_memory_reserved_gb";                                   // GiB: CUDA allocator's reserved
inline constexpr const char* kRssBytes = "rss_bytes";           // bytes: VmRSS
inline constexpr const char* kPeakRssBytes = "peak_rss_bytes";  // bytes: VmHWM
inline constexpr const char* kRssAnonBytes = "rss_anon_bytes";  // bytes: RssAnon
inline constexpr const char* kRssFileBytes = "rss_file_bytes";  // bytes: RssFile
inline constexpr const char* kSystemMemoryTotalBytes = "system_memory_total_bytes";  // bytes: MemTotal
inline constexpr const char* kSystemMemoryAvailableBytes =
    "system_memory_available_bytes";                    // bytes: MemAvailable
inline constexpr const char* kTimestamp = "timestamp";  // float: Unix seconds
// Per device: {kDeviceCpu or kDeviceCudaPrefix + index: {the device keys below}}.
inline constexpr const char* kMemory = "memory";
inline constexpr const char* kDeviceCpu = "cpu";           // present when the CPU allocator is counted
inline constexpr const char* kDeviceCudaPrefix = "cuda:";  // "cuda:0": present on CUDA runs
// A device's keys (bytes, int); the reserved ones on CUDA only.
inline constexpr const char* kBytesInUse = "bytes_in_use";
inline constexpr const char* kPeakBytesInUse = "peak_bytes_in_use";
inline constexpr const char* kReservedBytes = "reserved_bytes";
inline constexpr const char* kPeakReservedBytes = "peak_reserved_bytes";
// With memory categories watched: {category name (prof::memory_category_name): bytes}, the
// bytes counted in a category that the bytes in use do not hold (int), and on CPU runs the
// interval's peak {kBytesInUse: bytes, kCategories: {category name: bytes}}.
inline constexpr const char* kCategories = "categories";
inline constexpr const char* kCategoriesUntrackedBytes = "categories_untracked_bytes";
inline constexpr const char* kIntervalPeak = "interval_peak";
}  // namespace memory

// ---- training_summary.json ----------------------------------------------------------------
// One object, rewritten at log cadence and on every exit path.
namespace summary {
// Written by prof::TrainingSummary:
inline constexpr const char* kTotalTrainingTimeSeconds = "total_training_time_seconds";  // s (float)
inline constexpr const char* kTotalSteps = "total_steps";                    // int: steps this process ran
inline constexpr const char* kAverageTimePerStep = "average_time_per_step";  // s (float)
inline constexpr const char* kStepsPerSecond = "steps_per_second";           // float
inline constexpr const char* kTrainingStartTime = "training_start_time";     // float: Unix seconds
inline constexpr const char* kTrainingEndTime = "training_end_time";         // float: Unix seconds
inline constexpr const char* kStatus =
    "status";  // string: "running", "completed", "interrupted", "failed: <reason>"
inline constexpr const char* kMetrics = "metrics";  // {name: float}: the last validation values
// The SSM decoders' R² of one session among the metrics: <prefix><session name> (the trainer
// writes it; evaluate and profile-report read it).
inline constexpr const char* kSessionR2Prefix = "val/r2_group_";
inline constexpr const char* kFirstStepLoss = "first_step_loss";        // float or null
inline constexpr const char* kLastStepLoss = "last_step_loss";          // float or null
inline constexpr const char* kLastStep = "last_step";                   // int or null
inline constexpr const char* kTotalSamples = "total_samples";           // int: in the model's sample unit
inline constexpr const char* kSamplesPerSecond = "samples_per_second";  // float
inline constexpr const char* kPeakRssBytes = "peak_rss_bytes";          // bytes (int): VmHWM at writing
// Set by the trainer (TrainingSummary::set_info):
inline constexpr const char* kModel = "model";               // string: the model's description
inline constexpr const char* kModelFamily = "model_family";  // string: "rave", "ssm", …
inline constexpr const char* kConfig = "config";             // string: the config stack's name
inline constexpr const char* kRunName = "run_name";          // string: train.name
inline constexpr const char* kDevice = "device";             // string: "cpu", "cuda:0"
inline constexpr const char* kThreads = "threads";           // int: intra-op threads
inline constexpr const char* kBatch = "batch";               // int: train.batch (per rank)
inline constexpr const char* kWorldSize = "world_size";      // int: ranks of the job
inline constexpr const char* kSampleUnit = "sample_unit";    // string: what samples_per_second counts
inline constexpr const char* kFirstStep = "first_step";      // int: the step the run started at
inline constexpr const char* kHeap = "heap";                 // string: the malloc settings in force
inline constexpr const char* kBlasKernels =
    "blas_kernels";  // string: OpenBLAS's kernels ("SkylakeX"), absent with another BLAS
inline constexpr const char* kGemm =
    "gemm";  // string: the library our own CPU products call ("oneDNN 2.6.3 (libdnnl.so.2, …)"), CPU runs
inline constexpr const char* kGlobalBatch = "global_batch";  // int: batch × world_size (data-parallel jobs)
inline constexpr const char* kLaunch = "launch";  // string: how the ranks were launched (data-parallel jobs)
inline constexpr const char* kPreviousConfig =
    "previous_config";  // string: the earlier config.toml kept aside
inline constexpr const char* kConfigChanges =
    "config_changes";  // [{"key", "before", "after"}]: a resume's changed keys
inline constexpr const char* kDataWaitSeconds = "data_wait_seconds";  // s: this process's wait for batches
inline constexpr const char* kStepExamplesPerSecond =
    "step_examples_per_second";                              // float: the step alone, waits excluded
inline constexpr const char* kLostOutputs = "lost_outputs";  // [string]: outputs asked for and not written
// {timer name (timer_names below, and any other timer's): {kAvgTime: s, kTotalTime: s, kCount:
// int}} (prof::timers()), with timing on.
inline constexpr const char* kTimers = "timers";
inline constexpr const char* kAvgTime = "avg_time";
inline constexpr const char* kTotalTime = "total_time";
inline constexpr const char* kCount = "count";
// A data-parallel job's figures (docs/distributed.md): {kBackend: string, kWaitPolicy: string,
// kStepTimeSkew: float (slowest / fastest rank's mean step), kPerRank: [{kRank, kRankSteps: int,
// kRankStepTime: s, kExamplesPerSecond: float, kCommBusyShare, kCommWaitShare: shares of the
// step, float, …}], …}; the keys here are those profile-report reads.
inline constexpr const char* kDistributed = "distributed";
inline constexpr const char* kBackend = "backend";
inline constexpr const char* kWaitPolicy = "wait_policy";
inline constexpr const char* kStepTimeSkew = "step_time_skew";
inline constexpr const char* kPerRank = "per_rank";
inline constexpr const char* kRank = "rank";
inline constexpr const char* kRankSteps = "steps";
inline constexpr const char* kRankStepTime = "step_time";
inline constexpr const char* kExamplesPerSecond = "examples_per_second";
inline constexpr const char* kCommBusyShare = "comm_busy_share";
inline constexpr const char* kCommWaitShare = "comm_wait_share";
// The rest of kDistributed (written by trainer/job_summary.cpp; the job's kExamplesPerSecond,
// kSamplesPerSecond and kCommWaitShare (worst rank) beside kWorldSize):
inline constexpr const char* kEventLoopScheduling = "event_loop_scheduling";  // string: "" or "SCHED_BATCH"
inline constexpr const char* kRanksReported = "ranks_reported";  // int: ranks whose figures were gathered
// … and per rank, beside kDataWaitSeconds and kStepExamplesPerSecond:
inline constexpr const char* kRankTrainSeconds = "train_seconds";     // s: the rank's steps
inline constexpr const char* kDataWaitShare = "data_wait_share";      // share of the step, float
inline constexpr const char* kCommBusySeconds = "comm_busy_seconds";  // s: collectives executing
inline constexpr const char* kCommWaitSeconds = "comm_wait_seconds";  // s: blocked on collectives
inline constexpr const char* kCollectives = "collectives";            // int
inline constexpr const char* kCollectiveBytes = "collective_bytes";  // bytes (int): input of every collective
}  // namespace summary

// The built-in timers' names (prof::timers(), the trainer's phases, the SSM guide's names):
// summary::kTimers's keys, and the profiling/<name>_* scalars.
namespace timer_names {
inline constexpr const char* kDataBatchProduction = "data_batch_production";
inline constexpr const char* kForward = "forward";
inline constexpr const char* kLossFnComputation = "loss_fn_computation";
inline constexpr const char* kBackward = "backward";
inline constexpr const char* kOptimizerStep = "optimizer_step";
inline constexpr const char* kMakeStepTotal = "make_step_total";
inline constexpr const char* kTrainingStep = "training_step";
inline constexpr const char* kValidation = "validation";
inline constexpr const char* kCheckpoint = "checkpoint";
}  // namespace timer_names

}  // namespace rt::profile_schema
