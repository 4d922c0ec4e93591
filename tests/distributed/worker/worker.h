// The rank worker of the multi-process tests: `rt_rank_worker <scenario> <out_dir>` joins the
// process group its environment describes and runs one scenario, saving what the test checks
// under out_dir; `rt_rank_worker launch N GRACE_MS -- argv...` is the local launcher
// (distributed/local_launcher.h) the tests start the ranks with.
#pragma once

#include <torch/torch.h>

#include <filesystem>
#include <functional>
#include <map>
#include <string>

#include "distributed/communicator.h"

namespace rt::testing::dist {

// Saves `t` as <out>/<name>_rank<R>.pt (load_result in dist_fixtures.h reads it).
void save_result(const std::filesystem::path& out, const std::string& name, int rank, const torch::Tensor& t);
// Writes `text` to <out>/<name>_rank<R>.txt.
void save_text(const std::filesystem::path& out, const std::string& name, int rank, const std::string& text);

// A scenario returns the worker's exit code.
using Scenario = std::function<int(rt::dist::Communicator& comm, const std::filesystem::path& out)>;
std::map<std::string, Scenario>& scenarios();

// Registers scenarios at static initialisation: static Register r("name", fn);
struct Register {
  Register(const std::string& name, Scenario fn) { scenarios()[name] = std::move(fn); }
};

}  // namespace rt::testing::dist
