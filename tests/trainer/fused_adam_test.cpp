// FusedAdam / FusedAdamW against LibTorch's stock Adam / AdamW: same trajectory to rounding,
// interchangeable state archives, the stock fallback (amsgrad), thread-count independence,
// and zero_grad_to_none; the multi-tensor path of non-contiguous and CUDA parameters.
#include "training/fused_adam.h"

#include <ATen/record_function.h>
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <cstring>
#include <sstream>

namespace {

// Parameters of assorted shapes, one above the parallel grain (32768 elements).
std::vector<torch::Tensor> make_params(torch::Dtype dtype = torch::kFloat) {
  torch::manual_seed(3);
  std::vector<torch::Tensor> ps;
  for (auto shape : std::vector<std::vector<int64_t>>{{7}, {16, 5, 3}, {300, 150}, {1}}) {
    ps.push_back(torch::randn(shape, torch::TensorOptions().dtype(dtype)).requires_grad_(true));
  }
  return ps;
}

std::vector<torch::Tensor> clone_params(const std::vector<torch::Tensor>& ps) {
  std::vector<torch::Tensor> out;
  for (const auto& p : ps) out.push_back(p.detach().clone().requires_grad_(true));
  return out;
}

// Deterministic pseudo-gradients for step k (differ per step and per parameter).
void set_grads(std::vector<torch::Tensor>& ps, int k) {
  for (size_t i = 0; i < ps.size(); ++i) {
    auto gen = at::detail::createCPUGenerator(static_cast<uint64_t>(1000 * k + i));
    ps[i].mutable_grad() =
        torch::randn(ps[i].sizes(), gen, ps[i].options().requires_grad(false)) * 0.1 + 0.01 * ps[i].detach();
  }
}

double max_rel_diff(const std::vector<torch::Tensor>& a, const std::vector<torch::Tensor>& b) {
  double worst = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    const double scale = std::max(1e-12, b[i].abs().max().item<double>());
    worst = std::max(worst, (a[i] - b[i]).abs().max().item<double>() / scale);
  }
  return worst;
}

template <typename Stock, typename Fused, typename Options>
void expect_same_trajectory(const Options& options, int steps, double tol) {
  auto ps_stock = make_params();
  auto ps_fused = clone_params(ps_stock);
  Stock stock(ps_stock, options);
  Fused fused(ps_fused, options);
  for (int k = 0; k < steps; ++k) {
    set_grads(ps_stock, k);
    set_grads(ps_fused, k);
    stock.step();
    fused.step();
  }
  const double d = max_rel_diff(ps_fused, ps_stock);
  EXPECT_LE(d, tol);
  // The update did something: parameters moved away from their start.
  auto start = make_params();
  EXPECT_GT(max_rel_diff(ps_fused, start), 1e-3);
}

TEST(FusedAdam, MatchesStockAdamOver20Steps) {
  expect_same_trajectory<torch::optim::Adam, rt::FusedAdam>(torch::optim::AdamOptions(1e-3).betas({0.5, 0.9}),
                                                            20, 1e-6);
}

TEST(FusedAdam, MatchesStockAdamWithL2WeightDecay) {
  expect_same_trajectory<torch::optim::Adam, rt::FusedAdam>(
      torch::optim::AdamOptions(3e-3).weight_decay(0.05), 20, 1e-6);
}

TEST(FusedAdam, MatchesStockAdamW) {
  expect_same_trajectory<torch::optim::AdamW, rt::FusedAdamW>(
      torch::optim::AdamWOptions(1e-3).weight_decay(0.01), 20, 1e-6);
  expect_same_trajectory<torch::optim::AdamW, rt::FusedAdamW>(
      torch::optim::AdamWOptions(1e-3).weight_decay(0.0), 20, 1e-6);
}

