#include "profiling/profile_writers.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <malloc.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <iostream>
#include <limits>
#include <thread>

#include "support/test_support.h"
#include "util/atomic_file.h"
#include "util/json.h"
#include "util/profile_files.h"

namespace rt::prof {
namespace {

namespace fs = std::filesystem;

FlushPolicy every_entry() { return FlushPolicy{0.0, 1}; }

TimingEntry timing_entry(int64_t step) {
  TimingEntry e;
  e.step = step;
  e.batch_idx = step;
  e.total_batch_time = 0.045;
  e.samples_per_second = 177.78;
  e.examples_per_second = 88.89;
  e.data_time = 0.001;
  e.forward_time = 0.02;
  e.backward_time = 0.02;
  e.optimizer_time = 0.004;
  return e;
}

TEST(TimingProfileWriter, WritesEveryFieldOfTheRaveGuidePlusPhases) {
  testing::ScratchDir dir;
  const fs::path path = dir / "timing_profile.json";
  {
    TimingProfileWriter writer(path, 1, every_entry());
    TimingEntry e = timing_entry(100);
    e.extra["loss_fn_computation_time"] = 0.003;
    EXPECT_TRUE(writer.record(e));
  }
  const Json j = read_json(path);
  ASSERT_TRUE(j.is_array());
  ASSERT_EQ(j.size(), 1u);
  const Json& e = j[0];
  EXPECT_EQ(e["step"], 100);
  EXPECT_EQ(e["batch_idx"], 100);
  EXPECT_DOUBLE_EQ(e["total_batch_time"].get<double>(), 0.045);
  EXPECT_DOUBLE_EQ(e["samples_per_second"].get<double>(), 177.78);
  EXPECT_DOUBLE_EQ(e["examples_per_second"].get<double>(), 88.89);
  EXPECT_DOUBLE_EQ(e["data_time"].get<double>(), 0.001);
  EXPECT_DOUBLE_EQ(e["forward_time"].get<double>(), 0.02);
  EXPECT_DOUBLE_EQ(e["backward_time"].get<double>(), 0.02);
  EXPECT_DOUBLE_EQ(e["optimizer_time"].get<double>(), 0.004);
  EXPECT_DOUBLE_EQ(e["loss_fn_computation_time"].get<double>(), 0.003);
}

TEST(TimingProfileWriter, TimingEveryKeepsOnlyMultiples) {
  testing::ScratchDir dir;
  const fs::path path = dir / "timing_profile.json";
  {
    TimingProfileWriter writer(path, 3, every_entry());
    for (int64_t step = 0; step < 10; ++step) EXPECT_EQ(writer.record(timing_entry(step)), step % 3 == 0);
  }
  const Json j = read_json(path);
  ASSERT_EQ(j.size(), 4u);
  EXPECT_EQ(j[0]["step"], 0);
  EXPECT_EQ(j[1]["step"], 3);
  EXPECT_EQ(j[2]["step"], 6);
  EXPECT_EQ(j[3]["step"], 9);
  EXPECT_THROW(TimingProfileWriter(dir / "x.json", 0), std::exception);
}

TEST(JsonListFile, IsParseableAfterEveryFlushAndHoldsEveryEntry) {
  testing::ScratchDir dir;
  const fs::path path = dir / "list.json";
  JsonListFile file(path, every_entry());
  file.flush();  // an empty list is still a file
  EXPECT_EQ(read_json(path), Json::array());
  for (int i = 0; i < 20; ++i) {
    file.append(Json{{"i", i}, {"name", "quote\"and\\slash"}});
    const Json j = read_json(path);
    ASSERT_EQ(j.size(), static_cast<size_t>(i + 1));
    EXPECT_EQ(j[i]["i"], i);
    EXPECT_EQ(j[i]["name"], "quote\"and\\slash");
  }
  EXPECT_EQ(file.flush_count(), 21);
}

TEST(JsonListFile, ContinuingAFileKeepsTheStepsBeforeTheResumeAndSetsAsideAnUnreadableOne) {
  testing::ScratchDir dir;
  const fs::path path = dir / "timing_profile.json";
  {
    TimingProfileWriter first(path, 1, every_entry());
    for (int64_t s = 0; s < 6; ++s) first.record(timing_entry(s));
  }
  {
    TimingProfileWriter resumed(path, 1, every_entry());
    EXPECT_EQ(resumed.continue_from(4), 4);  // steps 4 and 5 lay past the checkpoint
    resumed.record(timing_entry(4));
  }
  std::vector<int64_t> steps;
  for (const auto& e : read_json(path)) steps.push_back(e.at("step").get<int64_t>());
  EXPECT_EQ(steps, (std::vector<int64_t>{0, 1, 2, 3, 4}));

  write_file_atomic(path, "[{\"step\": 0},");  // not JSON
  {
    TimingProfileWriter resumed(path, 1, every_entry());
    EXPECT_EQ(resumed.continue_from(4), 0);
    resumed.record(timing_entry(4));
  }
  EXPECT_EQ(read_json(path).size(), 1u);
  EXPECT_EQ(read_file(path.string() + ".unreadable"), "[{\"step\": 0},");
}

TEST(JsonListFile, FlushesOnlyWhenThePolicySaysSoAndOnClose) {
  testing::ScratchDir dir;
  const fs::path path = dir / "list.json";
  JsonListFile file(path, FlushPolicy{3600.0, 5});
  for (int i = 0; i < 4; ++i) file.append(Json{{"i", i}});
  EXPECT_FALSE(fs::exists(path));  // neither interval nor count reached
  file.append(Json{{"i", 4}});
  EXPECT_EQ(read_json(path).size(), 5u);
  file.append(Json{{"i", 5}});
  EXPECT_EQ(read_json(path).size(), 5u);
  file.close();
  EXPECT_EQ(read_json(path).size(), 6u);
  EXPECT_THROW(file.append(Json{{"i", 6}}), std::exception);
}

// Flushes at 1000, 1100 and 100000 entries each leave one valid list holding every entry so far
// (what a flush costs is a benchmark's business: BENCHMARKS.md, profiling overhead).
TEST(JsonListFile, EachFlushOfThousandsOfEntriesLeavesOneValidList) {
  testing::ScratchDir dir;
  JsonListFile file(dir / "timing_profile.json", FlushPolicy{3600.0, 1'000'000});
  int64_t written = 0;
  for (int64_t upto : {1000, 1100, 100'000}) {
    for (; written < upto; ++written) file.append(to_json(timing_entry(written)));
    file.flush();
    const Json all = read_json(file.path());
    ASSERT_EQ(all.size(), static_cast<size_t>(upto));
    EXPECT_EQ(all.back()["step"], upto - 1);
  }
}

// The profile streams to disk: the writer's heap does not grow with the entries written.
// Before: the whole list was kept in memory (360 bytes a step; gigabytes over a week-long run).
// The bytes malloc hands out: its arena's chunks (uordblks) and the chunks it maps on their own
// (hblkhd). A string of the whole profile, past the mmap threshold, lives in the second only: a
// count of uordblks alone did not see the entries the writer kept before d0b1dc2.
size_t heap_bytes() {
  const auto m = mallinfo2();
  return m.uordblks + m.hblkhd;
}

TEST(JsonListFile, HeapStaysFlatWhileTheFileGrows) {
  testing::ScratchDir dir;
  const fs::path path = dir / "timing_profile.json";
  TimingProfileWriter writer(path, 1, FlushPolicy{3600.0, 1000}, RotationPolicy{0, 8});
  for (int64_t s = 0; s < 2000; ++s) writer.record(timing_entry(s));
  writer.flush();
  const size_t heap_before = heap_bytes();
  for (int64_t s = 2000; s < 200'000; ++s) writer.record(timing_entry(s));
  writer.flush();
  const size_t heap_after = heap_bytes();
  const auto file = fs::file_size(path);
  EXPECT_GT(file, 30u << 20);
  EXPECT_LT(heap_after, heap_before + (2u << 20)) << "the entries are held in memory";
  EXPECT_LT(writer.file().pending_bytes(), 1u << 20);
  const Json all = read_json(path);  // still one valid list
  ASSERT_EQ(all.size(), 200'000u);
  EXPECT_EQ(all.back().at("step"), 199'999);
}

// Rotation bounds the files: parts of at most part_bytes (plus one flush, here one entry), at
// most `parts` files, the oldest removed first; the readers see the newest entries in order.
TEST(JsonListFile, RotationKeepsAtMostPartsFilesOfPartBytesAndReadsThemAsOne) {
  testing::ScratchDir dir;
  const fs::path path = dir / "timing_profile.json";
  const int64_t part_bytes = 16 * 1024;
  {
    TimingProfileWriter writer(path, 1, every_entry(), RotationPolicy{part_bytes, 3});
    for (int64_t s = 0; s < 1000; ++s) writer.record(timing_entry(s));
    writer.close();
    EXPECT_GT(writer.file().rotations(), 3);
    EXPECT_GT(writer.file().parts_removed(), 0);
  }
  const auto parts = profile_parts(path);
  ASSERT_EQ(parts.size(), 2u);  // + the current file: 3
  uintmax_t total = fs::file_size(path);
  for (const auto& p : parts) {
    const Json list = read_json(p);  // every part is a JSON list of its own
    EXPECT_TRUE(list.is_array()) << p;
    EXPECT_LT(fs::file_size(p), static_cast<uintmax_t>(part_bytes) + 400) << p;  // + one flush
    total += fs::file_size(p);
  }
  EXPECT_LT(total, 3u * (part_bytes + 400));
  const Json all = read_profile_entries(path);
  ASSERT_FALSE(all.empty());
  // Every file kept is read, the oldest part first: profile-report sees all of it.
  size_t held = read_json(path).size();
  for (const auto& p : parts) held += read_json(p).size();
  ASSERT_EQ(all.size(), held) << "the parts are not read with the file";
  EXPECT_EQ(all.front().at("step"), read_json(parts.front()).front().at("step"));
  EXPECT_EQ(all.back().at("step"), 999);
  for (size_t i = 1; i < all.size(); ++i)
    ASSERT_EQ(all[i].at("step"), all[i - 1].at("step").get<int64_t>() + 1);
  // A resume at step 900 drops the later steps from every file, parts included.
  {
    TimingProfileWriter resumed(path, 1, every_entry(), RotationPolicy{part_bytes, 3});
    resumed.continue_from(900);
    resumed.record(timing_entry(900));
  }
  const Json after = read_profile_entries(path);
  EXPECT_EQ(after.back().at("step"), 900);
  for (size_t i = 1; i < after.size(); ++i)
    ASSERT_EQ(after[i].at("step"), after[i - 1].at("step").get<int64_t>() + 1);
}

// A file cut short in the middle of a line (a writer killed during its write) is read line by
// line, and the note names it.
TEST(JsonListFile, AFileCutShortIsReadLineByLine) {
  testing::ScratchDir dir;
  const fs::path path = dir / "timing_profile.json";
  {
    TimingProfileWriter writer(path, 1, every_entry());
    for (int64_t s = 0; s < 5; ++s) writer.record(timing_entry(s));
  }
  const std::string text = read_file(path);
  write_file_atomic(path, text.substr(0, text.size() - 3) + ",\n  {\"step\": 5, \"batch_i");
  EXPECT_THROW(read_json(path), std::exception);
  std::vector<std::string> notes;
  const Json entries = read_profile_entries(path, &notes);
  ASSERT_EQ(entries.size(), 5u);
  EXPECT_EQ(entries.back().at("step"), 4);
  ASSERT_EQ(notes.size(), 1u);
  EXPECT_NE(notes[0].find("was cut short while being written"), std::string::npos) << notes[0];
  // A resume continues it: the complete entries are kept, the file is a list again.
  {
    TimingProfileWriter resumed(path, 1, every_entry());
    EXPECT_EQ(resumed.continue_from(5), 5);
    resumed.record(timing_entry(5));
  }
  EXPECT_EQ(read_json(path).size(), 6u);
}

TEST(MemoryProfileWriter, WritesRaveAndJaxGuideFieldsPlusRss) {
  testing::ScratchDir dir;
  const fs::path path = dir / "memory_profile.json";
  MemorySample s;
  s.cpu_tracked = true;
  s.cpu_bytes_in_use = 1000;
  s.cpu_peak_bytes_in_use = 2000;
  s.process = {3000, 4000};
  s.system = {16LL << 30, 8LL << 30, 50.0};
  s.cuda.available = true;
  s.cuda.device = 0;
  s.cuda.allocated_bytes = 1LL << 30;
  s.cuda.peak_allocated_bytes = 3LL << 29;
  s.cuda.reserved_bytes = 2LL << 30;
  s.cuda.peak_reserved_bytes = 2LL << 30;
  s.timestamp = 1700000000.5;
  {
    MemoryProfileWriter writer(path, 10, every_entry());
    EXPECT_FALSE(writer.record(5, 5, s));
    EXPECT_TRUE(writer.record(10, 10, s, Json{{"categories", {{"parameters", 123}}}}));
  }
  const Json j = read_json(path);
  ASSERT_EQ(j.size(), 1u);
  const Json& e = j[0];
  EXPECT_EQ(e["step"], 10);
  EXPECT_EQ(e["batch_idx"], 10);
  EXPECT_DOUBLE_EQ(e["cpu_memory_percent"].get<double>(), 50.0);
  EXPECT_DOUBLE_EQ(e["gpu_memory_allocated_gb"].get<double>(), 1.0);
  EXPECT_DOUBLE_EQ(e["gpu_memory_reserved_gb"].get<double>(), 2.0);
  EXPECT_EQ(e["memory"]["cpu"]["bytes_in_use"], 1000);
  EXPECT_EQ(e["memory"]["cpu"]["peak_bytes_in_use"], 2000);
  EXPECT_EQ(e["memory"]["cuda:0"]["bytes_in_use"], 1LL << 30);
  EXPECT_EQ(e["memory"]["cuda:0"]["peak_bytes_in_use"], 3LL << 29);
  EXPECT_EQ(e["memory"]["cuda:0"]["reserved_bytes"], 2LL << 30);
  EXPECT_EQ(e["rss_bytes"], 3000);
  EXPECT_EQ(e["peak_rss_bytes"], 4000);
  EXPECT_DOUBLE_EQ(e["timestamp"].get<double>(), 1700000000.5);
  EXPECT_EQ(e["categories"]["parameters"], 123);
}

TEST(MemoryProfileWriter, CpuOnlySampleHasZeroGpuFieldsAndNoCudaKey) {
  testing::ScratchDir dir;
  const fs::path path = dir / "memory_profile.json";
  {
    MemoryProfileWriter writer(path, 1, every_entry());
    writer.record(1, 1, sample_memory(default_memory_reporter().get()));
  }
  const Json e = read_json(path).at(0);
  EXPECT_EQ(e["gpu_memory_allocated_gb"], 0.0);
  EXPECT_EQ(e["gpu_memory_reserved_gb"], 0.0);
  EXPECT_TRUE(e["memory"].contains("cpu"));
  EXPECT_FALSE(e["memory"].contains("cuda:0"));
  EXPECT_GT(e["rss_bytes"].get<int64_t>(), 0);
  EXPECT_GT(e["cpu_memory_percent"].get<double>(), 0.0);
}

TEST(MemoryProfileWriter, AMeasurementAddsItsSplitAndPeakCompositionOnlyWhenItHasThem) {
  testing::ScratchDir dir;
  const fs::path path = dir / "memory_profile.json";
  MemoryMeasurement plain;
  plain.sample = sample_memory(nullptr);
  MemoryMeasurement cpu = plain;
  cpu.split = CategorySplit{};
  cpu.split->bytes[MemoryCategory::kParameters] = 400;
  cpu.split->bytes[MemoryCategory::kOther] = 600;
  cpu.split->untracked_bytes = 8;
  cpu.interval_peak = PeakComposition{};
  cpu.interval_peak->bytes_in_use = 1500;
  cpu.interval_peak->categories[MemoryCategory::kGradients] = 500;
  MemoryMeasurement cuda = cpu;
  cuda.interval_peak.reset();
  {
    MemoryProfileWriter writer(path, 1, every_entry());
    writer.record(0, 0, plain);
    writer.record(1, 1, cpu);
    writer.record(2, 2, cuda);
  }
  const Json j = read_json(path);
  ASSERT_EQ(j.size(), 3u);
  for (const char* key : {"categories", "categories_untracked_bytes", "interval_peak"})
    EXPECT_FALSE(j[0].contains(key)) << key;
  EXPECT_EQ(j[1]["categories"]["parameters"], 400);
  EXPECT_EQ(j[1]["categories"]["activations_and_temporaries"], 600);
  EXPECT_EQ(j[1]["categories"]["optimizer_state"], 0);
  EXPECT_EQ(j[1]["categories_untracked_bytes"], 8);
  EXPECT_EQ(j[1]["interval_peak"]["bytes_in_use"], 1500);
  EXPECT_EQ(j[1]["interval_peak"]["categories"]["gradients"], 500);
  EXPECT_EQ(j[2]["categories"]["parameters"], 400);
  EXPECT_FALSE(j[2].contains("interval_peak"));
  EXPECT_TRUE(j[2].contains("rss_bytes"));
}

TEST(TrainingSummary, HasEveryGuideFieldAndStatus) {
  testing::ScratchDir dir;
  const fs::path path = dir / "training_summary.json";
  TrainingSummary summary;
  summary.start();
  const double before =
      std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  summary.record_step(1, 2.5, 8 * 131072);
  summary.record_step(2, 2.0, 8 * 131072);
  summary.record_step(3, 1.5, 8 * 131072);
  summary.set_metric("validation", 0.75);
  summary.set_info("model_family", "rave");
  summary.set_info("device", "cpu");
  summary.write(path, "interrupted");
  const Json j = read_json(path);
  EXPECT_EQ(j["total_steps"], 3);
  EXPECT_GE(j["total_training_time_seconds"].get<double>(), 0.019);
  EXPECT_NEAR(j["average_time_per_step"].get<double>(), j["total_training_time_seconds"].get<double>() / 3,
              1e-9);
  EXPECT_NEAR(j["steps_per_second"].get<double>(), 3 / j["total_training_time_seconds"].get<double>(), 1e-6);
  EXPECT_LE(j["training_start_time"].get<double>(), before + 1e-3);
  EXPECT_GT(j["training_start_time"].get<double>(), before - 60);
  EXPECT_GE(j["training_end_time"].get<double>(), j["training_start_time"].get<double>() + 0.019);
  EXPECT_EQ(j["status"], "interrupted");
  EXPECT_EQ(j["metrics"]["validation"], 0.75);
  EXPECT_EQ(j["first_step_loss"], 2.5);
  EXPECT_EQ(j["last_step_loss"], 1.5);
  EXPECT_EQ(j["last_step"], 3);
  EXPECT_EQ(j["total_samples"], 3 * 8 * 131072);
  EXPECT_GT(j["samples_per_second"].get<double>(), 0.0);
  EXPECT_GT(j["peak_rss_bytes"].get<int64_t>(), 0);
  EXPECT_EQ(j["model_family"], "rave");
  EXPECT_EQ(j["device"], "cpu");
}

TEST(TrainingSummary, WithoutStepsHasNullLossesAndNoDivisionByZero) {
  testing::ScratchDir dir;
  const fs::path path = dir / "training_summary.json";
  TrainingSummary summary;
  summary.start();
  summary.write(path, "failed: cannot open data/x.mdb");
  const Json j = read_json(path);
  EXPECT_EQ(j["total_steps"], 0);
  EXPECT_EQ(j["average_time_per_step"], 0.0);
  EXPECT_TRUE(j["first_step_loss"].is_null());
  EXPECT_TRUE(j["last_step_loss"].is_null());
  EXPECT_EQ(j["status"], "failed: cannot open data/x.mdb");
  EXPECT_TRUE(j["metrics"].is_object());
}

// The child of SurvivesSigkillMidRun: writes timing entries forever, flushing after each.
TEST(ProfileWritersChild, DISABLED_WritesEntriesForever) {
  const char* out = std::getenv("RT_PROFILE_CHILD_PATH");
  ASSERT_NE(out, nullptr);
  TimingProfileWriter writer(out, 1, every_entry());
  for (int64_t step = 0;; ++step) {
    TimingEntry e = timing_entry(step);
    for (int k = 0; k < 40; ++k) e.extra["phase_" + std::to_string(k)] = 0.001 * k;  // bigger writes
    writer.record(e);
  }
}

TEST(TimingProfileWriter, SurvivesSigkillMidRun) {
  testing::ScratchDir dir;
  const fs::path path = dir / "timing_profile.json";
  // The child's environment: this process's (LD_LIBRARY_PATH among it, where the LibTorch's
  // libraries are not the dynamic linker's own) and the path to write.
  std::vector<std::string> env{"RT_PROFILE_CHILD_PATH=" + path.string()};
  for (char** e = environ; *e != nullptr; ++e) {
    if (std::strncmp(*e, "RT_PROFILE_CHILD_PATH=", 22) != 0) env.emplace_back(*e);
  }
  std::vector<char*> envp;
  for (auto& v : env) envp.push_back(v.data());
  envp.push_back(nullptr);
  size_t previous = 0;
  for (int round = 0; round < 4; ++round) {
    const pid_t pid = ::fork();
    ASSERT_GE(pid, 0);
    if (pid == 0) {
      // Exec right away: the parent is multi-threaded, so the child must not do more than that.
      const int devnull = ::open("/dev/null", O_WRONLY);
      ::dup2(devnull, 1);
      ::dup2(devnull, 2);
      char* const argv[] = {
          const_cast<char*>("/proc/self/exe"), const_cast<char*>("--gtest_also_run_disabled_tests"),
          const_cast<char*>("--gtest_filter=ProfileWritersChild.DISABLED_WritesEntriesForever"), nullptr};
      ::execve("/proc/self/exe", argv, envp.data());
      ::_exit(127);
    }
    // Wait until the child has flushed some entries, then kill it at a varying moment.
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
    while (!fs::exists(path) && std::chrono::steady_clock::now() < deadline) {
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(50 + 37 * round));
    ASSERT_EQ(::kill(pid, SIGKILL), 0);
    int status = 0;
    ASSERT_EQ(::waitpid(pid, &status, 0), pid);
    ASSERT_TRUE(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL) << "child exited on its own: " << status;

    // Valid line by line: every complete line is an entry (util/profile_files.h).
    const Json j = read_profile_entries(path);
    ASSERT_TRUE(j.is_array());
    EXPECT_GT(j.size(), 0u);
    for (size_t i = 0; i < j.size(); ++i) ASSERT_EQ(j[i]["step"], static_cast<int64_t>(i));
    previous = j.size();
    fs::remove(path);
  }
  EXPECT_GT(previous, 0u);
}

}  // namespace
}  // namespace rt::prof
