#include <gtest/gtest.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <csignal>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <string>
#include <tuple>
#include <utility>

#include "support/test_support.h"
#include "util/atomic_file.h"
#include "util/error.h"
#include "util/heap_retention.h"
#include "util/json.h"
#include "util/path_kind.h"
#include "util/signals.h"

namespace rt {
namespace {

// What a terminal would act on is escaped; text and valid UTF-8 pass unchanged.
TEST(TerminalSafe, EscapesWhatATerminalActsOnAndKeepsText) {
  EXPECT_EQ(terminal_safe("plain text, tabs\tand\nlines"), "plain text, tabs\tand\nlines");
  EXPECT_EQ(terminal_safe("Kl\xc3\xa4nge \xe2\x86\x92 \xf0\x9f\x8e\xb5"),
            "Kl\xc3\xa4nge \xe2\x86\x92 \xf0\x9f\x8e\xb5");
  EXPECT_EQ(terminal_safe("a\x1b[2Jb"), "a\\x1b[2Jb");
  EXPECT_EQ(terminal_safe("over\rwrite\x07\x7f"), "over\\x0dwrite\\x07\\x7f");
  EXPECT_EQ(terminal_safe(std::string("nul\0in", 6)), "nul\\x00in");
  EXPECT_EQ(terminal_safe("c1 \xc2\x9b"
                          "31m"),
            "c1 \\xc2\\x9b31m");                                       // U+009B, CSI
  EXPECT_EQ(terminal_safe("latin1 \xe9t\xe9"), "latin1 \\xe9t\\xe9");  // not UTF-8
  EXPECT_EQ(terminal_safe("cut \xe2\x86"), "cut \\xe2\\x86");          // a sequence cut short
  EXPECT_EQ(terminal_safe("overlong \xc0\xaf \xe0\x80\xaf"), "overlong \\xc0\\xaf \\xe0\\x80\\xaf");
  EXPECT_EQ(terminal_safe("surrogate \xed\xa0\x80"), "surrogate \\xed\\xa0\\x80");
  // Every rt::Error is made so where it is made.
  EXPECT_STREQ(Error("value '\x1b]0;title\x07'").what(), "value '\\x1b]0;title\\x07'");
}

TEST(PathKind, SaysWhatAPathIsInsteadOfDoesNotExist) {
  testing::ScratchDir dir;
  const auto file = dir / "f", fifo = dir / "p", link = dir / "dangling";
  write_file_atomic(file, "x");
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0644), 0);
  std::filesystem::create_symlink(dir / "nowhere", link);
  EXPECT_EQ(not_a_regular_file(file), "");
  EXPECT_EQ(not_a_regular_file(dir.path()), "is a folder, not a file");
  EXPECT_EQ(not_a_regular_file(fifo), "is a FIFO, not a file");
  EXPECT_EQ(not_a_regular_file("/dev/null"), "is a character device, not a file");
  EXPECT_EQ(not_a_regular_file(dir / "missing"), "does not exist");
  EXPECT_EQ(not_a_regular_file(link), "does not exist (a symbolic link to a missing file)");
  EXPECT_EQ(not_a_folder(dir.path()), "");
  EXPECT_EQ(not_a_folder(file), "is a regular file, not a folder");
  EXPECT_EQ(not_a_folder(file / "below"), "does not exist");
}

