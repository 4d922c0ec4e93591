// rave_bench: measurements of the native RAVE model for benchmarks/run.sh (not a test).
//
//   rave_bench step --version v2 --batch 4 --n_signal 32768 --threads 1 --steps N
//       Times phase-1 training steps (forward + losses + backward + Adam), per-phase split;
//       bench.py times it against the real RAVE's training_step (benchmarks/rave_gpu_step.py).
//       --mkldnn 0|1 toggles at::globalContext().setUserEnabledMkldnn; --count_ops counts
//       operator calls per phase (RecordFunction) for one extra step. --conv_backward aten and
//       --fused_spectral 0 turn off the step's two CPU kernels of our own (the convolutions'
//       backward; the spectral distance's STFT and terms); --ab conv|spectral alternates one of
//       them on and off step by step in the one process, the A/B that host noise between
//       processes does not drown (step_seconds_by_arm: on, off). --retain_freed_memory 1 (the
//       default, as train.retain_freed_memory) keeps freed heap blocks for the next step.
//   rave_bench flops --version v2 --batch 4 --n_signal 32768
//       Forward convolution FLOPs of one phase-1 forward pass, from aten::convolution shapes.
//   rave_bench peak --threads T [--size 2048]
//       sgemm peak: FLOP/s of torch::mm on size×size float32 matrices (best of --reps).
//   rave_bench validate --version v2 ... : validation pass time under NoGradGuard vs
//       InferenceMode (interleaved).
// Every subcommand prints one JSON object on stdout.
#include <ATen/record_function.h>
#include <torch/torch.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <chrono>
#include <iostream>
#include <map>
#include <string_view>
#include <thread>

#include "models/common/conv1d_backward.h"
#include "models/common/onednn_check.h"
#include "models/common/row_linear.h"
#include "models/rave/rave.h"
#include "training/fused_adam.h"
#include "util/blas_kernels.h"
#include "util/heap_retention.h"
#include "util/json.h"

