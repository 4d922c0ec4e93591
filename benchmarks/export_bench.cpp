// export_bench: realtime factor of an exported RAVE model, as nn~ runs it (not a test).
//
//   export_bench --version v2 --block 2048 --threads 1 --seconds 20 [--capacity N]
//   export_bench --version v2 --onnx_dir DIR      (the weights and ONNX graphs onnx_bench.sh compares)
//
// Builds the full-size model (random weights: the speed does not depend on their values),
// exports it with --streaming to a temporary file, loads it with torch::jit::load, and calls
// `forward` on consecutive `block`-sample blocks of noise under c10::InferenceMode (nn~'s
// Backend::perform), `seconds` of audio after 5 warm-up blocks. The same blocks then go
// through the C++ module (RaveModel::forward, each block on its own, no cached state) and the
// offline export. Realtime factor = seconds of audio / seconds of compute. Prints one JSON
// object.
//
// It also measures the floor a block cannot go under: every call of `forward` reads every
// weight once (a block of 2048 samples is 1 latent frame, so the large top-level convolutions
// are matrix-vector products), so `weights_read_ms` times one pass over the exported module's
// weights (a sum of each, median of 9) and `parameter_bytes` counts them.
#include <torch/script.h>
#include <torch/torch.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <chrono>
#include <filesystem>
#include <iostream>
#include <tuple>
#include <vector>

#include "export/onnx/onnx_rave.h"
#include "export/torchscript/rave_script.h"
#include "util/blas_kernels.h"
#include "util/json.h"
#include "util/tensor_manifest.h"
#include "util/torch_compat.h"

namespace {

using Clock = std::chrono::steady_clock;

// Audio seconds per compute second of `step` over `blocks` calls, after 5 warm-up calls.
double realtime_factor(const std::function<void(const torch::Tensor&)>& step, const torch::Tensor& audio,
                       int64_t block, int64_t sampling_rate) {
  const int64_t blocks = audio.size(-1) / block;
  c10::InferenceMode guard;
  for (int64_t i = 0; i < 5; ++i) step(audio.narrow(-1, i * block, block));
  const auto t0 = Clock::now();
  for (int64_t i = 0; i < blocks; ++i) step(audio.narrow(-1, i * block, block));
  const double compute = std::chrono::duration<double>(Clock::now() - t0).count();
  return static_cast<double>(blocks * block) / static_cast<double>(sampling_rate) / compute;
}

// Median milliseconds of one read of every tensor in `tensors` (their sum), 9 repetitions.
double read_once_ms(const std::vector<torch::Tensor>& tensors) {
  c10::InferenceMode guard;
  std::vector<double> ms;
  for (int rep = 0; rep < 10; ++rep) {  // the first pass warms up and is not counted
    const auto t0 = Clock::now();
    auto total = torch::zeros({}, torch::kDouble);
    for (const auto& t : tensors) total += t.sum();
    (void)total.item<double>();
    if (rep > 0) ms.push_back(std::chrono::duration<double, std::milli>(Clock::now() - t0).count());
  }
  std::sort(ms.begin(), ms.end());
  return ms[ms.size() / 2];
}

}  // namespace

