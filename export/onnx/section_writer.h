// The ONNX writer of the description's ops (export/graph/graph.h): one small method per op kind
// adds its nodes to the graph being written. What each op computes and the streaming state it
// keeps are the description's; how it is written is decided here:
//   - a streaming state is no hidden buffer but a graph input "state.<key>" and the matching
//     output "state.<key>.next" (export/onnx/onnx_rave.h);
//   - with int8 weights a large convolution is DynamicQuantizeLinear → MatMulInteger → Cast →
//     Mul (+ Add), its weight int8 with one scale per output channel (7 bits: see int8_columns);
//   - the noise synthesis as one matrix product per frame (the impulse responses' map) and a
//     Toeplitz product, where TorchScript uses FFTs;
//   - LeakyReLU after a Conv as LeakyRelu (fused by ONNX Runtime), elsewhere as Max(x, α·x).
#pragma once

#include <string>
#include <vector>

#include "export/graph/graph.h"
#include "export/onnx/onnx_graph.h"
#include "export/onnx/onnx_rave.h"

namespace rt::exporting::onnx {

// A value of the graph being written and its flow (channels, rate, rows, delay).
struct Value {
  std::string name;
  graph::Flow flow;
};

class SectionWriter {
 public:
  // `states` collects the streaming states declared; `noise_scale` is the graph's input of that
  // name; int8_min_weights as RaveGraphOptions'.
  SectionWriter(Graph& graph, bool streaming, std::vector<StateSpec>& states, std::string noise_scale,
                int64_t int8_min_weights);

  // Adds the nodes of `section` from the value `input` (its value 0); returns its output value.
  std::string write(const graph::Section& section, const std::string& input);

  Graph& graph() { return graph_; }
  // RAVE mod_sigmoid: 2·sigmoid(x)^2.3 + 1e-7.
  std::string mod_sigmoid(const std::string& x);
  // A [batch, n, time] tensor of zeros shaped like x with n channels: Shape, ConstantOfShape.
  std::string zeros_like_channels(const std::string& x, int64_t n);
  // Standard normal draws shaped like `like`, scaled by noise_scale.
  std::string gaussian_like(const std::string& like);

  int64_t int8_layers = 0, int8_weights = 0;  // what went on int8 weights

 private:
  bool int8_for(int64_t weights) const { return int8_min_weights_ >= 0 && weights >= int8_min_weights_; }
  std::string cached_pad(const Value& x, const std::string& key, int64_t n, bool crop);
  StateSpec state_input(const std::string& key, const graph::Flow& like, int64_t n);
  void state_output(const StateSpec& state, const std::string& value);
  std::string rows_times_int8(const std::string& rows, const torch::Tensor& weight, const torch::Tensor& bias,
                              const std::string& key);
  std::string conv(const Value& x, const graph::Conv& c, const torch::Tensor& kernel, bool int8);
  std::string conv_int8(const std::string& src, const graph::Conv& c, const torch::Tensor& kernel,
                        const std::vector<int64_t>& pads);
  std::string conv_transpose(const Value& x, const graph::Flow& out, const graph::ConvTranspose& c);
  std::string conv_transpose_int8(const Value& x, const graph::Flow& out, const graph::ConvTranspose& c);
  std::string activation(const std::string& x, const graph::Activation& a);
  std::string batch_norm(const std::string& x, const graph::BatchNorm& b);
  std::string gate(const std::vector<Value>& in, const graph::Gate& g);
  std::string reverse_half(const std::string& x, int64_t bands, int64_t offset);
  std::string pqmf(const Value& x, const graph::Pqmf& p);
  std::string noise(const std::string& h, const graph::Noise& n);
  // The op's nodes from its inputs `in` (the first is the op's main input); `out` its output's flow.
  std::string op(const graph::OpKind& kind, const std::vector<Value>& in, const graph::Flow& out);

  Graph& graph_;
  const bool streaming_;
  std::vector<StateSpec>& states_;
  const std::string noise_scale_;
  const int64_t int8_min_weights_;
};

}  // namespace rt::exporting::onnx