// In a child (mallopt is process-wide): a 20 MiB block freed and allocated again comes back
// without faulting its pages in again once freed memory is retained.
TEST(HeapRetention, AFreedBlockIsReusedWithoutPageFaults) {
  const pid_t pid = fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    if (std::getenv("GLIBC_TUNABLES")) unsetenv("GLIBC_TUNABLES");
    const HeapRetention r = retain_freed_heap_memory();
#if defined(__GLIBC__)
    if (!r.applied) _exit(2);
#endif
    auto faults = [] {
      rusage u{};
      getrusage(RUSAGE_SELF, &u);
      return u.ru_minflt;
    };
    constexpr size_t kBytes = size_t{20} << 20;
    long second = 0;
    for (int round = 0; round < 3; ++round) {
      const long before = faults();
      auto* p = static_cast<char*>(std::malloc(kBytes));
      if (!p) _exit(3);
      std::memset(p, round + 1, kBytes);
      volatile char sink = 0;  // read every page back, so the stores cannot be optimised away
      for (size_t i = 0; i < kBytes; i += 4096) sink = static_cast<char>(sink + p[i]);
      const long taken = faults() - before;
      std::free(p);
      if (round == 1) second = taken;
    }
    // 20 MiB is 5,120 pages: glibc's defaults fault all of them in again in the second round
    // (the first free munmaps the block; the second block comes from a heap grown afresh).
    _exit(second < 256 ? 0 : 1);
  }
  int status = 0;
  ASSERT_EQ(waitpid(pid, &status, 0), pid);
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_NE(WEXITSTATUS(status), 2) << "retention was not applied on glibc";
  EXPECT_EQ(WEXITSTATUS(status), 0) << "the freed block's pages were faulted in again";
  EXPECT_EQ(retain_freed_heap_memory().applied, retain_freed_heap_memory().applied) << "idempotent";
}

TEST(AtomicFile, ReplacesContentsAndLeavesNoTemporaryFile) {
  testing::ScratchDir dir;
  const auto path = dir / "sub/dir/file.txt";
  write_file_atomic(path, "first");
  write_file_atomic(path, "second, longer");
  EXPECT_EQ(read_file(path), "second, longer");
  size_t entries = 0;
  for ([[maybe_unused]] const auto& e : std::filesystem::directory_iterator(path.parent_path())) ++entries;
  EXPECT_EQ(entries, 1u);
}

// The summary's last resort on a full disk: the status over the file's own first bytes, the
// rest cut off, no new block and no temporary file; refused when the text would not fit.
TEST(AtomicFile, OverwriteInPlaceUsesTheFilesOwnBlocksOnly) {
  testing::ScratchDir dir;
  const auto path = dir / "training_summary.json";
  write_file_atomic(path, std::string(4096, 'x'));
  struct stat before {};
  ASSERT_EQ(::stat(path.c_str(), &before), 0);
  ASSERT_TRUE(overwrite_file_in_place(path, "{\"status\": \"failed\"}\n"));
  EXPECT_EQ(read_file(path), "{\"status\": \"failed\"}\n");
  struct stat after {};
  ASSERT_EQ(::stat(path.c_str(), &after), 0);
  EXPECT_EQ(after.st_ino, before.st_ino) << "a new file replaced it";
  EXPECT_FALSE(overwrite_file_in_place(path, std::string(100, 'y'))) << "a text longer than the file";
  EXPECT_EQ(read_file(path), "{\"status\": \"failed\"}\n");
  EXPECT_FALSE(overwrite_file_in_place(dir / "missing.json", "x"));
  EXPECT_FALSE(std::filesystem::exists(dir / "missing.json"));
}

// A second name for a file: the same inode, replacing what was there, no temporary left.
TEST(AtomicFile, LinkFileAtomicGivesTheSameFileASecondName) {
  testing::ScratchDir dir;
  write_file_atomic(dir / "traces" / "a.json", "trace");
  write_file_atomic(dir / "step.json", "old copy");
  link_file_atomic(dir / "traces" / "a.json", dir / "step.json");
  EXPECT_TRUE(std::filesystem::equivalent(dir / "traces" / "a.json", dir / "step.json"));
  EXPECT_EQ(read_file(dir / "step.json"), "trace");
  size_t entries = 0;
  for ([[maybe_unused]] const auto& e : std::filesystem::directory_iterator(dir.path())) ++entries;
  EXPECT_EQ(entries, 2u);  // traces/ and step.json
}

TEST(AtomicFile, ErrorNamesThePath) {
  try {
    write_file_atomic("/proc/rt_cannot_write_here/x.json", "x");
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("/proc/rt_cannot_write_here"), std::string::npos) << e.what();
  }
}

TEST(Json, RoundTripsAndReportsParseErrorsWithPath) {
  testing::ScratchDir dir;
  write_json_atomic(dir / "a.json", Json{{"step", 3}, {"loss", 0.5}});
  Json back = read_json(dir / "a.json");
  EXPECT_EQ(back["step"], 3);
  write_file_atomic(dir / "bad.json", "{\"step\": ");
  try {
    read_json(dir / "bad.json");
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("bad.json"), std::string::npos);
  }
}

