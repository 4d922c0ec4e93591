// ssm_step_bench: one training step (forward + MSE + backward + AdamW) of the s5_maze SSM decoder
// (models/ssm/decoders.h; --ssm s5, s4d or lru: the layer in its block) on a fixed random batch,
// timed step by step. The Python twin
// is tests/oracle/s5_maze.py; benchmarks/ssm_step.sh runs both interleaved.
//
// --export DIR writes what the twin needs to check it computes the same thing: every named
// parameter and buffer after initialisation, the batch, and the losses of the first
// --check_steps steps (dropout forced to 0 so both sides are deterministic), plus the parameters
// after those steps, as DIR/ssm_step.json + DIR/ssm_step.bin in the tests' golden format
// (rt-golden/1, util/tensor_manifest.h; its keys and tensor names: tests/assets/README.md).
#include <torch/torch.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <chrono>
#include <filesystem>
#include <iostream>

#include "models/ssm/decoders.h"
#include "training/fused_adam.h"
#include "util/blas_kernels.h"
#include "util/enum_names.h"
#include "util/heap_retention.h"
#include "util/json.h"
#include "util/tensor_manifest.h"

namespace {

struct Step {
  std::shared_ptr<rt::ssm::SsmModelImpl> model;
  std::unique_ptr<torch::optim::AdamW> opt;
  double run(const torch::Tensor& x, const torch::Tensor& y) {
    rt::clear_gradients(*opt);  // as train does
    auto loss = torch::mse_loss(model->forward(x, 0), y);
    loss.backward();
    opt->step();
    return loss.item<double>();
  }
};

Step make_step(const rt::ssm::SsmOptions& o, double lr, double wd, bool fused_block, bool fused_optimizer) {
  Step s;
  s.model = rt::ssm::make_ssm_model(o, 1);
  s.model->set_fused_kernels(fused_block);
  auto [decay, no_decay] = rt::ssm::split_weight_decay_parameters(*s.model);
  std::vector<torch::optim::OptimizerParamGroup> groups;
  groups.emplace_back(
      decay, std::make_unique<torch::optim::AdamWOptions>(torch::optim::AdamWOptions(lr).weight_decay(wd)));
  groups.emplace_back(no_decay, std::make_unique<torch::optim::AdamWOptions>(
                                    torch::optim::AdamWOptions(lr).weight_decay(0.0)));
  s.opt = rt::make_adamw(std::move(groups), fused_optimizer);
  return s;
}

// The file --export writes in its directory: <dir>/ssm_step.{json,bin}.
constexpr const char* kExportStem = "ssm_step";

void export_check(const std::filesystem::path& dir, const rt::ssm::SsmOptions& base, const torch::Tensor& x,
                  const torch::Tensor& y, int check_steps, double lr, double wd, bool fused_block,
                  bool fused_optimizer, uint64_t seed) {
  auto o = base;
  o.dropout = 0.0;
  torch::manual_seed(1234);
  Step s = make_step(o, lr, wd, fused_block, fused_optimizer);
  rt::tensor_manifest::TensorFileWriter file;
  auto put = [&](const std::string& name, const torch::Tensor& t) {
    const auto c = t.detach().to(torch::kCPU, torch::kFloat32).contiguous();
    file.add(name, c.sizes().vec(), rt::tensor_manifest::Dtype::kFloat32, c.data_ptr<float>());
  };
  put("input:x", x);
  put("input:target", y);
  for (const auto& p : s.model->named_parameters()) put("weight:" + p.key(), p.value());
  for (const auto& b : s.model->named_buffers()) put("buffer:" + b.key(), b.value());
  rt::Json steps = rt::Json::array();
  for (int i = 0; i < check_steps; ++i) steps.push_back({{"step", i}, {"loss", s.run(x, y)}});
  // The parameters after those steps: a stricter check than the losses (gradients, AdamW and
  // its weight-decay groups all show up here).
  for (const auto& p : s.model->named_parameters()) put("final:" + p.key(), p.value());
  const rt::Json manifest = {{"model", "s5"},
                             {"generated_by", "benchmarks/ssm_step_bench.cpp --export"},
                             {"torch", TORCH_VERSION},
                             {"seed", seed},
                             {"options",
                              {{"variant", rt::enum_name(o.variant)},
                               {"input_dim", o.input_dim},
                               {"output_dim", o.output_dim},
                               {"d_model", o.d_model},
                               {"state_dim", o.state_dim},
                               {"n_layers", o.n_layers},
                               {"dropout", o.dropout},
                               {"scan", rt::enum_name(o.scan)}}},
                             {"derived", rt::Json::array()},
                             {"lr", lr},
                             {"weight_decay", wd},
                             {"steps", steps}};
  std::filesystem::create_directories(dir);
  file.write(dir / kExportStem, manifest);
}

}  // namespace

