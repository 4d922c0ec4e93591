// Shared by the ONNX export tests: a model's three graphs written to a folder, and the model's
// own noise synthesis silenced for a deterministic reference (the graphs run at noise_scale 0).
#pragma once

#include <algorithm>
#include <cmath>
#include <filesystem>

#include "export/onnx/onnx_rave.h"
#include "models/rave/generator.h"

namespace rt::exporting::testing {

struct OnnxFiles {
  std::filesystem::path encode, decode, forward;
  exporting::onnx::RaveGraphs graphs;
};

// int8_min_weights: RaveGraphOptions' (0: every layer that can be on int8 weights; -1: float32).
inline OnnxFiles write_onnx(rave::RaveModelImpl& model, bool streaming, const std::filesystem::path& dir,
                            int64_t latent_size = 0, int64_t int8_min_weights = -1) {
  exporting::onnx::RaveGraphOptions o;
  o.streaming = streaming;
  o.latent_size = latent_size;
  o.int8_min_weights = int8_min_weights;
  OnnxFiles f{dir / "m.encode.onnx", dir / "m.decode.onnx", dir / "m.onnx",
              exporting::onnx::build_rave_graphs(model, o)};
  f.graphs.encode.save(f.encode, {{"rt_method", "encode"}}, "test");
  f.graphs.decode.save(f.decode, {{"rt_method", "decode"}}, "test");
  f.graphs.forward.save(f.forward, {{"rt_method", "forward"}}, "test");
  return f;
}

// Signal-to-noise ratio of `got` against `want`, in dB.
inline double snr_db(const torch::Tensor& got, const torch::Tensor& want) {
  const double noise = (got - want).pow(2).sum().item<double>();
  return 10.0 * std::log10(want.pow(2).sum().item<double>() / std::max(noise, 1e-30));
}

// Every noise generator of the model (v2's noise_module, v1's third synthesis branch) at scale 0.
inline void silence_noise(rave::RaveModelImpl& model) {
  for (auto& m : model.modules(/*include_self=*/false)) {
    if (auto* n = dynamic_cast<rave::NoiseGeneratorImpl*>(m.get())) n->noise_scale = 0.0;
  }
}

}  // namespace rt::exporting::testing
