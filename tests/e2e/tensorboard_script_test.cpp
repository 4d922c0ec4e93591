// scripts/tensorboard.sh: the working TensorBoard recipe on Debian (a venv; pip refuses the
// system Python there). The venv is given through TB_VENV with a stand-in `tensorboard` that
// records its arguments, so the test needs neither PyPI nor a network.
#include <gtest/gtest.h>

#include "e2e/report_fixture.h"
#include "util/atomic_file.h"

namespace rt::report_e2e {
namespace {

using testing::ScratchDir;

std::string tensorboard_cmd(const fs::path& venv, const std::string& args) {
  return "TB_VENV=" + q(venv) + " bash " + q(testing::source_path("scripts/tensorboard.sh")) + " " + args +
         " < /dev/null";
}

fs::path fake_venv(const ScratchDir& dir, const fs::path& log) {
  const fs::path venv = dir / "venv";
  fs::create_directories(venv / "bin");
  write_file_atomic(venv / "bin" / "tensorboard", "#!/bin/sh\necho \"$*\" > " + q(log) + "\n");
  fs::permissions(venv / "bin" / "tensorboard", fs::perms::owner_all);
  return venv;
}

TEST(TensorBoardScript, ReusesItsVenvAndOpensTheLogdirWithTheGivenOptions) {
  ScratchDir dir("tb_script");
  const fs::path log = dir / "tensorboard_args.txt";
  const fs::path venv = fake_venv(dir, log);
  fs::create_directories(dir / "runs");
  const auto r = testing::run_command(tensorboard_cmd(venv, q(dir / "runs") + " --port 6007"));
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_EQ(r.output.find("creating"), std::string::npos) << "an existing venv is reused:\n" << r.output;
  EXPECT_EQ(read_file(log), "--logdir " + (dir / "runs").string() + " --port 6007\n");
}

TEST(TensorBoardScript, AMissingLogdirIsNamed) {
  ScratchDir dir("tb_script");
  const fs::path log = dir / "tensorboard_args.txt";
  const auto r = testing::run_command(tensorboard_cmd(fake_venv(dir, log), q(dir / "nope")));
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_NE(r.output.find("no such folder '" + (dir / "nope").string() + "'"), std::string::npos) << r.output;
  EXPECT_FALSE(fs::exists(log));
}

}  // namespace
}  // namespace rt::report_e2e
