// scripts/lib/libtorch.sh: which LibTorch scripts/setup.sh and scripts/build.sh build against, and
// the one line saying which and why. The machine is played by stand-ins: an `nvidia-smi` first on
// PATH (answering as a driver does, or failing as it does when no driver is loaded), a
// /proc/driver/nvidia/version (RT_NVIDIA_PROC), a python that reports a torch (RT_PYTHON), and an
// unpacked LibTorch folder. Nothing is installed: the script runs in its choosing mode.
#include <gtest/gtest.h>

#include "e2e/report_fixture.h"
#include "util/atomic_file.h"

namespace rt::report_e2e {
namespace {

using testing::contains;
using testing::ScratchDir;

class LibTorchChoice : public ::testing::Test {
 protected:
  void SetUp() override {
    fs::create_directories(bin_);
    // No driver unless a test gives one: a stand-in that fails as nvidia-smi does without a
    // loaded driver hides a real one, and the /proc file does not exist.
    stand_in(
        "nvidia-smi",
        "echo 'NVIDIA-SMI has failed because it couldn'\\''t communicate with the NVIDIA driver.'\nexit 9\n");
    // A python without torch.
    stand_in("python-none", "echo \"ModuleNotFoundError: No module named 'torch'\" >&2\nexit 1\n");
    python_ = bin_ / "python-none";
  }

  void stand_in(const std::string& name, const std::string& body) {
    write_file_atomic(bin_ / name, "#!/bin/sh\n" + body);
    fs::permissions(bin_ / name, fs::perms::owner_all);
  }
  // A python whose torch is `version` built for `cuda` ("None": CPU only).
  void python_with_torch(const std::string& version, const std::string& cuda) {
    stand_in("python-torch", "cat > /dev/null\necho '" + version + " " + cuda + "'\n");
    python_ = bin_ / "python-torch";
  }

  testing::CommandResult choose(const std::string& env, const std::string& args = "") const {
    return testing::run_command("PATH=" + q(bin_) + ":\"$PATH\" RT_PYTHON=" + q(python_) +
                                " RT_NVIDIA_PROC=" + q(dir_ / "no_proc_file") + " " + env + " bash " +
                                q(testing::source_path("scripts/lib/libtorch.sh")) + " " + args +
                                " < /dev/null");
  }