TEST(FusedAdam, AmsgradTakesTheStockPathExactly) {
  auto ps_stock = make_params();
  auto ps_fused = clone_params(ps_stock);
  auto options = torch::optim::AdamOptions(1e-3).amsgrad(true);
  torch::optim::Adam stock(ps_stock, options);
  rt::FusedAdam fused(ps_fused, options);
  for (int k = 0; k < 5; ++k) {
    set_grads(ps_stock, k);
    set_grads(ps_fused, k);
    stock.step();
    fused.step();
  }
  for (size_t i = 0; i < ps_stock.size(); ++i) EXPECT_TRUE(torch::equal(ps_stock[i], ps_fused[i])) << i;
}

TEST(FusedAdam, DoublePrecisionMatches) {
  auto ps_stock = make_params(torch::kDouble);
  auto ps_fused = clone_params(ps_stock);
  torch::optim::AdamW stock(ps_stock, torch::optim::AdamWOptions(1e-3).weight_decay(0.01));
  rt::FusedAdamW fused(ps_fused, torch::optim::AdamWOptions(1e-3).weight_decay(0.01));
  for (int k = 0; k < 10; ++k) {
    set_grads(ps_stock, k);
    set_grads(ps_fused, k);
    stock.step();
    fused.step();
  }
  EXPECT_LE(max_rel_diff(ps_fused, ps_stock), 1e-13);
}

// `Writer` takes 5 steps and saves its state; a `Reader` loads the archive and both take 5 more
// steps, which must agree. A Reader that missed the state (keyed differently: LibTorch 1.13
// keys it by a string, 2.x by the TensorImpl pointer) would restart its moments and diverge,
// as an optimizer without the archive does.
template <typename Writer, typename Reader>
void expect_archive_resumes() {
  auto options = torch::optim::AdamOptions(1e-3).betas({0.5, 0.9});
  auto ps_a = make_params();
  Writer writer(ps_a, options);
  for (int k = 0; k < 5; ++k) {
    set_grads(ps_a, k);
    writer.step();
  }
  std::stringstream archive;
  torch::save(writer, archive);
  auto ps_b = clone_params(ps_a);
  auto ps_fresh = clone_params(ps_a);
  Reader reader(ps_b, options);
  torch::load(reader, archive);
  Reader fresh(ps_fresh, options);  // same parameters, no state: must diverge
  for (int k = 5; k < 10; ++k) {
    set_grads(ps_a, k);
    set_grads(ps_b, k);
    set_grads(ps_fresh, k);
    writer.step();
    reader.step();
    fresh.step();
  }
  EXPECT_LE(max_rel_diff(ps_a, ps_b), 1e-6);
  EXPECT_GT(max_rel_diff(ps_fresh, ps_b), 1e-4);
}

TEST(FusedAdam, ArchivesAreInterchangeableWithStockAdam) {
  expect_archive_resumes<rt::FusedAdam, torch::optim::Adam>();
}

TEST(FusedAdam, ResumesFromStockAdamArchives) { expect_archive_resumes<torch::optim::Adam, rt::FusedAdam>(); }

// The same parameters, each laid out so that no fused CPU pass applies: 2-D ones transposed,
// the others every second element of a longer tensor.
std::vector<torch::Tensor> strided(const std::vector<torch::Tensor>& ps) {
  std::vector<torch::Tensor> out;
  for (const auto& p : ps) {
    torch::Tensor q;
    if (p.dim() == 2) {
      q = torch::empty({p.size(1), p.size(0)}, p.options()).t();
    } else {
      q = torch::empty({2 * p.numel()}, p.options()).slice(0, 0, 2 * p.numel(), 2).view(p.sizes());
    }
    q.copy_(p.detach());
    out.push_back(q.detach().requires_grad_(true));
  }
  return out;
}

int64_t g_foreach_addcdiv = 0;