namespace {

using Clock = std::chrono::steady_clock;
double seconds_since(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

struct ModelArgs {
  std::string version = "v2";
  int64_t capacity = 0;     // 0: the preset's
  int64_t latent_size = 0;  // 0: the preset's
  int64_t batch = 4;
  int64_t n_signal = 32768;
  uint64_t seed = 1;
  int threads = 0;                     // 0: all cores
  int mkldnn = -1;                     // -1: leave LibTorch's default
  int fused_optimizer = 1;             // 1: rt::FusedAdam + set-to-none gradients (train's default); 0: stock
  std::string conv_backward = "gemm";  // models/common/conv1d_backward.h; "aten": aten's own
  int fused_spectral = 1;              // models/rave/losses.h set_fused_spectral_terms
  int retain_freed_memory = 1;         // util/heap_retention.h, as train.retain_freed_memory
  std::string conv_forward = "gemm";   // models/common/conv1d_backward.h; "aten": aten's convolution
  std::string gemm = "onednn";         // models/common/row_linear.h set_onednn_gemm; "aten": aten's mm
  int weight_norm_fused = 1;           // models/common/conv1d_backward.h set_conv1d_weight_norm_fused
  std::string ab;                      // step: the change --ab alternates step by step (its help)
};

void add_model_args(CLI::App* c, ModelArgs& a) {
  c->add_option("--version", a.version, "v1 | v2 | v3 (RaveOptions::preset)")->capture_default_str();
  c->add_option("--capacity", a.capacity, "override the preset's capacity (0 = keep)");
  c->add_option("--latent_size", a.latent_size, "override the preset's latent size (0 = keep)");
  c->add_option("--batch", a.batch)->capture_default_str();
  c->add_option("--n_signal", a.n_signal)->capture_default_str();
  c->add_option("--seed", a.seed)->capture_default_str();
  c->add_option("--threads", a.threads, "intra-op threads (0 = all cores)")->capture_default_str();
  c->add_option("--mkldnn", a.mkldnn, "1/0: enable/disable oneDNN (mkldnn) kernels; -1 = default");
  c->add_option("--fused_optimizer", a.fused_optimizer,
                "1: rt::FusedAdam and set-to-none gradients (train.fused_optimizer's default); 0: "
                "torch::optim::Adam, zero_grad()")
      ->capture_default_str();
  c->add_option("--conv_backward", a.conv_backward,
                "gemm: the convolutions' backward of models/common/conv1d_backward.h (the default); aten: "
                "aten's convolution_backward")
      ->check(CLI::IsMember({"gemm", "aten"}))
      ->capture_default_str();
  c->add_option("--conv_forward", a.conv_forward,
                "gemm: the convolutions' forward as products of models/common/conv1d_backward.h (the "
                "default); aten: aten's convolution")
      ->check(CLI::IsMember({"gemm", "aten"}))
      ->capture_default_str();
  c->add_option("--gemm", a.gemm,
                "onednn: our products through oneDNN's sgemm where the process has or can open it "
                "(models/common/row_linear.h, the default); aten: aten's mm")
      ->check(CLI::IsMember({"onednn", "aten"}))
      ->capture_default_str();
  c->add_option("--weight_norm_fused", a.weight_norm_fused,
                "1: WNConv1d's weight norm inside its convolution node (models/common/conv1d_backward.h, the "
                "default); 0: aten's weight norm before it")
      ->capture_default_str();
  c->add_option("--fused_spectral", a.fused_spectral,
                "1: the spectral distance's STFT and terms as nodes of our own (models/rave/losses.h, "
                "the default); 0: torch.stft and aten's operator chain")
      ->capture_default_str();
  c->add_option("--retain_freed_memory", a.retain_freed_memory,
                "1: glibc's malloc keeps freed blocks up to 32 MiB for the next step (util/heap_retention.h, "
                "train.retain_freed_memory's default); 0: the C library's defaults")
      ->capture_default_str();
  c->add_option(
       "--ab", a.ab,
       "step: alternate one change on and off step by step in this process, timings in "
       "step_seconds_by_arm: conv (--conv_backward gemm vs aten), conv_forward (--conv_forward gemm vs "
       "aten), gemm (--gemm onednn vs aten), weight_norm (WNConv1d's weight norm in the convolution node vs "
       "aten's) or spectral (--fused_spectral 1 vs 0)")
      ->check(CLI::IsMember({"conv", "conv_forward", "gemm", "weight_norm", "spectral"}));
}

rt::HeapRetention& heap_retention() {
  static rt::HeapRetention h{false, "the C library's malloc defaults (--retain_freed_memory 0)"};
  return h;
}

void apply_runtime(const ModelArgs& a) {
  const int n = a.threads > 0 ? a.threads : static_cast<int>(std::thread::hardware_concurrency());
  torch::set_num_threads(std::max(1, n));
  rt::models::ensure_correct_cpu_convolutions();  // first, so an explicit --mkldnn still wins
  if (a.mkldnn >= 0) at::globalContext().setUserEnabledMkldnn(a.mkldnn != 0);
  rt::models::set_conv1d_backward_gemm(a.conv_backward != "aten");
  rt::models::set_conv1d_forward_gemm(a.conv_forward != "aten");
  rt::models::set_onednn_gemm(a.gemm != "aten");
  rt::models::set_conv1d_weight_norm_fused(a.weight_norm_fused != 0);
  rt::rave::set_fused_spectral_terms(a.fused_spectral != 0);
  if (a.retain_freed_memory != 0) heap_retention() = rt::retain_freed_heap_memory();
}

rt::rave::RaveOptions options_of(const ModelArgs& a) {
  auto o = rt::rave::RaveOptions::preset(rt::parse_enum<rt::rave::RaveVersion>(a.version, "--version"));
  if (a.capacity > 0) o.capacity = a.capacity;
  if (a.latent_size > 0) o.latent_size = a.latent_size;
  return o;
}

// A deterministic, audio-like batch: a few decaying partials plus a little noise, in [−1, 1].
torch::Tensor make_input(const ModelArgs& a) {
  torch::manual_seed(a.seed + 1000);
  auto t = torch::arange(a.n_signal, torch::kFloat32).div(44100.0).reshape({1, 1, -1});
  auto f = torch::rand({a.batch, 1, 1}) * 800 + 100;
  auto x = 0.5 * torch::sin(2 * M_PI * f * t) + 0.25 * torch::sin(2 * M_PI * 2.5 * f * t) +
           0.05 * torch::randn({a.batch, 1, a.n_signal});
  return x.clamp(-1, 1).contiguous();
}

rt::Json runtime_info() {
  const auto& onednn = rt::models::ensure_correct_cpu_convolutions();
  return {{"threads", torch::get_num_threads()},
          {"mkldnn_enabled", at::globalContext().userEnabledMkldnn()},
          {"conv_backward", rt::models::conv1d_backward_gemm() ? "gemm" : "aten"},
          {"conv_forward", rt::models::conv1d_forward_gemm() ? "gemm" : "aten"},
          {"weight_norm_fused", rt::models::conv1d_weight_norm_fused()},
          {"gemm", rt::models::gemm_library()},
          {"fused_spectral", rt::rave::fused_spectral_terms()},
          {"heap_retention", heap_retention().description},
          {"onednn_check", {{"max_rel_error", onednn.max_rel_error}, {"disabled_onednn", onednn.disabled}}},
          {"hardware_concurrency", std::thread::hardware_concurrency()},
          {"torch_version", TORCH_VERSION}};
}

// ---- operator counting (RecordFunction) ----------------------------------------------------
std::string g_phase = "none";
std::map<std::string, std::map<std::string, int64_t>>* g_counts = nullptr;

std::unique_ptr<at::ObserverContext> count_op(const at::RecordFunction& fn) {
  if (g_counts != nullptr) {
    std::string_view name = fn.name();
    (*g_counts)[g_phase][std::string(name)] += 1;
  }
  return nullptr;
}

// ---- step ----------------------------------------------------------------------------------
struct StepTimes {
  double forward = 0, loss = 0, backward = 0, optimizer = 0, total = 0, value = 0;
};

StepTimes one_step(rt::rave::RaveModelImpl& model, torch::optim::Adam& opt, const torch::Tensor& x,
                   const rt::rave::RaveLossOptions& lo) {
  StepTimes s;
  const auto t0 = Clock::now();
  g_phase = "forward";
  auto f = rt::rave::rave_forward(model, x);
  s.forward = seconds_since(t0);
  auto t = Clock::now();
  g_phase = "loss";
  auto l = rt::rave::rave_losses_from_forward(model, x, f, lo, 1e-6);
  s.loss = seconds_since(t);
  t = Clock::now();
  g_phase = "backward";
  rt::clear_gradients(opt);
  l.loss_gen.backward();
  s.backward = seconds_since(t);
  t = Clock::now();
  g_phase = "optimizer";
  opt.step();
  s.optimizer = seconds_since(t);
  g_phase = "item";
  s.value = l.loss_gen.item<double>();
  s.total = seconds_since(t0);
  g_phase = "none";
  return s;
}

int cmd_step(const ModelArgs& a, int steps, int warmup, bool count_ops) {
  apply_runtime(a);
  torch::manual_seed(a.seed);
  rt::rave::RaveModel model(options_of(a));
  model->train();
  auto lo = rt::rave::RaveLossOptions::preset(rt::parse_enum<rt::rave::RaveVersion>(a.version, "--version"));
  lo.stft_scales = model->options().stft_scales;
  const bool fused = a.fused_optimizer != 0;
  auto opt_ptr =
      rt::make_adam(model->generator_parameters(), torch::optim::AdamOptions(1e-3).betas({0.5, 0.9}), fused);
  torch::optim::Adam& opt = *opt_ptr;
  const auto x = make_input(a);
  for (int i = 0; i < warmup; ++i) one_step(*model, opt, x, lo);
  rt::Json out = runtime_info();
  out["impl"] = "native";
  out["version"] = a.version;
  out["capacity"] = model->options().capacity;
  out["batch"] = a.batch;
  out["n_signal"] = a.n_signal;
  out["fused_optimizer"] = fused;
  std::vector<double> total;
  for (int i = 0; i < steps; ++i) {
    const bool on = i % 2 == 0;  // --ab: even steps with the change, odd steps without
    if (a.ab == "conv") rt::models::set_conv1d_backward_gemm(on);
    if (a.ab == "conv_forward") rt::models::set_conv1d_forward_gemm(on);
    if (a.ab == "gemm") rt::models::set_onednn_gemm(on);
    if (a.ab == "weight_norm") rt::models::set_conv1d_weight_norm_fused(on);
    if (a.ab == "spectral") rt::rave::set_fused_spectral_terms(on);
    const auto s = one_step(*model, opt, x, lo);
    total.push_back(s.total);
    if (!a.ab.empty()) out["step_seconds_by_arm"][on ? "on" : "off"].push_back(s.total);
    out["phases"].push_back(
        {{"forward", s.forward}, {"loss", s.loss}, {"backward", s.backward}, {"optimizer", s.optimizer}});
    out["loss"] = s.value;
  }
  out["step_seconds"] = total;
  if (count_ops) {
    std::map<std::string, std::map<std::string, int64_t>> counts;
    g_counts = &counts;
    auto handle =
        at::addGlobalCallback(at::RecordFunctionCallback(&count_op).scopes({at::RecordScope::FUNCTION}));
    one_step(*model, opt, x, lo);
    at::removeCallback(handle);
    g_counts = nullptr;
    rt::Json c;
    for (const auto& [phase, ops] : counts) {
      int64_t sum = 0;
      for (const auto& [op, n] : ops) {
        c[phase]["ops"][op] = n;
        sum += n;
      }
      c[phase]["total"] = sum;
    }
    out["op_counts"] = c;
  }
  std::cout << out.dump() << "\n";
  return 0;
}

// ---- flops ---------------------------------------------------------------------------------
double g_conv_flops = 0;
int64_t g_conv_calls = 0;

std::unique_ptr<at::ObserverContext> count_conv(const at::RecordFunction& fn) {
  std::string_view name = fn.name();
  if (name != "aten::convolution") return nullptr;
  // aten::convolution(input, weight, bias, stride, padding, dilation, transposed,
  //                   output_padding, groups)
  const auto in = fn.inputs();
  if (in.size() < 9 || !in[0].isTensor() || !in[1].isTensor()) return nullptr;
  const auto& x = in[0].toTensor();
  const auto& w = in[1].toTensor();
  const auto stride = in[3].toIntVector(), padding = in[4].toIntVector(), dilation = in[5].toIntVector();
  const bool transposed = in[6].toBool();
  const auto out_pad = in[7].toIntVector();
  const int64_t groups = in[8].toInt();
  const int64_t spatial = x.dim() - 2;
  // Every output element costs 2·(C_in/groups)·Πk multiply-adds for a direct conv; for a
  // transposed conv every *input* element scatters C_out/groups·Πk of them.
  double kernel = 1;
  for (int64_t d = 0; d < spatial; ++d) kernel *= static_cast<double>(w.size(2 + d));
  double points = 1;
  if (!transposed) {
    for (int64_t d = 0; d < spatial; ++d) {
      const int64_t L = x.size(2 + d), K = w.size(2 + d);
      const int64_t s = stride.size() > 1 ? stride[d] : stride[0];
      const int64_t p = padding.size() > 1 ? padding[d] : padding[0];
      const int64_t dl = dilation.size() > 1 ? dilation[d] : dilation[0];
      points *= static_cast<double>((L + 2 * p - dl * (K - 1) - 1) / s + 1);
    }
    g_conv_flops += 2.0 * static_cast<double>(x.size(0)) * static_cast<double>(w.size(0)) * points *
                    static_cast<double>(w.size(1)) * kernel;
  } else {
    (void)out_pad;
    for (int64_t d = 0; d < spatial; ++d) points *= static_cast<double>(x.size(2 + d));
    g_conv_flops += 2.0 * static_cast<double>(x.size(0)) * static_cast<double>(x.size(1)) * points *
                    static_cast<double>(w.size(1)) * kernel;
  }
  (void)groups;  // w.size(1) is already C_in/groups (direct) or C_out/groups (transposed)
  ++g_conv_calls;
  return nullptr;
}

int cmd_flops(const ModelArgs& a) {
  apply_runtime(a);
  torch::manual_seed(a.seed);
  rt::rave::RaveModel model(options_of(a));
  model->train();
  const auto x = make_input(a);
  auto handle = at::addGlobalCallback(
      at::RecordFunctionCallback(&count_conv).needsInputs(true).scopes({at::RecordScope::FUNCTION}));
  {
    torch::NoGradGuard ng;
    model->forward_train(x);
  }
  at::removeCallback(handle);
  rt::Json out = runtime_info();
  out["version"] = a.version;
  out["capacity"] = model->options().capacity;
  out["batch"] = a.batch;
  out["n_signal"] = a.n_signal;
  out["forward_conv_flops"] = g_conv_flops;
  out["conv_calls"] = g_conv_calls;
  // Backward of a convolution = grad-input + grad-weight, each the forward's cost.
  out["step_conv_flops"] = 3.0 * g_conv_flops;
  std::cout << out.dump() << "\n";
  return 0;
}

// ---- peak ----------------------------------------------------------------------------------
int cmd_peak(int threads, int64_t size, int reps) {
  torch::set_num_threads(threads > 0 ? threads : static_cast<int>(std::thread::hardware_concurrency()));
  torch::manual_seed(0);
  auto a = torch::randn({size, size}), b = torch::randn({size, size});
  auto c = torch::mm(a, b);  // warm-up
  std::vector<double> s;
  for (int i = 0; i < reps; ++i) {
    const auto t0 = Clock::now();
    c = torch::mm(a, b);
    s.push_back(seconds_since(t0));
  }
  const double best = *std::min_element(s.begin(), s.end());
  rt::Json out = runtime_info();
  out["size"] = size;
  out["seconds"] = s;
  out["gflops_best"] = 2.0 * std::pow(static_cast<double>(size), 3) / best / 1e9;
  std::cout << out.dump() << "\n";
  return 0;
}

// ---- validate: NoGradGuard vs InferenceMode --------------------------------------------------
int cmd_validate(const ModelArgs& a, int reps) {
  apply_runtime(a);
  torch::manual_seed(a.seed);
  rt::rave::RaveModel model(options_of(a));
  model->eval();
  auto lo = rt::rave::RaveLossOptions::preset(rt::rave::RaveVersion::kV2);
  lo.stft_scales = model->options().stft_scales;
  const auto x = make_input(a);
  auto run = [&](bool inference) {
    const auto t0 = Clock::now();
    if (inference) {
      c10::InferenceMode guard;
      rt::rave::spectral_distance(x, model->forward_train(x).y, lo.stft_scales).item<double>();
    } else {
      torch::NoGradGuard guard;
      rt::rave::spectral_distance(x, model->forward_train(x).y, lo.stft_scales).item<double>();
    }
    return seconds_since(t0);
  };
  run(false);
  run(true);
  rt::Json out = runtime_info();
  out["version"] = a.version;
  out["batch"] = a.batch;
  out["n_signal"] = a.n_signal;
  for (int i = 0; i < reps; ++i) {
    out["no_grad_seconds"].push_back(run(false));
    out["inference_mode_seconds"].push_back(run(true));
  }
  std::cout << out.dump() << "\n";
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  rt::announce_blas_kernels();
  CLI::App app{"Native RAVE measurements (benchmarks/run.sh)"};
  app.require_subcommand(1);
  ModelArgs a;
  int steps = 5, warmup = 1, reps = 5;
  int64_t size = 2048;
  bool count_ops = false;

  auto* step = app.add_subcommand("step", "time phase-1 training steps");
  add_model_args(step, a);
  step->add_option("--steps", steps)->capture_default_str();
  step->add_option("--warmup", warmup)->capture_default_str();
  step->add_flag("--count_ops", count_ops, "count operator calls per phase in one extra step");
  auto* flops = app.add_subcommand("flops", "convolution FLOPs of one forward pass");
  add_model_args(flops, a);
  auto* peak = app.add_subcommand("peak", "torch::mm FLOP/s");
  peak->add_option("--threads", a.threads)->capture_default_str();
  peak->add_option("--size", size)->capture_default_str();
  peak->add_option("--reps", reps)->capture_default_str();
  auto* val = app.add_subcommand("validate", "validation pass: NoGradGuard vs InferenceMode");
  add_model_args(val, a);
  val->add_option("--reps", reps)->capture_default_str();
  CLI11_PARSE(app, argc, argv);
  try {
    if (*step) return cmd_step(a, steps, warmup, count_ops);
    if (*flops) return cmd_flops(a);
    if (*peak) return cmd_peak(a.threads, size, reps);
    if (*val) return cmd_validate(a, reps);
  } catch (const std::exception& e) {
    std::cerr << "rave_bench: " << e.what() << "\n";
    return 1;
  }
  return 0;
}
