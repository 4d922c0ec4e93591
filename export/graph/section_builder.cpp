#include "export/graph/section_builder.h"

#include <algorithm>

#include "distributed/sync_batch_norm.h"
#include "models/common/blocks.h"
#include "util/error.h"

namespace rt::exporting::graph {
namespace {

void require(bool ok, const std::string& key, const std::string& what) {
  if (!ok) throw Error("export: '" + key + "': " + what);
}

}  // namespace

SectionBuilder::SectionBuilder(Section& section, TensorLedger& ledger, bool streaming, const Flow& input)
    : section_(section), ledger_(ledger), streaming_(streaming) {
  section_.ops.clear();
  section_.values = {input};
  section_.output = 0;
}

int SectionBuilder::append(OpKind kind, std::vector<int> inputs, Flow out) {
  const int id = static_cast<int>(section_.values.size());
  section_.values.push_back(out);
  section_.ops.push_back(Op{std::move(kind), std::move(inputs), id});
  return id;
}

void SectionBuilder::stream_conv(Conv& c, const Flow& x, Flow& in) const {
  if (!streaming_) return;
  // cached_conv CachedConv1d, its cumulative_delay being the delay the input already carries:
  // the strided convolution's total input delay becomes a whole number of output steps, so it
  // decimates at the offline phase.
  require(x.delay % x.hop == 0, c.key, "input delay is not a whole number of input steps");
  const int64_t s = c.options.stride(), right = c.options.pad_right(), cumulative = x.delay / x.hop;
  c.stride_delay = (s - (right + cumulative) % s) % s;
  c.cache = c.options.pad_left() + right;
  in.delay = x.delay + (right + c.stride_delay) * x.hop;
}

int SectionBuilder::conv(int x, const models::WNConv1dImpl& conv, const std::string& key) {
  const torch::Tensor kernel = ledger_.take_kernel(key);
  return this->conv(x, conv.options, kernel, ledger_.take_bias(key), key);
}

int SectionBuilder::conv(int x, const models::WNConv1dOptions& options, const torch::Tensor& kernel,
                         const torch::Tensor& bias, const std::string& key) {
  require(flow(x).channels == options.in_channels(), key,
          "expects " + std::to_string(options.in_channels()) + " input channels, gets " +
              std::to_string(flow(x).channels));
  Conv c{key, options, kernel, bias};
  Flow out = flow(x);
  stream_conv(c, flow(x), out);
  out.channels = options.out_channels();
  out.hop = flow(x).hop * options.stride();
  return append(std::move(c), {x}, out);
}

int SectionBuilder::conv_transpose(int x, const models::WNConvTranspose1dImpl& conv, const std::string& key) {
  const auto& o = conv.options;
  const Flow& in = flow(x);
  require(in.channels == o.in_channels(), key, "input channels do not match");
  require(in.hop % o.stride() == 0, key, "upsampling below the audio rate");
  ConvTranspose c{key, o, ledger_.take_kernel(key), ledger_.take_bias(key)};
  if (streaming_) {
    c.overlap = o.kernel_size() - o.stride();
    require(c.overlap <= o.stride(), key, "streaming needs kernel_size <= 2 * stride");
  }
  Flow out = in;
  out.channels = o.out_channels();
  out.hop = in.hop / o.stride();
  if (streaming_) out.delay = in.delay + o.padding() * out.hop;
  return append(std::move(c), {x}, out);
}

int SectionBuilder::delay(int x, int64_t samples, const std::string& key) {
  if (!streaming_ || samples == 0) return x;
  require(samples > 0, key, "negative delay");
  Flow out = flow(x);
  out.delay += samples * out.hop;
  return append(Delay{key, samples}, {x}, out);
}

std::vector<int> SectionBuilder::aligned(std::vector<int> outs, const std::string& key) {
  int64_t latest = 0;
  for (int v : outs) latest = std::max(latest, flow(v).delay);
  for (size_t i = 0; i < outs.size(); ++i) {
    const int64_t lag = latest - flow(outs[i]).delay;
    require(lag % flow(outs[i]).hop == 0, key, "branch delays differ by a fraction of a sample");
    outs[i] = delay(outs[i], lag / flow(outs[i]).hop, key + ".align." + std::to_string(i));
  }
  return outs;
}

int SectionBuilder::add(int x, int y) {
  if (streaming_ && flow(x).delay != flow(y).delay) {
    throw Error("export: internal error: adding signals with delays " + std::to_string(flow(x).delay) +
                " and " + std::to_string(flow(y).delay));
  }
  return append(Add{}, {x, y}, flow(x));
}

int SectionBuilder::activation(int x, Activation a) { return append(std::move(a), {x}, flow(x)); }

int SectionBuilder::gate(Gate::Kind kind, const std::vector<int>& inputs) {
  Flow out = flow(inputs.at(0));
  if (kind == Gate::Kind::kAmplitude) out.channels /= 2;
  return append(Gate{kind}, inputs, out);
}

models::WNConv1dOptions pqmf_conv_options(const torch::Tensor& weight, int64_t stride,
                                          models::PaddingMode mode) {
  const auto pad = models::get_padding(weight.size(2), 1, mode);
  return models::WNConv1dOptions(weight.size(1), weight.size(0), weight.size(2))
      .stride(stride)
      .weight_norm(false)
      .pad_left(pad.first)
      .pad_right(pad.second);
}

int SectionBuilder::pqmf(int x, models::PqmfImpl& pqmf, models::PaddingMode mode, bool synthesis) {
  const int64_t m = pqmf.n_band();
  if (m == 1) return x;
  const Flow in = flow(x);
  Pqmf p;
  p.synthesis = synthesis;
  p.bands = m;
  p.channels = synthesis ? in.channels / m : in.channels;
  p.folded = in;
  p.folded.rows = p.channels;
  p.folded.channels = synthesis ? m : 1;
  if (!synthesis) {
    ledger_.take("pqmf.hk");  // the prototype bank, of which forward_conv.weight is the padded copy
    ledger_.take("pqmf.h");
  }
  const std::string key = synthesis ? "pqmf.inverse_conv" : "pqmf.forward_conv";
  const torch::Tensor kernel = ledger_.take_kernel(key);
  p.conv = Conv{key, pqmf_conv_options(kernel, synthesis ? 1 : m, mode), kernel, ledger_.take_bias(key)};
  Flow conv_out = p.folded;
  stream_conv(p.conv, p.folded, conv_out);
  conv_out.hop = p.folded.hop * p.conv.options.stride();
  // The sign pattern follows the offline sample index of the bands, behind by their whole delay
  // (the delay the input already carries included: export --sr's resampler comes first).
  p.sign_offset = synthesis ? in.delay / in.hop : conv_out.delay / conv_out.hop;
  Flow out{synthesis ? p.channels : in.channels * m, synthesis ? in.hop / m : conv_out.hop, 1,
           conv_out.delay};
  return append(std::move(p), {x}, out);
}

int SectionBuilder::resample(int x, rave::ResamplerImpl& r, bool up) {
  const Flow in = flow(x);
  Resample op;
  op.up = up;
  op.ratio = r.ratio;
  op.channels = in.channels;
  op.folded = in;
  op.folded.rows = in.channels;
  op.folded.channels = 1;
  const torch::Tensor& kernel = up ? r.up_filter : r.down_filter;
  const std::string key = up ? "resampler.up" : "resampler.down";
  const auto options = models::WNConv1dOptions(1, kernel.size(0), kernel.size(2))
                           .stride(up ? 1 : r.ratio)
                           .pad_left(up ? r.up_left : r.down_left)
                           .pad_right(up ? r.up_right : r.down_right)
                           .weight_norm(false);
  op.conv = Conv{key, options, kernel, torch::Tensor()};
  Flow conv_out = op.folded;
  stream_conv(op.conv, op.folded, conv_out);
  if (up) require(in.hop % r.ratio == 0, key, "upsampling below the audio rate");
  Flow out{in.channels, up ? in.hop / r.ratio : in.hop * r.ratio, 1, conv_out.delay};
  return append(std::move(op), {x}, out);
}

int SectionBuilder::noise(int x, rave::NoiseGeneratorImpl& n, const std::string& key) {
  const int h = module(x, *n.net, key + ".net");
  if (ledger_.take(key + ".target_size").item<int64_t>() != n.hop) {
    throw Error("export: '" + key + ".target_size' does not match the noise generator's ratios");
  }
  Flow out = flow(x);
  out.channels = n.data_size;
  out.delay = flow(h).delay;
  return append(Noise{key, n.hop, n.data_size, flow(h).channels / n.data_size}, {h}, out);
}

// RAVE blocks.Residual = AlignBranches(module, Identity): the skip path is delayed by the
// inner module's delay (cached_conv AlignBranches, delays [inner, 0]).
int SectionBuilder::residual(int x, models::ResidualImpl& r, const std::string& key) {
  const int y = module(x, *r.aligned->branches->ptr(0), key + ".aligned.branches.0");
  require(flow(y).hop == flow(x).hop && flow(y).channels == flow(x).channels, key,
          "a residual branch must keep shape and rate");
  const int skip = delay(x, (flow(y).delay - flow(x).delay) / flow(x).hop, key + ".aligned.paddings.1");
  return add(y, skip);
}

// RAVE blocks.ResidualStack: one ResidualBlock per kernel size, summed.
int SectionBuilder::residual_stack(int x, models::ResidualStackImpl& s, const std::string& key) {
  std::vector<int> outs;
  size_t i = 0;
  for (const auto& block : *s.net->branches)
    outs.push_back(module(x, *block, key + ".net.branches." + std::to_string(i++)));
  outs = aligned(std::move(outs), key + ".net");
  int sum = outs[0];
  for (size_t j = 1; j < outs.size(); ++j) sum = add(sum, outs[j]);
  return sum;
}

int SectionBuilder::batch_norm(int x, const torch::nn::BatchNorm1dImpl& bn, const std::string& key) {
  const auto& o = bn.options;
  require(o.affine() && o.track_running_stats(), key,
          "BatchNorm1d needs affine parameters and running statistics");
  BatchNorm b{key,
              ledger_.take(key + ".weight"),
              ledger_.take(key + ".bias"),
              ledger_.take(key + ".running_mean"),
              ledger_.take(key + ".running_var"),
              o.momentum().value_or(0.1),
              o.eps()};
  ledger_.take(key + ".num_batches_tracked");  // a training counter
  return append(std::move(b), {x}, flow(x));
}

// blocks.GRU (hybrid.gin), offline only: a stream would have to carry the hidden state of every
// batch slot from call to call.
int SectionBuilder::gru(int x, rave::GruLayerImpl& g, const std::string& key) {
  if (streaming_) {
    throw Error(
        "--streaming: the generator's GRU (model.gru_layers) runs over the whole signal, and this export "
        "carries no GRU state from block to block; export without --streaming");
  }
  ledger_.take(key + ".gru_state");  // RAVE's placeholder buffer, never read
  Gru op{key, g.gru->options.num_layers(), g.gru->options.hidden_size(), {}};
  for (int64_t k = 0; k < op.layers; ++k) {
    for (const char* name : {"weight_ih_l", "weight_hh_l", "bias_ih_l", "bias_hh_l"}) {
      const std::string full = key + ".gru." + name + std::to_string(k);
      op.params.emplace_back(full, ledger_.take(full));
    }
  }
  return append(std::move(op), {x}, flow(x));
}

void take_adain_as_identity(TensorLedger& ledger, const std::string& key) {
  auto value = [&](const char* name) { return ledger.take(key + "." + name).sum().item<double>(); };
  const double learn_x = value("learn_x"), learn_y = value("learn_y");
  const double updates_x = value("num_update_x"), updates_y = value("num_update_y");
  for (const char* name : {"mean_x", "std_x", "mean_y", "std_y"}) ledger.take(key + "." + name);
  require(learn_x == 0 && learn_y == 0 && (updates_x == 0 || updates_y == 0), key,
          "AdaIN with learnt statistics is not supported by export (it is the identity after training)");
}

int SectionBuilder::module(int x, torch::nn::Module& m, const std::string& key) {
  if (auto* g = dynamic_cast<rave::GruLayerImpl*>(&m)) return gru(x, *g, key);
  if (auto* seq = dynamic_cast<models::SeqImpl*>(&m)) {
    int y = x;
    for (const auto& child : seq->named_children()) y = module(y, *child.value(), key + "." + child.key());
    return y;
  }
  if (auto* r = dynamic_cast<models::ResidualImpl*>(&m)) return residual(x, *r, key);
  if (auto* s = dynamic_cast<models::ResidualStackImpl*>(&m)) return residual_stack(x, *s, key);
  if (auto* c = dynamic_cast<models::WNConv1dImpl*>(&m)) return conv(x, *c, key);
  if (auto* t = dynamic_cast<models::WNConvTranspose1dImpl*>(&m)) return conv_transpose(x, *t, key);
  if (auto* lr = dynamic_cast<torch::nn::LeakyReLUImpl*>(&m)) {
    return activation(x, Activation{Activation::Kind::kLeakyRelu, lr->options.negative_slope(), "", {}});
  }
  if (dynamic_cast<models::SnakeImpl*>(&m)) {
    return activation(x, Activation{Activation::Kind::kSnake, 0.0, key, ledger_.take(key + ".alpha")});
  }
  if (dynamic_cast<models::AdaINImpl*>(&m)) {
    take_adain_as_identity(ledger_, key);
    return x;
  }
  if (auto* bn = dynamic_cast<torch::nn::BatchNorm1dImpl*>(&m)) return batch_norm(x, *bn, key);
  if (auto* bn = dynamic_cast<dist::SyncableBatchNorm1dImpl*>(&m)) return batch_norm(x, *bn->norm, key);
  if (dynamic_cast<torch::nn::IdentityImpl*>(&m)) return x;
  // Wrappers whose forward is their `net` (DilatedUnit, ResidualLayer, and blocks.cpp's /
  // generator.cpp's ResidualBlock and UpsampleLayer): no tensors of their own, one child.
  const auto children = m.named_children();
  if (children.size() == 1 && children.contains("net") && m.named_parameters(false).is_empty() &&
      m.named_buffers(false).is_empty()) {
    return module(x, *children["net"], key + ".net");
  }
  throw Error("export: no export op for module '" + key + "' (" + m.name() + ")");
}

}  // namespace rt::exporting::graph
