// models/common/row_linear.h: the rows' Linear computes what aten's addmm computes, forward and
// backward, with or without oneDNN under it.
#include "models/common/row_linear.h"

#include <gtest/gtest.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <torch/torch.h>
#include <unistd.h>

#include "tests/support/expect.h"
#include "util/signals.h"

namespace rt::models {
namespace {

using rt::testing::max_rel_error;

struct Case {
  int64_t n, k, m;
  bool bias, x_grad, transposed_weight;
};

TEST(RowLinear, ForwardAndGradientsAreAddmmsOnTheShapesTheDecodersUse) {
  torch::manual_seed(3);
  // s5_maze's products (8960 rows: encoder 182 → 64, the SSM's 64 → 64, the GLU's 64 → 128,
  // the decoder's 64 → 2), a few rows, and a weight that is a transposed view.
  for (const Case& c : {Case{8960, 182, 64, true, false, false}, Case{8960, 64, 64, false, true, false},
                        Case{8960, 64, 128, true, true, false}, Case{8960, 64, 2, true, true, false},
                        Case{3, 5, 7, true, true, false}, Case{300, 40, 24, false, true, true}}) {
    auto x = torch::randn({c.n, c.k}).requires_grad_(c.x_grad);
    auto w = (c.transposed_weight ? torch::randn({c.k, c.m}).t() : torch::randn({c.m, c.k})).requires_grad_();
    auto b = c.bias ? torch::randn({c.m}).requires_grad_() : torch::Tensor();
    auto g = torch::randn({c.n, c.m});
    auto y = row_linear(x, w, b);
    y.backward(g);
    // The reference in float64, from the same float32 values.
    auto xd = x.detach().to(torch::kDouble).requires_grad_(c.x_grad);
    auto wd = w.detach().to(torch::kDouble).requires_grad_();
    auto bd = c.bias ? b.detach().to(torch::kDouble).requires_grad_() : torch::Tensor();
    auto yd = c.bias ? torch::addmm(bd, xd, wd.t()) : torch::mm(xd, wd.t());
    yd.backward(g.to(torch::kDouble));
    const std::string what = std::to_string(c.n) + "x" + std::to_string(c.k) + " -> " + std::to_string(c.m);
    ASSERT_EQ(y.sizes(), yd.sizes()) << what;
    EXPECT_LT(max_rel_error(y, yd), 1e-5) << what;
    EXPECT_LT(max_rel_error(w.grad(), wd.grad()), 1e-5) << what;
    if (c.x_grad) {
      EXPECT_LT(max_rel_error(x.grad(), xd.grad()), 1e-5) << what;
    } else {
      EXPECT_FALSE(x.grad().defined()) << what;
    }
    if (c.bias) {
      EXPECT_LT(max_rel_error(b.grad(), bd.grad()), 1e-5) << what;
    }
  }
}

TEST(RowLinear, DoubleAndReducedPrecisionTakeAtensOwnProducts) {
  torch::manual_seed(4);
  auto x = torch::randn({50, 9}, torch::kDouble).requires_grad_();
  auto w = torch::randn({4, 9}, torch::kDouble).requires_grad_();
  auto b = torch::randn({4}, torch::kDouble);
  auto y = row_linear(x, w, b);
  EXPECT_EQ(y.scalar_type(), torch::kDouble);
  EXPECT_TRUE(torch::allclose(y, torch::addmm(b, x, w.t())));
  y.sum().backward();
  auto xr = x.detach().clone().requires_grad_();
  torch::addmm(b, xr, w.detach().t()).sum().backward();
  EXPECT_TRUE(torch::allclose(x.grad(), xr.grad()));
}

// Signals from outside (Ctrl-C, a launcher's SIGTERM, `kill -USR1`) arriving while the products
// run. With Debian's oneDNN 2.6 sgemm, a signal handler that runs on the interrupted product's
// own stack corrupts the heap (with the same handler on an alternate signal stack nothing
// does: the handler's frame overwrites data the JIT code keeps below its stack pointer): 3 of
// 120 `train` runs stopped by Ctrl-C crashed ("corrupted size vs. prev_size") on an AVX-512
// Xeon. util/signals.h takes the signals on a thread of their own; here another process sends
// ~50000 SIGUSR1 a second to a process that installed the trainer's handlers, and every product
// must stay bitwise what it was without them, with the heap intact (before: killed by SIGSEGV
// or SIGABRT within a second, 3 runs of 3).
void products_under_signals() {
  install_stop_signal_handlers();
  set_stop_messages(false);
  struct Product {
    char ta, tb;
    int64_t M, N, K;
  };
  // Gradients of the conv backward node (models/common/conv1d_backward.cpp) at tiny sizes.
  const Product products[] = {{'N', 'T', 64, 96, 2048},
                              {'N', 'N', 32, 2048, 288},
                              {'N', 'T', 16, 16, 8192},
                              {'T', 'N', 288, 2048, 32}};
  const pid_t self = ::getpid();
  const pid_t sender = ::fork();
  if (sender == 0) {
    ::prctl(PR_SET_PDEATHSIG, SIGKILL);  // ends with the process it signals, however that ends
    while (::getppid() == self && ::kill(self, SIGUSR1) == 0) ::usleep(20);
    ::_exit(0);
  }
  int mismatches = 0;
  for (const Product& p : products) {
    auto a = torch::randn({p.ta == 'N' ? p.M : p.K, p.ta == 'N' ? p.K : p.M});
    auto b = torch::randn({p.tb == 'N' ? p.K : p.N, p.tb == 'N' ? p.N : p.K});
    auto first = torch::empty({p.M, p.N});
    gemm_rows<float>(p.ta, p.tb, p.M, p.N, p.K, a.data_ptr<float>(), a.size(1), b.data_ptr<float>(),
                     b.size(1), 0.0f, first.data_ptr<float>(), p.N);
    for (int rep = 0; rep < 1500; ++rep) {
      auto c = torch::full({p.M, p.N}, -7.0f);
      gemm_rows<float>(p.ta, p.tb, p.M, p.N, p.K, a.data_ptr<float>(), a.size(1), b.data_ptr<float>(),
                       b.size(1), 0.0f, c.data_ptr<float>(), p.N);
      if (!torch::equal(c, first)) ++mismatches;
    }
  }
  ::kill(sender, SIGKILL);
  ::waitpid(sender, nullptr, 0);
  if (!take_checkpoint_request()) ::_exit(3);  // no signal arrived: nothing was tested
  ::_exit(mismatches == 0 ? 0 : 2);
}

TEST(GemmRows, TheLibraryIsNamedAndTheSwitchGivesBackAtensProducts) {
  // Where the process has oneDNN (Debian's LibTorch links it; beside PyPI's the system's
  // libdnnl is opened), gemm_rows calls its sgemm and says so with its version; switched off,
  // aten's mm; the same products either way, within float rounding.
  torch::manual_seed(31);
  auto a = torch::randn({96, 300}), b = torch::randn({288, 300});
  torch::Tensor c[2];
  std::string names[2];
  for (bool onednn : {false, true}) {
    set_onednn_gemm(onednn);
    names[onednn] = gemm_library();
    c[onednn] = torch::empty({96, 288});
    gemm_rows<float>('N', 'T', 96, 288, 300, a.data_ptr<float>(), 300, b.data_ptr<float>(), 300, 0.0f,
                     c[onednn].data_ptr<float>(), 288);
  }
  set_onednn_gemm(true);
  EXPECT_EQ(names[0], "aten's mm (the BLAS LibTorch links)");
  EXPECT_TRUE(torch::allclose(c[0], torch::mm(a, b.t()), 1e-4, 1e-4));
  if (row_linear_uses_onednn()) {
    EXPECT_EQ(names[1].rfind("oneDNN ", 0), 0u) << names[1];
    EXPECT_NE(names[1].find('.'), std::string::npos) << "a version: " << names[1];
    EXPECT_LT(max_rel_error(c[1], c[0]), 1e-5);
  } else {
    EXPECT_EQ(names[1], names[0]);
  }
}

TEST(GemmRows, ProductsStayExactAndTheHeapIntactWhileSignalsArrive) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");  // a fresh process: only this test's threads
  EXPECT_EXIT(products_under_signals(), ::testing::ExitedWithCode(0), "");
}

}  // namespace
}  // namespace rt::models
