// scripts/lib/offline_env.sh, which scripts/offline_bundle.sh copies into a bundle as env.sh: what
// `. offline-bundle/env.sh` does on a GPU node without network. The node is played by stand-ins: a
// python that reports where its torch is and which version (RT_PYTHON), a site-packages folder
// with NVIDIA wheels' lib/ folders, and a bundle whose native.tar.xz holds a `train` that prints
// its library path.
#include <gtest/gtest.h>

#include "e2e/report_fixture.h"
#include "util/atomic_file.h"

namespace rt::report_e2e {
namespace {

using testing::contains;
using testing::ScratchDir;

class OfflineEnv : public ::testing::Test {
 protected:
  void SetUp() override {
    fs::create_directories(bundle_);
    fs::create_directories(site_ / "torch" / "lib");
    fs::create_directories(site_ / "nvidia" / "cudnn" / "lib");
    fs::copy_file(testing::source_path("scripts/lib/offline_env.sh"), bundle_ / "env.sh");
    write_file_atomic(bundle_ / "MANIFEST.txt",
                      "offline bundle made 2026-11-28T00:00:00Z from 07a9d16\n"
                      "torch: 2.11.0+cu130\n");
    pack_train("echo \"train from the bundle; LD_LIBRARY_PATH=$LD_LIBRARY_PATH\"");
    python_with_torch("2.11.0+cu130");
  }

  void executable(const fs::path& path, const std::string& body) {
    fs::create_directories(path.parent_path());
    write_file_atomic(path, "#!/bin/sh\n" + body + "\n");
    fs::permissions(path, fs::perms::owner_all);
  }
  // The bundle's native.tar.xz with a `train` whose body is `body`, and a lib/ folder.
  void pack_train(const std::string& body) {
    const fs::path staging = dir_ / "staging";
    fs::remove_all(staging);
    executable(staging / "bin" / "train", body);
    fs::create_directories(staging / "lib" / "cxx");
    const auto r =
        testing::run_command("tar -C " + q(staging) + " -cJf " + q(bundle_ / "native.tar.xz") + " bin lib");
    ASSERT_EQ(r.exit_code, 0) << r.output;
  }
  // A python whose torch is `version`, installed in site_.
  void python_with_torch(const std::string& version) {
    executable(dir_ / "python", "echo " + q(site_ / "torch" / "lib") + " " + q(site_) + " " + version);
    python_ = dir_ / "python";
  }
  // `. env.sh`, then `then` in the same shell.
  testing::CommandResult source_then(const std::string& then) const {
    return testing::run_command("cd " + q(dir_.path()) + " && RT_PYTHON=" + q(python_) +
                                " bash -c '. bundle/env.sh || { echo \"sourcing failed: $?\"; exit 3; }; " +
                                then + "' < /dev/null");
  }

  ScratchDir dir_{"offline_env"};
  fs::path bundle_ = dir_ / "bundle";
  fs::path site_ = dir_ / "site";
  fs::path python_;
};

TEST_F(OfflineEnv, SourcingPutsTheBundlesBinariesFirstThenTheNodesTorchAndNvidiaLibraries) {
  const auto r = source_then("command -v train; train");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_TRUE(contains(r.output,
                       "offline env: offline bundle made 2026-11-28T00:00:00Z from 07a9d16; torch "
                       "2.11.0+cu130 at " +
                           (site_ / "torch" / "lib").string()))
      << r.output;
  EXPECT_TRUE(contains(r.output, (bundle_ / "native" / "bin" / "train").string() + "\n")) << r.output;
  const std::string expected_path = "LD_LIBRARY_PATH=" + (bundle_ / "native" / "lib").string() + ":" +
                                    (site_ / "torch" / "lib").string() + ":" +
                                    (site_ / "nvidia" / "cudnn" / "lib").string() + ":";
  EXPECT_TRUE(contains(r.output, "train from the bundle; " + expected_path)) << r.output;
}

TEST_F(OfflineEnv, AnotherTorchMinorVersionIsRefusedWithTheCommandThatRebuildsTheBundle) {
  python_with_torch("2.6.0+cu126");
  const auto r = source_then("train");
  EXPECT_EQ(r.exit_code, 3) << r.output;
  EXPECT_TRUE(contains(r.output, "sourcing failed: 2")) << r.output;
  EXPECT_TRUE(contains(r.output, "the bundle was built against torch 2.11.0+cu130, and " + python_.string() +
                                     " has torch 2.6.0+cu126: rebuild the bundle for it "
                                     "(TORCH_VERSION=2.6.0+cu126 scripts/offline_bundle.sh)"))
      << r.output;
  // A patch release of the same minor version runs the same binaries.
  python_with_torch("2.11.1+cu130");
  EXPECT_EQ(source_then("train").exit_code, 0);
}

TEST_F(OfflineEnv, APythonWithoutTorchIsNamed) {
  executable(dir_ / "python", "echo \"ModuleNotFoundError: No module named 'torch'\" >&2\nexit 1");
  const auto r = source_then("train");
  EXPECT_EQ(r.exit_code, 3) << r.output;
  EXPECT_TRUE(contains(r.output, python_.string() + " cannot import torch (set RT_PYTHON to the Python whose "
                                                    "torch the node runs)"))
      << r.output;
}

TEST_F(OfflineEnv, ABundleRemadeSinceTheLastUnpackingIsUnpackedAgain) {
  ASSERT_EQ(source_then("train").exit_code, 0);
  pack_train("echo 'the remade train'");
  // The new archive is newer than the first unpacking's stamp, whatever the clock's resolution.
  ASSERT_EQ(testing::run_command("touch -d '1 hour ago' " + q(bundle_ / "native" / ".unpacked")).exit_code,
            0);
  const auto r = source_then("train");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_TRUE(contains(r.output, "the remade train")) << r.output;
  // And an unchanged bundle is not unpacked again: the copy in native/ is what runs.
  executable(bundle_ / "native" / "bin" / "train", "echo 'the unpacked copy'");
  EXPECT_TRUE(contains(source_then("train").output, "the unpacked copy"));
}

}  // namespace
}  // namespace rt::report_e2e
