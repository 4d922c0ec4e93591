// Stopping a profiled run: Ctrl-C (SIGINT) and SIGTERM flush every file and exit 130 / 143
// with status "interrupted"; kill -9 still leaves parseable timing and memory profiles.
#include "e2e/e2e_fixtures.h"
#include "util/profile_files.h"
#include "util/signals.h"

namespace rt::e2e {
namespace {

class ProfilingSignals : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = new ScratchDir("e2e_profiling_signals");
    db_ = make_demo_db(dir_->path());
  }
  static void TearDownTestSuite() {
    delete dir_;
    dir_ = nullptr;
  }
  // A 1000-step profiled run in the background, logging every step.
  static std::unique_ptr<BackgroundProcess> start(const std::string& name) {
    return std::make_unique<BackgroundProcess>(
        tiny_train_command(db_, dir_->path() / name,
                           "--max_steps 1000 --log_every 1 --profiling.memory_every 5 "
                           "--enable_timing_profiling --enable_memory_profiling"),
        dir_->path() / (name + ".log"));
  }
  static ScratchDir* dir_;
  static fs::path db_;
};
ScratchDir* ProfilingSignals::dir_ = nullptr;
fs::path ProfilingSignals::db_;

void expect_interrupted_run(BackgroundProcess& p, int sig, int expected_exit) {
  ASSERT_TRUE(p.wait_until([&] { return last_logged_step(p.log()) >= 20; }, 120)) << p.log();
  p.signal(sig);
  const int code = p.wait_exit(60);
  const std::string log = p.log();
  EXPECT_EQ(code, expected_exit) << log;
  const fs::path run = run_dir_from_output(log);
  ASSERT_FALSE(run.empty()) << log;

  const Json summary = read_json(run / "training_summary.json");
  EXPECT_EQ(summary.at("status"), "interrupted");
  const Json timing = read_json(run / "timing_profile.json");
  const Json memory = read_json(run / "memory_profile.json");
  ASSERT_TRUE(timing.is_array());
  ASSERT_TRUE(memory.is_array());
  const int64_t steps = summary.at("total_steps");
  EXPECT_GE(steps, 20);
  EXPECT_LT(steps, 1000);
  // Every step done is in the flushed profile, and the summary counts exactly those.
  EXPECT_EQ(static_cast<int64_t>(timing.size()), steps);
  EXPECT_EQ(timing.back().at("step"), steps - 1);
  EXPECT_EQ(last_logged_step(log), steps);
  EXPECT_EQ(static_cast<int64_t>(memory.size()), (steps + 4) / 5);  // steps 0, 5, 10, ...
  EXPECT_NE(log.find("training interrupted after " + std::to_string(steps) + " steps"), std::string::npos)
      << log;
  // The final checkpoint of an interrupted run is the step it stopped at.
  EXPECT_TRUE(fs::exists(run / "checkpoints" / "last.ckpt"));
}

TEST_F(ProfilingSignals, SigintStopsWithExitCode130AndFlushedFiles) {
  auto p = start("int");
  expect_interrupted_run(*p, SIGINT, 130);
}

TEST_F(ProfilingSignals, SigtermStopsWithExitCode143AndFlushedFiles) {
  auto p = start("term");
  expect_interrupted_run(*p, SIGTERM, 143);
}

TEST_F(ProfilingSignals, KillNineLeavesParseableProfiles) {
  auto proc = start("kill");
  BackgroundProcess& p = *proc;
  // Past the first flushes (the writers rewrite their files at most every 2 s).
  ASSERT_TRUE(p.wait_until([&] { return last_logged_step(p.log()) >= 20; }, 120)) << p.log();
  const fs::path run = run_dir_from_output(p.log());
  ASSERT_FALSE(run.empty());
  ASSERT_TRUE(p.wait_until(
      [&] { return fs::exists(run / "timing_profile.json") && fs::exists(run / "memory_profile.json"); },
      60));
  p.signal(SIGKILL);
  EXPECT_EQ(p.wait_exit(60), 128 + SIGKILL);
  for (const char* file : {"timing_profile.json", "memory_profile.json"}) {
    // Valid line by line (util/profile_files.h): a kill in the middle of a flush's write leaves
    // every complete line readable.
    Json j;
    ASSERT_NO_THROW(j = read_profile_entries(run / file)) << file;
    ASSERT_TRUE(j.is_array()) << file;
    ASSERT_FALSE(j.empty()) << file;
    for (size_t i = 0; i < j.size(); ++i) EXPECT_TRUE(j[i].contains("step")) << file;
  }
}