template <typename Stock, typename Fused, typename Options>
void expect_multi_tensor_path_matches(const Options& options) {
  auto ps_stock = make_params();
  auto ps_multi = strided(ps_stock);
  for (const auto& p : ps_multi) ASSERT_FALSE(p.is_contiguous() && p.numel() > 1);
  Stock stock(ps_stock, options);
  Fused multi(ps_multi, options);
  g_foreach_addcdiv = 0;
  auto handle = at::addThreadLocalCallback(
      at::RecordFunctionCallback([](const at::RecordFunction& fn) -> std::unique_ptr<at::ObserverContext> {
        if (std::strstr(fn.name(), "_foreach_addcdiv_") != nullptr) ++g_foreach_addcdiv;
        return nullptr;
      }));
  for (int k = 0; k < 20; ++k) {
    set_grads(ps_stock, k);
    set_grads(ps_multi, k);
    stock.step();
    multi.step();
  }
  at::removeCallback(handle);
  EXPECT_GE(g_foreach_addcdiv, 20);  // one multi-tensor update per step at least
  EXPECT_LE(max_rel_diff(ps_multi, ps_stock), 1e-6);
  EXPECT_GT(max_rel_diff(ps_multi, make_params()), 1e-3);
}

TEST(FusedAdam, NonContiguousParametersTakeTheMultiTensorUpdate) {
  expect_multi_tensor_path_matches<torch::optim::Adam, rt::FusedAdam>(torch::optim::AdamOptions(1e-3));
  expect_multi_tensor_path_matches<torch::optim::Adam, rt::FusedAdam>(
      torch::optim::AdamOptions(2e-3).betas({0.5, 0.9}).weight_decay(0.1));
  expect_multi_tensor_path_matches<torch::optim::AdamW, rt::FusedAdamW>(
      torch::optim::AdamWOptions(1e-3).weight_decay(0.05));
}

// On CUDA every parameter takes the multi-tensor update; it follows the CPU's fused pass to
// rounding (float32, 20 steps).
TEST(FusedAdam, CudaParametersFollowTheCpuUpdate) {
  if (!torch::cuda::is_available()) GTEST_SKIP() << "needs a CUDA device (the multi-tensor update on CUDA)";
  for (bool decoupled : {false, true}) {
    auto ps_cpu = make_params();
    std::vector<torch::Tensor> ps_cuda;
    for (const auto& p : ps_cpu) ps_cuda.push_back(p.detach().to(torch::kCUDA).requires_grad_(true));
    std::unique_ptr<torch::optim::Optimizer> cpu, cuda;
    if (decoupled) {
      cpu = std::make_unique<rt::FusedAdamW>(ps_cpu, torch::optim::AdamWOptions(1e-3).weight_decay(0.05));
      cuda = std::make_unique<rt::FusedAdamW>(ps_cuda, torch::optim::AdamWOptions(1e-3).weight_decay(0.05));
    } else {
      cpu = std::make_unique<rt::FusedAdam>(ps_cpu, torch::optim::AdamOptions(1e-3).betas({0.5, 0.9}));
      cuda = std::make_unique<rt::FusedAdam>(ps_cuda, torch::optim::AdamOptions(1e-3).betas({0.5, 0.9}));
    }
    for (int k = 0; k < 20; ++k) {
      set_grads(ps_cpu, k);
      for (size_t i = 0; i < ps_cpu.size(); ++i)
        ps_cuda[i].mutable_grad() = ps_cpu[i].grad().to(torch::kCUDA);
      cpu->step();
      cuda->step();
    }
    std::vector<torch::Tensor> back;
    for (const auto& p : ps_cuda) back.push_back(p.detach().cpu());
    EXPECT_LE(max_rel_diff(back, ps_cpu), 1e-5) << (decoupled ? "AdamW" : "Adam");
  }
}

TEST(FusedAdam, ResultDoesNotDependOnThreadCount) {
  const int before = torch::get_num_threads();
  std::vector<torch::Tensor> results[2];
  for (int threads : {1, 2}) {
    torch::set_num_threads(threads);
    auto ps = make_params();
    rt::FusedAdam opt(ps, torch::optim::AdamOptions(1e-3));
    for (int k = 0; k < 5; ++k) {
      set_grads(ps, k);
      opt.step();
    }
    results[threads - 1] = ps;
  }
  torch::set_num_threads(before);
  for (size_t i = 0; i < results[0].size(); ++i) EXPECT_TRUE(torch::equal(results[0][i], results[1][i])) << i;
}

