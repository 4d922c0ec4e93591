// profile-report's analysis on synthetic inputs: statistics, the memory-growth detector, trace
// self-time aggregation, bottleneck findings, JSON/compare renderings and the gnuplot plots.
#include <gtest/gtest.h>

#include <cmath>
#include <fstream>
#include <random>
#include <set>

#include "profiling/report/plots.h"
#include "profiling/report/report_format.h"
#include "profiling/report/run_report.h"
#include "profiling/report/series_stats.h"
#include "profiling/report/trace_ops.h"
#include "support/test_support.h"
#include "util/atomic_file.h"
#include "util/error.h"
#include "util/json.h"

namespace rt::report {
namespace {

namespace fs = std::filesystem;
constexpr double kMiB = 1024.0 * 1024.0;

TEST(ReportStats, DescribeUsesInterpolatedPercentiles) {
  std::vector<double> v;
  for (int i = 10; i >= 1; --i) v.push_back(i);  // unsorted on purpose
  const Distribution d = describe(v);
  EXPECT_EQ(d.n, 10);
  EXPECT_DOUBLE_EQ(d.median, 5.5);
  EXPECT_NEAR(d.p90, 9.1, 1e-12);
  EXPECT_DOUBLE_EQ(d.max, 10);
  EXPECT_DOUBLE_EQ(d.min, 1);
  EXPECT_DOUBLE_EQ(d.mean, 5.5);
  EXPECT_EQ(describe({}).n, 0);
}

TEST(ReportStats, WarmupIsTheFirstTenthAndNoneForTinySeries) {
  EXPECT_EQ(warmup_count(4), 0);
  EXPECT_EQ(warmup_count(5), 1);
  EXPECT_EQ(warmup_count(60), 6);
  EXPECT_EQ(warmup_count(1000), 100);
}

std::vector<double> steps_of(size_t n, double every = 10) {
  std::vector<double> s(n);
  for (size_t i = 0; i < n; ++i) s[i] = static_cast<double>(i) * every;
  return s;
}

TEST(ReportMemoryTrend, SteadyGrowthInTheLastHalfIsALeak) {
  std::mt19937 rng(7);
  std::normal_distribution<double> noise(0, 0.2 * kMiB);
  std::vector<double> v;
  for (int i = 0; i < 40; ++i) v.push_back(500 * kMiB + i * 2 * kMiB + noise(rng));  // +2 MiB per sample
  const MemoryTrend t = analyse_memory_trend("rss", steps_of(v.size()), v);
  EXPECT_TRUE(t.enough_samples);
  EXPECT_TRUE(t.leak_suspected);
  EXPECT_NEAR(t.slope_per_step, 2 * kMiB / 10, 0.02 * kMiB);
  EXPECT_GT(t.rising_fraction, 0.6);
}

TEST(ReportMemoryTrend, FlatNoisySeriesIsNotALeak) {
  std::mt19937 rng(3);
  std::normal_distribution<double> noise(0, 1 * kMiB);
  std::vector<double> v;
  for (int i = 0; i < 40; ++i) v.push_back(500 * kMiB + noise(rng));
  EXPECT_FALSE(analyse_memory_trend("rss", steps_of(v.size()), v).leak_suspected);
}

TEST(ReportMemoryTrend, WarmupGrowthThenPlateauIsNotALeak) {
  std::vector<double> v;
  for (int i = 0; i < 40; ++i) v.push_back(i < 15 ? 100 * kMiB + i * 20 * kMiB : 400 * kMiB);
  const MemoryTrend t = analyse_memory_trend("cpu bytes_in_use", steps_of(v.size()), v);
  EXPECT_FALSE(t.leak_suspected);
  EXPECT_DOUBLE_EQ(t.peak, 400 * kMiB);
  EXPECT_DOUBLE_EQ(t.first, 100 * kMiB);
}

TEST(ReportMemoryTrend, SmallRelativeGrowthOfALargeHeapIsNotALeak) {
  std::vector<double> v;  // 20 GiB growing by 1 MiB per sample: 1% over the last half
  for (int i = 0; i < 40; ++i) v.push_back(20.0 * 1024 * kMiB + i * kMiB);
  EXPECT_FALSE(analyse_memory_trend("cuda:0 bytes_in_use", steps_of(v.size()), v).leak_suspected);
}

TEST(ReportMemoryTrend, TooFewSamplesGiveNoVerdict) {
  const std::vector<double> v = {1 * kMiB, 100 * kMiB, 200 * kMiB, 300 * kMiB};
  const MemoryTrend t = analyse_memory_trend("rss", steps_of(v.size()), v);
  EXPECT_FALSE(t.enough_samples);
  EXPECT_FALSE(t.leak_suspected);
}

TEST(ReportMemoryTrend, OneStepUpLateInTheRunIsNotALeak) {
  // The demo's healthy tiny_rave run: anonymous RSS level, then +13.4 MiB at step 200 of 300
  // when phase 2 brings the discriminator in, level again (sampled every 10 steps, with a
  // slow drift of 16 KiB per sample).
  std::vector<double> v;
  const auto steps = steps_of(30);
  for (size_t i = 0; i < steps.size(); ++i)
    v.push_back((steps[i] < 200 ? 90 : 103.4) * kMiB + i * 16 * 1024.0);
  const MemoryTrend t = analyse_memory_trend("rss anon", steps, v, {8, 0.10});
  EXPECT_GT(t.last_half_growth, 0.10 * 100 * kMiB);  // grew more than the relative threshold…
  EXPECT_LT(t.quarter_growth[1], 1 * kMiB);          // …but stopped: not a leak
  EXPECT_FALSE(t.leak_suspected);
}

TEST(ReportMemoryTrend, GrowthThatContinuesInBothQuartersIsALeak) {
  std::vector<double> v;  // flat during warm-up, then +1 MiB per sample to the end
  const auto steps = steps_of(30);
  for (size_t i = 0; i < steps.size(); ++i) v.push_back(90 * kMiB + (i < 10 ? 0.0 : (i - 10.0) * kMiB));
  const MemoryTrend t = analyse_memory_trend("rss anon", steps, v, {8, 0.10});
  EXPECT_GT(t.quarter_growth[0], 5 * kMiB);
  EXPECT_GT(t.quarter_growth[1], 5 * kMiB);
  EXPECT_TRUE(t.leak_suspected);
}

Json span(const std::string& cat, const std::string& name, double ts, double dur, int tid = 1) {
  return {{"ph", "X"}, {"cat", cat}, {"name", name}, {"pid", 10}, {"tid", tid}, {"ts", ts}, {"dur", dur}};
}

TEST(ReportTraceOps, SelfTimeSubtractsDirectChildrenPerThread) {
  Json trace = {{"schemaVersion", 1}, {"traceEvents", Json::array()}};
  auto& ev = trace["traceEvents"];
  ev.push_back(span("user_annotation", "ProfilerStep#3", 0, 1000));
  ev.push_back(span("cpu_op", "aten::conv1d", 10, 300));
  ev.push_back(span("cpu_op", "aten::convolution", 20, 250));  // child of conv1d
  ev.push_back(span("cpu_op", "aten::add", 400, 50));
  ev.push_back(span("cpu_op", "aten::add", 0, 40, /*tid=*/2));  // another thread, not nested
  ev.push_back(span("kernel", "sgemm", 5, 70));
  ev.push_back({{"ph", "i"}, {"cat", "cpu_instant_event"}, {"name", "[memory]"}, {"ts", 5}});
  TraceOps ops;
  aggregate_trace(trace, ops);
  ASSERT_EQ(ops.cpu_ops.size(), 3u);
  EXPECT_EQ(ops.cpu_ops[0].name, "aten::convolution");
  EXPECT_DOUBLE_EQ(ops.cpu_ops[0].self_us, 250);
  EXPECT_EQ(ops.cpu_ops[1].name, "aten::add");
  EXPECT_EQ(ops.cpu_ops[1].count, 2);
  EXPECT_DOUBLE_EQ(ops.cpu_ops[1].self_us, 90);
  EXPECT_EQ(ops.cpu_ops[2].name, "aten::conv1d");
  EXPECT_DOUBLE_EQ(ops.cpu_ops[2].self_us, 50);
  EXPECT_DOUBLE_EQ(ops.cpu_ops[2].total_us, 300);
  EXPECT_DOUBLE_EQ(ops.cpu_self_total_us, 390);
  ASSERT_EQ(ops.device_ops.size(), 1u);
  EXPECT_EQ(ops.device_ops[0].name, "sgemm");
  EXPECT_EQ(ops.profiler_steps, 1);
}

// Our custom autograd functions' nodes, which torch names after their C++ type, are told apart
// by that type's own name, in the aggregation (so in --json and --compare) and in the table.
TEST(ReportTraceOps, CppNodesAreNamedByTheirTypeInTheTableAndTheJson) {
  Json trace = {{"schemaVersion", 1}, {"traceEvents", Json::array()}};
  auto& ev = trace["traceEvents"];
  const std::string ns = "torch::autograd::CppNode<rt::models::(anonymous namespace)::";
  ev.push_back(span("cpu_op", ns + "WnConv1dGemm>", 0, 400));
  ev.push_back(span("cpu_op", ns + "Conv1dGemm>", 500, 300));
  ev.push_back(
      span("cpu_op", "autograd::engine::evaluate_function: " + ns + "ConvTranspose1dGemm>", 900, 200));
  ev.push_back(span("cpu_op", "torch::autograd::CppNode<Outer<A::B, C>::Inner>", 1200, 100));
  ev.push_back(span("cpu_op", "aten::mm", 1400, 50));
  TraceOps ops;
  aggregate_trace(trace, ops);
  std::set<std::string> names;
  for (const auto& op : ops.cpu_ops) names.insert(op.name);
  EXPECT_EQ(names,
            (std::set<std::string>{"WnConv1dGemm (C++ node)", "Conv1dGemm (C++ node)",
                                   "autograd::engine::evaluate_function: ConvTranspose1dGemm (C++ node)",
                                   "Inner (C++ node)", "aten::mm"}));
  EXPECT_EQ(op_display_name("torch::autograd::CppNode<X"), "torch::autograd::CppNode<X");  // unbalanced
  RunAnalysis a;
  a.ops = ops;
  const std::string text = format_report(a);
  for (const char* shown :
       {"WnConv1dGemm (C++ node)", "Conv1dGemm (C++ node)", "...ConvTranspose1dGemm (C++ node)"})
    EXPECT_NE(text.find(shown), std::string::npos) << shown << "\n" << text;
  EXPECT_EQ(text.find("CppNode<"), std::string::npos) << text;
}

// A run directory as train writes it, with the phase times chosen by the test.
struct FakeRun {
  double data = 0.001, forward = 0.010, loss = 0.004, backward = 0.020, optimizer = 0.003;
  int steps = 40;
  double memory_growth_per_sample = 0;  // bytes
  double first_steps_slowdown = 1.0;
  Json summary_extra = Json::object();  // merged into training_summary.json

