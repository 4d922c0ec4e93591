// scripts/profiling_example.sh: unattended preset runs to the end, the menu works through a
// pseudo-terminal, and without a terminal it refuses unless given --preset NAME --yes.
#include <gtest/gtest.h>

#include "e2e/report_fixture.h"
#include "util/atomic_file.h"
#include "util/run_pointer.h"

namespace rt::report_e2e {
namespace {

using testing::ScratchDir;

// The script, run against the already-built binaries (BUILD_DIR), output under `out`.
std::string script_cmd(const fs::path& out, const std::string& args) {
  const fs::path build = fs::path(testing::bin_path("train")).parent_path().parent_path();
  return "BUILD_DIR=" + q(build) + " bash " + q(testing::source_path("scripts/profiling_example.sh")) +
         " --out " + q(out) + " " + args;
}

TEST(ReportExampleScript, BasicPresetRunsUnattendedToTheEnd) {
  ScratchDir dir("report_script");
  make_demo_db(dir.path());  // at <out>/db, where the script looks first
  const auto r = testing::run_command(script_cmd(dir.path(), "--preset basic --yes --steps 8 --threads 1") +
                                      " < /dev/null");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  // The exact train command is shown, every output file is explained, profile-report runs.
  EXPECT_NE(r.output.find("--enable_timing_profiling --enable_memory_profiling"), std::string::npos)
      << r.output;
  for (const char* f : {"* config.toml", "* training_summary.json", "* timing_profile.json",
                        "* memory_profile.json", "* events.out.tfevents.", "* checkpoints/"}) {
    EXPECT_NE(r.output.find(f), std::string::npos) << f << "\n" << r.output;
  }
  EXPECT_NE(r.output.find("Bottleneck: "), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("scripts/tensorboard.sh " + (dir / "runs").string()), std::string::npos)
      << r.output;
  const fs::path run = fs::canonical(resolve_run_pointer(dir / "runs" / "latest"));
  EXPECT_TRUE(fs::exists(run / "timing_profile.json"));
  EXPECT_TRUE(fs::exists(run / "memory_profile.json"));
}

TEST(ReportExampleScript, RefusesWithoutATerminalUnlessPresetAndYes) {
  ScratchDir dir("report_script");
  for (const char* args : {"", "--preset basic"}) {
    const auto r = testing::run_command(script_cmd(dir.path(), args) + " < /dev/null");
    EXPECT_EQ(r.exit_code, 2) << args << "\n" << r.output;
    EXPECT_NE(r.output.find("--preset NAME --yes"), std::string::npos) << r.output;
  }
  const auto bad = testing::run_command(script_cmd(dir.path(), "--preset nope --yes") + " < /dev/null");
  EXPECT_EQ(bad.exit_code, 2);
  EXPECT_NE(bad.output.find("unknown preset 'nope'"), std::string::npos) << bad.output;
  EXPECT_FALSE(fs::exists(dir / "runs"));
}

// On a fresh clone the example builds only the three binaries it runs, not the whole tree with
// its tests and benchmarks (many times longer on 2 cores). cmake is replaced on PATH by a script
// that records its arguments, passes the configure step and fails the build, so nothing is built.
TEST(ReportExampleScript, BuildsOnlyTheBinariesItRuns) {
  ScratchDir dir("report_script");
  const fs::path shim_dir = dir / "shim";
  fs::create_directories(shim_dir);
  const fs::path log = dir / "cmake_calls.txt";
  write_file_atomic(shim_dir / "cmake", "#!/bin/sh\necho \"$*\" >> " + q(log) +
                                            "\ncase \"$*\" in *--build*) exit 3 ;; esac\nexit 0\n");
  fs::permissions(shim_dir / "cmake", fs::perms::owner_all);
  const fs::path empty_build = dir / "fresh_build";
  const std::string cmd = "PATH=" + q(shim_dir) + ":\"$PATH\" BUILD_DIR=" + q(empty_build) + " bash " +
                          q(testing::source_path("scripts/profiling_example.sh")) + " --out " +
                          q(dir / "out") + " --preset basic --yes < /dev/null";
  const auto r = testing::run_command(cmd);
  EXPECT_NE(r.exit_code, 0) << r.output;  // the fake cmake fails the build
  const std::string calls = read_file(log);
  const auto build_call = calls.find("--build");
  ASSERT_NE(build_call, std::string::npos) << "no cmake --build call:\n" << calls << "\n" << r.output;
  EXPECT_NE(calls.find("--target train preprocess profile-report", build_call), std::string::npos) << calls;
}

// Drives the menu through a pseudo-terminal: a wrong choice, then preset 1 by number, then "y".
const char* kPtyDriver = R"PY(
import os, pty, select, sys, time
try:
    pid, fd = pty.fork()
except OSError as e:  # no pseudo-terminal on this machine ("out of pty devices")
    print("no pseudo-terminal: %s" % e)
    sys.exit(77)
if pid == 0:
    os.execvp(sys.argv[1], sys.argv[1:])
buf = b""
deadline = time.time() + 240
def read_some(wait):
    global buf
    r, _, _ = select.select([fd], [], [], wait)
    if not r:
        return True
    try:
        data = os.read(fd, 4096)
    except OSError:
        return False
    buf += data
    return bool(data)
def expect(pattern, start):
    while pattern not in buf[start:]:
        if time.time() > deadline or not read_some(1):
            sys.stdout.write(buf.decode(errors="replace"))
            sys.exit("pty driver: did not see %r" % pattern)
    return buf.index(pattern, start) + len(pattern)
at = expect(b"Preset [1-5, q]:", 0)
os.write(fd, b"9\n")
at = expect(b"Preset [1-5, q]:", at)
os.write(fd, b"1\n")
at = expect(b"Run it? [Y/n]", at)
os.write(fd, b"y\n")
while time.time() < deadline and read_some(1):
    pass
_, status = os.waitpid(pid, 0)
sys.stdout.write(buf.decode(errors="replace"))
sys.exit(os.WEXITSTATUS(status) if os.WIFEXITED(status) else 99)
)PY";

TEST(ReportExampleScript, MenuChoosesAPresetByNumberThroughATerminal) {
  ScratchDir dir("report_script");
  make_demo_db(dir.path());
  write_file_atomic(dir / "drive.py", kPtyDriver);
  const fs::path build = fs::path(testing::bin_path("train")).parent_path().parent_path();
  const auto r = testing::run_command("BUILD_DIR=" + q(build) + " /usr/bin/python3 " + q(dir / "drive.py") +
                                      " bash " + q(testing::source_path("scripts/profiling_example.sh")) +
                                      " --out " + q(dir.path()) + " --steps 6 --threads 1 --no-plots");
  if (r.exit_code == 77)
    GTEST_SKIP() << "the menu needs a terminal and none can be opened here: " << r.output;
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("'9' is not a preset"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("preset: basic"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("Bottleneck: "), std::string::npos) << r.output;
  EXPECT_TRUE(
      fs::exists(fs::canonical(resolve_run_pointer(dir / "runs" / "latest")) / "timing_profile.json"));
}

}  // namespace
}  // namespace rt::report_e2e
