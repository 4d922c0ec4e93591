#include "export/torchscript/emit_layers.h"

#include <algorithm>

#include "distributed/sync_batch_norm.h"
#include "models/common/blocks.h"
#include "models/rave/generator.h"
#include "util/error.h"

namespace rt::exporting {
namespace {

using models::WNConv1dImpl;

std::string ints(std::initializer_list<int64_t> v) {
  std::string s = "[";
  for (auto x : v) s += (s.size() > 1 ? ", " : "") + std::to_string(x);
  return s + "]";
}

void require(bool ok, const std::string& key, const std::string& what) {
  if (!ok) throw Error("export: '" + key + "': " + what);
}

Signal emit_seq(MethodWriter& w, const Signal& x, models::SeqImpl& seq, const std::string& key) {
  Signal y = x;
  for (const auto& child : seq.named_children())
    y = emit_module(w, y, *child.value(), key + "." + child.key());
  return y;
}

// RAVE blocks.Residual = AlignBranches(module, Identity): the skip path is delayed by the
// inner module's delay (cached_conv AlignBranches, delays [inner, 0]).
Signal emit_residual(MethodWriter& w, const Signal& x, models::ResidualImpl& r, const std::string& key) {
  Signal y = emit_module(w, x, *r.aligned->branches->ptr(0), key + ".aligned.branches.0");
  require(y.hop == x.hop && y.channels == x.channels, key, "a residual branch must keep shape and rate");
  const Signal skip = emit_delay(w, x, (y.delay - x.delay) / x.hop, key + ".aligned.paddings.1");
  return emit_sum(w, y, skip);
}

// RAVE blocks.ResidualStack: one ResidualBlock per kernel size, summed.
Signal emit_residual_stack(MethodWriter& w, const Signal& x, models::ResidualStackImpl& s,
                           const std::string& key) {
  std::vector<Signal> outs;
  size_t i = 0;
  for (const auto& block : *s.net->branches) {
    outs.push_back(emit_module(w, x, *block, key + ".net.branches." + std::to_string(i++)));
  }
  outs = emit_aligned(w, std::move(outs), key + ".net");
  Signal sum = outs[0];
  for (size_t j = 1; j < outs.size(); ++j) sum = emit_sum(w, sum, outs[j]);
  return sum;
}

Signal emit_snake(MethodWriter& w, const Signal& x, const std::string& key) {
  const std::string a = w.tensor(key + ".alpha", w.ledger().take(key + ".alpha"));
  // Written as models::SnakeImpl::forward computes it, so both round alike.
  return w.assign(x, x.var + " + (" + a + " + " + num(1e-9) + ").reciprocal() * (" + a + " * " + x.var +
                         ").sin().pow(2)");
}

// AdaIN (RAVE blocks.AdaptiveInstanceNormalization) is the identity in evaluation until
// statistics are learnt with learn_x / learn_y, which training never sets. A checkpoint that
// says otherwise is refused rather than exported wrong.
Signal emit_adain(MethodWriter& w, const Signal& x, const std::string& key) {
  take_adain_as_identity(w.ledger(), key);
  return x;
}

Signal emit_batch_norm(MethodWriter& w, const Signal& x, const torch::nn::BatchNorm1dImpl& bn,
                       const std::string& key) {
  auto& l = w.ledger();
  const auto& o = bn.options;
  require(o.affine() && o.track_running_stats(), key,
          "BatchNorm1d needs affine parameters and running statistics");
  const std::string weight = w.tensor(key + ".weight", l.take(key + ".weight"));
  const std::string bias = w.tensor(key + ".bias", l.take(key + ".bias"));
  const std::string mean = w.tensor(key + ".running_mean", l.take(key + ".running_mean"), /*is_buffer=*/true);
  const std::string var = w.tensor(key + ".running_var", l.take(key + ".running_var"), /*is_buffer=*/true);
  l.take(key + ".num_batches_tracked");  // a training counter
  return w.assign(x, "torch.batch_norm(" + x.var + ", " + weight + ", " + bias + ", " + mean + ", " + var +
                         ", False, " + num(o.momentum().value_or(0.1)) + ", " + num(o.eps()) + ", False)");
}

}  // namespace

void take_adain_as_identity(TensorLedger& ledger, const std::string& key) {
  auto value = [&](const char* name) { return ledger.take(key + "." + name).sum().item<double>(); };
  const double learn_x = value("learn_x"), learn_y = value("learn_y");
  const double updates_x = value("num_update_x"), updates_y = value("num_update_y");
  for (const char* name : {"mean_x", "std_x", "mean_y", "std_y"}) ledger.take(key + "." + name);
  require(learn_x == 0 && learn_y == 0 && (updates_x == 0 || updates_y == 0), key,
          "AdaIN with learnt statistics is not supported by export (it is the identity after training)");
}

Signal emit_sum(MethodWriter& w, const Signal& x, const Signal& y) {
  if (w.streaming() && x.delay != y.delay) {
    throw Error("export: internal error: adding signals with delays " + std::to_string(x.delay) + " and " +
                std::to_string(y.delay));
  }
  return w.assign(x, x.var + " + " + y.var);
}

namespace {

// Convolutions (groups = 1) are emitted as one matrix product on a weight laid out at export:
// the input's windows [batch · steps, in · kernel] times [out, in · kernel]; streaming
// transposed convolutions likewise, [batch · steps, in] times [out · kernel, in]. At nn~'s
// block sizes the large layers see one or two time steps, where a convolution's set-up
// (im2col, the BLAS packing the whole weight for a one-column product) costs more than one
// read of the weight, which is what a matrix-vector product costs. Lossless: the same sums.
bool as_matmul(int64_t groups) { return groups == 1; }

// rows [N, K] times weight [M, K] transposed (+ bias) → [N, M]. One row (batch 1, one output
// step: the top layers of a 2048-sample call) is a matrix-vector product, which every BLAS
// runs at the speed of one read of the weight; a matrix product with one column is not
// (OpenBLAS packs the whole weight first). Two rows (the layers after the first upsampling)
// are two matrix-vector products: measured faster than one matrix product of two rows with
// OpenBLAS and MKL alike (docs/perf/export.md); from four rows on the matrix product wins.
std::string emit_rows_times_weight(MethodWriter& w, const std::string& rows, const std::string& weight,
                                   const std::string& bias) {
  const std::string y = w.fresh("m");
  auto mv = [&](const std::string& row) {
    return bias == "None" ? "torch.mv(" + weight + ", " + row + ")"
                          : "torch.addmv(" + bias + ", " + weight + ", " + row + ")";
  };
  w.line("if " + rows + ".size(0) == 1:");
  w.line("    " + y + " = " + mv(rows + "[0]") + ".unsqueeze(0)");
  w.line("elif " + rows + ".size(0) == 2:");
  w.line("    " + y + " = torch.stack([" + mv(rows + "[0]") + ", " + mv(rows + "[1]") + "])");
  w.line("else:");
  w.line("    " + y + " = torch.linear(" + rows + ", " + weight + ", " + bias + ")");
  return y;
}

// rows [N, K] times an int8 weight packed by MethodWriter::packed_int8 (+ its bias): aten's
// dynamic quantized linear, which quantizes the rows per call (7-bit, reduce_range, which x86's
// fbgemm needs) and accumulates in int32.
std::string emit_rows_times_int8(MethodWriter& w, const std::string& rows, const std::string& packed) {
  const std::string y = w.fresh("m");
  w.line(y + " = quantized.linear_dynamic(" + rows + ".contiguous(), " + packed + ", True)");
  return y;
}

}  // namespace

Signal emit_conv(MethodWriter& w, const Signal& x, const WNConv1dImpl& conv, const std::string& key) {
  const auto& o = conv.options;
  require(
      x.channels == o.in_channels(), key,
      "expects " + std::to_string(o.in_channels()) + " input channels, gets " + std::to_string(x.channels));
  const torch::Tensor kernel = w.ledger().take_kernel(key);
  const bool matmul = as_matmul(o.groups());
  const bool int8 = matmul && w.int8_for(kernel.numel());
  const torch::Tensor b = w.ledger().take_bias(key);
  // As a matrix product the weight is laid out once, at export: [out, in · kernel].
  std::string weight, bias = "None";
  if (int8) {
    weight = w.packed_int8(key + ".packed", kernel.reshape({kernel.size(0), -1}), b);
  } else {
    weight = w.tensor(key + ".weight", matmul ? kernel.reshape({kernel.size(0), -1}).contiguous() : kernel);
    if (b.defined()) bias = w.tensor(key + ".bias", b);
  }
  Signal in = x;
  int64_t padding = 0;
  if (w.streaming()) {
    // cached_conv CachedConv1d, its cumulative_delay being the delay the input already carries:
    // the strided convolution's total input delay becomes a whole number of output steps, so
    // it decimates at the offline phase.
    require(x.delay % x.hop == 0, key, "input delay is not a whole number of input steps");
    const int64_t s = o.stride(), right = o.pad_right(), cumulative = x.delay / x.hop;
    const int64_t stride_delay = (s - (right + cumulative) % s) % s;
    if (stride_delay > 0) in.var = w.cached_pad(in, key + ".downsampling_delay", stride_delay, /*crop=*/true);
    if (o.pad_left() + right > 0)
      in.var = w.cached_pad(in, key + ".cache", o.pad_left() + right, /*crop=*/false);
    in.delay = x.delay + (right + stride_delay) * x.hop;
  } else if (o.pad_left() == o.pad_right() && !matmul) {
    padding = o.pad_left();  // as WNConv1dImpl::forward: the convolution pads
  } else if (o.pad_left() + o.pad_right() > 0) {
    in =
        w.assign(x, "torch.constant_pad_nd(" + x.var + ", " + ints({o.pad_left(), o.pad_right()}) + ", 0.0)");
  }
  if (matmul) {
    // The convolution as one product: the input's windows [B · steps, in · kernel] (unfold,
    // every dilation-th sample) times the weight. Lossless: the same sums in another order.
    const int64_t k = o.kernel_size(), d = o.dilation(), s = o.stride(), cin = o.in_channels();
    const std::string rows = w.fresh("c");
    if (k == 1 && s == 1) {
      w.line(rows + " = " + in.var + ".transpose(1, 2).reshape(-1, " + std::to_string(cin) + ")");
    } else {
      std::string windows =
          in.var + ".unfold(2, " + std::to_string((k - 1) * d + 1) + ", " + std::to_string(s) + ")";
      if (d > 1) windows += "[:, :, :, ::" + std::to_string(d) + "]";
      w.line(rows + " = " + windows + ".transpose(1, 2).reshape(-1, " + std::to_string(cin * k) + ")");
    }
    const std::string m =
        int8 ? emit_rows_times_int8(w, rows, weight) : emit_rows_times_weight(w, rows, weight, bias);
    Signal y = w.assign(in, m + ".view(" + in.var + ".size(0), -1, " + std::to_string(o.out_channels()) +
                                ").transpose(1, 2)");
    y.channels = o.out_channels();
    y.hop = x.hop * o.stride();
    return y;
  }
  Signal y = w.assign(in, "torch.conv1d(" + in.var + ", " + weight + ", " + bias + ", " + ints({o.stride()}) +
                              ", " + ints({padding}) + ", " + ints({o.dilation()}) + ", " +
                              std::to_string(o.groups()) + ")");
  y.channels = o.out_channels();
  y.hop = x.hop * o.stride();
  return y;
}

Signal emit_conv_transpose(MethodWriter& w, const Signal& x, const models::WNConvTranspose1dImpl& conv,
                           const std::string& key) {
  const auto& o = conv.options;
  require(x.channels == o.in_channels(), key, "input channels do not match");
  require(x.hop % o.stride() == 0, key, "upsampling below the audio rate");
  const torch::Tensor kernel = w.ledger().take_kernel(key);
  const int64_t s = o.stride(), k = o.kernel_size();
  const bool matmul = w.streaming() && (k == s || k == 2 * s);  // else aten's, as offline
  const bool int8 = matmul && w.int8_for(kernel.numel());
  // As a matrix product: [out · kernel, in], row co·k + j holding kernel[:, co, j].
  const std::string weight =
      int8 ? w.packed_int8(key + ".packed", kernel.reshape({kernel.size(0), -1}).t(), torch::Tensor())
           : w.tensor(key + ".weight",
                      matmul ? kernel.reshape({kernel.size(0), -1}).t().contiguous() : kernel);
  const torch::Tensor b = w.ledger().take_bias(key);
  const std::string bias = b.defined() ? w.tensor(key + ".bias", b) : "None";
  const std::string stride = ints({o.stride()});
  if (matmul) {
    // Each input step t gives k output samples from t·s: [B · steps, out · k] in one product.
    // With k = 2s the second half of step t overlaps the first half of step t+1; the last
    // step's second half is the next call's start (the cache), as below.
    const std::string cout = std::to_string(o.out_channels()), ss = std::to_string(s);
    const std::string rows = w.fresh("c");
    w.line(rows + " = " + x.var + ".transpose(1, 2).reshape(-1, " + std::to_string(o.in_channels()) + ")");
    const std::string m =
        int8 ? emit_rows_times_int8(w, rows, weight) : emit_rows_times_weight(w, rows, weight, "None");
    const std::string steps = w.fresh("q");
    w.line(steps + " = " + m + ".view(" + x.var + ".size(0), -1, " + cout + ", " + std::to_string(k) +
           ").permute(0, 2, 1, 3)");
    Signal y = w.assign(x, steps + "[:, :, :, :" + ss + "].reshape(" + x.var + ".size(0), " + cout + ", -1)");
    y.channels = o.out_channels();
    y.hop = x.hop / s;
    if (k == 2 * s) {
      const std::string tail = w.fresh("h");
      w.line(tail + " = " + steps + "[:, :, :, " + ss + ":].reshape(" + x.var + ".size(0), " + cout +
             ", -1)");
      const std::string cache = w.state(key + ".cache", y.rows, y.channels, s) + "[:" + x.var + ".size(0)]";
      const std::string before = w.fresh("o");
      w.line(before + " = torch.cat([" + cache + ", " + tail + "[:, :, :-" + ss + "]], -1)");
      w.line(cache + ".copy_(" + tail + "[:, :, -" + ss + ":])");
      y = w.assign(y, y.var + " + " + before);
    }
    if (b.defined()) w.line(y.var + " = " + y.var + " + " + bias + ".unsqueeze(-1)");
    y.delay = x.delay + o.padding() * y.hop;
    return y;
  }
  if (!w.streaming()) {
    Signal y = w.assign(x, "torch.conv_transpose1d(" + x.var + ", " + weight + ", " + bias + ", " + stride +
                               ", " + ints({o.padding()}) + ")");
    y.channels = o.out_channels();
    y.hop = x.hop / o.stride();
    return y;
  }
  // cached_conv CachedConvTranspose1d: no padding, the overlap (k − s samples) of one call is
  // added to the start of the next; the bias comes after, so it is added once.
  const int64_t overlap = o.kernel_size() - o.stride();
  require(overlap <= o.stride(), key, "streaming needs kernel_size <= 2 * stride");
  Signal y = w.assign(
      x, "torch.conv_transpose1d(" + x.var + ", " + weight + ", None, " + stride + ", [0], [0], 1, [1])");
  y.channels = o.out_channels();
  y.hop = x.hop / o.stride();
  if (overlap > 0) {
    const std::string rows =
        w.state(key + ".cache", y.rows, y.channels, overlap) + "[:" + y.var + ".size(0)]";
    const std::string n = std::to_string(overlap);
    w.line(y.var + "[:, :, :" + n + "].add_(" + rows + ")");
    w.line(rows + ".copy_(" + y.var + "[:, :, -" + n + ":])");
    w.line(y.var + " = " + y.var + "[:, :, :-" + n + "]");
  }
  if (b.defined()) w.line(y.var + " = " + y.var + " + " + bias + ".unsqueeze(-1)");
  y.delay = x.delay + o.padding() * y.hop;
  return y;
}

Signal emit_delay(MethodWriter& w, const Signal& x, int64_t samples, const std::string& key) {
  if (!w.streaming() || samples == 0) return x;
  require(samples > 0, key, "negative delay");
  Signal y = x;
  y.var = w.cached_pad(x, key, samples, /*crop=*/true);
  y.delay = x.delay + samples * x.hop;
  return y;
}

std::vector<Signal> emit_aligned(MethodWriter& w, std::vector<Signal> outs, const std::string& key) {
  int64_t latest = 0;
  for (const auto& s : outs) latest = std::max(latest, s.delay);
  for (size_t i = 0; i < outs.size(); ++i) {
    const int64_t lag = latest - outs[i].delay;
    require(lag % outs[i].hop == 0, key, "branch delays differ by a fraction of a sample");
    outs[i] = emit_delay(w, outs[i], lag / outs[i].hop, key + ".align." + std::to_string(i));
  }
  return outs;
}

// blocks.GRU (hybrid.gin): aten's gru over the frames, from a zero state at every call. Offline
// only: a stream would have to carry the hidden state of every batch slot from call to call.
Signal emit_gru(MethodWriter& w, const Signal& x, rave::GruLayerImpl& g, const std::string& key) {
  if (w.streaming()) {
    throw Error(
        "--streaming: the generator's GRU (model.gru_layers) runs over the whole signal, and this export "
        "carries no GRU state from block to block; export without --streaming");
  }
  w.ledger().take(key + ".gru_state");  // RAVE's placeholder buffer, never read
  const int64_t layers = g.gru->options.num_layers(), hidden = g.gru->options.hidden_size();
  std::string params;
  for (int64_t k = 0; k < layers; ++k) {
    for (const char* name : {"weight_ih_l", "weight_hh_l", "bias_ih_l", "bias_hh_l"}) {
      const std::string full = key + ".gru." + name + std::to_string(k);
      params += (params.empty() ? "" : ", ") + w.tensor(full, w.ledger().take(full));
    }
  }
  const std::string h0 = w.fresh("h0");
  w.line(h0 + " = torch.zeros([" + std::to_string(layers) + ", " + x.var + ".size(0), " +
         std::to_string(hidden) + "], dtype=" + x.var + ".dtype, device=" + x.var + ".device)");
  // aten::gru.input(input, hx, params, has_biases, num_layers, dropout, train, bidirectional, batch_first)
  return w.assign(x, "torch.gru(" + x.var + ".permute([0, 2, 1]), " + h0 + ", [" + params + "], True, " +
                         std::to_string(layers) + ", 0.0, False, False, True)[0].permute([0, 2, 1])");
}

Signal emit_module(MethodWriter& w, const Signal& x, torch::nn::Module& m, const std::string& key) {
  if (auto* gru = dynamic_cast<rave::GruLayerImpl*>(&m)) return emit_gru(w, x, *gru, key);
  if (auto* seq = dynamic_cast<models::SeqImpl*>(&m)) return emit_seq(w, x, *seq, key);
  if (auto* r = dynamic_cast<models::ResidualImpl*>(&m)) return emit_residual(w, x, *r, key);
  if (auto* s = dynamic_cast<models::ResidualStackImpl*>(&m)) return emit_residual_stack(w, x, *s, key);
  if (auto* c = dynamic_cast<WNConv1dImpl*>(&m)) return emit_conv(w, x, *c, key);
  if (auto* t = dynamic_cast<models::WNConvTranspose1dImpl*>(&m)) return emit_conv_transpose(w, x, *t, key);
  if (auto* lr = dynamic_cast<torch::nn::LeakyReLUImpl*>(&m)) {
    return w.assign(x, "torch.leaky_relu(" + x.var + ", " + num(lr->options.negative_slope()) + ")");
  }
  if (dynamic_cast<models::SnakeImpl*>(&m)) return emit_snake(w, x, key);
  if (dynamic_cast<models::AdaINImpl*>(&m)) return emit_adain(w, x, key);
  if (auto* bn = dynamic_cast<torch::nn::BatchNorm1dImpl*>(&m)) return emit_batch_norm(w, x, *bn, key);
  if (auto* bn = dynamic_cast<dist::SyncableBatchNorm1dImpl*>(&m))
    return emit_batch_norm(w, x, *bn->norm, key);
  if (dynamic_cast<torch::nn::IdentityImpl*>(&m)) return x;
  // Wrappers whose forward is their `net` (DilatedUnit, ResidualLayer, and blocks.cpp's /
  // generator.cpp's ResidualBlock and UpsampleLayer): no tensors of their own, one child.
  const auto children = m.named_children();
  if (children.size() == 1 && children.contains("net") && m.named_parameters(false).is_empty() &&
      m.named_buffers(false).is_empty()) {
    return emit_module(w, x, *children["net"], key + ".net");
  }
  throw Error("export: no TorchScript emitter for module '" + key + "' (" + m.name() + ")");
}

}  // namespace rt::exporting
