// A trained RaveModel as ONNX graphs (export --format onnx), without Python: encode, decode and
// forward, each its own model file, for ONNX Runtime hosts (anira, Neutone-style plug-ins,
// browser/WASM runtimes). Built from the same module tree, ledger and streaming rules as the
// TorchScript file: both walk one description (export/graph/graph.h), each with its own writer
// of its ops (export/onnx/section_writer.h).
//
// With int8 weights (RaveGraphOptions::int8_min_weights) a large layer is DynamicQuantizeLinear →
// MatMulInteger → Cast → Mul (+ Add): its input quantized per call over the tensor's range,
// its weight int8 with one scale per output channel.
//
// Streaming has no hidden buffers: every cached convolution's, delay's and transposed
// convolution's state is a graph input "state.<key>" and the matching output
// "state.<key>.next" (float32, [batch·rows, channels, samples], zeros before the first block).
// A host feeds each call's ".next" outputs back as the next call's inputs, per stream.
//
// Each graph takes `noise_scale` (float32 scalar, default 1: a host may leave it out), which
// scales every random draw as the TorchScript file's nn~ attribute does: the posterior sample
// (encode), the fill of cropped latent dimensions (decode), the noise synthesis. 0 makes the
// graphs deterministic. Random draws are ONNX RandomNormalLike / RandomUniformLike, unseeded.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "export/onnx/onnx_graph.h"
#include "models/rave/rave.h"

namespace rt::exporting::onnx {

struct RaveGraphOptions {
  bool streaming = false;
  int64_t latent_size = 0;  // the exported (PCA-cropped) latent; 0 = all
  double noise_scale = 1.0;
  // export --quantize int8: convolutions (groups 1) and transposed convolutions (kernel s or
  // 2s) with at least this many weights run on int8 weights (ScriptOptions::int8_min_weights,
  // as the TorchScript file); -1: float32 only. The PQMF's fixed filters stay float32.
  int64_t int8_min_weights = -1;
};

// One streaming state: input `name`, output `name + ".next"`.
struct StateSpec {
  std::string name;
  int64_t rows = 1;  // tensor batch rows per stream (the PQMF folds channels into the batch)
  int64_t channels = 0, samples = 0;
};

struct RaveGraphs {
  Graph encode{"encode"}, decode{"decode"}, forward{"forward"};
  std::vector<StateSpec> encode_states, decode_states;  // forward: both
  int64_t ratio = 0;                                    // audio samples per latent frame
  int64_t latent_size = 0, full_latent_size = 0, channels = 0;
  int64_t encode_latency = 0, decode_latency = 0;  // streaming delays, audio samples
  int64_t int8_layers = 0, int8_weights = 0;       // forward: the layers on int8 weights
  std::map<std::string, std::vector<std::string>> dropped;
};

// Every latent kind (variational, wasserstein, spherical, discrete), as script_rave exports it.
// Throws rt::Error naming what cannot be exported (the mel encoder, a GRU, an odd product of
// ratios with a PQMF) before anything is written.
RaveGraphs build_rave_graphs(rave::RaveModelImpl& model, const RaveGraphOptions& options);

}  // namespace rt::exporting::onnx
