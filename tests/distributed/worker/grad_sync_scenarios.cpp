// Scenarios for gradient synchronisation and parameter broadcast.
#include <chrono>

#include "dist_fixtures.h"
#include "distributed/bucketed_gradient_sync.h"
#include "distributed/parameter_broadcast.h"
#include "models/common/batch_slice.h"
#include "util/clock.h"
#include "util/error.h"
#include "worker.h"

namespace rt::testing::dist {
namespace {

using rt::dist::BucketedGradientSync;
using rt::dist::Communicator;

// Small buckets, so even the tiny MLP spreads over several.
rt::dist::BucketOptions small_buckets() { return {256, 1024}; }

void save_grads(const std::filesystem::path& out, const std::string& name, int rank,
                const std::vector<torch::Tensor>& params) {
  for (size_t i = 0; i < params.size(); ++i) {
    const auto& g = params[i].grad();
    save_result(out, name + std::to_string(i), rank, g.defined() ? g : torch::full({1}, std::nan("")));
  }
}

// Two steps of the MLP on this rank's rows of the global batch; the gradients after each, the
// buckets' launch times and the end of backward.
int grad_sync(Communicator& comm, const std::filesystem::path& out) {
  const int r = comm.rank(), w = comm.world_size();
  auto net = make_mlp(7);
  auto params = net->parameters();
  BucketedGradientSync sync(std::shared_ptr<Communicator>(&comm, [](Communicator*) {}), small_buckets());
  for (int step = 0; step < 2; ++step) {
    auto x = rows_of_rank(global_input(kRowsPerRank * w, 8, 100 + step), r, w);
    auto y = rows_of_rank(global_input(kRowsPerRank * w, 4, 200 + step), r, w);
    for (auto& p : params) p.mutable_grad() = torch::Tensor();
    auto loss = torch::mse_loss(net->forward(x), y);
    sync.begin(params);
    loss.backward();
    const int64_t backward_end = steady_ns();
    sync.finish();
    save_grads(out, "step" + std::to_string(step) + "_grad", r, params);
    const auto& report = sync.last_report();
    save_result(out, "step" + std::to_string(step) + "_launch_ns", r, torch::tensor(report.launch_ns));
    save_result(out, "step" + std::to_string(step) + "_backward_end_ns", r, torch::tensor({backward_end}));
    save_result(out, "step" + std::to_string(step) + "_buckets", r,
                torch::tensor({static_cast<int64_t>(report.buckets.size()),
                               static_cast<int64_t>(report.launched_during_backward)}));
  }
  return 0;
}
Register grad_sync_scenario("grad_sync", grad_sync);

// Gradients left in the bucket (finish() makes each .grad an alias of its part) and zeroed in
// place between steps, as LibTorch's zero_grad() does (detach_, zero_). Step 0: an extra layer,
// listed last so its gradient comes first in the one bucket, takes part; steps 1 and 2 it has
// no gradient, so at step 1 every other gradient sits at another offset than the one it is
// reduced at (taken out before the copies), at step 2 at its own (not copied).
int aliased_grads(Communicator& comm, const std::filesystem::path& out) {
  const int r = comm.rank(), w = comm.world_size();
  auto net = make_mlp(7);
  torch::nn::Linear extra(8, 3);
  std::vector<torch::Tensor> params = net->parameters();
  params.push_back(extra->weight);
  params.push_back(extra->bias);
  BucketedGradientSync sync(std::shared_ptr<Communicator>(&comm, [](Communicator*) {}), {1 << 20, 1 << 20});
  for (int step = 0; step < 3; ++step) {
    for (auto& p : params) {
      if (!p.grad().defined()) continue;
      p.mutable_grad().detach_();
      p.mutable_grad().zero_();
    }
    if (step == 1) {
      extra->weight.mutable_grad() = torch::Tensor();
      extra->bias.mutable_grad() = torch::Tensor();
    }
    auto x = rows_of_rank(global_input(kRowsPerRank * w, 8, 100 + step), r, w);
    auto y = rows_of_rank(global_input(kRowsPerRank * w, 4, 200 + step), r, w);
    auto loss = torch::mse_loss(net->forward(x), y);
    if (step == 0)
      loss = loss + extra->forward(rows_of_rank(global_input(kRowsPerRank * w, 8, 300), r, w)).pow(2).mean();
    sync.begin(params);
    loss.backward();
    sync.finish();
    save_grads(out, "step" + std::to_string(step) + "_grad", r, params);
  }
  return 0;
}
Register aliased_grads_scenario("aliased_grads", aliased_grads);

// A layer outside the forward pass: its gradients stay undefined on every rank, and its bucket
// (shared with used parameters) reduces only the defined gradients.
int unused_grads(Communicator& comm, const std::filesystem::path& out) {
  const int r = comm.rank(), w = comm.world_size();
  auto net = make_mlp(7);
  torch::nn::Linear unused(4, 4);  // registered between used layers' parameters below
  std::vector<torch::Tensor> params = net->parameters();
  params.insert(params.end() - 2, unused->weight);
  params.insert(params.end() - 2, unused->bias);
  BucketedGradientSync sync(std::shared_ptr<Communicator>(&comm, [](Communicator*) {}), {1 << 20, 1 << 20});
  auto x = rows_of_rank(global_input(kRowsPerRank * w, 8, 100), r, w);
  auto y = rows_of_rank(global_input(kRowsPerRank * w, 4, 200), r, w);
  auto loss = torch::mse_loss(net->forward(x), y);
  sync.begin(params);
  loss.backward();
  sync.finish();
  save_grads(out, "grad", r, params);
  save_result(out, "launched_during_backward", r,
              torch::tensor({static_cast<int64_t>(sync.last_report().launched_during_backward)}));
  return 0;
}
Register unused_grads_scenario("unused_grads", unused_grads);

// carry(): a per-step count summed over ranks inside the last bucket's all-reduce. Step 0:
// only rank 1 carries 1, the MLP's parameters alone (buckets {b3 W3} {b2 W2} {b1 W1}); step 1:
// both carry 1 and an unused layer's parameters come first, so the bucket backward reaches
// last holds no gradient and launches with the count alone; step 2 (the same list) carries
// nothing. Per step: the sum read back, the gradients, and the collectives it took.
int carried_count(Communicator& comm, const std::filesystem::path& out) {
  const int r = comm.rank(), w = comm.world_size();
  auto net = make_mlp(7);
  torch::nn::Linear unused(4, 4);
  const std::vector<torch::Tensor> mlp = net->parameters();
  std::vector<torch::Tensor> with_unused{unused->weight, unused->bias};
  with_unused.insert(with_unused.end(), mlp.begin(), mlp.end());
  BucketedGradientSync sync(std::shared_ptr<Communicator>(&comm, [](Communicator*) {}), {256, 512});
  save_result(out, "before_any", r, torch::tensor({sync.take_carried().has_value() ? 1 : 0}));
  for (int step = 0; step < 3; ++step) {
    const auto& params = step == 0 ? mlp : with_unused;
    for (auto& p : with_unused) p.mutable_grad() = torch::Tensor();
    auto x = rows_of_rank(global_input(kRowsPerRank * w, 8, 100 + step), r, w);
    auto y = rows_of_rank(global_input(kRowsPerRank * w, 4, 200 + step), r, w);
    if (step == 0) sync.carry(r == 1 ? 1.0 : 0.0);
    if (step == 1) sync.carry(1.0);
    const int64_t before = comm.stats().collectives;
    auto loss = torch::mse_loss(net->forward(x), y);
    sync.begin(params);
    loss.backward();
    sync.finish();
    const auto carried = sync.take_carried();
    const std::string tag = "step" + std::to_string(step) + "_";
    save_result(out, tag + "carried", r, torch::tensor({carried ? *carried : -1.0}, torch::kDouble));
    save_result(out, tag + "collectives", r, torch::tensor({comm.stats().collectives - before}));
    save_result(out, tag + "buckets", r,
                torch::tensor({static_cast<int64_t>(sync.last_report().buckets.size())}));
    save_grads(out, tag + "grad", r, mlp);
  }
  return 0;
}
Register carried_count_scenario("carried_count", carried_count);

// RAVE-like alternation: a generator step syncs only the generator's parameters although its
// backward also reaches the discriminator; a discriminator step syncs only the discriminator;
// a backward outside begin..finish (validation) syncs nothing.
int alternation(Communicator& comm, const std::filesystem::path& out) {
  const int r = comm.rank(), w = comm.world_size();
  auto gen = make_mlp(7);
  torch::manual_seed(8);
  torch::nn::Linear dis(4, 1);
  auto gen_params = gen->parameters();
  auto dis_params = dis->parameters();
  BucketedGradientSync sync(std::shared_ptr<Communicator>(&comm, [](Communicator*) {}), small_buckets());
  auto x = rows_of_rank(global_input(kRowsPerRank * w, 8, 100), r, w);
  auto clear = [&] {
    for (auto& p : gen_params) p.mutable_grad() = torch::Tensor();
    for (auto& p : dis_params) p.mutable_grad() = torch::Tensor();
  };
  for (int round = 0; round < 2; ++round) {
    const std::string tag = "round" + std::to_string(round) + "_";
    clear();
    auto gen_loss = -dis->forward(gen->forward(x)).mean();
    sync.begin(gen_params);
    gen_loss.backward();
    sync.finish();
    save_grads(out, tag + "gen_step_gen", r, gen_params);
    save_grads(out, tag + "gen_step_dis", r, dis_params);
    clear();
    auto dis_loss = dis->forward(gen->forward(x).detach()).pow(2).mean();
    sync.begin(dis_params);
    dis_loss.backward();
    sync.finish();
    save_grads(out, tag + "dis_step_dis", r, dis_params);
    clear();
    dis->forward(gen->forward(x)).sum().backward();  // no begin(): local gradients
    save_grads(out, tag + "unsynced_gen", r, gen_params);
  }
  return 0;
}
Register alternation_scenario("alternation", alternation);

// Every rank initialises differently; after broadcast_parameters all hold rank 0's parameters
// and buffers. A rank with a different model makes every rank stop with a clear message.
int broadcast_params(Communicator& comm, const std::filesystem::path& out) {
  const int r = comm.rank();
  torch::manual_seed(50 + r);
  torch::nn::Sequential net(torch::nn::Linear(3, 5), torch::nn::BatchNorm1d(5), torch::nn::Linear(5, 2));
  net->forward(torch::randn({4, 3}));  // running statistics differ per rank too
  std::vector<torch::Tensor> before;
  for (const auto& t : net->parameters()) before.push_back(t.detach().clone());
  for (const auto& t : net->buffers()) before.push_back(t.detach().clone());
  save_result(out, "before", r, torch::cat([&] {
                std::vector<torch::Tensor> flat;
                for (auto& t : before) flat.push_back(t.reshape({-1}).to(torch::kDouble));
                return flat;
              }()));
  rt::dist::broadcast_parameters(comm, *net);
  std::vector<torch::Tensor> after;
  for (const auto& t : net->parameters()) after.push_back(t.detach().reshape({-1}).to(torch::kDouble));
  for (const auto& t : net->buffers()) after.push_back(t.detach().reshape({-1}).to(torch::kDouble));
  save_result(out, "after", r, torch::cat(after));
  torch::nn::Sequential other(torch::nn::Linear(3, r == 0 ? 5 : 6));
  try {
    rt::dist::broadcast_parameters(comm, *other);
  } catch (const Error& e) {
    save_text(out, "mismatch", r, e.what());
  }
  return 0;
}
Register broadcast_params_scenario("broadcast_params", broadcast_params);

// models::batch_global_means_async over uneven slices of a global batch of 5 (rank 0 holds
// examples 0–1, rank 1 examples 2–4): started, then a blocking all-reduce issued meanwhile
// (collectives run in call order), then read twice (the second read is the first's result).
int global_means(Communicator& comm, const std::filesystem::path& out) {
  const int r = comm.rank();
  const auto global = global_input(5, 3, 41);  // 5 examples × 3 values each
  const int64_t offset = r == 0 ? 0 : 2, local = r == 0 ? 2 : 3;
  rt::models::BatchSliceScope scope(rt::models::BatchSlice{offset, local, 5, &comm});
  const auto mine = global.narrow(0, offset, local);
  auto pending = rt::models::batch_global_means_async(mine.mean(0));
  auto other = torch::ones({2});
  comm.all_reduce_sum(other);
  save_result(out, "means", r, pending.get());
  save_result(out, "means_again", r, pending.get());
  save_result(out, "blocking", r, rt::models::batch_global_means(mine.mean(0)));
  save_result(out, "other", r, other);
  return 0;
}
Register global_means_scenario("global_means", global_means);

}  // namespace
}  // namespace rt::testing::dist
