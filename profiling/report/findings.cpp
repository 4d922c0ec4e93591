#include "profiling/report/findings.h"

#include <algorithm>
#include <iomanip>
#include <sstream>

namespace rt::report {

namespace {

constexpr double kGiB = 1024.0 * 1024.0 * 1024.0;
constexpr double kMiB = 1024.0 * 1024.0;

// Thresholds of the findings, in one place.
constexpr double kDataBoundShare = 0.10;  // the loader's goal is < 1%; 10% is clearly data-bound
constexpr double kDominantShare = 0.50;   // one compute phase above half the step
constexpr double kLossHeavyShare = 0.40;
constexpr double kOptimizerHeavyShare = 0.25;
constexpr double kLowExamplesPerSecond =
    100;  // RAVE guide: "> 100 samples/second" (its samples = batch elements)
constexpr double kSlowStartRatio = 1.5;
constexpr double kJitterRatio = 1.5;
constexpr double kFragmentationShare = 0.20;
// Data parallelism: a fifth of the step blocked on collectives, or the slowest rank's mean step
// 15 % above the fastest's (every collective waits for it).
constexpr double kCommExposedShare = 0.20;
constexpr double kStragglerSkew = 1.15;
constexpr double kFragmentationMinBytes = 256.0 * kMiB;
constexpr double kHighRamPercent = 90.0;

std::string fmt(double v, int precision = 1) {
  std::ostringstream s;
  s << std::fixed << std::setprecision(precision) << v;
  return s.str();
}
std::string pct(double share) { return fmt(100.0 * share) + "%"; }
std::string ms(double seconds) { return fmt(seconds * 1e3, seconds < 0.01 ? 2 : 1) + " ms"; }
std::string mib(double bytes) { return fmt(bytes / kMiB) + " MiB"; }

}  // namespace

void judge_memory(RunAnalysis& a, const LeakOptions& leak_options) {
  for (const auto& [name, values] : a.memory_series) {
    // A peak series only rises by construction: plotted, not tested for growth.
    if (name.size() >= 5 && name.compare(name.size() - 5, 5, " peak") == 0) continue;
    // RSS also holds malloc's free lists and library caches, which move in steps of several MiB
    // (a 300-step tiny_rave run: +8% when phase 2 brings the discriminator in): it must rise
    // by 10% of its level to count, the exact allocator series by the configured share.
    LeakOptions leak = leak_options;
    if (name.rfind("rss", 0) == 0) leak.min_relative_growth = std::max(leak.min_relative_growth, 0.10);
    MemoryTrend t = analyse_memory_trend(name, a.memory_steps, values, leak);
    // With RSS split (newer profiles), total RSS is judged through its anonymous part: file-backed
    // pages (a memory-mapped LMDB dataset read in random order) grow without any leak.
    if (name == "rss file" || (name == "rss" && a.memory_series.count("rss anon") > 0)) {
      t.file_backed = name == "rss file";
      t.grew = t.leak_suspected;
      t.leak_suspected = false;
    }
    a.memory_trends.push_back(t);
  }
}

void find_bottleneck(RunAnalysis& a) {
  for (auto& p : a.phases) p.share = a.phase_step_seconds > 0 ? p.seconds / a.phase_step_seconds : 0.0;
  if (!a.phases.empty() && a.phase_step_seconds > 0) {
    a.bottleneck =
        std::max_element(a.phases.begin(), a.phases.end(), [](const PhaseTime& x, const PhaseTime& y) {
          return x.share < y.share;
        })->key;
  }
}

void add_findings(RunAnalysis& a) {
  auto add = [&](const char* code, const char* severity, std::string message, std::string advice) {
    a.findings.push_back({code, severity, std::move(message), std::move(advice)});
  };
  auto setting = [&](const std::string& key, const std::string& fallback) {
    auto it = a.settings.find(key);
    return it == a.settings.end() ? fallback : it->second;
  };
  auto phase = [&](const std::string& key) -> const PhaseTime* {
    for (const auto& p : a.phases) {
      if (p.key == key) return &p;
    }
    return nullptr;
  };

  if (!a.ranks.empty()) {
    const auto waits = std::max_element(
        a.ranks.begin(), a.ranks.end(),
        [](const RankFigures& x, const RankFigures& y) { return x.comm_wait_share < y.comm_wait_share; });
    if (waits->comm_wait_share >= kCommExposedShare) {
      add("comm_exposed", "warning",
          "communication not hidden by backward: rank " + std::to_string(waits->rank) +
              " waits on collectives " + pct(waits->comm_wait_share) + " of its step time (" +
              std::to_string(a.world_size) + " ranks, " + a.backend + ")",
          std::string(a.backend == "gloo" && a.wait_policy == "passive"
                          ? "the ranks slept in their waits: train.distributed.wait = \"active\" polls "
                            "instead (worth it "
                            "while ranks × train.threads fit the cores); "
                          : "") +
              "a larger per-rank batch (train.batch) spreads each step's collectives over more work; on one "
              "machine "
              "keep ranks × train.threads (+ data.workers) within the cores; across machines set "
              "GLOO_SOCKET_IFNAME to "
              "the fastest interface; the trace's gloo:/nccl: spans show which collectives wait");
    }
    const auto [fastest, slowest] = std::minmax_element(
        a.ranks.begin(), a.ranks.end(),
        [](const RankFigures& x, const RankFigures& y) { return x.step_time < y.step_time; });
    if (a.step_time_skew >= kStragglerSkew) {
      add("straggler", "warning",
          "straggler: rank " + std::to_string(slowest->rank) + "'s mean step (" + ms(slowest->step_time) +
              ") is " + fmt(a.step_time_skew, 2) + "× rank " + std::to_string(fastest->rank) + "'s (" +
              ms(fastest->step_time) + "); every rank waits for it at each collective",
          "compare the ranks' timing_profile.rank<R>.json (data_time, forward_time): a slower loader, host "
          "or "
          "device on that rank; balance threads per rank");
    }
  }
  if (a.status == "running") {
    add("status", "warning",
        "the run did not finish: training_summary.json still says 'running'" +
            (a.last_step >= 0 ? ", written after step " + std::to_string(a.last_step) : std::string()) +
            " (the process was killed, e.g. kill -9 or out of memory, or is still training); figures cover "
            "the steps "
            "up to there",
        "resume it with --ckpt last (or the run's checkpoints/last.ckpt)");
  } else if (!a.status.empty() && a.status != "completed") {
    add("status", "warning",
        "the run did not complete (status: " + a.status + "); figures cover the steps it made",
        "check the end of train's output for the reason");
  }
  if (a.step_time_source != "timing_profile.json") {
    add("missing_profile", "info", "no timing_profile.json: no per-step phase times",
        "rerun with --enable_timing_profiling (RAVE guide: start with basic profiling)");
  }

  double slowdown_ms = 0;
  try {
    slowdown_ms = std::stod(setting("data.slowdown_ms", "0"));
  } catch (const std::exception&) {
  }
  if (const PhaseTime* d = phase("data"); d && (d->share >= kDataBoundShare || a.bottleneck == "data")) {
    const bool gpu = a.device.rfind("cuda", 0) == 0;
    add("data_bound", "warning",
        "data-bound: data loading takes " + pct(d->share) + " of the step (" + ms(d->seconds) + " of " +
            ms(a.phase_step_seconds) + ")",
        "raise data.workers (--workers, now " + setting("data.workers", "?") + ") and data.prefetch (now " +
            setting("data.prefetch", "?") + "); preprocess offline" +
            (slowdown_ms > 0
                 ? "; data.slowdown_ms adds an artificial " + fmt(slowdown_ms, 0) + " ms per example"
                 : std::string()) +
            (gpu ? "; keep pinned memory for host-to-device copies" : "") +
            " (SSM guide: high data_batch_production)");
  }
  if (a.bottleneck == "backward" && phase("backward")->share >= kDominantShare) {
    add("backward_dominated", "info", "backward dominates: " + pct(phase("backward")->share) + " of the step",
        "run --enable_profiling to see which *Backward operators cost most; reduce model size (capacity) or, "
        "on "
        "GPU, use mixed precision");
  }
  if (a.bottleneck == "forward" && phase("forward")->share >= kDominantShare) {
    add("forward_dominated", "info", "forward dominates: " + pct(phase("forward")->share) + " of the step",
        "look for expensive operators with --enable_profiling (RAVE guide: long batch times); on GPU, mixed "
        "precision");
  }
  if (const PhaseTime* l = phase("loss"); l && l->share >= kLossHeavyShare) {
    add("loss_dominated", "info", "loss computation takes " + pct(l->share) + " of the step",
        "SSM guide (high loss_fn_computation): reduce model/loss complexity (e.g. fewer STFT scales), mixed "
        "precision");
  }
  if (const PhaseTime* o = phase("optimizer"); o && o->share >= kOptimizerHeavyShare) {
    add("optimizer_heavy", "info", "the optimizer step takes " + pct(o->share) + " of the step",
        "many small parameter tensors make per-tensor updates dominate; a larger batch amortises them");
  }
  if (a.steady_examples_per_second.n > 0 && a.steady_examples_per_second.median < kLowExamplesPerSecond) {
    add("low_throughput", "info",
        "throughput " + fmt(a.steady_examples_per_second.median) +
            " examples/s (median, steady state) is below the "
            "RAVE guide's 100/s target",
        "check for CPU bottlenecks (threads: " + std::to_string(a.threads) +
            ") and data loading; increase the batch "
            "size if memory allows (JAX guide: compare batch sizes)");
  }
  if (a.warmup_step_time.n > 0 && a.steady_step_time.median > 0 &&
      a.warmup_step_time.median > kSlowStartRatio * a.steady_step_time.median) {
    add("slow_start", "info",
        (a.warmup_steps == 1 ? std::string("the first step is slower: ")
                             : "the first " + std::to_string(a.warmup_steps) + " steps are slower: median ") +
            ms(a.warmup_step_time.median) + " vs " + ms(a.steady_step_time.median) + " after",
        "warm-up (allocator, caches); skip it when tracing (--profiling.skip_first N / profiling.wait), as "
        "the "
        "guides advise");
  }
  if (a.steady_step_time.n >= 10 && a.steady_step_time.median > 0 &&
      a.steady_step_time.p90 > kJitterRatio * a.steady_step_time.median) {
    add("jitter", "info",
        "step time varies: p90 " + ms(a.steady_step_time.p90) + " vs median " + ms(a.steady_step_time.median),
        "other processes on the machine, or periodic work (validation, checkpoints) falling inside steps");
  }
  if (a.gpu_reserved_peak_bytes > 0 && a.gpu_fragmentation_bytes > kFragmentationMinBytes &&
      a.gpu_fragmentation_bytes > kFragmentationShare * a.gpu_reserved_peak_bytes) {
    add("fragmentation", "warning",
        "GPU memory fragmentation: reserved - allocated reaches " + fmt(a.gpu_fragmentation_bytes / kGiB, 2) +
            " GiB",
        "RAVE guide: a large reserved-allocated gap is fragmentation; reduce the batch size or use gradient "
        "checkpointing; PYTORCH_CUDA_ALLOC_CONF=max_split_size_mb:128 limits block splitting");
  }
  if (a.peak_cpu_memory_percent > kHighRamPercent) {
    add("high_ram", "warning", "system RAM use reached " + fmt(a.peak_cpu_memory_percent) + "%",
        "reduce the batch size, data.prefetch or data.workers (RAVE guide: optimise data loading if CPU "
        "memory is high)");
  }
  for (const auto& t : a.memory_trends) {
    if (t.file_backed && t.grew) {
      add("file_backed_growth", "info",
          "file-backed memory grew " + mib(t.last_half_growth) + " over the last half of the run (" +
              fmt(t.slope_per_step / 1024.0) +
              " KiB/step): pages of memory-mapped files (the LMDB dataset) "
              "counted in RSS as records are first read; bounded by the files' size, not a leak",
          "nothing to fix; watch `rss anon` (heap) for leaks");
    }
    if (!t.leak_suspected) continue;
    add("memory_growth", "warning",
        "memory keeps growing: " + t.name + " +" + mib(t.last_half_growth) +
            " over the last half of the run (" + fmt(t.slope_per_step / 1024.0) + " KiB/step)",
        "JAX guide (memory leaks): look for state accumulated across steps (tensors kept in lists, graphs "
        "kept "
        "alive by stored losses); trace with --enable_profiling --profiling.profile_memory true");
  }
  if (!a.ops.cpu_ops.empty() && a.ops.cpu_self_total_us > 0) {
    const OpTotal& top = a.ops.cpu_ops.front();
    add("top_operator", "info",
        "top operator: " + top.name + " with " + pct(top.self_us / a.ops.cpu_self_total_us) +
            " of CPU self time",
        "open the trace in Perfetto / chrome://tracing to see where it is called");
  }
}
}  // namespace rt::report
