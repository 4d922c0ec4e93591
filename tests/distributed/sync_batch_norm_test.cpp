// SyncBatchNorm: 2 ranks × N rows normalise, back-propagate and update running statistics as
// one process with the 2N rows (rt_rank_worker on loopback); one process is plain batch norm.
#include "distributed/sync_batch_norm.h"

#include <gtest/gtest.h>

#include <sstream>

#include "dist_fixtures.h"
#include "support/expect.h"

namespace rt::dist {
namespace {

using testing::ScratchDir;
using testing::dist::global_input;
using testing::dist::load_result;
using testing::dist::rows_of_rank;
using testing::dist::run_ranks;

using rt::testing::expect_allclose;

// torch's own batch norm (training) on rows x [N, C], and dL/dx for L = Σ y ⊙ weights.
std::pair<torch::Tensor, torch::Tensor> torch_batch_norm(const torch::Tensor& x_in,
                                                         const torch::Tensor& weights) {
  auto x = x_in.clone().requires_grad_(true);
  auto y = torch::batch_norm(x, {}, {}, {}, {}, /*training=*/true, 0.1, 1e-5, false);
  (y * weights).sum().backward();
  return {y.detach(), x.grad()};
}

TEST(SyncBatchNorm, OneProcessIsPlainBatchNorm) {
  LocalCommunicator one;
  auto x = global_input(12, 3, 11).clone().requires_grad_(true);
  auto weights = global_input(12, 3, 12);
  auto y = sync_batch_norm_rows(x, 1e-5, one);
  (y * weights).sum().backward();
  const auto [y_ref, dx_ref] = torch_batch_norm(x.detach(), weights);
  expect_allclose(y, y_ref, "y");
  expect_allclose(x.grad(), dx_ref, "dx");
  torch::nn::BatchNorm1d norm(3), reference(3);
  EXPECT_TRUE(torch::equal(sync_batch_norm(x.detach(), *norm, one), reference->forward(x.detach())))
      << "one process takes the module's own path";
}

TEST(SyncBatchNorm, TwoRanksMatchOneProcessWithTheWholeBatch) {
  ScratchDir out("sync_bn");
  const auto run = run_ranks(2, "sync_bn", out.path());
  ASSERT_EQ(run.exit_code, 0) << run.output;
  const auto x = global_input(12, 3, 11);
  const auto weights = global_input(12, 3, 12);
  const auto [y_ref, dx_ref] = torch_batch_norm(x, weights);

  // The module: affine, momentum 0.3, two steps (x, then 2x), then evaluation.
  torch::manual_seed(4);
  torch::nn::BatchNorm1d norm(torch::nn::BatchNorm1dOptions(3).momentum(0.3));
  {
    torch::NoGradGuard no_grad;
    norm->weight.uniform_(0.5, 1.5);
    norm->bias.uniform_(-0.5, 0.5);
  }
  auto x2 = x.clone().requires_grad_(true);
  for (int step = 0; step < 2; ++step) (norm->forward(x2 * (step + 1)) * weights).sum().backward();
  norm->eval();
  const auto eval_ref = norm->forward(x);

  torch::Tensor dweight, dbias;
  for (int r = 0; r < 2; ++r) {
    const std::string rank = " (rank " + std::to_string(r) + ")";
    expect_allclose(load_result(out.path(), "rows_y", r), rows_of_rank(y_ref, r, 2), "y" + rank);
    expect_allclose(load_result(out.path(), "rows_dx", r), rows_of_rank(dx_ref, r, 2), "dx" + rank);
    expect_allclose(load_result(out.path(), "module_dx", r), rows_of_rank(x2.grad(), r, 2),
                    "module dx" + rank);
    expect_allclose(load_result(out.path(), "module_running", r),
                    torch::cat({norm->running_mean, norm->running_var,
                                norm->num_batches_tracked.to(torch::kFloat).reshape({1})}),
                    "running statistics (unbiased global variance)" + rank);
    expect_allclose(load_result(out.path(), "module_eval", r), rows_of_rank(eval_ref, r, 2), "eval" + rank);
    // Weight and bias gradients stay local (the gradient sync averages them): their sum over
    // ranks is the whole batch's, as the loss is a sum.
    dweight = r == 0 ? load_result(out.path(), "module_dweight", r)
                     : dweight + load_result(out.path(), "module_dweight", r);
    dbias = r == 0 ? load_result(out.path(), "module_dbias", r)
                   : dbias + load_result(out.path(), "module_dbias", r);
  }
  expect_allclose(dweight, norm->weight.grad(), "weight grad");
  expect_allclose(dbias, norm->bias.grad(), "bias grad");
}

// SyncableBatchNorm1d: without a communicator it is torch's BatchNorm1d, under its names (so
// checkpoints and export see a BatchNorm1d), following train()/eval().
TEST(SyncableBatchNorm1d, WithoutSyncIsBatchNorm1dUnderItsNames) {
  torch::manual_seed(6);
  SyncableBatchNorm1d ours(torch::nn::BatchNorm1dOptions(3).momentum(0.2));
  torch::nn::BatchNorm1d theirs(torch::nn::BatchNorm1dOptions(3).momentum(0.2));
  std::vector<std::string> our_names, their_names;
  for (const auto& p : ours->named_parameters()) our_names.push_back(p.key());
  for (const auto& b : ours->named_buffers()) our_names.push_back(b.key());
  for (const auto& p : theirs->named_parameters()) their_names.push_back(p.key());
  for (const auto& b : theirs->named_buffers()) their_names.push_back(b.key());
  EXPECT_EQ(our_names, their_names);
  EXPECT_TRUE(ours->named_children().is_empty()) << "the inner norm is no child";
  const auto x = global_input(4, 15, 33).view({4, 3, 5});
  EXPECT_TRUE(torch::equal(ours->forward(x), theirs->forward(x)));
  EXPECT_TRUE(torch::equal(ours->norm->running_var, theirs->running_var));
  ours->eval();
  theirs->eval();
  EXPECT_TRUE(torch::equal(ours->forward(x * 3), theirs->forward(x * 3))) << "eval: running statistics";
  ours->train();
  theirs->train();
  EXPECT_TRUE(torch::equal(ours->forward(x * 2), theirs->forward(x * 2))) << "train again: batch statistics";
  std::ostringstream printed;
  ours->pretty_print(printed);
  EXPECT_EQ(printed.str(),
            "torch::nn::BatchNorm1d(3, eps=1e-05, momentum=0.2, affine=true, track_running_stats=true)");
}

// 2 ranks × 4 examples of [N, 3, 5]: the output, input gradient and running statistics of one
// process with the 8 examples.
TEST(SyncableBatchNorm1d, TwoRanksNormaliseOverEveryRanksExamplesAndTime) {
  ScratchDir out("syncable_bn");
  const auto run = run_ranks(2, "syncable_bn", out.path());
  ASSERT_EQ(run.exit_code, 0) << run.output;
  auto x = global_input(8, 15, 31).view({8, 3, 5}).clone().requires_grad_(true);
  const auto weights = global_input(8, 15, 32).view({8, 3, 5});
  torch::manual_seed(5);
  torch::nn::BatchNorm1d norm(torch::nn::BatchNorm1dOptions(3).momentum(0.2));
  {
    torch::NoGradGuard no_grad;
    norm->weight.uniform_(0.5, 1.5);
    norm->bias.uniform_(-0.5, 0.5);
  }
  auto y = norm->forward(x);
  (y * weights).sum().backward();
  for (int r = 0; r < 2; ++r) {
    const std::string rank = " (rank " + std::to_string(r) + ")";
    expect_allclose(load_result(out.path(), "syncable_y", r), rows_of_rank(y.detach(), r, 2), "y" + rank);
    expect_allclose(load_result(out.path(), "syncable_dx", r), rows_of_rank(x.grad(), r, 2), "dx" + rank);
    expect_allclose(load_result(out.path(), "syncable_running", r),
                    torch::cat({norm->running_mean, norm->running_var}), "running statistics" + rank);
  }
}

}  // namespace
}  // namespace rt::dist
