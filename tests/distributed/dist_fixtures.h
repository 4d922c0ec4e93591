// What the multi-process tests share with their worker (tests/distributed/worker/): fixtures
// that both compute, so each rank's result can be compared with one process's, and the runner
// that starts the ranks.
//
// run_ranks() starts `rt_rank_worker launch N` (distributed/local_launcher.h, loopback only)
// under `timeout`, so a hung rank can never hang the test: the launcher forwards timeout's
// SIGTERM to the ranks and kills them after a grace period.
#pragma once

#include <ATen/CPUGeneratorImpl.h>
#include <torch/torch.h>

#include <filesystem>
#include <string>

#include "support/test_support.h"

namespace rt::testing::dist {

// Rows of the global batch each rank gets in the equivalence tests.
inline constexpr int64_t kRowsPerRank = 4;

// A small MLP: Linear(8, 16) → Tanh → Linear(16, 16) → Tanh → Linear(16, 4), initialised from `seed`.
inline torch::nn::Sequential make_mlp(uint64_t seed) {
  torch::manual_seed(seed);
  return torch::nn::Sequential(torch::nn::Linear(8, 16), torch::nn::Tanh(), torch::nn::Linear(16, 16),
                               torch::nn::Tanh(), torch::nn::Linear(16, 4));
}

// A deterministic global batch: x [rows, cols] (and y [rows, 4] for the MLP).
inline torch::Tensor global_input(int64_t rows, int64_t cols, uint64_t seed) {
  auto gen = at::detail::createCPUGenerator(seed);
  return torch::randn({rows, cols}, gen);
}

// Rank r's contiguous block of rows of a global tensor split over `world` ranks.
inline torch::Tensor rows_of_rank(const torch::Tensor& t, int rank, int world) {
  const int64_t per = t.size(0) / world;
  return t.narrow(0, rank * per, per);
}

// The S5 block the SyncBatchNorm tests train: width 8, state 8, no dropout (so one process and
// N ranks draw no random masks), on the fused or op-by-op path.
inline constexpr int64_t kBlockWidth = 8;
inline constexpr int64_t kBlockTime = 5;

struct RankRun {
  int exit_code = -1;
  std::string output;
};

// Runs `rt_rank_worker <scenario> <out>` as `n` ranks; `env` is prepended to the command line
// (e.g. "RT_TEST_PG_TIMEOUT_S=3 ").
inline RankRun run_ranks(int n, const std::string& scenario, const std::filesystem::path& out,
                         const std::string& env = "", int timeout_s = 120, int grace_ms = 5000) {
  const std::string worker = RT_RANK_WORKER;
  const std::string command = env + "timeout -k 10 " + std::to_string(timeout_s) + " " + worker + " launch " +
                              std::to_string(n) + " " + std::to_string(grace_ms) + " -- " + worker + " " +
                              scenario + " " + out.string();
  auto r = run_command(command);
  return {r.exit_code, r.output};
}

// A tensor a rank saved with torch::save as <out>/<name>_rank<R>.pt.
inline torch::Tensor load_result(const std::filesystem::path& out, const std::string& name, int rank) {
  torch::Tensor t;
  torch::load(t, (out / (name + "_rank" + std::to_string(rank) + ".pt")).string());
  return t;
}

}  // namespace rt::testing::dist
