// util/blas_kernels.h: OpenBLAS's fallback for a CPU it does not know is replaced by the
// kernels the CPU's features allow, and only that.
#include "util/blas_kernels.h"

#include <gtest/gtest.h>
#include <torch/torch.h>

#include <cstdlib>

namespace rt {
namespace {

TEST(BlasKernels, OnlyTheFallbackOnACpuThatCanDoBetterIsReplaced) {
  // OpenBLAS's x86-64 fallback, on CPUs with AVX2 + FMA, with and without AVX-512.
  EXPECT_EQ(blas_kernels_to_force("Prescott", true, true, false), "SkylakeX");
  EXPECT_EQ(blas_kernels_to_force("prescott", true, false, false), "Haswell");
  // A real Prescott-class CPU, a CPU OpenBLAS recognised, the user's own choice, not OpenBLAS.
  EXPECT_EQ(blas_kernels_to_force("Prescott", false, false, false), "");
  EXPECT_EQ(blas_kernels_to_force("Zen", true, false, false), "");
  EXPECT_EQ(blas_kernels_to_force("SkylakeX", true, true, false), "");
  EXPECT_EQ(blas_kernels_to_force("Prescott", true, true, true), "");
  EXPECT_EQ(blas_kernels_to_force("", true, true, false), "");
}

TEST(BlasKernels, TheNoteSaysWhatWasFoundAndWhatRunsNow) {
  BlasKernelChoice c;
  c.found = "Prescott";
  EXPECT_EQ(c.note(), "");
  c.chosen = "SkylakeX";
  const std::string n = c.note();
  EXPECT_NE(n.find("Prescott"), std::string::npos) << n;
  EXPECT_NE(n.find("OPENBLAS_CORETYPE=SkylakeX"), std::string::npos) << n;
}

// The process's own BLAS: after the choice (made by the test binary at load, as the programs
// make it in main), OpenBLAS runs no fallback kernels on a CPU with AVX2, and a product it
// computes is still right.
TEST(BlasKernels, ThisProcessRunsKernelsItsCpuAllowsAndProductsStayRight) {
  const BlasKernelChoice c = choose_blas_kernels();
  if (c.found.empty()) GTEST_SKIP() << "the BLAS in this process is not OpenBLAS";
  __builtin_cpu_init();
  const bool avx2 = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
  const char* user = std::getenv("OPENBLAS_CORETYPE");
  if (avx2 && (user == nullptr || c.chosen.size() > 0)) {
    EXPECT_NE(blas_kernels_running(), "Prescott");
  }
  torch::manual_seed(1);
  const auto a = torch::randn({300, 182}), b = torch::randn({182, 64});
  const auto expected = torch::mm(a.to(torch::kDouble), b.to(torch::kDouble));
  EXPECT_LT((torch::mm(a, b).to(torch::kDouble) - expected).abs().max().item<double>(), 1e-3);
}

}  // namespace
}  // namespace rt
