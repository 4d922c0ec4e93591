// The S5 block's BatchNorm with norm_sync (SyncBatchNorm): 2 ranks × B examples train as one
// process with 2B, on the op-by-op path and the fused CPU kernels (rt_rank_worker, loopback).
#include <gtest/gtest.h>

#include "distributed/dist_fixtures.h"
#include "models/ssm/decoders.h"
#include "support/expect.h"

namespace rt::ssm {
namespace {

using testing::ScratchDir;
using namespace testing::dist;

using rt::testing::expect_allclose;

TEST(SsmSyncBatchNorm, TwoRanksTrainTheBlockAsOneProcessWithTheWholeBatch) {
  ScratchDir out("ssm_sync_bn");
  const auto run = run_ranks(2, "s5_block", out.path());
  ASSERT_EQ(run.exit_code, 0) << run.output;
  for (const bool fused : {false, true}) {
    const std::string tag = fused ? "fused_" : "ops_";
    S5LayerOptions layer;
    layer.d_model = kBlockWidth;
    layer.state_dim = kBlockWidth;
    layer.scan = ScanKind::kFused;
    torch::manual_seed(3);
    S5Block block(layer, /*dropout=*/0.0);
    block->fused_kernels = fused;
    auto x = global_input(4, kBlockTime * kBlockWidth, 21)
                 .view({-1, kBlockTime, kBlockWidth})
                 .clone()
                 .requires_grad_(true);
    auto weights = global_input(4, kBlockTime * kBlockWidth, 22).view(x.sizes());
    EXPECT_EQ(block->uses_fused_kernels(x), fused);
    auto y = block->forward(x);
    (y * weights).sum().backward();
    std::vector<torch::Tensor> grads;
    for (const auto& p : block->parameters()) grads.push_back(p.grad().reshape({-1}));
    torch::Tensor dparams_sum;
    for (int r = 0; r < 2; ++r) {
      const std::string what = tag + "rank " + std::to_string(r) + " ";
      expect_allclose(load_result(out.path(), tag + "y", r), rows_of_rank(y.detach(), r, 2), what + "output");
      expect_allclose(load_result(out.path(), tag + "dx", r), rows_of_rank(x.grad(), r, 2),
                      what + "input gradient");
      expect_allclose(load_result(out.path(), tag + "running", r),
                      torch::cat({block->norm->running_mean, block->norm->running_var}),
                      what + "running statistics");
      const auto d = load_result(out.path(), tag + "dparams", r);
      dparams_sum = r == 0 ? d : dparams_sum + d;
    }
    // Parameter gradients are per rank (the loss is a sum over examples): their sum is the
    // whole batch's; the gradient sync's mean then equals one process's mean-loss gradient.
    expect_allclose(dparams_sum, torch::cat(grads), tag + "parameter gradients");
  }
}

}  // namespace
}  // namespace rt::ssm