// SIGHUP (a closed ssh session) and SIGQUIT (Ctrl-\\) end the run like SIGTERM. Before: they
// killed it the way kill -9 does, leaving .tmp files and a summary saying "running".
TEST_F(ProfilingSignals, SighupStopsWithExitCode129AndFlushedFiles) {
  auto p = start("hup");
  expect_interrupted_run(*p, SIGHUP, 129);
}

TEST_F(ProfilingSignals, SigquitStopsWithExitCode131AndFlushedFiles) {
  auto p = start("quit");
  expect_interrupted_run(*p, SIGQUIT, 131);
}

// SIGUSR1 writes a checkpoint after the current step and training goes on.
TEST_F(ProfilingSignals, Sigusr1WritesACheckpointNowAndTrainingGoesOn) {
  auto proc = start("usr1");
  BackgroundProcess& p = *proc;
  ASSERT_TRUE(p.wait_until([&] { return last_logged_step(p.log()) >= 5; }, 120)) << p.log();
  p.signal(SIGUSR1);
  ASSERT_TRUE(p.wait_until(
      [&] { return p.log().find("SIGUSR1: checkpoint written at step ") != std::string::npos; }, 60))
      << p.log();
  const std::string log = p.log();
  const auto at = log.find("SIGUSR1: checkpoint written at step ");
  const int64_t step =
      std::stoll(log.substr(at + std::string("SIGUSR1: checkpoint written at step ").size()));
  const fs::path run = run_dir_from_output(log);
  EXPECT_TRUE(fs::exists(run / "checkpoints" / ("step_" + std::to_string(step) + ".ckpt"))) << log;
  EXPECT_TRUE(fs::exists(run / "checkpoints" / "last.ckpt")) << log;
  // Still training.
  ASSERT_TRUE(p.wait_until([&] { return last_logged_step(p.log()) >= step + 3; }, 120)) << p.log();
  p.signal(SIGTERM);
  EXPECT_EQ(p.wait_exit(60), 143) << p.log();
}

// `nohup train …`: an ignored SIGHUP stays ignored.
TEST_F(ProfilingSignals, SighupIgnoredByNohupStaysIgnored) {
  const fs::path out = dir_->path() / "nohup";
  BackgroundProcess p("nohup " + tiny_train_command(db_, out, "--max_steps 40 --log_every 1"),
                      dir_->path() / "nohup.log");
  ASSERT_TRUE(p.wait_until([&] { return last_logged_step(p.log()) >= 5; }, 120)) << p.log();
  p.signal(SIGHUP);
  EXPECT_EQ(p.wait_exit(300), 0) << p.log();
  EXPECT_NE(p.log().find("training completed after 40 steps"), std::string::npos) << p.log();
}