TEST(FusedAdam, ZeroGradToNoneUndefinesGradientsAndSkipsThoseParameters) {
  auto ps = make_params();
  rt::FusedAdam opt(ps, torch::optim::AdamOptions(1e-2));
  set_grads(ps, 0);
  opt.step();
  rt::zero_grad_to_none(opt);
  for (const auto& p : ps) EXPECT_FALSE(p.grad().defined());
  auto before = clone_params(ps);
  opt.step();  // no gradients: nothing moves (stock zero_grad would move them on momentum)
  for (size_t i = 0; i < ps.size(); ++i) EXPECT_TRUE(torch::equal(ps[i], before[i])) << i;
  // A backward after zero_grad_to_none writes fresh gradients.
  (ps[0].sum() * 2).backward();
  EXPECT_TRUE(torch::allclose(ps[0].grad(), torch::full_like(ps[0], 2.0)));
}

}  // namespace

namespace {

TEST(FusedAdam, ClearGradientsFollowsTheOptimizerKind) {
  auto ps_fused = make_params();
  auto ps_stock = clone_params(ps_fused);
  auto fused = rt::make_adam(ps_fused, torch::optim::AdamOptions(1e-3), /*fused=*/true);
  auto stock = rt::make_adamw({torch::optim::OptimizerParamGroup(ps_stock)}, /*fused=*/false);
  EXPECT_NE(dynamic_cast<rt::FusedAdam*>(fused.get()), nullptr);
  EXPECT_EQ(dynamic_cast<rt::FusedAdamW*>(stock.get()), nullptr);
  set_grads(ps_fused, 0);
  set_grads(ps_stock, 0);
  rt::clear_gradients(*fused);  // set to none
  rt::clear_gradients(*stock);  // LibTorch's zero_grad(): zero-filled, still defined
  for (const auto& p : ps_fused) EXPECT_FALSE(p.grad().defined());
  for (const auto& p : ps_stock) {
    ASSERT_TRUE(p.grad().defined());
    EXPECT_EQ(p.grad().abs().max().item<float>(), 0.0f);
  }
}

}  // namespace

namespace {

int64_t defined_state_bytes(const torch::optim::Optimizer& opt) {
  int64_t total = 0;
  for (const auto& t : rt::optimizer_state_tensors(opt)) {
    if (t.defined()) total += t.numel() * static_cast<int64_t>(t.element_size());
  }
  return total;
}

int64_t param_bytes(const std::vector<torch::Tensor>& ps) {
  int64_t total = 0;
  for (const auto& p : ps) total += p.numel() * static_cast<int64_t>(p.element_size());
  return total;
}

void one_step(torch::optim::Optimizer& opt, const std::vector<torch::Tensor>& ps) {
  for (const auto& p : ps) p.mutable_grad() = torch::ones_like(p);
  opt.step();
}

}  // namespace

TEST(OptimizerStateTensors, AdamKeepsTwoMomentsPerParameterAfterItsFirstStep) {
  for (bool fused : {true, false}) {
    auto ps = make_params();
    auto adam = rt::make_adam(ps, torch::optim::AdamOptions(1e-3), fused);
    EXPECT_EQ(defined_state_bytes(*adam), 0) << "fused " << fused;
    one_step(*adam, ps);
    EXPECT_EQ(defined_state_bytes(*adam), 2 * param_bytes(ps)) << "fused " << fused;
  }
  auto ps = make_params();
  std::vector<torch::optim::OptimizerParamGroup> groups;
  groups.emplace_back(
      ps, std::make_unique<torch::optim::AdamWOptions>(torch::optim::AdamWOptions(1e-3).amsgrad(true)));
  auto adamw = rt::make_adamw(std::move(groups), true);
  one_step(*adamw, ps);
  EXPECT_EQ(defined_state_bytes(*adamw), 3 * param_bytes(ps));  // + max_exp_avg_sq
}

TEST(OptimizerStateTensors, SgdMomentumIsItsState) {
  auto ps = make_params();
  torch::optim::SGD sgd(ps, torch::optim::SGDOptions(0.1).momentum(0.9));
  one_step(sgd, ps);
  EXPECT_EQ(defined_state_bytes(sgd), param_bytes(ps));
}