  ScratchDir dir_{"libtorch_choice"};
  fs::path bin_ = dir_ / "bin";
  fs::path python_;
};

TEST_F(LibTorchChoice, WithoutADriverOrACudaTorchItIsDebiansAndSaysWhy) {
  const auto r = choose("");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_TRUE(contains(r.output, "libtorch: debian — no NVIDIA driver and no CUDA torch in ")) << r.output;
  EXPECT_TRUE(contains(r.output, "RT_LIBTORCH=debian|pypi|python|/path overrides")) << r.output;
  // A CPU-only torch in python (Debian's python3-torch) does not count.
  python_with_torch("1.13.0a0", "None");
  EXPECT_TRUE(contains(choose("").output, "libtorch: debian")) << choose("").output;
}

TEST_F(LibTorchChoice, AnNvidiaSmiThatAnswersChoosesPypisCudaTorch) {
  stand_in("nvidia-smi",
           "case \"$*\" in *--query-gpu=name,driver_version*) printf 'NVIDIA H200, 580.65.06\\nNVIDIA H200, "
           "580.65.06\\n' ;; *) exit 3 ;; esac\n");
  const auto r = choose("");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_TRUE(contains(r.output,
                       "libtorch: pypi — an NVIDIA driver is present (2 GPU(s): NVIDIA H200, driver "
                       "580.65.06): PyPI's torch==2.11.0 (CUDA)"))
      << r.output;
}

TEST_F(LibTorchChoice, TheDriversProcFileAloneIsEnough) {
  write_file_atomic(
      dir_ / "version",
      "NVRM version: NVIDIA UNIX x86_64 Kernel Module  580.65.06  Sun Jul 27 06:54:38 UTC 2025\n");
  const auto r = testing::run_command("PATH=" + q(bin_) + ":\"$PATH\" RT_PYTHON=" + q(python_) +
                                      " RT_NVIDIA_PROC=" + q(dir_ / "version") + " bash " +
                                      q(testing::source_path("scripts/lib/libtorch.sh")) + " < /dev/null");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_TRUE(contains(r.output, "libtorch: pypi — an NVIDIA driver is present (driver 580.65.06)"))
      << r.output;
}

TEST_F(LibTorchChoice, ACudaTorchThatPythonImportsWinsOverTheDriver) {
  stand_in("nvidia-smi", "printf 'NVIDIA A100, 550.54.15\\n'\n");
  python_with_torch("2.4.0+cu121", "12.1");
  const auto r = choose("");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_TRUE(contains(r.output, "libtorch: python — " + python_.string() +
                                     " imports torch 2.4.0+cu121 built for CUDA 12.1: building against it"))
      << r.output;
}

TEST_F(LibTorchChoice, RtLibtorchOverridesEveryCaseAndAnythingElseIsRefusedNamingIt) {
  stand_in("nvidia-smi", "printf 'NVIDIA A100, 550.54.15\\n'\n");
  python_with_torch("2.4.0+cu121", "12.1");
  EXPECT_TRUE(contains(choose("RT_LIBTORCH=debian").output, "libtorch: debian — RT_LIBTORCH=debian"));
  EXPECT_TRUE(contains(choose("RT_LIBTORCH=pypi").output, "libtorch: pypi — RT_LIBTORCH=pypi"));
  EXPECT_TRUE(contains(choose("RT_LIBTORCH=python").output, "libtorch: python — RT_LIBTORCH=python"));
  const auto p = choose("RT_LIBTORCH=" + q(dir_.path()));
  EXPECT_TRUE(contains(
      p.output, "libtorch: path — RT_LIBTORCH=" + dir_.path().string() + ": the LibTorch in that folder"))
      << p.output;
  const auto bad = choose("RT_LIBTORCH=cuda");
  EXPECT_EQ(bad.exit_code, 2) << bad.output;
  EXPECT_TRUE(contains(bad.output,
                       "RT_LIBTORCH='cuda' is not a choice (accepted: debian, pypi, python, or a "
                       "LibTorch folder's absolute or ./ path)"))
      << bad.output;
}

TEST_F(LibTorchChoice, ALibTorchFolderIsCheckedAndItsCudaMatchedAgainstTheToolkit) {
  const fs::path lt = dir_ / "libtorch";
  // Not a LibTorch: refused, naming what is missing.
  fs::create_directories(lt / "lib");
  auto r = choose("RT_LIBTORCH=" + q(lt), "--cmake-args");
  EXPECT_NE(r.exit_code, 0) << r.output;
  EXPECT_TRUE(contains(r.output, "no LibTorch there (share/cmake/Torch/TorchConfig.cmake missing)"))
      << r.output;
  // A CPU LibTorch: its prefix, no CUDA arguments.
  fs::create_directories(lt / "share" / "cmake" / "Torch");
  write_file_atomic(lt / "share" / "cmake" / "Torch" / "TorchConfig.cmake", "");
  write_file_atomic(lt / "build-version", "2.5.1+cpu\n");
  r = choose("RT_LIBTORCH=" + q(lt), "--cmake-args");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_TRUE(contains(r.output, "torch 2.5.1+cpu, CUDA None\n-DRT_LIBTORCH_CHOICE=path:" + lt.string() +
                                     "\n-DCMAKE_PREFIX_PATH=" + lt.string() + "\n"))
      << r.output;
  EXPECT_FALSE(contains(r.output, "CUDAToolkit_ROOT")) << r.output;
  // A CUDA one: the toolkit at CUDA_HOME must be there, of the same major version.
  write_file_atomic(lt / "lib" / "libtorch_cuda.so", "");
  write_file_atomic(lt / "build-version", "2.5.1+cu124\n");
  r = choose("CUDA_HOME=" + q(dir_ / "no_toolkit") + " RT_LIBTORCH=" + q(lt), "--cmake-args");
  EXPECT_NE(r.exit_code, 0) << r.output;
  EXPECT_TRUE(contains(r.output,
                       "torch 2.5.1+cu124 is built for CUDA 12.4, and building against it needs that "
                       "CUDA toolkit (nvcc, headers): none at " +
                           (dir_ / "no_toolkit").string()))
      << r.output;
  const fs::path toolkit = dir_ / "cuda";
  fs::create_directories(toolkit / "bin");
  write_file_atomic(toolkit / "bin" / "nvcc",
                    "#!/bin/sh\necho 'Cuda compilation tools, release 13.0, V13.0.48'\n");
  fs::permissions(toolkit / "bin" / "nvcc", fs::perms::owner_all);
  r = choose("CUDA_HOME=" + q(toolkit) + " RT_LIBTORCH=" + q(lt), "--cmake-args");
  EXPECT_NE(r.exit_code, 0) << r.output;
  EXPECT_TRUE(
      contains(r.output, "torch 2.5.1+cu124 targets CUDA 12.4 but " + toolkit.string() + " is CUDA 13.0"))
      << r.output;
  write_file_atomic(lt / "build-version", "2.9.0+cu130\n");
  r = choose("CUDA_HOME=" + q(toolkit) + " RT_LIBTORCH=" + q(lt), "--cmake-args");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_TRUE(contains(r.output, "-DCMAKE_CUDA_COMPILER=" + (toolkit / "bin" / "nvcc").string())) << r.output;
  EXPECT_TRUE(contains(r.output, "-DCMAKE_BUILD_RPATH=" + (toolkit / "lib64").string())) << r.output;
}

}  // namespace
}  // namespace rt::report_e2e
