// export_bench: realtime factor of an exported RAVE model, as nn~ runs it (not a test).
//
//   export_bench --version v2 --block 2048 --threads 1 --seconds 20 [--capacity N]
//
// Builds the full-size model (random weights: the speed does not depend on their values),
// exports it with --streaming to a temporary file, loads it with torch::jit::load, and calls
// `forward` on consecutive `block`-sample blocks of noise under c10::InferenceMode (nn~'s
// Backend::perform), `seconds` of audio after 5 warm-up blocks. The same blocks then go
// through the C++ module (RaveModel::forward, each block on its own, no cached state) and the
// offline export. Realtime factor = seconds of audio / seconds of compute. Prints one JSON
// object.
#include <CLI/CLI.hpp>
#include <torch/script.h>
#include <torch/torch.h>

#include <chrono>
#include <filesystem>
#include <iostream>
#include <unistd.h>

#include "export/rave_script.h"
#include "util/json.h"

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

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"Realtime factor of the exported RAVE model (forward, block by block)"};
  std::string version = "v2";
  int64_t block = 2048, capacity = 0, threads = 1;
  double seconds = 20.0;
  app.add_option("--version", version, "v1 | v2 | v3 (RaveOptions::preset)")->capture_default_str();
  app.add_option("--capacity", capacity, "override the preset's capacity (0 = keep)");
  app.add_option("--block", block, "samples per call (nn~'s buffer size)")->capture_default_str();
  app.add_option("--threads", threads, "intra-op threads")->capture_default_str();
  app.add_option("--seconds", seconds, "audio seconds timed per arm")->capture_default_str();
  CLI11_PARSE(app, argc, argv);
  torch::set_num_threads(static_cast<int>(threads));

  auto o = rt::rave::RaveOptions::preset(rt::parse_enum<rt::rave::RaveVersion>(version, "--version"));
  o.discriminator = rt::rave::DiscriminatorKind::kNone;
  if (capacity > 0) o.capacity = capacity;
  rt::rave::RaveModel model(o);
  model->eval();
  const auto file = std::filesystem::temp_directory_path() / ("export_bench_" + std::to_string(::getpid()));
  rt::exporting::ScriptOptions s;
  s.streaming = true;
  rt::exporting::ScriptInfo info;
  rt::exporting::script_rave(*model, s, &info).save(file.string() + "_streaming.ts");
  s.streaming = false;
  rt::exporting::script_rave(*model, s, nullptr).save(file.string() + ".ts");
  auto streaming = torch::jit::load(file.string() + "_streaming.ts");
  auto offline = torch::jit::load(file.string() + ".ts");
  std::filesystem::remove(file.string() + "_streaming.ts");
  std::filesystem::remove(file.string() + ".ts");

  torch::manual_seed(1);
  const int64_t total = (static_cast<int64_t>(seconds * static_cast<double>(o.sampling_rate)) / block + 5) * block;
  auto audio = (torch::rand({1, o.channels, total}) * 2 - 1) * 0.5;
  const double rtf_streaming = realtime_factor(
      [&](const torch::Tensor& x) { streaming.get_method("forward")({x}); }, audio, block, o.sampling_rate);
  const double rtf_module = realtime_factor([&](const torch::Tensor& x) { model->forward(x); }, audio, block,
                                            o.sampling_rate);
  const double rtf_offline = realtime_factor(
      [&](const torch::Tensor& x) { offline.get_method("forward")({x}); }, audio, block, o.sampling_rate);
  rt::Json j = {{"version", version},
                {"capacity", o.capacity},
                {"block", block},
                {"threads", torch::get_num_threads()},
                {"seconds", seconds},
                {"forward_latency_samples", info.forward_latency()},
                {"rtf_export_streaming", rtf_streaming},
                {"rtf_cpp_module", rtf_module},
                {"rtf_export_offline", rtf_offline}};
  std::cout << j.dump() << std::endl;
  return 0;
}