int main(int argc, char** argv) {
  rt::announce_blas_kernels();
  rt::compat::disable_tensorexpr_fuser();
  CLI::App app{"Realtime factor of the exported RAVE model (forward, block by block)"};
  std::string version = "v2";
  int64_t block = 2048, capacity = 0, threads = 1;
  double seconds = 20.0;
  std::string keep, quantize = "none";
  app.add_option("--version", version, "v1 | v2 | v3 (RaveOptions::preset)")->capture_default_str();
  app.add_option("--capacity", capacity, "override the preset's capacity (0 = keep)");
  app.add_option("--block", block, "samples per call (nn~'s buffer size)")->capture_default_str();
  app.add_option("--threads", threads, "intra-op threads")->capture_default_str();
  app.add_option("--seconds", seconds, "audio seconds timed per arm")->capture_default_str();
  app.add_option("--keep", keep, "also write the streaming export to this file (for profiling)");
  app.add_option("--quantize", quantize, "none | int8 (export --quantize)")->capture_default_str();
  std::string onnx_dir;
  app.add_option(
      "--onnx_dir", onnx_dir,
      "instead of timing: write the model's weights (DIR/weights, rt-golden/1, every float "
      "parameter and buffer by name) and its ONNX forward graphs, DIR/ours_streaming.onnx, "
      "DIR/ours_offline.onnx and DIR/ours_streaming_int8.onnx (--quantize int8) (benchmarks/onnx_bench.sh)");
  CLI11_PARSE(app, argc, argv);
  torch::set_num_threads(static_cast<int>(threads));

  auto o = rt::rave::RaveOptions::preset(rt::parse_enum<rt::rave::RaveVersion>(version, "--version"));
  o.discriminator = rt::rave::DiscriminatorKind::kNone;
  if (capacity > 0) o.capacity = capacity;
  rt::rave::RaveModel model(o);
  model->eval();
  if (!onnx_dir.empty()) {
    const std::filesystem::path dir = onnx_dir;
    rt::tensor_manifest::TensorFileWriter weights;
    auto add = [&](const std::string& name, const torch::Tensor& t) {
      if (!t.is_floating_point()) return;  // counters (num_batches_tracked)
      auto c = t.detach().to(torch::kFloat).contiguous();
      weights.add(name, c.sizes().vec(), rt::tensor_manifest::Dtype::kFloat32, c.data_ptr<float>());
    };
    for (const auto& p : model->named_parameters()) add(p.key(), p.value());
    for (const auto& b : model->named_buffers()) add(b.key(), b.value());
    weights.write(dir / "weights", {{"generated_by", "benchmarks/export_bench.cpp --onnx_dir"},
                                    {"version", version},
                                    {"capacity", o.capacity}});
    // float32 streaming and offline, and streaming on int8 weights (export --format onnx --quantize int8).
    for (const auto& [file, streaming, int8] :
         {std::tuple{"ours_streaming.onnx", true, false}, std::tuple{"ours_offline.onnx", false, false},
          std::tuple{"ours_streaming_int8.onnx", true, true}}) {
      rt::exporting::onnx::RaveGraphOptions g;
      g.streaming = streaming;
      if (int8) g.int8_min_weights = rt::exporting::ScriptOptions{}.int8_min_weights;
      const auto graphs = rt::exporting::onnx::build_rave_graphs(*model, g);
      graphs.forward.save(dir / file, {{"rt_method", "forward"}}, "export_bench");
      if (int8) {
        const rt::Json record{{"int8_layers", graphs.int8_layers},
                              {"int8_weights", graphs.int8_weights},
                              {"float_weights", graphs.forward.weight_count()}};
        std::cout << record.dump() << std::endl;
      }
    }
    return 0;
  }
  const auto file = std::filesystem::temp_directory_path() / ("export_bench_" + std::to_string(::getpid()));
  rt::exporting::ScriptOptions s;
  s.streaming = true;
  s.quantize = rt::parse_enum<rt::exporting::Quantize>(quantize, "--quantize");
  rt::exporting::ScriptInfo info;
  rt::exporting::script_rave(*model, s, &info).save(file.string() + "_streaming.ts");
  s.streaming = false;
  rt::exporting::script_rave(*model, s, nullptr).save(file.string() + ".ts");
  if (!keep.empty())
    std::filesystem::copy_file(file.string() + "_streaming.ts", keep,
                               std::filesystem::copy_options::overwrite_existing);
  auto streaming = torch::jit::load(file.string() + "_streaming.ts");
  auto offline = torch::jit::load(file.string() + ".ts");
  std::filesystem::remove(file.string() + "_streaming.ts");
  std::filesystem::remove(file.string() + ".ts");

  std::vector<torch::Tensor> tensors;
  int64_t parameter_bytes = 0;
  // The weights (parameters); not the streaming caches, of which a call reads only its slots.
  for (const auto& p : streaming.parameters(/*recurse=*/true)) tensors.push_back(p);
  for (const auto& t : tensors) parameter_bytes += static_cast<int64_t>(t.nbytes());
  const double weights_read_ms = read_once_ms(tensors);

  torch::manual_seed(1);
  const int64_t total =
      (static_cast<int64_t>(seconds * static_cast<double>(o.sampling_rate)) / block + 5) * block;
  auto audio = (torch::rand({1, o.channels, total}) * 2 - 1) * 0.5;
  const double rtf_streaming = realtime_factor(
      [&](const torch::Tensor& x) { streaming.get_method("forward")({x}); }, audio, block, o.sampling_rate);
  const double rtf_module =
      realtime_factor([&](const torch::Tensor& x) { model->forward(x); }, audio, block, o.sampling_rate);
  const double rtf_offline = realtime_factor(
      [&](const torch::Tensor& x) { offline.get_method("forward")({x}); }, audio, block, o.sampling_rate);
  rt::Json j = {
      {"version", version},
      {"capacity", o.capacity},
      {"block", block},
      {"threads", torch::get_num_threads()},
      {"seconds", seconds},
      {"forward_latency_samples", info.forward_latency()},
      {"parameter_bytes", parameter_bytes},
      {"weights_read_ms", weights_read_ms},
      {"block_ms_at_10x", 1000.0 * static_cast<double>(block) / static_cast<double>(o.sampling_rate) / 10.0},
      {"rtf_export_streaming", rtf_streaming},
      {"rtf_cpp_module", rtf_module},
      {"rtf_export_offline", rtf_offline}};
  std::cout << j.dump() << std::endl;
  return 0;
}
