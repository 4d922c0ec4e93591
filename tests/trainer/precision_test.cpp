// train.precision: autocast around the step, float32 everywhere it must stay, and fp16's loss
// scale (GradScaler's rules). bf16 runs on the CPU too (autocast's CPU dtype); fp16 needs CUDA.
#include "trainer/precision.h"

#include <gtest/gtest.h>
#include <torch/torch.h>

#include <limits>
#include <string>
#include <vector>

#include "config/config.h"
#include "distributed/gradient_sync.h"
#include "models/ssm/decoders.h"
#include "models/ssm/s5.h"
#include "support/expect.h"
#include "util/error.h"

namespace rt {
namespace {

using testing::error_of;

TEST(Precision, KeyAcceptsTheThreeAndNamesItWhenRefusing) {
  EXPECT_EQ(parse_precision("fp32"), Precision::kFp32);
  EXPECT_EQ(parse_precision("bf16"), Precision::kBf16);
  EXPECT_EQ(parse_precision("fp16"), Precision::kFp16);
  Config c;
  EXPECT_EQ(c.get_string("train.precision"), "fp32");
  const std::string msg = error_of([&] { c.set("train.precision", "fp8", "t"); });
  EXPECT_HAS(msg, "train.precision");
  EXPECT_HAS(msg, "one of fp32, bf16, fp16");
}

TEST(Precision, Fp16IsRefusedOffCuda) {
  const std::string msg = error_of([] { MixedPrecision mp(Precision::kFp16, torch::Device(torch::kCPU)); });
  EXPECT_HAS(msg, "train.precision = fp16 needs a CUDA device");
  EXPECT_HAS(msg, "bf16");
}

// A linear layer's forward under the step scope: bfloat16 out; its parameters and their
// gradients float32; backward outside autocast; autocast off again after the step.
void check_autocast_step(const torch::Device& device, Precision precision, at::ScalarType expected) {
  torch::manual_seed(0);
  torch::nn::Linear lin(8, 4);
  lin->to(device);
  MixedPrecision mp(precision, device);
  auto x = torch::randn({3, 8}, torch::TensorOptions().device(device));
  torch::Tensor y;
  {
    MixedPrecision::StepScope step(mp);
    y = lin(x);
    EXPECT_EQ(y.scalar_type(), expected);
    auto loss = y.to(torch::kFloat).pow(2).mean();
    backward_with_sync(loss, lin->parameters(), single_process_sync());
    // Back under autocast after backward (a family may run another forward in the step).
    EXPECT_EQ(lin(x).scalar_type(), expected);
  }
  EXPECT_EQ(lin(x).scalar_type(), torch::kFloat);  // autocast ended with the step
  for (const auto& p : lin->parameters()) {
    EXPECT_EQ(p.scalar_type(), torch::kFloat);
    ASSERT_TRUE(p.grad().defined());
    EXPECT_EQ(p.grad().scalar_type(), torch::kFloat);
    EXPECT_TRUE(torch::isfinite(p.grad()).all().item<bool>());
  }
  // The scaled loss's gradients come back divided by the scale: those of fp32.
  torch::nn::Linear ref(8, 4);
  ref->to(device);
  {
    torch::NoGradGuard g;
    ref->weight.copy_(lin->weight);
    ref->bias.copy_(lin->bias);
  }
  auto ref_loss = ref(x).pow(2).mean();
  ref_loss.backward();
  EXPECT_TRUE(torch::allclose(lin->weight.grad(), ref->weight.grad(), 5e-2, 5e-2))
      << lin->weight.grad() << ref->weight.grad();
}

TEST(Precision, Bf16StepAutocastsForwardOnlyAndKeepsFloat32) {
  check_autocast_step(torch::Device(torch::kCPU), Precision::kBf16, torch::kBFloat16);
}

TEST(Precision, Fp32ChangesNothing) {
  check_autocast_step(torch::Device(torch::kCPU), Precision::kFp32, torch::kFloat);
  MixedPrecision mp(Precision::kFp32, torch::Device(torch::kCPU));
  EXPECT_EQ(mp.scale(), 1.0);
}

TEST(Precision, Fp16AndBf16StepsOnCuda) {
  if (!torch::cuda::is_available()) GTEST_SKIP() << "needs a CUDA device (none is usable here)";
  const torch::Device cuda(torch::kCUDA, 0);
  check_autocast_step(cuda, Precision::kFp16, torch::kHalf);
  check_autocast_step(cuda, Precision::kBf16, torch::kBFloat16);
  MixedPrecision mp(Precision::kFp16, cuda);
  EXPECT_EQ(mp.scale(), 65536.0);
  // An overflowing backward: gradients dropped (the step is skipped), the scale halved.
  torch::nn::Linear lin(4, 1);
  lin->to(cuda);
  {
    MixedPrecision::StepScope step(mp);
    auto loss =
        lin(torch::full({2, 4}, 6.0e4, torch::TensorOptions().device(cuda))).to(torch::kFloat).sum() * 1e30;
    backward_with_sync(loss, lin->parameters(), single_process_sync());
    for (const auto& p : lin->parameters()) EXPECT_FALSE(p.grad().defined());
  }
  EXPECT_EQ(mp.skipped(), 1);
  EXPECT_EQ(mp.scale(), 32768.0);
}

// train.precision = bf16: under autocast the input projections come out in bfloat16, and every
// scan runs its recurrence in float32 (there is no complex bfloat16): forward and backward work
// and stay close to float32's.
TEST(Precision, EveryS5ScanRunsUnderBf16Autocast) {
  for (auto scan : {ssm::ScanKind::kParallel, ssm::ScanKind::kSequential, ssm::ScanKind::kFused}) {
    torch::manual_seed(5);
    ssm::S5LayerOptions o;
    o.d_model = 8;
    o.state_dim = 8;
    o.scan = scan;
    ssm::S5Layer layer(o);
    auto u = torch::randn({2, 16, 8});
    const auto ref = layer->forward(u).detach();
    MixedPrecision mp(Precision::kBf16, torch::Device(torch::kCPU));
    torch::Tensor y;
    {
      MixedPrecision::StepScope step(mp);
      y = layer->forward(u);
      backward_with_sync(y.to(torch::kFloat).pow(2).mean(), layer->parameters(), single_process_sync());
    }
    EXPECT_TRUE(torch::allclose(y.to(torch::kFloat), ref, 5e-2, 5e-2)) << enum_name(scan);
    for (const auto& p : layer->parameters()) {
      ASSERT_TRUE(p.grad().defined()) << enum_name(scan);
      EXPECT_EQ(p.grad().scalar_type(), torch::kFloat);
      EXPECT_TRUE(torch::isfinite(p.grad()).all().item<bool>()) << enum_name(scan);
    }
  }
}

// The same for a whole S5 decoder in training mode (dropout on), with each scan and the fused
// block kernels (float32-only kernels: fed float32 under autocast).
TEST(Precision, SsmDecoderTrainsUnderBf16AutocastWithEveryScan) {
  for (auto scan : {ssm::ScanKind::kParallel, ssm::ScanKind::kSequential, ssm::ScanKind::kFused}) {
    torch::manual_seed(6);
    auto opts = ssm::SsmOptions::s5_maze();
    opts.input_dim = 10;
    opts.d_model = 16;
    opts.state_dim = 16;
    opts.n_layers = 2;
    opts.scan = scan;
    auto model = ssm::make_ssm_model(opts);
    model->train();
    MixedPrecision mp(Precision::kBf16, torch::Device(torch::kCPU));
    {
      MixedPrecision::StepScope step(mp);
      auto y = model->forward(torch::randn({3, 20, 10}), 0);
      backward_with_sync(y.to(torch::kFloat).pow(2).mean(), model->parameters(), single_process_sync());
    }
    for (const auto& p : model->parameters()) {
      ASSERT_TRUE(p.grad().defined()) << enum_name(scan);
      EXPECT_EQ(p.grad().scalar_type(), torch::kFloat);
      EXPECT_TRUE(torch::isfinite(p.grad()).all().item<bool>()) << enum_name(scan);
    }
  }
}

TEST(Precision, LossScaleFollowsGradScalersRules) {
  GradScalerOptions o;
  o.growth_interval = 3;
  LossScale s{65536.0, 0};
  s.update(true, o);
  EXPECT_EQ(s.scale, 32768.0);
  s.update(false, o);
  s.update(false, o);
  EXPECT_EQ(s.scale, 32768.0);
  EXPECT_EQ(s.growth_tracker, 2);
  s.update(false, o);
  EXPECT_EQ(s.scale, 65536.0);  // doubled after growth_interval clean steps
  EXPECT_EQ(s.growth_tracker, 0);
  s.update(false, o);
  s.update(true, o);  // an overflow resets the tracker
  EXPECT_EQ(s.growth_tracker, 0);
  EXPECT_EQ(s.scale, 32768.0);
}

TEST(Precision, UnscaleDividesAndFindsInfAndNan) {
  auto a = torch::full({3}, 8.0f), b = torch::full({2}, 4.0f);
  EXPECT_FALSE(unscale_and_check_overflow({a, b, torch::Tensor()}, 0.25));
  EXPECT_TRUE(torch::equal(a, torch::full({3}, 2.0f)));
  EXPECT_TRUE(torch::equal(b, torch::full({2}, 1.0f)));
  auto c = torch::tensor({1.0f, std::numeric_limits<float>::infinity()});
  EXPECT_TRUE(unscale_and_check_overflow({a, c}, 1.0));
  auto d = torch::tensor({std::numeric_limits<float>::quiet_NaN()});
  EXPECT_TRUE(unscale_and_check_overflow({d}, 1.0));
  EXPECT_FALSE(unscale_and_check_overflow({}, 1.0));
}

}  // namespace
}  // namespace rt