int main(int argc, char** argv) {
  rt::announce_blas_kernels();
  CLI::App app{"Training-step time of the s5_maze SSM decoder (forward + backward + AdamW)"};
  int threads = 1, steps = 30, warmup = 5, check_steps = 3;
  int64_t batch = 64, bins = 140, units = 182, d_model = 64, state = 64, layers = 1;
  double dropout = 0.05, lr = 1e-3, wd = 0.01;
  std::string scan = "parallel", export_dir;
  bool unfused_block = false;
  uint64_t seed = 0;
  app.add_option("--threads", threads, "intra-op threads")->capture_default_str();
  app.add_option("--steps", steps, "timed steps")->capture_default_str();
  app.add_option("--warmup", warmup, "untimed steps first")->capture_default_str();
  app.add_option("--batch", batch)->capture_default_str();
  app.add_option("--bins", bins)->capture_default_str();
  app.add_option("--units", units)->capture_default_str();
  app.add_option("--d_model", d_model)->capture_default_str();
  app.add_option("--state", state)->capture_default_str();
  app.add_option("--layers", layers)->capture_default_str();
  app.add_option("--dropout", dropout)->capture_default_str();
  app.add_option("--scan", scan, "model.scan")->capture_default_str();
  std::string kind = "s5";
  app.add_option("--ssm", kind, "model.ssm: s5, s4d or lru")->capture_default_str();
  app.add_option("--seed", seed)->capture_default_str();
  app.add_flag("--unfused_block", unfused_block,
               "op-by-op S5 block even with --scan fused (A/B against the fused block kernels)");
  int fused_optimizer = 1;
  app.add_option(
         "--fused_optimizer", fused_optimizer,
         "1: rt::FusedAdamW + set-to-none gradients (train's default); 0: torch::optim::AdamW, zero_grad()")
      ->capture_default_str();
  int retain_freed_memory = 1;
  app.add_option(
         "--retain_freed_memory", retain_freed_memory,
         "1: keep the memory a step frees for the next (train.retain_freed_memory, train's default); 0: "
         "glibc's malloc defaults")
      ->capture_default_str();
  app.add_option(
      "--export", export_dir,
      "write weights, batch and reference losses to DIR/ssm_step.{json,bin} (rt-golden/1) and exit");
  app.add_option("--check_steps", check_steps, "steps whose losses --export records")->capture_default_str();
  CLI11_PARSE(app, argc, argv);
  if (retain_freed_memory) rt::retain_freed_heap_memory();
  torch::set_num_threads(threads);
  torch::manual_seed(static_cast<int64_t>(seed));

  rt::ssm::SsmOptions o = rt::ssm::SsmOptions::s5_maze();
  o.input_dim = units;
  o.d_model = d_model;
  o.state_dim = state;
  o.n_layers = layers;
  o.dropout = dropout;
  o.scan = rt::parse_enum<rt::ssm::ScanKind>(scan, "--scan");
  o.kind = rt::parse_enum<rt::ssm::SsmKind>(kind, "--ssm");
  // Smoothed-spike-like inputs (non-negative) and unit-scale velocity targets.
  auto x = torch::rand({batch, bins, units}) * 0.5;
  auto y = torch::randn({batch, bins, o.output_dim});
  try {
    if (!export_dir.empty()) {
      export_check(export_dir, o, x, y, check_steps, lr, wd, !unfused_block, fused_optimizer != 0, seed);
      std::cout << "wrote " << export_dir << "\n";
      return 0;
    }
    Step s = make_step(o, lr, wd, !unfused_block, fused_optimizer != 0);
    for (int i = 0; i < warmup; ++i) s.run(x, y);
    std::vector<double> ms;
    for (int i = 0; i < steps; ++i) {
      const auto t0 = std::chrono::steady_clock::now();
      s.run(x, y);
      ms.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
    }
    auto sorted = ms;
    std::sort(sorted.begin(), sorted.end());
    rt::Json r = {{"impl", "native"},
                  {"torch", TORCH_VERSION},
                  {"threads", threads},
                  {"batch", batch},
                  {"bins", bins},
                  {"units", units},
                  {"d_model", d_model},
                  {"state", state},
                  {"scan", scan},
                  {"ssm", kind},
                  {"block", s.model->blocks.front()->uses_fused_kernels(x) ? "fused" : "unfused"},
                  {"fused_optimizer", fused_optimizer != 0},
                  {"retain_freed_memory", retain_freed_memory != 0},
                  {"steps", steps},
                  {"median_ms", sorted[sorted.size() / 2]},
                  {"min_ms", sorted.front()},
                  {"max_ms", sorted.back()},
                  {"step_ms", ms}};
    std::cout << r.dump() << "\n";
  } catch (const std::exception& e) {
    std::cerr << "ssm_step_bench: " << e.what() << "\n";
    return 1;
  }
  return 0;
}
