#include "export/onnx/section_writer.h"

#include <limits>
#include <type_traits>
#include <variant>

#include "util/error.h"

namespace rt::exporting::onnx {
namespace {

constexpr int64_t kEnd = std::numeric_limits<int64_t>::max();

// A state tensor's graph value: [batch·rows, channels, samples], the first dim named "batch" or
// "batch*<rows>" (export/onnx/onnx_eval.h's StreamRunner and hosts read the rows from it).
ValueSpec state_value(const StateSpec& state, const std::string& name, const std::string& doc) {
  const std::string rows = state.rows == 1 ? "batch" : "batch*" + std::to_string(state.rows);
  return ValueSpec{name, {rows, state.channels, state.samples}, false, doc};
}

// `weight` [K, M] as int8 with one symmetric scale per column (max |w| / 63) and the scales.
// Seven bits, not eight: x86 CPUs without VNNI multiply uint8 × int8 pairs into int16
// (vpmaddubsw), where 2 · 255 · 127 saturates and 2 · 255 · 63 does not, so the file computes
// the same on every CPU ONNX Runtime runs on.
std::pair<torch::Tensor, torch::Tensor> int8_columns(const torch::Tensor& weight) {
  const auto w = weight.to(torch::kFloat);
  auto scale = w.abs().amax(0) / 63.0;
  scale = torch::where(scale > 0, scale, torch::ones_like(scale));
  const auto q = torch::round(w / scale).clamp(-63, 63).to(torch::kChar).contiguous();
  return {q, scale.contiguous()};
}

// The linear map from a noise filter's magnitudes (bins) to its impulse response (hop taps), as
// NoiseGeneratorImpl computes it (irfft, centring roll, Hann window, zero-pad or crop to hop, roll back),
// applied to the identity so that the graph needs one matrix product instead of an inverse FFT.
torch::Tensor impulse_response_map(int64_t bins, int64_t hop) {
  const int64_t filter = 2 * (bins - 1);
  auto eye = torch::eye(bins, torch::kDouble);
  auto ir = torch::fft::irfft(torch::complex(eye, torch::zeros_like(eye)));
  ir = torch::roll(ir, {filter / 2}, {-1});
  ir = ir * torch::hann_window(filter, torch::TensorOptions().dtype(torch::kDouble));
  ir = torch::constant_pad_nd(ir, {0, hop - filter}, 0.0);
  ir = torch::roll(ir, {-((filter + 1) / 2)}, {-1});
  return ir.to(torch::kFloat).contiguous();  // [bins, hop]
}

}  // namespace

SectionWriter::SectionWriter(Graph& graph, bool streaming, std::vector<StateSpec>& states,
                             std::string noise_scale, int64_t int8_min_weights)
    : graph_(graph),
      streaming_(streaming),
      states_(states),
      noise_scale_(std::move(noise_scale)),
      int8_min_weights_(int8_min_weights) {}

// cached_conv CachedPadding1d with an explicit state: the previous call's last n samples (the
// state input) are prepended to x; the concatenation's last n samples are the state output.
// With `crop` the result is cut back to x's length, which delays x by n samples.
std::string SectionWriter::cached_pad(const Value& x, const std::string& key, int64_t n, bool crop) {
  const StateSpec state = state_input(key, x.flow, n);
  const std::string cat = graph_.concat({state.name, x.name}, 2);
  state_output(state, graph_.slice(cat, 2, -n, kEnd));
  return crop ? graph_.slice(cat, 2, 0, -n) : cat;
}

StateSpec SectionWriter::state_input(const std::string& key, const graph::Flow& like, int64_t n) {
  StateSpec state{"state." + key, like.rows, like.channels, n};
  graph_.input(state_value(state, state.name, "streaming state; zeros before the first block"));
  states_.push_back(state);
  return state;
}

void SectionWriter::state_output(const StateSpec& state, const std::string& value) {
  graph_.output(value, state_value(state, state.name + ".next", ""));
}

// rows [..., K] (float32) times `weight` [K, M] stored as int8 with one scale per column, + bias:
// the rows are quantized at each call over their own range (DynamicQuantizeLinear: uint8),
// multiplied in int32 (MatMulInteger) and scaled back to float32. ONNX Runtime fuses the four
// nodes into one (DynamicQuantizeMatMul) and packs the weight once, when it loads the file.
std::string SectionWriter::rows_times_int8(const std::string& rows, const torch::Tensor& weight,
                                           const torch::Tensor& bias, const std::string& key) {
  const auto [q, scale] = int8_columns(weight);
  const auto dq = graph_.nodes("DynamicQuantizeLinear", {rows}, 3, {}, key + ".rows");
  const std::string product =
      graph_.node("MatMulInteger", {dq[0], graph_.initializer(key + ".weight_int8", q), dq[2]});
  const std::string scales = graph_.node("Mul", {dq[1], graph_.initializer(key + ".weight_scale", scale)});
  std::string y = graph_.node("Mul", {graph_.node("Cast", {product}, {{"to", int64_t{1}}}), scales});
  if (bias.defined()) y = graph_.node("Add", {y, graph_.initializer(key + ".bias", bias)});
  ++int8_layers;
  int8_weights += weight.numel();
  return y;
}

// A convolution with `kernel` (the description's, or the PQMF synthesis bank with its scale and
// band reversal folded in).
std::string SectionWriter::conv(const Value& x, const graph::Conv& c, const torch::Tensor& kernel,
                                bool int8) {
  const auto& o = c.options;
  Value src = x;
  std::vector<int64_t> pads{o.pad_left(), o.pad_right()};
  if (streaming_) {
    if (c.stride_delay > 0)
      src.name = cached_pad(src, c.key + ".downsampling_delay", c.stride_delay, /*crop=*/true);
    if (c.cache > 0) src.name = cached_pad(src, c.key + ".cache", c.cache, /*crop=*/false);
    pads = {0, 0};
  }
  if (int8) return conv_int8(src.name, c, kernel, pads);
  std::vector<std::string> in{src.name, graph_.initializer(c.key + ".weight", kernel)};
  if (c.bias.defined()) in.push_back(graph_.initializer(c.key + ".bias", c.bias));
  return graph_.node("Conv", in,
                     {{"kernel_shape", std::vector<int64_t>{o.kernel_size()}},
                      {"strides", std::vector<int64_t>{o.stride()}},
                      {"dilations", std::vector<int64_t>{o.dilation()}},
                      {"group", o.groups()},
                      {"pads", std::vector<int64_t>{pads[0], pads[1]}}});
}

// The convolution (groups 1) of `src` [N, in, L] on int8 weights: its windows gathered by k
// strided slices, [N, T, k·in] (column j·in + c: input channel c at tap j), times the kernel laid
// out [k·in, out] to match. `pads` (offline) are applied first.
std::string SectionWriter::conv_int8(const std::string& src, const graph::Conv& c,
                                     const torch::Tensor& kernel, const std::vector<int64_t>& pads) {
  const auto& o = c.options;
  std::string in = src;
  if (pads[0] + pads[1] > 0)
    in = graph_.node("Pad", {in, graph_.ints("pads", {0, 0, pads[0], 0, 0, pads[1]})});
  const int64_t k = o.kernel_size(), d = o.dilation(), s = o.stride(), span = (k - 1) * d;
  std::string windows = in;  // a 1×1 convolution's window is its input
  if (k > 1 || s > 1) {
    std::vector<std::string> taps;
    for (int64_t j = 0; j < k; ++j) {
      const int64_t end = j * d - span;  // the window's last tap ends at the signal's end
      taps.push_back(graph_.node(
          "Slice", {in, graph_.ints("start", {j * d}), graph_.ints("end", {end == 0 ? kEnd : end}),
                    graph_.ints("axis", {2}), graph_.ints("step", {s})}));
    }
    windows = taps.size() == 1 ? taps[0] : graph_.concat(taps, 1);
  }
  const torch::Tensor w = kernel.permute({2, 1, 0}).reshape({k * o.in_channels(), o.out_channels()});
  return graph_.transpose(rows_times_int8(graph_.transpose(windows, {0, 2, 1}), w, c.bias, c.key), {0, 2, 1});
}

std::string SectionWriter::conv_transpose(const Value& x, const graph::Flow& out,
                                          const graph::ConvTranspose& c) {
  const auto& o = c.options;
  const int64_t s = o.stride(), k = o.kernel_size();
  if ((k == s || k == 2 * s) && int8_for(c.kernel.numel())) return conv_transpose_int8(x, out, c);
  const std::string w = graph_.initializer(c.key + ".weight", c.kernel);
  Attrs attrs{{"kernel_shape", std::vector<int64_t>{k}}, {"strides", std::vector<int64_t>{s}}};
  if (!streaming_) {
    std::vector<std::string> in{x.name, w};
    if (c.bias.defined()) in.push_back(graph_.initializer(c.key + ".bias", c.bias));
    attrs.emplace_back("pads", std::vector<int64_t>{o.padding(), o.padding()});
    return graph_.node("ConvTranspose", in, attrs);
  }
  // cached_conv CachedConvTranspose1d: no padding; the last k − s samples overlap the next call's
  // first ones and travel in the state; the bias is added after, once.
  attrs.emplace_back("pads", std::vector<int64_t>{0, 0});
  std::string y = graph_.node("ConvTranspose", {x.name, w}, attrs);
  if (c.overlap > 0) {
    const StateSpec state = state_input(c.key + ".cache", out, c.overlap);
    const std::string head = graph_.node("Add", {graph_.slice(y, 2, 0, c.overlap), state.name});
    state_output(state, graph_.slice(y, 2, -c.overlap, kEnd));
    y = graph_.concat({head, graph_.slice(y, 2, c.overlap, -c.overlap)}, 2);
  }
  if (c.bias.defined())
    y = graph_.node("Add", {y, graph_.initializer(c.key + ".bias", c.bias.reshape({-1, 1}))});
  return y;
}

// The transposed convolution with kernel s or 2s on int8 weights, as the TorchScript file's
// matrix form: each input step t gives k output samples from t·s, [N, T, in] times the kernel
// [in, out·k] (column co·k + j: kernel[:, co, j]); with k = 2s each step's second half overlaps
// the next step's first. Streaming, the last step's second half is the state (as the float32
// graph's); offline, the full output is cropped by the padding as ConvTranspose's.
std::string SectionWriter::conv_transpose_int8(const Value& x, const graph::Flow& out,
                                               const graph::ConvTranspose& c) {
  const auto& o = c.options;
  const int64_t s = o.stride(), k = o.kernel_size(), cout = o.out_channels(), p = o.padding();
  const std::string z =
      rows_times_int8(graph_.transpose(x.name, {0, 2, 1}), c.kernel.reshape({o.in_channels(), cout * k}),
                      torch::Tensor(), c.key);
  const std::string steps =
      graph_.transpose(graph_.reshape(z, {0, 0, cout, k}), {0, 2, 1, 3});  // [N, out, T, k]
  std::string y = graph_.reshape(graph_.slice(steps, 3, 0, s), {0, cout, -1});
  if (k == 2 * s) {
    const std::string tail = graph_.reshape(graph_.slice(steps, 3, s, kEnd), {0, cout, -1});
    if (streaming_) {
      const StateSpec state = state_input(c.key + ".cache", out, s);
      state_output(state, graph_.slice(tail, 2, -s, kEnd));
      y = graph_.node("Add", {y, graph_.concat({state.name, graph_.slice(tail, 2, 0, -s)}, 2)});
    } else {
      y = graph_.node("Add", {graph_.node("Pad", {y, graph_.ints("pads", {0, 0, 0, 0, 0, s})}),
                              graph_.node("Pad", {tail, graph_.ints("pads", {0, 0, s, 0, 0, 0})})});
    }
  }
  if (!streaming_ && p > 0) y = graph_.slice(y, 2, p, -p);
  if (c.bias.defined())
    y = graph_.node("Add", {y, graph_.initializer(c.key + ".bias", c.bias.reshape({-1, 1}))});
  return y;
}

// LeakyReLU after a Conv as LeakyRelu, which ONNX Runtime fuses into the convolution
// (FusedConv); anywhere else as Max(x, α·x), the same values for 0 < α < 1: ONNX Runtime 1.17's
// standalone LeakyRelu made the full-size v2 streaming graph on int8 weights 4.1 ms per
// 2048-sample call where Mul + Max make it 3.0 (6.6 and 4.6 ms at 4096; docs/perf/export.md).
// Snake as models::SnakeImpl::forward: x + 1/(α + 1e-9) · sin(α·x)².
std::string SectionWriter::activation(const std::string& x, const graph::Activation& a) {
  switch (a.kind) {
    case graph::Activation::Kind::kLeakyRelu:
      if (graph_.op_of(x) == "Conv" || a.slope <= 0.0 || a.slope >= 1.0)
        return graph_.node("LeakyRelu", {x}, {{"alpha", a.slope}});
      return graph_.node("Max", {x, graph_.node("Mul", {x, graph_.scalar("slope", a.slope)})});
    case graph::Activation::Kind::kSnake: {
      const std::string alpha = graph_.initializer(a.key + ".alpha", a.alpha);
      const std::string inv =
          graph_.node("Reciprocal", {graph_.node("Add", {alpha, graph_.scalar("eps", 1e-9)})});
      const std::string s = graph_.node("Sin", {graph_.node("Mul", {alpha, x})});
      return graph_.node("Add", {x, graph_.node("Mul", {inv, graph_.node("Mul", {s, s})})});
    }
    case graph::Activation::Kind::kTanh:
      return graph_.node("Tanh", {x});
  }
  throw Error("export --format onnx: internal error: unknown activation");
}

std::string SectionWriter::batch_norm(const std::string& x, const graph::BatchNorm& b) {
  std::vector<std::string> in{x};
  in.push_back(graph_.initializer(b.key + ".weight", b.weight));
  in.push_back(graph_.initializer(b.key + ".bias", b.bias));
  in.push_back(graph_.initializer(b.key + ".running_mean", b.mean));
  in.push_back(graph_.initializer(b.key + ".running_var", b.var));
  return graph_.node("BatchNormalization", in, {{"epsilon", b.eps}});
}

std::string SectionWriter::mod_sigmoid(const std::string& x) {
  const std::string p = graph_.node("Pow", {graph_.node("Sigmoid", {x}), graph_.scalar("exponent", 2.3)});
  return graph_.node("Add",
                     {graph_.node("Mul", {p, graph_.scalar("two", 2.0)}), graph_.scalar("tiny", 1e-7)});
}

std::string SectionWriter::gate(const std::vector<Value>& in, const graph::Gate& g) {
  const Value& x = in.at(0);
  if (g.kind == graph::Gate::Kind::kAmplitude) {
    const int64_t half = x.flow.channels / 2;
    const std::string gate = graph_.node("Sigmoid", {graph_.slice(x.name, 1, half, kEnd)});
    return graph_.node("Mul", {graph_.slice(x.name, 1, 0, half), gate});
  }
  return graph_.node("Mul", {graph_.node("Tanh", {x.name}), mod_sigmoid(in.at(1).name)});
}

// RAVE reverse_half: odd bands negated at even time steps, the pattern following the offline
// sample index (`offset` band samples behind). x: (N, bands, T) with T even.
std::string SectionWriter::reverse_half(const std::string& x, int64_t bands, int64_t offset) {
  auto mask = torch::ones({bands, 1, 2});
  for (int64_t b = 1; b < bands; b += 2) mask[b][0][offset % 2] = -1.0;
  const std::string pairs = graph_.reshape(x, {0, 0, -1, 2});
  return graph_.reshape(graph_.node("Mul", {pairs, graph_.initializer("reverse_half", mask)}), {0, 0, -1});
}

// The PQMF's fixed filters stay float32, whatever the int8 threshold.
std::string SectionWriter::pqmf(const Value& x, const graph::Pqmf& p) {
  const int64_t m = p.bands;
  if (!p.synthesis) {
    const Value folded{graph_.reshape(x.name, {-1, 1, 0}), p.folded};
    const std::string y = reverse_half(conv(folded, p.conv, p.conv.kernel, false), m, p.sign_offset);
    return graph_.reshape(y, {-1, p.channels * m, 0});
  }
  Value folded{graph_.reshape(x.name, {-1, m, 0}), p.folded};
  folded.name = reverse_half(folded.name, m, p.sign_offset);
  // PqmfImpl::inverse scales by the band count and reverses the bands after the convolution:
  // both folded into the kernel (×16 is exact in float32, the reversal a permutation).
  const torch::Tensor kernel = (p.conv.kernel * static_cast<double>(m)).flip({0}).contiguous();
  const std::string y = conv(folded, p.conv, kernel, false);
  // (B·C, M, T') → (B·C, T'·M) → (B, C, T'·M).
  const std::string flat = graph_.reshape(graph_.transpose(y, {0, 2, 1}), {0, -1});
  const std::string lifted = graph_.node("Unsqueeze", {flat, graph_.ints("axis0", {0})});
  return graph_.reshape(lifted, {-1, p.channels, 0});
}

// blocks.NoiseGenerator(V2): per-frame filters applied to uniform noise. fft_convolve(noise, ir)
// keeps the causal part of the linear convolution, out[n] = Σ_{j≤n} noise[j]·ir[n−j]: the graph
// gathers ir into a Toeplitz matrix per frame and multiplies.
std::string SectionWriter::noise(const std::string& h, const graph::Noise& n) {
  const int64_t hop = n.hop;
  const std::string shifted = graph_.node("Sub", {h, graph_.scalar("five", 5.0)});
  std::string amp = graph_.transpose(mod_sigmoid(shifted), {0, 2, 1});  // (B, frames, ds·bins)
  amp = graph_.reshape(amp, {0, 0, n.data_size, -1});                   // (B, frames, ds, bins)
  const std::string ir = graph_.node(
      "MatMul", {amp, graph_.initializer(n.key + ".impulse_response", impulse_response_map(n.bins, hop))});
  const std::string padded =
      graph_.node("Pad", {ir, graph_.ints("pad_one", {0, 0, 0, 0, 0, 0, 0, 1}), graph_.scalar("zero", 0.0)});
  auto index = torch::full({hop, hop}, hop, torch::kLong);
  for (int64_t j = 0; j < hop; ++j) {
    for (int64_t k = j; k < hop; ++k) index[j][k] = k - j;
  }
  const std::string toeplitz = graph_.node(
      "Gather", {padded, graph_.initializer(n.key + ".toeplitz_index", index)}, {{"axis", int64_t{-1}}});
  std::string uniform =
      graph_.node("RandomUniformLike", {ir}, {{"dtype", int64_t{1}}, {"low", -1.0}, {"high", 1.0}});
  uniform = graph_.node("Mul", {uniform, noise_scale_});
  const std::string row = graph_.node("Unsqueeze", {uniform, graph_.ints("axis_m2", {-2})});
  std::string out =
      graph_.reshape(graph_.node("MatMul", {row, toeplitz}), {0, 0, 0, -1});  // (B, frames, ds, hop)
  return graph_.reshape(graph_.transpose(out, {0, 2, 1, 3}), {0, 0, -1});     // (B, ds, frames·hop)
}

std::string SectionWriter::zeros_like_channels(const std::string& x, int64_t n) {
  const std::string shape = graph_.node("Shape", {x});
  const std::string scaled = graph_.node("Mul", {shape, graph_.ints("keep_batch_time", {1, 0, 1})});
  const std::string target = graph_.node("Add", {scaled, graph_.ints("channels", {0, n, 0})});
  return graph_.node("ConstantOfShape", {target}, {}, "zeros");
}

std::string SectionWriter::gaussian_like(const std::string& like) {
  return graph_.node("Mul", {graph_.node("RandomNormalLike", {like}, {{"dtype", int64_t{1}}}), noise_scale_});
}

std::string SectionWriter::op(const graph::OpKind& kind, const std::vector<Value>& in,
                              const graph::Flow& out) {
  const Value& x = in.at(0);
  return std::visit(
      [&](const auto& o) -> std::string {
        using T = std::decay_t<decltype(o)>;
        if constexpr (std::is_same_v<T, graph::Conv>) {
          return conv(x, o, o.kernel, o.options.groups() == 1 && int8_for(o.kernel.numel()));
        } else if constexpr (std::is_same_v<T, graph::ConvTranspose>) {
          return conv_transpose(x, out, o);
        } else if constexpr (std::is_same_v<T, graph::Delay>) {
          return cached_pad(x, o.key, o.samples, /*crop=*/true);
        } else if constexpr (std::is_same_v<T, graph::Activation>) {
          return activation(x.name, o);
        } else if constexpr (std::is_same_v<T, graph::BatchNorm>) {
          return batch_norm(x.name, o);
        } else if constexpr (std::is_same_v<T, graph::Add>) {
          return graph_.node("Add", {in.at(0).name, in.at(1).name});
        } else if constexpr (std::is_same_v<T, graph::Gate>) {
          return gate(in, o);
        } else if constexpr (std::is_same_v<T, graph::Pqmf>) {
          return pqmf(x, o);
        } else if constexpr (std::is_same_v<T, graph::Noise>) {
          return noise(x.name, o);
        } else if constexpr (std::is_same_v<T, graph::Resample>) {
          throw Error(
              "export --format onnx: --sr is written into TorchScript files only; an ONNX host resamples "
              "to the model's rate itself");
        } else {
          static_assert(std::is_same_v<T, graph::Gru>);
          throw Error(
              "export --format onnx: the generator's GRU (model.gru_layers) is not exported to ONNX; export "
              "it "
              "as TorchScript (the default format)");
        }
      },
      kind);
}

std::string SectionWriter::write(const graph::Section& section, const std::string& input) {
  std::vector<Value> values(section.values.size());
  values[0] = Value{input, section.values[0]};
  for (const auto& o : section.ops) {
    std::vector<Value> in;
    for (int i : o.inputs) in.push_back(values.at(static_cast<size_t>(i)));
    const graph::Flow& out = section.values.at(static_cast<size_t>(o.output));
    values[static_cast<size_t>(o.output)] = Value{op(o.kind, in, out), out};
  }
  return values.at(static_cast<size_t>(section.output)).name;
}

}  // namespace rt::exporting::onnx