  void write(const fs::path& dir, const std::string& name) const {
    fs::create_directories(dir);
    Json timing = Json::array(), memory = Json::array();
    for (int s = 0; s < steps; ++s) {
      const double k = s < 4 ? first_steps_slowdown : 1.0;
      const double total = k * (data + forward + loss + backward + optimizer) + 0.0005;
      timing.push_back({{"step", s},
                        {"batch_idx", s},
                        {"total_batch_time", total},
                        {"samples_per_second", 4 * 8192 / total},
                        {"examples_per_second", 4 / total},
                        {"data_time", k * data},
                        {"forward_time", k * forward},
                        {"loss_time", k * loss},
                        {"backward_time", k * backward},
                        {"optimizer_time", k * optimizer}});
      if (s % 2 == 0) {
        const double used = 300 * kMiB + memory_growth_per_sample * (s / 2);
        memory.push_back({{"step", s},
                          {"batch_idx", s},
                          {"cpu_memory_percent", 40.0},
                          {"gpu_memory_allocated_gb", 0.0},
                          {"gpu_memory_reserved_gb", 0.0},
                          {"memory", {{"cpu", {{"bytes_in_use", used}, {"peak_bytes_in_use", used + kMiB}}}}},
                          {"rss_bytes", 600 * kMiB}});
      }
    }
    write_json_atomic(dir / "timing_profile.json", timing);
    write_json_atomic(dir / "memory_profile.json", memory);
    Json summary{{"total_training_time_seconds", 2.0},
                 {"total_steps", steps},
                 {"steps_per_second", steps / 2.0},
                 {"samples_per_second", steps * 4 * 8192 / 2.0},
                 {"status", "completed"},
                 {"model", name},
                 {"config", name},
                 {"device", "cpu"},
                 {"threads", 2},
                 {"batch", 4},
                 {"last_step", steps - 1}};
    for (auto it = summary_extra.begin(); it != summary_extra.end(); ++it) summary[it.key()] = it.value();
    write_json_atomic(dir / "training_summary.json", summary);
    write_file_atomic(dir / "config.toml", "[data]\nworkers = 1\nprefetch = 4\n\n[train]\nbatch = 4\n");
  }
};

const Finding* find(const RunAnalysis& a, const std::string& code) {
  for (const auto& f : a.findings) {
    if (f.code == code) return &f;
  }
  return nullptr;
}

TEST(ReportAnalysis, DataHeavyRunIsNamedDataBoundWithWorkerAdvice) {
  testing::ScratchDir dir("report_analysis");
  FakeRun run;
  run.data = 0.120;
  run.write(dir / "slow", "slow");
  const RunAnalysis a = analyse_run(dir / "slow");
  EXPECT_EQ(a.bottleneck, "data");
  const Finding* f = find(a, "data_bound");
  ASSERT_NE(f, nullptr);
  EXPECT_NE(f->advice.find("data.workers"), std::string::npos);
  EXPECT_NE(f->advice.find("now 1"), std::string::npos);  // read from config.toml
  EXPECT_NE(format_report(a).find("Bottleneck: data loading"), std::string::npos);
}

TEST(ReportAnalysis, ComputeBoundRunIsNotDataBound) {
  testing::ScratchDir dir("report_analysis");
  FakeRun{}.write(dir / "ok", "ok");
  const RunAnalysis a = analyse_run(dir / "ok");
  EXPECT_EQ(a.bottleneck, "backward");
  EXPECT_EQ(find(a, "data_bound"), nullptr);
  EXPECT_EQ(find(a, "memory_growth"), nullptr);
  double shares = 0;
  for (const auto& p : a.phases) shares += p.share;
  EXPECT_NEAR(shares, 1.0, 1e-9);
  EXPECT_EQ(a.warmup_steps, 4);
  EXPECT_EQ(a.step_time_source, "timing_profile.json");
}

TEST(ReportAnalysis, PeaksAreTheRecordedOnesNotTheLargestSample) {
  // Between two samples a step allocates and frees far more than what is live at either.
  testing::ScratchDir dir("report_analysis");
  FakeRun run;
  run.summary_extra = {{"peak_rss_bytes", 337.8 * kMiB}};
  run.write(dir / "peaks", "peaks");
  Json memory = Json::array();
  for (int64_t i = 0; i < 10; ++i) {
    memory.push_back(
        {{"step", 10 * i},
         {"memory", {{"cpu", {{"bytes_in_use", 1.2 * kMiB}, {"peak_bytes_in_use", 23.1 * kMiB}}}}},
         {"rss_bytes", 284.6 * kMiB - i * kMiB},
         {"peak_rss_bytes", 330.0 * kMiB}});
  }
  write_json_atomic(dir / "peaks" / "memory_profile.json", memory);
  const RunAnalysis a = analyse_run(dir / "peaks");
  const MemoryPeak* cpu = find_memory_peak(a, "cpu bytes_in_use");
  const MemoryPeak* rss = find_memory_peak(a, "rss");
  ASSERT_NE(cpu, nullptr);
  ASSERT_NE(rss, nullptr);
  EXPECT_DOUBLE_EQ(cpu->bytes, 23.1 * kMiB);
  EXPECT_DOUBLE_EQ(rss->bytes, 337.8 * kMiB);  // the summary's, above every sample's VmHWM
  const std::string text = format_report(a);
  EXPECT_NE(text.find("cpu bytes_in_use 23.1 MiB (allocator's peak_bytes_in_use)"), std::string::npos)
      << text;
  EXPECT_NE(text.find("rss 337.8 MiB (VmHWM, peak_rss_bytes)"), std::string::npos) << text;
  EXPECT_NE(text.find("sampled max"), std::string::npos) << text;
  const std::string compare = format_comparison(a, a);
  EXPECT_NE(compare.find("23.1 MiB"), std::string::npos) << compare;
  EXPECT_NE(compare.find("337.8 MiB"), std::string::npos) << compare;
  EXPECT_EQ(compare.find("1.2 MiB"), std::string::npos) << compare;
}

TEST(ReportAnalysis, MemoryCategoriesAndThePeakCompositionAreShown) {
  testing::ScratchDir dir("report_analysis");
  FakeRun{}.write(dir / "cats", "cats");
  Json memory = Json::array();
  for (int64_t i = 0; i < 4; ++i) {
    const double optimizer = i == 0 ? 0.0 : 2 * kMiB;  // Adam's state appears at the first step
    Json cats = {{"parameters", 1 * kMiB},
                 {"buffers", 0.0},
                 {"gradients", 1 * kMiB},
                 {"optimizer_state", optimizer},
                 {"activations_and_temporaries", 0.5 * kMiB}};
    const double peak = (i == 2 ? 40 : 20) * kMiB;
    Json at_peak = {{"parameters", 1 * kMiB},
                    {"buffers", 0.0},
                    {"gradients", 0.25 * kMiB},
                    {"optimizer_state", optimizer},
                    {"activations_and_temporaries", peak - (1.25 * kMiB + optimizer)}};
    memory.push_back(
        {{"step", 10 * i},
         {"memory", {{"cpu", {{"bytes_in_use", 2.5 * kMiB + optimizer}, {"peak_bytes_in_use", 40 * kMiB}}}}},
         {"categories", cats},
         {"interval_peak", {{"bytes_in_use", peak}, {"categories", at_peak}}}});
  }
  write_json_atomic(dir / "cats" / "memory_profile.json", memory);
  const RunAnalysis a = analyse_run(dir / "cats");
  ASSERT_EQ(a.category_series.at("optimizer_state").size(), 4u);
  EXPECT_DOUBLE_EQ(a.category_series.at("optimizer_state").back(), 2 * kMiB);
  EXPECT_DOUBLE_EQ(a.category_peak_step, 20);
  EXPECT_DOUBLE_EQ(a.category_peak_bytes, 40 * kMiB);
  EXPECT_DOUBLE_EQ(a.category_peak.at("activations_and_temporaries"), 40 * kMiB - 3.25 * kMiB);
  const std::string text = format_report(a);
  EXPECT_NE(text.find("at the peak (step 20)"), std::string::npos) << text;
  EXPECT_NE(text.find("optimizer_state"), std::string::npos) << text;
  EXPECT_NE(text.find("36.8 MiB"), std::string::npos) << text;  // activations at the peak
  const Json j = to_json(a);
  EXPECT_EQ(j.at("memory").at("categories_last_sample").at("parameters"), 1 * kMiB);
  EXPECT_EQ(j.at("memory").at("category_peak").at("step"), 20);
}

TEST(ReportAnalysis, ThroughputIsNamedInTheModelFamilysUnit) {
  testing::ScratchDir dir("report_analysis");
  FakeRun ssm, rave;
  ssm.summary_extra = {{"sample_unit", "time bins"}};
  rave.summary_extra = {{"sample_unit", "audio samples"}};
  ssm.write(dir / "ssm", "ssm");
  rave.write(dir / "rave", "rave");
  const RunAnalysis s = analyse_run(dir / "ssm"), r = analyse_run(dir / "rave");
  const std::string text = format_report(s);
  EXPECT_NE(text.find("time bins/s over the whole run"), std::string::npos) << text;
  EXPECT_NE(text.find("time bins/s (median)"), std::string::npos) << text;
  EXPECT_EQ(text.find("samples/s"), std::string::npos) << text;
  // Runs counting different units: no throughput ratio.
  EXPECT_FALSE(comparison_json(r, s).at("ratios").contains("samples_per_second"));
  EXPECT_TRUE(comparison_json(r, r).at("ratios").contains("samples_per_second"));
  EXPECT_NE(format_comparison(r, s).find("time bins"), std::string::npos);
}

TEST(ReportAnalysis, ConfigAndRunNameAreLabelledApart) {
  testing::ScratchDir dir("report_analysis");
  FakeRun run;
  run.summary_extra = {{"config", "tiny_rave"}, {"run_name", "demo"}, {"threads", 1}};
  run.write(dir / "named", "named");
  const std::string text = format_report(analyse_run(dir / "named"));
  EXPECT_NE(text.find("(config tiny_rave)"), std::string::npos) << text;
  EXPECT_NE(text.find("run name   demo"), std::string::npos) << text;
  EXPECT_NE(text.find("1 thread,"), std::string::npos) << text;
  EXPECT_EQ(text.find("1 threads"), std::string::npos) << text;
}

// The last validation of training_summary.json: pooled figures, R² per dimension and per
// session, in the text and the JSON.
TEST(ReportAnalysis, TheLastValidationIsShownWithRSquaredPerSession) {
  testing::ScratchDir dir("report_analysis");
  FakeRun run;
  run.summary_extra = {{"metrics",
                        {{"val/loss", 0.25},
                         {"val/r2", 0.5},
                         {"val/r2_0", 0.4},
                         {"val/r2_1", 0.6},
                         {"val/r2_group_monkey_a", 0.75},
                         {"val/r2_group_monkey_b", 0.25}}}};
  run.write(dir / "ssm", "ssm");
  const RunAnalysis a = analyse_run(dir / "ssm");
  const std::string text = format_report(a);
  EXPECT_NE(text.find("Validation (the last, training_summary.json)\n  val/loss 0.2500, val/r2 0.5000\n"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("R² per dimension: 0 0.4000, 1 0.6000"), std::string::npos) << text;
  EXPECT_NE(text.find("R² per session:\n    monkey_a  0.7500\n    monkey_b  0.2500\n"), std::string::npos)
      << text;
  const Json j = to_json(a);
  EXPECT_EQ(j.at("validation").at("per_session_r2").at("monkey_a"), 0.75);
  EXPECT_EQ(j.at("validation").at("metrics").at("val/r2"), 0.5);
  // A run without validation has no such section.
  FakeRun none;
  none.write(dir / "none", "none");
  EXPECT_EQ(format_report(analyse_run(dir / "none")).find("Validation"), std::string::npos);
}

TEST(ReportAnalysis, GrowingMemoryAndSlowStartAreReported) {
  testing::ScratchDir dir("report_analysis");
  FakeRun run;
  run.memory_growth_per_sample = 8 * kMiB;
  run.first_steps_slowdown = 3.0;
  run.write(dir / "leaky", "leaky");
  const RunAnalysis a = analyse_run(dir / "leaky");
  const Finding* leak = find(a, "memory_growth");
  ASSERT_NE(leak, nullptr);
  EXPECT_NE(leak->message.find("cpu bytes_in_use"), std::string::npos);
  EXPECT_NE(find(a, "slow_start"), nullptr);
  EXPECT_GT(a.warmup_step_time.median, 2.5 * a.steady_step_time.median);
}

TEST(ReportAnalysis, GrowingFileBackedRssIsNotALeakButGrowingAnonymousRssIs) {
  // A memory-mapped LMDB dataset read in random order adds file-backed pages to RSS.
  auto write = [](const fs::path& dir, double anon_growth, double file_growth) {
    FakeRun{}.write(dir, "mmap");
    Json memory = Json::array();
    for (int64_t i = 0; i < 20; ++i) {
      const double anon = 200 * kMiB + anon_growth * i, file = 100 * kMiB + file_growth * i;
      memory.push_back(
          {{"step", 2 * i},
           {"cpu_memory_percent", 40.0},
           {"memory", {{"cpu", {{"bytes_in_use", 50 * kMiB}, {"peak_bytes_in_use", 60 * kMiB}}}}},
           {"rss_bytes", anon + file},
           {"rss_anon_bytes", anon},
           {"rss_file_bytes", file}});
    }
    write_json_atomic(dir / "memory_profile.json", memory);
  };
  testing::ScratchDir dir("report_analysis");
  write(dir / "mmap", 0.0, 4 * kMiB);
  RunAnalysis a = analyse_run(dir / "mmap");
  EXPECT_EQ(find(a, "memory_growth"), nullptr);  // total RSS grew 76 MiB, all of it file-backed
  ASSERT_NE(find(a, "file_backed_growth"), nullptr);
  EXPECT_NE(format_report(a).find("no (file-backed)"), std::string::npos);

  // A level step of 8% in the heap (e.g. phase 2 bringing a discriminator in) is not a leak.
  FakeRun{}.write(dir / "step", "step");
  {
    Json memory = Json::array();
    for (int64_t i = 0; i < 20; ++i) {
      const double anon = (i < 14 ? 100 : 108) * kMiB;
      memory.push_back({{"step", 2 * i},
                        {"rss_bytes", anon + 50 * kMiB},
                        {"rss_anon_bytes", anon},
                        {"rss_file_bytes", 50 * kMiB}});
    }
    write_json_atomic(dir / "step" / "memory_profile.json", memory);
  }
  EXPECT_EQ(find(analyse_run(dir / "step"), "memory_growth"), nullptr);

  write(dir / "leak", 4 * kMiB, 0.0);
  a = analyse_run(dir / "leak");
  const Finding* leak = find(a, "memory_growth");
  ASSERT_NE(leak, nullptr);
  EXPECT_NE(leak->message.find("rss anon"), std::string::npos);
  EXPECT_EQ(find(a, "file_backed_growth"), nullptr);
}

TEST(ReportAnalysis, TheDemoRunsHeapStepAtPhaseTwoIsNotALeak) {
  // rss_anon_bytes of a healthy 300-step demo run (tiny_rave, memory_every 10), in MiB: level,
  // a step of +15 MiB around step 180 as phase 2 brings the discriminator and its Adam state in,
  // level again. Over the last half it grew 14% of its level with 71% of the changes rising,
  // which the earlier test (growth and rising share alone) called a leak.
  const std::vector<double> anon = {96.1,  96.2,  96.4,  96.4,  96.9,  96.6,  97.9,  97.9,  96.6,  96.6,
                                    96.9,  96.9,  97.0,  97.7,  97.2,  97.2,  99.2,  98.7,  106.7, 107.9,
                                    107.4, 111.3, 111.3, 111.3, 112.3, 112.3, 112.3, 112.3, 112.3, 112.3};
  testing::ScratchDir dir("report_analysis");
  FakeRun{}.write(dir / "demo", "demo");
  Json memory = Json::array();
  for (size_t i = 0; i < anon.size(); ++i) {
    memory.push_back({{"step", 10 * static_cast<int64_t>(i)},
                      {"rss_bytes", (anon[i] + 130) * kMiB},
                      {"rss_anon_bytes", anon[i] * kMiB},
                      {"rss_file_bytes", 130 * kMiB}});
  }
  write_json_atomic(dir / "demo" / "memory_profile.json", memory);
  const RunAnalysis a = analyse_run(dir / "demo");
  const MemoryTrend* t = nullptr;
  for (const auto& trend : a.memory_trends) {
    if (trend.name == "rss anon") t = &trend;
  }
  ASSERT_NE(t, nullptr);
  EXPECT_GT(t->last_half_growth, 0.10 * 108 * kMiB);  // above the relative threshold…
  EXPECT_GE(t->rising_fraction, 0.6);                 // …mostly rising…
  EXPECT_FALSE(t->leak_suspected);                    // …but it stopped growing
  EXPECT_EQ(find(a, "memory_growth"), nullptr);
  const std::string text = format_report(a);
  EXPECT_EQ(text.find("SUSPECTED"), std::string::npos) << text;
  EXPECT_EQ(text.find("LIKELY"), std::string::npos) << text;
}

TEST(ReportAnalysis, FallsBackToTheSummaryTimers) {
  testing::ScratchDir dir("report_analysis");
  write_json_atomic(dir / "training_summary.json",
                    Json{{"total_steps", 10},
                         {"status", "completed"},
                         {"timers",
                          {{"data_batch_production", {{"total_time", 6.0}, {"count", 10}, {"avg_time", 0.6}}},
                           {"forward", {{"total_time", 1.0}, {"count", 10}, {"avg_time", 0.1}}},
                           {"backward", {{"total_time", 2.0}, {"count", 10}, {"avg_time", 0.2}}},
                           {"training_step", {{"total_time", 10.0}, {"count", 10}, {"avg_time", 1.0}}}}}});
  const RunAnalysis a = analyse_run(dir.path());
  EXPECT_EQ(a.phase_source, "training_summary.json timers");
  EXPECT_EQ(a.bottleneck, "data");
  EXPECT_NEAR(a.phase_step_seconds, 1.0, 1e-12);
  EXPECT_NE(find(a, "missing_profile"), nullptr);
}

TEST(ReportAnalysis, ARunKilledWhileRunningIsSaidNotToHaveFinishedAndWhereItStopped) {
  // What train leaves after kill -9: the summary it rewrites at log cadence.
  testing::ScratchDir dir("report_analysis");
  write_json_atomic(dir / "training_summary.json",
                    Json{{"total_steps", 40}, {"first_step", 0}, {"last_step", 39}, {"status", "running"}});
  const RunAnalysis a = analyse_run(dir.path());
  const Finding* f = find(a, "status");
  ASSERT_NE(f, nullptr);
  EXPECT_NE(f->message.find("the run did not finish"), std::string::npos) << f->message;
  EXPECT_NE(f->message.find("after step 39"), std::string::npos) << f->message;
  const std::string text = format_report(a);
  EXPECT_NE(text.find("status     did not finish"), std::string::npos) << text;
  EXPECT_NE(text.find("40 steps (0..39)"), std::string::npos) << text;
}

TEST(ReportAnalysis, RejectsADirectoryThatIsNotARun) {
  testing::ScratchDir dir("report_analysis");
  try {
    analyse_run(dir.path());
    FAIL() << "expected rt::Error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("training_summary.json"), std::string::npos);
    EXPECT_NE(std::string(e.what()).find(dir.path().string()), std::string::npos);
  }
  EXPECT_THROW(analyse_run(dir / "missing"), Error);
}

TEST(ReportFormat, JsonAndComparisonCarryBothRunsAndRatios) {
  testing::ScratchDir dir("report_analysis");
  FakeRun fast, slow;
  slow.data = 0.120;
  fast.write(dir / "fast", "fast");
  slow.write(dir / "slow", "slow");
  const RunAnalysis a = analyse_run(dir / "fast"), b = analyse_run(dir / "slow");

  const Json j = Json::parse(to_json(a).dump());
  EXPECT_EQ(j["phases"]["bottleneck"], "backward");
  EXPECT_EQ(j["step_time"]["steady"]["n"], 36);

  const Json c = comparison_json(a, b);
  EXPECT_EQ(c["a"]["name"], "fast");
  EXPECT_EQ(c["b"]["name"], "slow");
  EXPECT_NEAR(c["ratios"]["phase_data"].get<double>(), 120.0, 1e-6);
  EXPECT_GT(c["ratios"]["median_step_time"].get<double>(), 3.0);

  const std::string text = format_comparison(a, b);
  EXPECT_NE(text.find("fast"), std::string::npos);
  EXPECT_NE(text.find("slow"), std::string::npos);
  EXPECT_NE(text.find("120.00x"), std::string::npos);
  EXPECT_NE(text.find("data loading"), std::string::npos);
}

bool is_png(const fs::path& p) {
  const std::string bytes = read_file(p);
  return bytes.size() > 1000 && bytes.compare(0, 8, "\x89PNG\r\n\x1a\n") == 0;
}

TEST(ReportPlots, WritesBothPngsWithGnuplotOrSaysWhatIsMissing) {
  testing::ScratchDir dir("report_plots");
  FakeRun run;
  run.write(dir / "run", "run");
  const RunAnalysis a = analyse_run(dir / "run");
  if (find_gnuplot().empty()) {
    try {
      write_plots({&a}, dir / "plots", nullptr);
      FAIL() << "expected rt::Error without gnuplot";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("gnuplot-nox"), std::string::npos);
    }
    GTEST_SKIP() << "gnuplot not installed (scripts/setup.sh installs gnuplot-nox)";
  }
  std::vector<std::string> notes;
  const auto files = write_plots({&a}, dir / "plots", &notes);
  ASSERT_EQ(files.size(), 2u);
  EXPECT_TRUE(is_png(dir / "plots" / "memory_plot.png"));
  EXPECT_TRUE(is_png(dir / "plots" / "step_time_plot.png"));
  EXPECT_TRUE(notes.empty());
  // The kept gnuplot script names the axes and units.
  const std::string gp = read_file(dir / "plots" / "memory_plot.gp");
  EXPECT_NE(gp.find("Memory (MiB)"), std::string::npos);
  EXPECT_NE(gp.find("Training step"), std::string::npos);
}

TEST(ReportPlots, MissingGnuplotIsAClearError) {
  testing::ScratchDir dir("report_plots");
  FakeRun{}.write(dir / "run", "run");
  const RunAnalysis a = analyse_run(dir / "run");
  setenv("RT_GNUPLOT", (dir / "no-such-gnuplot").c_str(), 1);
  try {
    write_plots({&a}, dir / "plots", nullptr);
    unsetenv("RT_GNUPLOT");
    FAIL() << "expected rt::Error";
  } catch (const Error& e) {
    unsetenv("RT_GNUPLOT");
    EXPECT_NE(std::string(e.what()).find("gnuplot-nox"), std::string::npos);
  }
}

// A 2-rank run: every rank's figures in the text and the JSON, a straggler and exposed
// communication named with the rank.
TEST(ReportAnalysis, DataParallelRunShowsEveryRankAndNamesTheStraggler) {
  testing::ScratchDir dir("report_analysis");
  auto rank = [](int r, double step_time, double wait) {
    return Json{{"rank", r},
                {"steps", 100},
                {"step_time", step_time},
                {"examples_per_second", 4 / step_time},
                {"comm_busy_share", wait + 0.05},
                {"comm_wait_share", wait}};
  };
  write_json_atomic(dir / "training_summary.json",
                    Json{{"total_steps", 100},
                         {"status", "completed"},
                         {"world_size", 2},
                         {"distributed",
                          {{"backend", "gloo"},
                           {"wait_policy", "passive"},
                           {"world_size", 2},
                           {"step_time_skew", 0.150 / 0.100},
                           {"comm_wait_share", 0.35},
                           {"per_rank", Json::array({rank(0, 0.100, 0.35), rank(1, 0.150, 0.02)})}}}});
  const RunAnalysis a = analyse_run(dir.path());
  ASSERT_EQ(a.ranks.size(), 2u);
  EXPECT_EQ(a.world_size, 2);
  EXPECT_EQ(a.backend, "gloo");
  const Finding* straggler = find(a, "straggler");
  ASSERT_NE(straggler, nullptr);
  EXPECT_NE(straggler->message.find("rank 1's mean step"), std::string::npos) << straggler->message;
  const Finding* comm = find(a, "comm_exposed");
  ASSERT_NE(comm, nullptr);
  EXPECT_NE(comm->message.find("rank 0 waits on collectives 35"), std::string::npos) << comm->message;
  EXPECT_NE(comm->advice.find("train.distributed.wait = \"active\""), std::string::npos)
      << "ranks that slept in their waits are told to poll: " << comm->advice;
  const std::string text = format_report(a);
  EXPECT_NE(text.find("Data parallel: 2 ranks (gloo, passive waits)"), std::string::npos) << text;
  EXPECT_EQ(to_json(a)["distributed"]["wait_policy"], "passive");
  EXPECT_NE(text.find("straggler skew (slowest / fastest mean step): 1.50"), std::string::npos) << text;
  EXPECT_EQ(to_json(a)["distributed"]["per_rank"].size(), 2u);

  // One process: no section, no findings about ranks.
  write_json_atomic(dir / "training_summary.json", Json{{"total_steps", 100}, {"status", "completed"}});
  const RunAnalysis single = analyse_run(dir.path());
  EXPECT_TRUE(single.ranks.empty());
  EXPECT_EQ(find(single, "straggler"), nullptr);
  EXPECT_EQ(format_report(single).find("Data parallel"), std::string::npos);
}

// A trace whose distributedInfo rank overflows an int (a crafted or damaged file) is no rank's
// trace; before, std::stoi threw and the report ended with a bare "stoi".
TEST(ReportAnalysis, ATraceRankBeyondAnyWorldIsIgnoredNotABareStoiError) {
  testing::ScratchDir dir("report_analysis");
  write_json_atomic(dir / "training_summary.json",
                    Json{{"total_steps", 10}, {"status", "completed"}, {"world_size", 2}});
  fs::create_directories(dir / "profiler_traces");
  auto trace = [](const std::string& rank, const std::string& op) {
    return "{\"distributedInfo\": {\"backend\": \"gloo\", \"rank\": " + rank +
           ", \"world_size\": 2}, \"traceEvents\": [{\"ph\": \"X\", \"cat\": \"cpu_op\", \"name\": \"" + op +
           "\", \"ts\": 0, \"dur\": 10, \"pid\": 1, \"tid\": 1}]}";
  };
  write_file_atomic(dir / "profiler_traces" / "a.pt.trace.json", trace("0", "aten::mm"));
  write_file_atomic(dir / "profiler_traces" / "b.pt.trace.json", trace("99999999999", "aten::add"));
  const RunAnalysis a = analyse_run(dir.path());
  ASSERT_EQ(a.ops.cpu_ops.size(), 1u) << "only rank 0's trace is read";
  EXPECT_EQ(a.ops.cpu_ops[0].name, "aten::mm");
}

}  // namespace
}  // namespace rt::report
