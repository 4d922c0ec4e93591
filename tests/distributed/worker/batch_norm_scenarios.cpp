// Scenarios for SyncBatchNorm: the rows function, the module semantics, and the S5 block
// (fused and op-by-op paths) with norm_sync.
#include "dist_fixtures.h"
#include "distributed/sync_batch_norm.h"
#include "models/ssm/decoders.h"
#include "worker.h"

namespace rt::testing::dist {
namespace {

using rt::dist::Communicator;

std::shared_ptr<Communicator> borrowed(Communicator& comm) {
  return std::shared_ptr<Communicator>(&comm, [](Communicator*) {});
}

// sync_batch_norm_rows and sync_batch_norm (affine, running statistics) on this rank's rows.
int sync_bn(Communicator& comm, const std::filesystem::path& out) {
  const int r = comm.rank(), w = comm.world_size();
  auto x = rows_of_rank(global_input(6 * w, 3, 11), r, w).clone().requires_grad_(true);
  auto weights = rows_of_rank(global_input(6 * w, 3, 12), r, w);
  auto y = rt::dist::sync_batch_norm_rows(x, 1e-5, comm);
  (y * weights).sum().backward();
  save_result(out, "rows_y", r, y);
  save_result(out, "rows_dx", r, x.grad());

  torch::manual_seed(4);
  torch::nn::BatchNorm1d norm(torch::nn::BatchNorm1dOptions(3).momentum(0.3));
  {
    torch::NoGradGuard no_grad;
    norm->weight.uniform_(0.5, 1.5);
    norm->bias.uniform_(-0.5, 0.5);
  }
  auto x2 = x.detach().clone().requires_grad_(true);
  for (int step = 0; step < 2; ++step) {
    auto y2 = rt::dist::sync_batch_norm(x2 * (step + 1), *norm, comm);
    (y2 * weights).sum().backward();
  }
  save_result(out, "module_dx", r, x2.grad());
  save_result(out, "module_dweight", r, norm->weight.grad());
  save_result(out, "module_dbias", r, norm->bias.grad());
  save_result(out, "module_running", r,
              torch::cat({norm->running_mean, norm->running_var,
                          norm->num_batches_tracked.to(torch::kFloat).reshape({1})}));
  norm->eval();  // evaluation: running statistics, no collective
  save_result(out, "module_eval", r, rt::dist::sync_batch_norm(x.detach(), *norm, comm));
  return 0;
}
Register sync_bn_scenario("sync_bn", sync_bn);

// One S5 block, BatchNorm synchronised, on this rank's examples; the op-by-op path ("ops")
// and the fused CPU kernels ("fused").
int s5_block(Communicator& comm, const std::filesystem::path& out) {
  const int r = comm.rank(), w = comm.world_size();
  for (const bool fused : {false, true}) {
    const std::string tag = fused ? "fused_" : "ops_";
    rt::ssm::S5LayerOptions layer;
    layer.d_model = kBlockWidth;
    layer.state_dim = kBlockWidth;
    layer.scan = rt::ssm::ScanKind::kFused;
    torch::manual_seed(3);
    rt::ssm::S5Block block(layer, /*dropout=*/0.0);
    block->fused_kernels = fused;
    block->norm_sync = borrowed(comm);
    auto x = rows_of_rank(global_input(2 * w, kBlockTime * kBlockWidth, 21), r, w)
                 .view({-1, kBlockTime, kBlockWidth})
                 .clone()
                 .requires_grad_(true);
    auto weights = rows_of_rank(global_input(2 * w, kBlockTime * kBlockWidth, 22), r, w).view(x.sizes());
    auto y = block->forward(x);
    (y * weights).sum().backward();
    save_result(out, tag + "y", r, y);
    save_result(out, tag + "dx", r, x.grad());
    std::vector<torch::Tensor> grads;
    for (const auto& p : block->parameters()) grads.push_back(p.grad().reshape({-1}));
    save_result(out, tag + "dparams", r, torch::cat(grads));
    save_result(out, tag + "running", r, torch::cat({block->norm->running_mean, block->norm->running_var}));
  }
  return 0;
}
Register s5_block_scenario("s5_block", s5_block);

// SyncableBatchNorm1d (RAVE v1's encoder norm) on this rank's examples of a global [4w, 3, 5]
// input: statistics per channel over examples and time, gathered over the ranks.
int syncable_bn(Communicator& comm, const std::filesystem::path& out) {
  const int r = comm.rank(), w = comm.world_size();
  auto x = rows_of_rank(global_input(4 * w, 15, 31), r, w).view({-1, 3, 5}).clone().requires_grad_(true);
  auto weights = rows_of_rank(global_input(4 * w, 15, 32), r, w).view({-1, 3, 5});
  torch::manual_seed(5);
  rt::dist::SyncableBatchNorm1d norm(torch::nn::BatchNorm1dOptions(3).momentum(0.2));
  {
    torch::NoGradGuard no_grad;
    norm->norm->weight.uniform_(0.5, 1.5);
    norm->norm->bias.uniform_(-0.5, 0.5);
  }
  norm->sync = borrowed(comm);
  auto y = norm->forward(x);
  (y * weights).sum().backward();
  save_result(out, "syncable_y", r, y);
  save_result(out, "syncable_dx", r, x.grad());
  save_result(out, "syncable_running", r, torch::cat({norm->norm->running_mean, norm->norm->running_var}));
  return 0;
}
Register syncable_bn_scenario("syncable_bn", syncable_bn);

}  // namespace
}  // namespace rt::testing::dist
