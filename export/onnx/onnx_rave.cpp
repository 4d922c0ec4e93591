#include "export/onnx/onnx_rave.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>

#include "distributed/sync_batch_norm.h"
#include "export/graph/tensor_ledger.h"
#include "export/torchscript/emit_layers.h"
#include "export/torchscript/emit_rave.h"
#include "export/torchscript/rave_script.h"
#include "models/common/blocks.h"
#include "models/common/pqmf.h"
#include "models/rave/generator.h"
#include "models/rave/latent_pca.h"
#include "util/error.h"

namespace rt::exporting::onnx {
namespace {

using models::WNConv1dImpl;
using models::WNConv1dOptions;
constexpr int64_t kEnd = std::numeric_limits<int64_t>::max();

// A value of the graph and what the emitters need to know of it (as export/torchscript/script_writer.h's
// Signal): channels, audio samples per step, batch rows per stream, streaming delay.
struct Sig {
  std::string v;
  int64_t channels = 0, hop = 1, rows = 1, delay = 0;
};

// A state tensor's graph value: [batch·rows, channels, samples], the first dim named "batch" or
// "batch*<rows>" (export/onnx/onnx_eval.h's StreamRunner and hosts read the rows from it).
ValueSpec state_value(const StateSpec& state, const std::string& name, const std::string& doc) {
  const std::string rows = state.rows == 1 ? "batch" : "batch*" + std::to_string(state.rows);
  return ValueSpec{name, {rows, state.channels, state.samples}, false, doc};
}

void require(bool ok, const std::string& key, const std::string& what) {
  if (!ok) throw Error("export --format onnx: '" + key + "': " + what);
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

// Emits into one graph: its ledger (every tensor it takes) and its streaming states.
class Emitter {
 public:
  Emitter(Graph& g, TensorLedger& ledger, bool streaming, std::vector<StateSpec>& states,
          const std::string& noise_scale, int64_t int8_min_weights)
      : g(g),
        ledger(ledger),
        streaming(streaming),
        noise_scale(noise_scale),
        int8_min_weights(int8_min_weights),
        states_(states) {}

  Graph& g;
  TensorLedger& ledger;
  const bool streaming;
  const std::string noise_scale;   // the graph's noise_scale input
  const int64_t int8_min_weights;  // RaveGraphOptions::int8_min_weights
  int64_t int8_layers = 0, int8_weights = 0;

  bool int8_for(int64_t weights) const { return int8_min_weights >= 0 && weights >= int8_min_weights; }

  // rows [..., K] (float32) times `weight` [K, M] stored as int8 with one scale per column, + bias:
  // the rows are quantized at each call over their own range (DynamicQuantizeLinear: uint8),
  // multiplied in int32 (MatMulInteger) and scaled back to float32. ONNX Runtime fuses the
  // four nodes into one (DynamicQuantizeMatMul) and packs the weight once, when it loads the file.
  std::string rows_times_int8(const std::string& rows, const torch::Tensor& weight, const torch::Tensor& bias,
                              const std::string& key) {
    const auto [q, scale] = int8_columns(weight);
    const auto dq = g.nodes("DynamicQuantizeLinear", {rows}, 3, {}, key + ".rows");
    const std::string product =
        g.node("MatMulInteger", {dq[0], g.initializer(key + ".weight_int8", q), dq[2]});
    const std::string scales = g.node("Mul", {dq[1], g.initializer(key + ".weight_scale", scale)});
    std::string y = g.node("Mul", {g.node("Cast", {product}, {{"to", int64_t{1}}}), scales});
    if (bias.defined()) y = g.node("Add", {y, g.initializer(key + ".bias", bias)});
    ++int8_layers;
    int8_weights += weight.numel();
    return y;
  }

  Sig with(const Sig& like, const std::string& v) const {
    Sig s = like;
    s.v = v;
    return s;
  }
  Sig op(const Sig& like, const std::string& op, const std::vector<std::string>& in,
         const Attrs& attrs = {}) {
    return with(like, g.node(op, in, attrs));
  }

  // cached_conv CachedPadding1d with an explicit state: the previous call's last n samples
  // (the state input) are prepended to x; the concatenation's last n samples are the state
  // output. With `crop` the result is cut back to x's length, which delays x by n samples.
  std::string cached_pad(const Sig& x, const std::string& key, int64_t n, bool crop) {
    const StateSpec state = state_input(key, x, n);
    const std::string cat = g.concat({state.name, x.v}, 2);
    state_output(state, g.slice(cat, 2, -n, kEnd));
    return crop ? g.slice(cat, 2, 0, -n) : cat;
  }

  // Declares the graph input "state.<key>", [batch·rows of `like`, its channels, n].
  StateSpec state_input(const std::string& key, const Sig& like, int64_t n) {
    StateSpec state{"state." + key, like.rows, like.channels, n};
    g.input(state_value(state, state.name, "streaming state; zeros before the first block"));
    states_.push_back(state);
    return state;
  }
  // Declares `value` as the output "state.<key>.next", the next call's input.
  void state_output(const StateSpec& state, const std::string& value) {
    g.output(value, state_value(state, state.name + ".next", ""));
  }

  Sig delay(const Sig& x, int64_t samples, const std::string& key) {
    if (!streaming || samples == 0) return x;
    require(samples > 0, key, "negative delay");
    Sig y = with(x, cached_pad(x, key, samples, /*crop=*/true));
    y.delay = x.delay + samples * x.hop;
    return y;
  }

  std::vector<Sig> aligned(std::vector<Sig> outs, const std::string& key) {
    int64_t latest = 0;
    for (const auto& s : outs) latest = std::max(latest, s.delay);
    for (size_t i = 0; i < outs.size(); ++i) {
      const int64_t lag = latest - outs[i].delay;
      require(lag % outs[i].hop == 0, key, "branch delays differ by a fraction of a sample");
      outs[i] = delay(outs[i], lag / outs[i].hop, key + ".align." + std::to_string(i));
    }
    return outs;
  }

  Sig sum(const Sig& x, const Sig& y) {
    if (streaming && x.delay != y.delay) {
      throw Error("export --format onnx: internal error: adding signals with delays " +
                  std::to_string(x.delay) + " and " + std::to_string(y.delay));
    }
    return op(x, "Add", {x.v, y.v});
  }

  // A convolution with the kernel given (groups, stride, dilation, padding from `o`).
  Sig conv(const Sig& x, const WNConv1dOptions& o, const torch::Tensor& kernel, const torch::Tensor& bias,
           const std::string& key, bool int8 = false) {
    require(
        x.channels == o.in_channels(), key,
        "expects " + std::to_string(o.in_channels()) + " input channels, gets " + std::to_string(x.channels));
    Sig src = x;
    std::vector<int64_t> pads{o.pad_left(), o.pad_right()};
    if (streaming) {
      // As emit_conv: the strided convolution's input delay is made a whole number of its steps.
      require(x.delay % x.hop == 0, key, "input delay is not a whole number of input steps");
      const int64_t s = o.stride(), right = o.pad_right(), cumulative = x.delay / x.hop;
      const int64_t stride_delay = (s - (right + cumulative) % s) % s;
      if (stride_delay > 0) src.v = cached_pad(src, key + ".downsampling_delay", stride_delay, /*crop=*/true);
      if (o.pad_left() + right > 0)
        src.v = cached_pad(src, key + ".cache", o.pad_left() + right, /*crop=*/false);
      src.delay = x.delay + (right + stride_delay) * x.hop;
      pads = {0, 0};
    }
    if (int8) {
      Sig y = with(src, conv_int8(src.v, o, kernel, bias, pads, key));
      y.channels = o.out_channels();
      y.hop = x.hop * o.stride();
      return y;
    }
    std::vector<std::string> in{src.v, g.initializer(key + ".weight", kernel)};
    if (bias.defined()) in.push_back(g.initializer(key + ".bias", bias));
    Sig y = op(src, "Conv", in,
               {{"kernel_shape", std::vector<int64_t>{o.kernel_size()}},
                {"strides", std::vector<int64_t>{o.stride()}},
                {"dilations", std::vector<int64_t>{o.dilation()}},
                {"group", o.groups()},
                {"pads", std::vector<int64_t>{pads[0], pads[1]}}});
    y.channels = o.out_channels();
    y.hop = x.hop * o.stride();
    return y;
  }

  Sig conv(const Sig& x, const WNConv1dImpl& c, const std::string& key) {
    const torch::Tensor kernel = ledger.take_kernel(key);
    const bool int8 = c.options.groups() == 1 && int8_for(kernel.numel());
    return conv(x, c.options, kernel, ledger.take_bias(key), key, int8);
  }

  // The convolution (groups 1) of `src` [N, in, L] on int8 weights: its windows gathered by
  // k strided slices, [N, T, k·in] (column j·in + c: input channel c at tap j), times the kernel
  // laid out [k·in, out] to match. `pads` (offline) are applied first.
  std::string conv_int8(const std::string& src, const WNConv1dOptions& o, const torch::Tensor& kernel,
                        const torch::Tensor& bias, const std::vector<int64_t>& pads, const std::string& key) {
    std::string in = src;
    if (pads[0] + pads[1] > 0) in = g.node("Pad", {in, g.ints("pads", {0, 0, pads[0], 0, 0, pads[1]})});
    const int64_t k = o.kernel_size(), d = o.dilation(), s = o.stride(), span = (k - 1) * d;
    std::string windows = in;  // a 1×1 convolution's window is its input
    if (k > 1 || s > 1) {
      std::vector<std::string> taps;
      for (int64_t j = 0; j < k; ++j) {
        const int64_t end = j * d - span;  // the window's last tap ends at the signal's end
        taps.push_back(g.node("Slice", {in, g.ints("start", {j * d}), g.ints("end", {end == 0 ? kEnd : end}),
                                        g.ints("axis", {2}), g.ints("step", {s})}));
      }
      windows = taps.size() == 1 ? taps[0] : g.concat(taps, 1);
    }
    const torch::Tensor w = kernel.permute({2, 1, 0}).reshape({k * o.in_channels(), o.out_channels()});
    return g.transpose(rows_times_int8(g.transpose(windows, {0, 2, 1}), w, bias, key), {0, 2, 1});
  }

  Sig conv_transpose(const Sig& x, const models::WNConvTranspose1dImpl& c, const std::string& key) {
    const auto& o = c.options;
    require(x.channels == o.in_channels(), key, "input channels do not match");
    require(x.hop % o.stride() == 0, key, "upsampling below the audio rate");
    const torch::Tensor kernel = ledger.take_kernel(key), b = ledger.take_bias(key);
    const int64_t s = o.stride(), k = o.kernel_size();
    if ((k == s || k == 2 * s) && int8_for(kernel.numel())) return conv_transpose_int8(x, o, kernel, b, key);
    const std::string w = g.initializer(key + ".weight", kernel);
    Attrs attrs{{"kernel_shape", std::vector<int64_t>{k}}, {"strides", std::vector<int64_t>{s}}};
    Sig y;
    if (!streaming) {
      std::vector<std::string> in{x.v, w};
      if (b.defined()) in.push_back(g.initializer(key + ".bias", b));
      attrs.emplace_back("pads", std::vector<int64_t>{o.padding(), o.padding()});
      y = op(x, "ConvTranspose", in, attrs);
    } else {
      // cached_conv CachedConvTranspose1d: no padding; the last k − s samples overlap the next
      // call's first ones and travel in the state; the bias is added after, once.
      const int64_t overlap = k - s;
      require(overlap <= s, key, "streaming needs kernel_size <= 2 * stride");
      attrs.emplace_back("pads", std::vector<int64_t>{0, 0});
      y = op(x, "ConvTranspose", {x.v, w}, attrs);
      y.channels = o.out_channels();
      if (overlap > 0) {
        const StateSpec state = state_input(key + ".cache", y, overlap);
        const std::string head = g.node("Add", {g.slice(y.v, 2, 0, overlap), state.name});
        state_output(state, g.slice(y.v, 2, -overlap, kEnd));
        y.v = g.concat({head, g.slice(y.v, 2, overlap, -overlap)}, 2);
      }
      if (b.defined()) y.v = g.node("Add", {y.v, g.initializer(key + ".bias", b.reshape({-1, 1}))});
    }
    y.channels = o.out_channels();
    y.hop = x.hop / s;
    y.delay = x.delay + (streaming ? o.padding() * y.hop : 0);
    return y;
  }

  // The transposed convolution with kernel s or 2s on int8 weights, as the TorchScript export's
  // matrix form: each input step t gives k output samples from t·s, [N, T, in] times the kernel
  // [in, out·k] (column co·k + j: kernel[:, co, j]); with k = 2s each step's second half
  // overlaps the next step's first. Streaming, the last step's second half is the state (as
  // the float32 graph's); offline, the full output is cropped by the padding as ConvTranspose's.
  Sig conv_transpose_int8(const Sig& x, const models::WNConvTranspose1dOptions& o,
                          const torch::Tensor& kernel, const torch::Tensor& b, const std::string& key) {
    const int64_t s = o.stride(), k = o.kernel_size(), cout = o.out_channels(), p = o.padding();
    const std::string z = rows_times_int8(g.transpose(x.v, {0, 2, 1}),
                                          kernel.reshape({o.in_channels(), cout * k}), torch::Tensor(), key);
    const std::string steps = g.transpose(g.reshape(z, {0, 0, cout, k}), {0, 2, 1, 3});  // [N, out, T, k]
    Sig y = with(x, g.reshape(g.slice(steps, 3, 0, s), {0, cout, -1}));
    y.channels = cout;
    y.hop = x.hop / s;
    if (k == 2 * s) {
      const std::string tail = g.reshape(g.slice(steps, 3, s, kEnd), {0, cout, -1});
      if (streaming) {
        const StateSpec state = state_input(key + ".cache", y, s);
        state_output(state, g.slice(tail, 2, -s, kEnd));
        y.v = g.node("Add", {y.v, g.concat({state.name, g.slice(tail, 2, 0, -s)}, 2)});
      } else {
        y.v = g.node("Add", {g.node("Pad", {y.v, g.ints("pads", {0, 0, 0, 0, 0, s})}),
                             g.node("Pad", {tail, g.ints("pads", {0, 0, s, 0, 0, 0})})});
      }
    }
    if (!streaming && p > 0) y.v = g.slice(y.v, 2, p, -p);
    if (b.defined()) y.v = g.node("Add", {y.v, g.initializer(key + ".bias", b.reshape({-1, 1}))});
    y.delay = x.delay + (streaming ? p * y.hop : 0);
    return y;
  }

  // LeakyReLU. After a Conv as LeakyRelu, which ONNX Runtime fuses into the convolution
  // (FusedConv); anywhere else as Max(x, α·x), the same values for 0 < α < 1: ONNX Runtime
  // 1.17's standalone LeakyRelu made the full-size v2 streaming graph on int8 weights 4.1 ms
  // per 2048-sample call where Mul + Max make it 3.0 (6.6 and 4.6 ms at 4096; docs/perf/export.md).
  Sig leaky_relu(const Sig& x, double alpha) {
    if (g.op_of(x.v) == "Conv" || alpha <= 0.0 || alpha >= 1.0)
      return op(x, "LeakyRelu", {x.v}, {{"alpha", alpha}});
    return op(x, "Max", {x.v, g.node("Mul", {x.v, g.scalar("slope", alpha)})});
  }

  Sig snake(const Sig& x, const std::string& key) {
    // As models::SnakeImpl::forward: x + 1/(α + 1e-9) · sin(α·x)².
    const std::string a = g.initializer(key + ".alpha", ledger.take(key + ".alpha"));
    const std::string inv = g.node("Reciprocal", {g.node("Add", {a, g.scalar("eps", 1e-9)})});
    const std::string s = g.node("Sin", {g.node("Mul", {a, x.v})});
    return op(x, "Add", {x.v, g.node("Mul", {inv, g.node("Mul", {s, s})})});
  }

  Sig adain(const Sig& x, const std::string& key) {
    take_adain_as_identity(ledger, key);
    return x;
  }

  Sig batch_norm(const Sig& x, const torch::nn::BatchNorm1dImpl& bn, const std::string& key) {
    const auto& o = bn.options;
    require(o.affine() && o.track_running_stats(), key,
            "BatchNorm1d needs affine parameters and running statistics");
    std::vector<std::string> in{x.v};
    for (const char* name : {"weight", "bias", "running_mean", "running_var"})
      in.push_back(g.initializer(key + "." + name, ledger.take(key + "." + name)));
    ledger.take(key + ".num_batches_tracked");  // a training counter
    return op(x, "BatchNormalization", in, {{"epsilon", o.eps()}});
  }

  Sig module(const Sig& x, torch::nn::Module& m, const std::string& key) {
    if (dynamic_cast<rave::GruLayerImpl*>(&m)) {
      throw Error(
          "export --format onnx: the generator's GRU (model.gru_layers) is not exported to ONNX; export it "
          "as TorchScript (the default format)");
    }
    if (auto* seq = dynamic_cast<models::SeqImpl*>(&m)) {
      Sig y = x;
      for (const auto& child : seq->named_children()) y = module(y, *child.value(), key + "." + child.key());
      return y;
    }
    if (auto* r = dynamic_cast<models::ResidualImpl*>(&m)) {
      // blocks.Residual = AlignBranches(module, Identity): the skip path waits for the branch.
      Sig y = module(x, *r->aligned->branches->ptr(0), key + ".aligned.branches.0");
      require(y.hop == x.hop && y.channels == x.channels, key, "a residual branch must keep shape and rate");
      return sum(y, delay(x, (y.delay - x.delay) / x.hop, key + ".aligned.paddings.1"));
    }
    if (auto* s = dynamic_cast<models::ResidualStackImpl*>(&m)) {
      std::vector<Sig> outs;
      size_t i = 0;
      for (const auto& block : *s->net->branches)
        outs.push_back(module(x, *block, key + ".net.branches." + std::to_string(i++)));
      outs = aligned(std::move(outs), key + ".net");
      Sig y = outs[0];
      for (size_t j = 1; j < outs.size(); ++j) y = sum(y, outs[j]);
      return y;
    }
    if (auto* c = dynamic_cast<WNConv1dImpl*>(&m)) return conv(x, *c, key);
    if (auto* t = dynamic_cast<models::WNConvTranspose1dImpl*>(&m)) return conv_transpose(x, *t, key);
    if (auto* lr = dynamic_cast<torch::nn::LeakyReLUImpl*>(&m))
      return leaky_relu(x, lr->options.negative_slope());
    if (dynamic_cast<models::SnakeImpl*>(&m)) return snake(x, key);
    if (dynamic_cast<models::AdaINImpl*>(&m)) return adain(x, key);
    if (auto* bn = dynamic_cast<torch::nn::BatchNorm1dImpl*>(&m)) return batch_norm(x, *bn, key);
    if (auto* bn = dynamic_cast<dist::SyncableBatchNorm1dImpl*>(&m)) return batch_norm(x, *bn->norm, key);
    if (dynamic_cast<torch::nn::IdentityImpl*>(&m)) return x;
    const auto children = m.named_children();
    if (children.size() == 1 && children.contains("net") && m.named_parameters(false).is_empty() &&
        m.named_buffers(false).is_empty()) {
      return module(x, *children["net"], key + ".net");
    }
    throw Error("export --format onnx: no ONNX emitter for module '" + key + "' (" + m.name() + ")");
  }

  // RAVE mod_sigmoid: 2·sigmoid(x)^2.3 + 1e-7.
  std::string mod_sigmoid(const std::string& x) {
    const std::string p = g.node("Pow", {g.node("Sigmoid", {x}), g.scalar("exponent", 2.3)});
    return g.node("Add", {g.node("Mul", {p, g.scalar("two", 2.0)}), g.scalar("tiny", 1e-7)});
  }

  // RAVE reverse_half: odd bands negated at even time steps, the pattern following the offline
  // sample index (`offset` band samples behind). x: (N, bands, T) with T even.
  Sig reverse_half(const Sig& x, int64_t bands, int64_t offset) {
    auto mask = torch::ones({bands, 1, 2});
    for (int64_t b = 1; b < bands; b += 2) mask[b][0][offset % 2] = -1.0;
    const std::string pairs = g.reshape(x.v, {0, 0, -1, 2});
    return with(x, g.reshape(g.node("Mul", {pairs, g.initializer("reverse_half", mask)}), {0, 0, -1}));
  }

  // A [batch, n, time] tensor of zeros shaped like x with n channels: Shape, ConstantOfShape.
  std::string zeros_like_channels(const std::string& x, int64_t n) {
    const std::string shape = g.node("Shape", {x});
    const std::string scaled = g.node("Mul", {shape, g.ints("keep_batch_time", {1, 0, 1})});
    const std::string target = g.node("Add", {scaled, g.ints("channels", {0, n, 0})});
    return g.node("ConstantOfShape", {target}, {}, "zeros");
  }

  // Standard normal draws shaped like `like`, scaled by noise_scale.
  std::string gaussian_like(const std::string& like) {
    return g.node("Mul", {g.node("RandomNormalLike", {like}, {{"dtype", int64_t{1}}}), noise_scale});
  }

 private:
  std::vector<StateSpec>& states_;
};

Sig pqmf_analysis(Emitter& e, const Sig& x, models::PqmfImpl& pqmf, models::PaddingMode mode) {
  const int64_t m = pqmf.n_band();
  if (m == 1) return x;
  e.ledger.take("pqmf.hk");  // the prototype bank, of which forward_conv.weight is the padded copy
  e.ledger.take("pqmf.h");
  Sig folded = e.with(x, e.g.reshape(x.v, {-1, 1, 0}));
  folded.rows = x.channels;
  folded.channels = 1;
  const torch::Tensor w = e.ledger.take_kernel("pqmf.forward_conv");
  Sig y = e.conv(folded, pqmf_conv_options(w, m, mode), w, torch::Tensor(), "pqmf.forward_conv");
  y = e.reverse_half(y, m, (y.delay - folded.delay) / y.hop);
  y = e.with(y, e.g.reshape(y.v, {-1, x.channels * m, 0}));
  y.rows = 1;
  y.channels = x.channels * m;
  return y;
}

Sig pqmf_synthesis(Emitter& e, const Sig& x, models::PqmfImpl& pqmf, models::PaddingMode mode) {
  const int64_t m = pqmf.n_band();
  if (m == 1) return x;
  const int64_t channels = x.channels / m;
  Sig folded = e.with(x, e.g.reshape(x.v, {-1, m, 0}));
  folded.rows = channels;
  folded.channels = m;
  folded = e.reverse_half(folded, m, x.delay / x.hop);
  // PqmfImpl::inverse scales by the band count and reverses the bands after the convolution:
  // both folded into the kernel (×16 is exact in float32, the reversal a permutation).
  const torch::Tensor w = e.ledger.take_kernel("pqmf.inverse_conv");
  const torch::Tensor folded_kernel = (w * static_cast<double>(m)).flip({0}).contiguous();
  Sig y = e.conv(folded, pqmf_conv_options(w, 1, mode), folded_kernel, torch::Tensor(), "pqmf.inverse_conv");
  // (B·C, M, T') → (B·C, T'·M) → (B, C, T'·M).
  const std::string flat = e.g.reshape(e.g.transpose(y.v, {0, 2, 1}), {0, -1});
  const std::string lifted = e.g.node("Unsqueeze", {flat, e.g.ints("axis0", {0})});
  y = e.with(y, e.g.reshape(lifted, {-1, channels, 0}));
  y.rows = 1;
  y.channels = channels;
  y.hop = x.hop / m;
  return y;
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

// blocks.NoiseGenerator(V2): per-frame filters applied to uniform noise. fft_convolve(noise, ir)
// keeps the causal part of the linear convolution, out[n] = Σ_{j≤n} noise[j]·ir[n−j]: the graph
// gathers ir into a Toeplitz matrix per frame and multiplies.
Sig noise(Emitter& e, const Sig& x, rave::NoiseGeneratorImpl& n, const std::string& key) {
  auto& g = e.g;
  const Sig h = e.module(x, *n.net, key + ".net");
  if (e.ledger.take(key + ".target_size").item<int64_t>() != n.hop)
    throw Error("export: '" + key + ".target_size' does not match the noise generator's ratios");
  const int64_t bins = h.channels / n.data_size, hop = n.hop;
  const std::string shifted = g.node("Sub", {h.v, g.scalar("five", 5.0)});
  std::string amp = g.transpose(e.mod_sigmoid(shifted), {0, 2, 1});  // (B, frames, ds·bins)
  amp = g.reshape(amp, {0, 0, n.data_size, -1});                     // (B, frames, ds, bins)
  const std::string ir =
      g.node("MatMul", {amp, g.initializer(key + ".impulse_response", impulse_response_map(bins, hop))});
  const std::string padded =
      g.node("Pad", {ir, g.ints("pad_one", {0, 0, 0, 0, 0, 0, 0, 1}), g.scalar("zero", 0.0)});
  auto index = torch::full({hop, hop}, hop, torch::kLong);
  for (int64_t j = 0; j < hop; ++j) {
    for (int64_t k = j; k < hop; ++k) index[j][k] = k - j;
  }
  const std::string toeplitz =
      g.node("Gather", {padded, g.initializer(key + ".toeplitz_index", index)}, {{"axis", int64_t{-1}}});
  std::string uniform =
      g.node("RandomUniformLike", {ir}, {{"dtype", int64_t{1}}, {"low", -1.0}, {"high", 1.0}});
  uniform = g.node("Mul", {uniform, e.noise_scale});
  const std::string row = g.node("Unsqueeze", {uniform, g.ints("axis_m2", {-2})});
  std::string out = g.reshape(g.node("MatMul", {row, toeplitz}), {0, 0, 0, -1});  // (B, frames, ds, hop)
  out = g.reshape(g.transpose(out, {0, 2, 1, 3}), {0, 0, -1});                    // (B, ds, frames·hop)
  Sig y = e.with(x, out);
  y.channels = n.data_size;
  y.delay = h.delay;
  return y;
}

Sig generator_v2(Emitter& e, const Sig& z, rave::GeneratorV2Impl& gen) {
  Sig x = e.module(z, *gen.net, "decoder.net");
  Sig n;
  if (gen.noise_module) {
    n = noise(e, x, *gen.noise_module, "decoder.noise_module");
    x = e.conv(x, *gen.waveform_module, "decoder.waveform_module");
    auto a = e.aligned({x, n}, "decoder.noise_module");
    x = a[0];
    n = a[1];
  }
  if (gen.amplitude_modulation) {
    const int64_t half = x.channels / 2;
    const std::string gate = e.g.node("Sigmoid", {e.g.slice(x.v, 1, half, kEnd)});
    x = e.op(x, "Mul", {e.g.slice(x.v, 1, 0, half), gate});
    x.channels = half;
  }
  if (!n.v.empty()) x = e.sum(x, n);
  return e.op(x, "Tanh", {x.v});
}

Sig generator_v1(Emitter& e, const Sig& z, rave::GeneratorV1Impl& gen) {
  const Sig x = e.module(z, *gen.net, "decoder.net");
  e.ledger.take("decoder.warmed_up");
  const std::string branches = "decoder.synth.branches.";
  std::vector<Sig> outs{e.module(x, *gen.synth->branches->ptr(0), branches + "0"),
                        e.module(x, *gen.synth->branches->ptr(1), branches + "1")};
  const bool with_noise = gen.use_noise && gen.warm_;
  if (with_noise) {
    auto* ng = dynamic_cast<rave::NoiseGeneratorImpl*>(gen.synth->branches->ptr(2).get());
    if (ng == nullptr) throw Error("export: '" + branches + "2' is not a noise generator");
    outs.push_back(noise(e, x, *ng, branches + "2"));
  } else if (gen.use_noise) {
    e.ledger.drop_prefix(branches + "2.", "v1 noise synthesis, off until phase 2 (decoder.warmed_up = 0)");
  }
  outs = e.aligned(std::move(outs), "decoder.synth");
  Sig y = e.op(outs[0], "Mul", {e.g.node("Tanh", {outs[0].v}), e.mod_sigmoid(outs[1].v)});
  if (with_noise) y = e.sum(y, outs[2]);
  return y;
}

// ONNX's own limits, then the TorchScript export's (rave_script.h check_exportable).
void check_exportable(const rave::RaveOptions& o, const RaveGraphOptions& s) {
  if (o.input_mode == rave::InputMode::kMel) {
    throw Error(
        "export --format onnx: the mel encoder (model.input_mode = mel) is exported as TorchScript only");
  }
  if (o.n_band > 1 && o.hop() % 2 != 0) {
    throw Error(
        "export --format onnx needs an even product of model.ratios with a PQMF (its band signs alternate "
        "per sample, taken in pairs); the model's is " +
        std::to_string(o.hop()));
  }
  ScriptOptions script;
  script.streaming = s.streaming;
  script.latent_size = s.latent_size;
  exporting::check_exportable(o, script);
}

// What one graph holds: the encoder half, the decoder half, or both.
struct Halves {
  bool encode = false, decode = false;
};

// RAVE's unit_norm_vector_to_angles, as the TorchScript file's latent_to_angles
// (export/torchscript/rave_script.cpp): x (B, L, T) → (B, L − 1, T) angles in [−1, 1], 0 where RAVE divides
// 0 by 0. The flipped cumulative sum there is CumSum with reverse here (the same additions).
std::string latent_to_angles(Emitter& e, const std::string& x, int64_t L) {
  auto& g = e.g;
  const std::string one = g.scalar("one", 1.0), pi = g.scalar("pi", M_PI),
                    two_pi = g.scalar("two_pi", 2.0 * M_PI);
  const std::string tails =
      g.node("CumSum", {g.node("Mul", {x, x}), g.initializer("axis", torch::tensor(int64_t{1}))},
             {{"reverse", int64_t{1}}});
  const std::string norms = g.node("Sqrt", {g.slice(tails, 1, 0, L - 1)});
  const std::string defined = g.node("Greater", {norms, g.scalar("zero", 0.0)});
  const std::string ratio = g.node(
      "Where",
      {defined, g.node("Div", {g.slice(x, 1, 0, L - 1), g.node("Where", {defined, norms, one})}), one});
  const std::string angles = g.node("Acos", {g.node("Clip", {ratio, g.scalar("minus_one", -1.0), one})});
  const std::string last_angle = g.slice(angles, 1, L - 2, L - 1);
  const std::string last =
      g.node("Where", {g.node("GreaterOrEqual", {g.slice(x, 1, L - 1, L), g.scalar("zero", 0.0)}), last_angle,
                       g.node("Sub", {two_pi, last_angle})});
  const std::string scaled =
      g.concat({g.node("Div", {g.slice(angles, 1, 0, L - 2), pi}), g.node("Div", {last, two_pi})}, 1);
  return g.node("Mul", {g.node("Sub", {scaled, g.scalar("half", 0.5)}), g.scalar("two", 2.0)});
}

// RAVE's angles_to_unit_norm_vector, as the TorchScript file's angles_to_latent: (B, L − 1, T)
// angles (wrapped into [−1, 1)) → the unit vector (B, L, T). The running product of sines is
// written out, one Mul per dimension (ONNX has no CumProd).
std::string angles_to_latent(Emitter& e, const std::string& angles, int64_t L) {
  auto& g = e.g;
  std::string a = g.node("Add", {g.node("Div", {angles, g.scalar("two", 2.0)}), g.scalar("half", 0.5)});
  a = g.node("Sub", {a, g.node("Floor", {a})});  // torch.remainder(a, 1.0)
  a = g.concat({g.node("Mul", {g.slice(a, 1, 0, L - 2), g.scalar("pi", M_PI)}),
                g.node("Mul", {g.slice(a, 1, L - 2, L - 1), g.scalar("two_pi", 2.0 * M_PI)})},
               1);
  const std::string sin = g.node("Sin", {a});
  std::vector<std::string> products{g.slice(sin, 1, 0, 1)};
  for (int64_t k = 1; k < L - 1; ++k)
    products.push_back(g.node("Mul", {products.back(), g.slice(sin, 1, k, k + 1)}));
  const std::string cumprod = products.size() == 1 ? products[0] : g.concat(products, 1);
  const std::string ones = g.node("Add", {e.zeros_like_channels(angles, 1), g.scalar("one", 1.0)});
  return g.node("Mul", {g.concat({g.node("Cos", {a}), ones}, 1), g.concat({ones, cumprod}, 1)});
}

// The discrete encoder's codebooks, (K, D) each, from the model: the decode graph's (the ledger
// accounts for them where encode takes them, take_codebooks).
std::vector<torch::Tensor> codebooks(rave::RaveModelImpl& model) {
  std::vector<torch::Tensor> out;
  const auto buffers = model.named_buffers();
  for (int64_t i = 0; i < model.options().num_quantizers; ++i)
    out.push_back(buffers["encoder.rvq.layers." + std::to_string(i) + "._codebook.embed"]);
  return out;
}

// The residual quantiser's nearest-code search over `codebooks` ([K, D] each), as the TorchScript
// file's quantize_latent: (B, D, T) → (B, Q, T) code indices as floats (what msprior reads).
std::string quantize_latent(Emitter& e, const std::vector<torch::Tensor>& codebooks, const std::string& z) {
  auto& g = e.g;
  std::string residual = g.transpose(z, {0, 2, 1});  // (B, T, D)
  std::vector<std::string> codes;
  int64_t i = 0;
  for (const auto& embed : codebooks) {
    const std::string key = "codebook_" + std::to_string(i++);
    const std::string table = g.initializer(key, embed);
    const torch::Tensor t = embed.t().contiguous();
    const std::string squared = g.node(
        "ReduceSum", {g.node("Mul", {residual, residual}), g.ints("last", {-1})}, {{"keepdims", int64_t{1}}});
    const std::string cross =
        g.node("Mul", {g.node("MatMul", {residual, g.initializer(key + "_t", t)}), g.scalar("two", 2.0)});
    const std::string distance = g.node(
        "Add", {g.node("Sub", {squared, cross}), g.initializer(key + "_norms", t.pow(2).sum(0, true))});
    const std::string index = g.node("ArgMin", {distance}, {{"axis", int64_t{-1}}, {"keepdims", int64_t{0}}});
    residual = g.node("Sub", {residual, g.node("Gather", {table, index})});
    codes.push_back(g.node("Unsqueeze", {index, g.ints("axis1", {1})}));
  }
  return g.node("Cast", {g.concat(codes, 1)}, {{"to", int64_t{1}}});
}

// The codes back to the latent, as the TorchScript file's dequantize_latent: (B, Q, T) floats,
// clamped to the codebook and truncated → (B, D, T), the sum of the codes they name.
std::string dequantize_latent(Emitter& e, rave::RaveModelImpl& model, const std::string& codes) {
  auto& g = e.g;
  const auto& o = model.options();
  const std::string index =
      g.node("Cast",
             {g.node("Clip", {codes, g.scalar("zero", 0.0),
                              g.scalar("last_code", static_cast<double>(o.codebook_size - 1))})},
             {{"to", int64_t{7}}});
  std::string sum;
  int64_t i = 0;
  for (const auto& embed : codebooks(model)) {
    const std::string picked = g.node(
        "Gather", {g.initializer("codebook_" + std::to_string(i), embed), g.slice(index, 1, i, i + 1)});
    sum = sum.empty() ? picked : g.node("Add", {sum, picked});
    ++i;
  }
  return g.transpose(g.reshape(sum, {0, -1, o.latent_size}), {0, 2, 1});  // (B, 1, T, D) → (B, D, T)
}

// The latent as encode returns it, from the graph's audio input.
std::string emit_encode(Emitter& e, rave::RaveModelImpl& model, const RaveGraphOptions& s, int64_t latent,
                        int64_t* latency) {
  const auto& o = model.options();
  Sig bands = pqmf_analysis(e, Sig{"audio_in", o.channels, 1, 1, 0}, *model.pqmf, o.padding);
  const auto kind = o.encoder;
  if (kind != rave::EncoderKind::kSpherical) e.ledger.take("encoder.warmed_up");  // the phase flag
  Sig stats;
  if (auto* v2 = dynamic_cast<rave::EncoderV2Impl*>(model.encoder->encoder.get())) {
    stats = e.module(bands, *v2->net, "encoder.encoder.net");
  } else if (auto* v1 = dynamic_cast<rave::EncoderV1Impl*>(model.encoder->encoder.get())) {
    stats = e.module(bands, *v1->net, "encoder.encoder.net");
  } else {
    throw Error("export: unknown RAVE encoder type");
  }
  const int64_t full = o.latent_size, ratio = o.compression();
  const bool variational = o.encoder == rave::EncoderKind::kVariational;
  if (stats.hop != ratio || stats.channels != (variational ? 2 : 1) * full)
    throw Error("export --format onnx: internal error: the encoder does not have the model's shapes");
  if (s.streaming && stats.delay % ratio != 0)
    throw Error("export --format onnx: internal error: the encoder's delay is not whole latent frames");
  *latency = s.streaming ? stats.delay : 0;
  e.ledger.take("latent_pca");
  e.ledger.take("latent_mean");
  e.ledger.take("fidelity");
  if (kind == rave::EncoderKind::kSpherical) return latent_to_angles(e, stats.v, full);
  if (kind == rave::EncoderKind::kDiscrete)
    return quantize_latent(e, take_codebooks(e.ledger, o.num_quantizers), stats.v);
  if (!variational) return stats.v;  // wasserstein: the whole latent
  // VariationalEncoderImpl::reparametrize, then the PCA rotation and the crop, as the TorchScript encode.
  auto& g = e.g;
  const std::string mean = g.slice(stats.v, 1, 0, full), scale = g.slice(stats.v, 1, full, 2 * full);
  const std::string std_dev = g.node("Add", {g.node("Softplus", {scale}), g.scalar("min_std", 1e-4)});
  const std::string z =
      g.node("Add", {g.node("Mul", {e.gaussian_like(mean), std_dev}), mean}, {}, "posterior_sample");
  auto pca = rave::stored_latent_pca(model);
  const std::string centred = g.node("Sub", {z, g.initializer("latent_mean", pca.mean.reshape({-1, 1}))});
  const std::string rotated = g.node("MatMul", {g.initializer("latent_pca", pca.components), centred});
  return latent < full ? g.slice(rotated, 1, 0, latent) : rotated;
}

// The audio decode makes from the latent value `z` (latent channels).
std::string emit_decode(Emitter& e, rave::RaveModelImpl& model, const std::string& z_in, int64_t latent,
                        int64_t* latency) {
  const auto& o = model.options();
  auto& g = e.g;
  const int64_t full = o.latent_size, ratio = o.compression();
  std::string z = z_in;
  if (o.encoder == rave::EncoderKind::kVariational) {
    if (latent < full) {
      // RAVE pre_process_latent: the cropped dimensions are drawn from a unit Gaussian.
      z = g.concat({z, e.gaussian_like(e.zeros_like_channels(z, full - latent))}, 1);
    }
    auto pca = rave::stored_latent_pca(model);
    z = g.node("Add", {g.node("MatMul", {g.initializer("latent_pca_t", pca.components.t().contiguous()), z}),
                       g.initializer("latent_mean", pca.mean.reshape({-1, 1}))});
  }
  if (o.encoder == rave::EncoderKind::kSpherical) z = angles_to_latent(e, z, full);
  if (o.encoder == rave::EncoderKind::kDiscrete) z = dequantize_latent(e, model, z);
  if (o.noise_augmentation > 0) {
    // Wasserstein/Discrete pre_process_latent: standard normal channels for the decoder.
    z = g.concat({z, e.gaussian_like(e.zeros_like_channels(z_in, o.noise_augmentation))}, 1);
  }
  const Sig zs{z, full + o.noise_augmentation, ratio, 1, 0};
  Sig bands;
  if (auto* v2 = dynamic_cast<rave::GeneratorV2Impl*>(model.decoder.get())) {
    bands = generator_v2(e, zs, *v2);
  } else if (auto* v1 = dynamic_cast<rave::GeneratorV1Impl*>(model.decoder.get())) {
    bands = generator_v1(e, zs, *v1);
  } else {
    throw Error("export: unknown RAVE decoder type");
  }
  Sig out = bands;
  if (o.output_mode == rave::OutputMode::kRaw) {
    e.ledger.drop_prefix("pqmf.inverse_conv", "the PQMF synthesis bank (model.output_mode = raw)");
  } else {
    out = pqmf_synthesis(e, bands, *model.pqmf, o.padding);
  }
  if (out.hop != 1 || out.channels != o.channels)
    throw Error("export --format onnx: internal error: the decoder does not have the model's shapes");
  *latency = out.delay;
  return out.v;
}

void build(Graph& g, std::vector<StateSpec>& states, TensorLedger& ledger, rave::RaveModelImpl& model,
           const RaveGraphOptions& s, Halves halves, int64_t latent, RaveGraphs& r) {
  const auto& o = model.options();
  ledger.drop_prefix("discriminator.", "the discriminator (training only)");
  ledger.drop_prefix("receptive_field", "RAVE's receptive-field record (not used by inference)");
  if (!halves.encode) {
    ledger.drop_prefix("encoder.", "the encoder (not in the decode graph)");
    ledger.drop_prefix("pqmf.forward_conv", "the PQMF analysis bank (not in the decode graph)");
    ledger.drop_prefix("pqmf.h", "the PQMF prototype (not in the decode graph)");
  }
  if (!halves.decode) {
    ledger.drop_prefix("decoder.", "the decoder (not in the encode graph)");
    ledger.drop_prefix("pqmf.inverse_conv", "the PQMF synthesis bank (not in the encode graph)");
  }
  const std::string time = "time";
  if (halves.encode) {
    g.input(ValueSpec{"audio_in",
                      {"batch", o.channels, time},
                      false,
                      "audio, (batch, channels, samples); samples a multiple of the ratio"});
  } else {
    g.input(
        ValueSpec{"latent_in", {"batch", latent, "frames"}, false, "latent, (batch, dimensions, frames)"});
  }
  const std::string noise_scale =
      g.input_with_default(ValueSpec{"noise_scale", {}, false, "scales every random draw; 0: deterministic"},
                           torch::tensor(static_cast<float>(s.noise_scale)));
  Emitter e(g, ledger, s.streaming, states, noise_scale, s.int8_min_weights);
  std::string value;
  if (halves.encode) {
    value = emit_encode(e, model, s, latent, &r.encode_latency);
    if (!halves.decode)
      g.output(
          value,
          ValueSpec{"latent_out", {"batch", latent, "frames"}, false, "latent, (batch, dimensions, frames)"});
  }
  if (halves.decode) {
    if (!halves.encode) {
      value = "latent_in";
      ledger.take("latent_pca");
      ledger.take("latent_mean");
      ledger.take("fidelity");
    }
    value = emit_decode(e, model, value, latent, &r.decode_latency);
    g.output(value,
             ValueSpec{"audio_out", {"batch", o.channels, time}, false, "audio, (batch, channels, samples)"});
  }
  if (halves.encode && halves.decode) {
    r.int8_layers = e.int8_layers;
    r.int8_weights = e.int8_weights;
  }
}

}  // namespace

RaveGraphs build_rave_graphs(rave::RaveModelImpl& model, const RaveGraphOptions& s) {
  const auto& o = model.options();
  check_exportable(o, s);
  torch::NoGradGuard no_grad;
  RaveGraphs r;
  r.channels = o.channels;
  r.ratio = o.compression();
  r.full_latent_size = o.latent_size;
  r.latent_size = exported_latent_size(o, s.latent_size);
  const auto tensors = model_tensors(model);
  std::vector<StateSpec> forward_states;
  {
    TensorLedger ledger(tensors);
    build(r.encode, r.encode_states, ledger, model, s, {true, false}, r.latent_size, r);
  }
  {
    TensorLedger ledger(tensors);
    build(r.decode, r.decode_states, ledger, model, s, {false, true}, r.latent_size, r);
  }
  TensorLedger ledger(tensors);
  build(r.forward, forward_states, ledger, model, s, {true, true}, r.latent_size, r);
  ledger.finish();  // the forward graph holds every tensor the model has, or drops it with a reason
  r.dropped = ledger.dropped();
  return r;
}

}  // namespace rt::exporting::onnx