// A signal that arrives before `train` could install its handlers (held pending here by a
// blocked mask across exec, as the first moments of a process are) ends the run at start-up
// with a message and exit 128 + signal, writing nothing. Before: the handlers were installed
// ~0.55 s into the run, after the config was read, and a signal then killed the process.
TEST_F(ProfilingSignals, ASignalBeforeTheHandlersAreInstalledEndsTheRunWithAMessage) {
  const fs::path out = dir_->path() / "early";
  const fs::path log = dir_->path() / "early.log";
  const std::string command =
      "exec " + tiny_train_command(db_, out, "--max_steps 40") + " > " + quote(log.string()) + " 2>&1";
  const pid_t pid = ::fork();
  if (pid == 0) {
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, SIGTERM);
    ::sigprocmask(SIG_BLOCK, &set, nullptr);
    ::raise(SIGTERM);  // pending: it arrives before any handler of train's exists
    ::execl("/bin/sh", "sh", "-c", command.c_str(), static_cast<char*>(nullptr));
    ::_exit(127);
  }
  int status = 0;
  const auto t0 = std::chrono::steady_clock::now();
  while (::waitpid(pid, &status, WNOHANG) != pid) {
    if (std::chrono::steady_clock::now() - t0 > std::chrono::seconds(300)) {
      ::kill(pid, SIGKILL);
      ::waitpid(pid, &status, 0);
      FAIL() << "still running after 300 s";
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  std::ifstream in(log);
  std::stringstream text;
  text << in.rdbuf();
  ASSERT_TRUE(WIFEXITED(status)) << "killed by signal " << WTERMSIG(status) << ":\n" << text.str();
  EXPECT_EQ(WEXITSTATUS(status), 143) << text.str();
  EXPECT_NE(text.str().find("stopped by SIGTERM during start-up"), std::string::npos) << text.str();
  EXPECT_FALSE(fs::exists(out)) << "a run directory was written:\n" << text.str();
}

// A signal before any code of train's can run (the dynamic loader still mapping and relocating
// its ~290 libraries, a tenth of a second or more): no handler exists yet, so SIGTERM's default
// action ends the process. Nothing is written, and a shell sees status 143, as after a handled
// stop (docs/cli.md states this window; scripts/signal_window.py measures it).
TEST_F(ProfilingSignals, ASignalWhileTheLibrariesLoadEndsWithNothingWritten) {
  for (const int delay_ms : {0, 5, 20, 60, 150}) {
    const fs::path out = dir_->path() / ("loading_" + std::to_string(delay_ms));
    const std::string command = tiny_train_command(db_, out, "--max_steps 40");
    const pid_t pid = ::fork();
    if (pid == 0) {
      ::execl("/bin/sh", "sh", "-c", ("exec " + command + " > /dev/null 2>&1").c_str(),
              static_cast<char*>(nullptr));
      ::_exit(127);
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(delay_ms));
    ::kill(pid, SIGTERM);
    int status = 0;
    ASSERT_EQ(::waitpid(pid, &status, 0), pid);
    const int shell_status = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
    EXPECT_EQ(shell_status, 143) << "after " << delay_ms << " ms";
    EXPECT_FALSE(fs::exists(out)) << "a run directory was written after a SIGTERM at " << delay_ms << " ms";
  }
}

// A signal while the shared libraries initialise (LibTorch's initialisers register its
// operators for about half a second before any code of train's ran): here raised by a preloaded
// library's initialiser, deterministically. The handlers are installed before any library's
// initialiser (DT_PREINIT_ARRAY), so it ends the run at start-up with a message. Before: they
// were installed by an initialiser of train's own, after the libraries', and the signal killed
// the process (the first 0.59 s of every run).
TEST_F(ProfilingSignals, ASignalWhileLibrariesInitialiseEndsTheRunWithAMessage) {
  const fs::path preload = bin_path("librt_raise_at_load.so");
  ASSERT_TRUE(fs::is_regular_file(preload)) << preload;
  for (int sig : {SIGTERM, SIGINT, SIGHUP}) {
    const fs::path out = dir_->path() / ("at_load_" + std::to_string(sig));
    auto r =
        run_command("RT_RAISE_AT_LOAD=" + std::to_string(sig) + " LD_PRELOAD=" + quote(preload.string()) +
                    " " + tiny_train_command(db_, out, "--max_steps 40") + " 2>&1");
    EXPECT_EQ(r.exit_code, 128 + sig) << r.output;
    EXPECT_NE(r.output.find(std::string("stopped by ") + signal_name(sig) + " during start-up"),
              std::string::npos)
        << r.output;
    EXPECT_FALSE(fs::exists(out)) << "a run directory was written:\n" << r.output;
  }
}

}  // namespace
}  // namespace rt::e2e
