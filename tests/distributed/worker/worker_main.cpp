#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <iostream>

#include "distributed/launch_env.h"
#include "distributed/local_launcher.h"
#include "distributed/process_group.h"
#include "util/blas_kernels.h"
#include "worker.h"

namespace rt::testing::dist {

void save_result(const std::filesystem::path& out, const std::string& name, int rank,
                 const torch::Tensor& t) {
  torch::save(t.detach().clone(), (out / (name + "_rank" + std::to_string(rank) + ".pt")).string());
}

void save_text(const std::filesystem::path& out, const std::string& name, int rank, const std::string& text) {
  std::ofstream(out / (name + "_rank" + std::to_string(rank) + ".txt")) << text;
}

std::map<std::string, Scenario>& scenarios() {
  static std::map<std::string, Scenario> all;
  return all;
}

}  // namespace rt::testing::dist

int main(int argc, char** argv) {
  rt::choose_blas_kernels();
  using namespace rt::testing::dist;
  namespace dist = rt::dist;
  if (argc >= 5 && std::string(argv[1]) == "launch" && std::string(argv[4]) == "--") {
    dist::LocalLaunchOptions o;
    o.nproc = std::atoi(argv[2]);
    o.grace = std::chrono::milliseconds(std::atoi(argv[3]));
    o.argv.assign(argv + 5, argv + argc);
    try {
      return dist::run_local_ranks(o);
    } catch (const std::exception& e) {
      std::cerr << "launcher: " << e.what() << "\n";
      return 1;
    }
  }
  if (argc != 3 || scenarios().count(argv[1]) == 0) {
    std::cerr << "usage: rt_rank_worker SCENARIO OUT_DIR | launch N GRACE_MS -- ARGV...; scenarios:";
    for (const auto& [name, fn] : scenarios()) std::cerr << " " << name;
    std::cerr << "\n";
    return 64;
  }
  torch::set_num_threads(1);
  const std::filesystem::path out = argv[2];
  const auto env = dist::parse_launch_env(dist::process_environment());
  dist::ProcessGroupOptions options;
  const char* timeout = std::getenv("RT_TEST_PG_TIMEOUT_S");
  options.timeout = std::chrono::seconds(timeout ? std::atoi(timeout) : 30);
  if (const char* wait = std::getenv("RT_TEST_WAIT"))
    options.wait = rt::parse_enum<rt::dist::WaitPolicy>(wait, "RT_TEST_WAIT");
  // train.distributed.small_all_reduce_kib (0: Gloo's ring for every all-reduce).
  if (const char* kib = std::getenv("RT_TEST_SMALL_ALL_REDUCE_KIB"))
    options.gather_sum_bytes = std::atoll(kib) * 1024;
  // train.distributed.gloo_loop ("batch" or "normal").
  if (const char* loop = std::getenv("RT_TEST_GLOO_LOOP"))
    options.gloo_loop_batch = std::string(loop) == "batch";
  try {
    auto comm = dist::join_process_group(env, options);
    return scenarios().at(argv[1])(*comm, out);
  } catch (const std::exception& e) {
    std::cerr << "rank " << env.rank << ": " << e.what() << "\n";
    save_text(out, "error", env.rank, e.what());
    return 2;
  }
}