TEST(ClosestMatch, SuggestsNearbyNamesOnly) {
  EXPECT_EQ(edit_distance("kitten", "sitting"), 3u);
  EXPECT_EQ(closest_match("learing_rate", {"lr", "learning_rate", "batch"}), "learning_rate");
  EXPECT_EQ(closest_match("zzzzzzzz", {"lr", "learning_rate", "batch"}), "");
}

TEST(ClosestMatch, PrefersAbbreviationsAndTheSameSectionOverRawDistance) {
  const std::vector<std::string> keys{"train.lr",      "train.lr_end_factor", "train.batch", "train.seed",
                                      "data.n_signal", "model.latent_size",   "model.lr"};
  // Initials: train.lr_end_factor is closer by edit distance (9 against 11).
  EXPECT_EQ(closest_match("train.learning_rate", keys), "train.lr");
  EXPECT_EQ(closest_match("train.batch_size", keys), "train.batch");         // leading words
  EXPECT_EQ(closest_match("train.n_signal", keys), "data.n_signal");         // the key in its section
  EXPECT_EQ(closest_match("model.latent_sise", keys), "model.latent_size");  // a typo
  EXPECT_EQ(closest_match("--learning_rate", {"--lr", "--lr_end_factor"}), "--lr");
  EXPECT_EQ(closest_match("train.zzzzzzzzzz", keys), "");
}

// In a child process: the handlers, then `first` and `second` sent to it; returns the wait status
// and what the handler printed (messages on, through a pipe).
std::pair<int, std::string> signals_in_child(int first, int second) {
  int fds[2];
  EXPECT_EQ(::pipe(fds), 0);
  const pid_t pid = ::fork();
  if (pid == 0) {
    ::dup2(fds[1], STDERR_FILENO);
    install_stop_signal_handlers();
    set_stop_messages(true);
    if (!rt::testing::signal_this_process(first)) ::_exit(4);
    if (!stop_requested() || stop_signal() != first) ::_exit(3);
    // A second Ctrl-C ends the process before signal_this_process returns (the signal thread
    // raises it with the default action).
    if (!rt::testing::signal_this_process(second)) ::_exit(4);
    ::_exit(0);  // still running: the second signal did not stop the process
  }
  ::close(fds[1]);
  std::string out;
  char buf[256];
  for (ssize_t n; (n = ::read(fds[0], buf, sizeof buf)) > 0;) out.append(buf, static_cast<size_t>(n));
  ::close(fds[0]);
  int status = 0;
  ::waitpid(pid, &status, 0);
  return {status, out};
}

TEST(StopSignals, SecondCtrlCStopsAtOnceAndALaunchersSigtermDoesNot) {
  auto [status, out] = signals_in_child(SIGINT, SIGINT);
  ASSERT_TRUE(WIFSIGNALED(status)) << "a second Ctrl-C was swallowed; output: " << out;
  EXPECT_EQ(WTERMSIG(status), SIGINT);
  EXPECT_NE(out.find("stopping after this step"), std::string::npos) << out;
  EXPECT_NE(out.find("second Ctrl-C: stopping now"), std::string::npos) << out;
  // Ctrl-C then the launcher's SIGTERM: the cooperative stop goes on.
  std::tie(status, out) = signals_in_child(SIGINT, SIGTERM);
  ASSERT_TRUE(WIFEXITED(status)) << out;
  EXPECT_EQ(WEXITSTATUS(status), 0) << out;
  // SIGTERM first: it says so, and a second SIGTERM does not cut the stop short either.
  std::tie(status, out) = signals_in_child(SIGTERM, SIGTERM);
  ASSERT_TRUE(WIFEXITED(status)) << out;
  EXPECT_EQ(WEXITSTATUS(status), 0) << out;
  EXPECT_NE(out.find("SIGTERM: stopping after this step"), std::string::npos) << out;
}

}  // namespace
}  // namespace rt
