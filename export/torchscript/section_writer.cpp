#include "export/torchscript/section_writer.h"

#include <type_traits>
#include <variant>
#include <vector>

#include "util/error.h"

namespace rt::exporting {
namespace {

Signal signal(const std::string& var, const graph::Flow& f) {
  return Signal{var, f.channels, f.hop, f.rows, f.delay};
}

std::string ints(std::initializer_list<int64_t> v) {
  std::string s = "[";
  for (auto x : v) s += (s.size() > 1 ? ", " : "") + std::to_string(x);
  return s + "]";
}

// rows [N, K] times weight [M, K] transposed (+ bias) → [N, M]. One row (batch 1, one output
// step: the top layers of a 2048-sample call) is a matrix-vector product, which every BLAS
// runs at the speed of one read of the weight; a matrix product with one column is not
// (OpenBLAS packs the whole weight first). Two rows (the layers after the first upsampling)
// are two matrix-vector products: measured faster than one matrix product of two rows with
// OpenBLAS and MKL alike (docs/perf/export.md); from four rows on the matrix product wins.
std::string rows_times_weight(MethodWriter& w, const std::string& rows, const std::string& weight,
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
std::string rows_times_int8(MethodWriter& w, const std::string& rows, const std::string& packed) {
  const std::string y = w.fresh("m");
  w.line(y + " = quantized.linear_dynamic(" + rows + ".contiguous(), " + packed + ", True)");
  return y;
}

// The convolution as one product (groups 1): the input's windows [B · steps, in · kernel]
// (unfold, every dilation-th sample) times the weight [out, in · kernel]. Lossless: the same sums.
std::string conv_as_product(MethodWriter& w, const Signal& in, const graph::Conv& c,
                            const std::string& weight, const std::string& bias, bool int8) {
  const auto& o = c.options;
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
  const std::string m = int8 ? rows_times_int8(w, rows, weight) : rows_times_weight(w, rows, weight, bias);
  return w
      .assign(in, m + ".view(" + in.var + ".size(0), -1, " + std::to_string(o.out_channels()) +
                      ").transpose(1, 2)")
      .var;
}

std::string write_conv(MethodWriter& w, const Signal& x, const graph::Conv& c) {
  const auto& o = c.options;
  const bool matmul = o.groups() == 1;
  const bool int8 = matmul && w.int8_for(c.kernel.numel());
  std::string weight, bias = "None";
  if (int8) {
    weight = w.packed_int8(c.key + ".packed", c.kernel.reshape({c.kernel.size(0), -1}), c.bias);
  } else {
    weight = w.tensor(c.key + ".weight",
                      matmul ? c.kernel.reshape({c.kernel.size(0), -1}).contiguous() : c.kernel);
    if (c.bias.defined()) bias = w.tensor(c.key + ".bias", c.bias);
  }
  Signal in = x;
  int64_t padding = 0;
  if (w.streaming()) {
    if (c.stride_delay > 0)
      in.var = w.cached_pad(in, c.key + ".downsampling_delay", c.stride_delay, /*crop=*/true);
    if (c.cache > 0) in.var = w.cached_pad(in, c.key + ".cache", c.cache, /*crop=*/false);
  } else if (o.pad_left() == o.pad_right() && !matmul) {
    padding = o.pad_left();  // as WNConv1dImpl::forward: the convolution pads
  } else if (o.pad_left() + o.pad_right() > 0) {
    in =
        w.assign(x, "torch.constant_pad_nd(" + x.var + ", " + ints({o.pad_left(), o.pad_right()}) + ", 0.0)");
  }
  if (matmul) return conv_as_product(w, in, c, weight, bias, int8);
  return w
      .assign(in, "torch.conv1d(" + in.var + ", " + weight + ", " + bias + ", " + ints({o.stride()}) + ", " +
                      ints({padding}) + ", " + ints({o.dilation()}) + ", " + std::to_string(o.groups()) + ")")
      .var;
}

// Streaming, kernel s or 2s: each input step t gives k output samples from t·s, [B · steps,
// out · k] in one product (row co·k + j of the weight holding kernel[:, co, j]). With k = 2s the
// second half of step t overlaps the first half of step t+1; the last step's second half is the
// next call's start (the cache).
std::string conv_transpose_as_product(MethodWriter& w, const Signal& x, const Signal& y,
                                      const graph::ConvTranspose& c, const std::string& weight, bool int8) {
  const auto& o = c.options;
  const int64_t s = o.stride(), k = o.kernel_size();
  const std::string cout = std::to_string(o.out_channels()), ss = std::to_string(s);
  const std::string rows = w.fresh("c");
  w.line(rows + " = " + x.var + ".transpose(1, 2).reshape(-1, " + std::to_string(o.in_channels()) + ")");
  const std::string m = int8 ? rows_times_int8(w, rows, weight) : rows_times_weight(w, rows, weight, "None");
  const std::string steps = w.fresh("q");
  w.line(steps + " = " + m + ".view(" + x.var + ".size(0), -1, " + cout + ", " + std::to_string(k) +
         ").permute(0, 2, 1, 3)");
  std::string out =
      w.assign(x, steps + "[:, :, :, :" + ss + "].reshape(" + x.var + ".size(0), " + cout + ", -1)").var;
  if (k == 2 * s) {
    const std::string tail = w.fresh("h");
    w.line(tail + " = " + steps + "[:, :, :, " + ss + ":].reshape(" + x.var + ".size(0), " + cout + ", -1)");
    const std::string cache = w.state(c.key + ".cache", y.rows, y.channels, s) + "[:" + x.var + ".size(0)]";
    const std::string before = w.fresh("o");
    w.line(before + " = torch.cat([" + cache + ", " + tail + "[:, :, :-" + ss + "]], -1)");
    w.line(cache + ".copy_(" + tail + "[:, :, -" + ss + ":])");
    out = w.assign(x, out + " + " + before).var;
  }
  return out;
}

std::string write_conv_transpose(MethodWriter& w, const Signal& x, const Signal& y,
                                 const graph::ConvTranspose& c) {
  const auto& o = c.options;
  const int64_t s = o.stride(), k = o.kernel_size();
  const bool matmul = w.streaming() && (k == s || k == 2 * s);  // else aten's, as offline
  const bool int8 = matmul && w.int8_for(c.kernel.numel());
  // As a matrix product: [out · kernel, in], row co·k + j holding kernel[:, co, j].
  const torch::Tensor& kernel = c.kernel;
  const std::string weight =
      int8 ? w.packed_int8(c.key + ".packed", kernel.reshape({kernel.size(0), -1}).t(), torch::Tensor())
           : w.tensor(c.key + ".weight",
                      matmul ? kernel.reshape({kernel.size(0), -1}).t().contiguous() : kernel);
  const std::string bias = c.bias.defined() ? w.tensor(c.key + ".bias", c.bias) : "None";
  const std::string stride = ints({s});
  std::string out;
  if (matmul) {
    out = conv_transpose_as_product(w, x, y, c, weight, int8);
  } else if (!w.streaming()) {
    return w
        .assign(x, "torch.conv_transpose1d(" + x.var + ", " + weight + ", " + bias + ", " + stride + ", " +
                       ints({o.padding()}) + ")")
        .var;
  } else {
    // cached_conv CachedConvTranspose1d: no padding, the overlap of one call is added to the
    // start of the next; the bias comes after, so it is added once.
    out = w.assign(x, "torch.conv_transpose1d(" + x.var + ", " + weight + ", None, " + stride +
                          ", [0], [0], 1, [1])")
              .var;
    if (c.overlap > 0) {
      const std::string rows =
          w.state(c.key + ".cache", y.rows, y.channels, c.overlap) + "[:" + out + ".size(0)]";
      const std::string n = std::to_string(c.overlap);
      w.line(out + "[:, :, :" + n + "].add_(" + rows + ")");
      w.line(rows + ".copy_(" + out + "[:, :, -" + n + ":])");
      w.line(out + " = " + out + "[:, :, :-" + n + "]");
    }
  }
  if (c.bias.defined()) w.line(out + " = " + out + " + " + bias + ".unsqueeze(-1)");
  return out;
}

std::string write_activation(MethodWriter& w, const Signal& x, const graph::Activation& a) {
  switch (a.kind) {
    case graph::Activation::Kind::kLeakyRelu:
      return w.assign(x, "torch.leaky_relu(" + x.var + ", " + num(a.slope) + ")").var;
    case graph::Activation::Kind::kSnake: {
      const std::string alpha = w.tensor(a.key + ".alpha", a.alpha);
      // Written as models::SnakeImpl::forward computes it, so both round alike.
      return w
          .assign(x, x.var + " + (" + alpha + " + " + num(1e-9) + ").reciprocal() * (" + alpha + " * " +
                         x.var + ").sin().pow(2)")
          .var;
    }
    case graph::Activation::Kind::kTanh:
      return w.assign(x, "torch.tanh(" + x.var + ")").var;
  }
  throw Error("export: internal error: unknown activation");
}

std::string write_batch_norm(MethodWriter& w, const Signal& x, const graph::BatchNorm& b) {
  const std::string weight = w.tensor(b.key + ".weight", b.weight);
  const std::string bias = w.tensor(b.key + ".bias", b.bias);
  const std::string mean = w.tensor(b.key + ".running_mean", b.mean, /*is_buffer=*/true);
  const std::string var = w.tensor(b.key + ".running_var", b.var, /*is_buffer=*/true);
  return w
      .assign(x, "torch.batch_norm(" + x.var + ", " + weight + ", " + bias + ", " + mean + ", " + var +
                     ", False, " + num(b.momentum) + ", " + num(b.eps) + ", False)")
      .var;
}

// RAVE mod_sigmoid, as rave::mod_sigmoid computes it.
std::string mod_sigmoid(const std::string& x) {
  return "(2.0 * torch.sigmoid(" + x + ").pow(" + num(2.3) + ") + " + num(1e-7) + ")";
}

std::string write_gate(MethodWriter& w, const std::vector<Signal>& in, const graph::Gate& g) {
  const Signal& x = in.at(0);
  if (g.kind == graph::Gate::Kind::kAmplitude) {
    const std::string half = str(x.channels / 2);
    return w.assign(x, x.var + "[:, :" + half + "] * torch.sigmoid(" + x.var + "[:, " + half + ":])").var;
  }
  return w.assign(x, "torch.tanh(" + x.var + ") * " + mod_sigmoid(in.at(1).var)).var;
}

// RAVE reverse_half: odd bands negated at even time steps, the pattern following the offline
// time index (`offset` band samples behind).
std::string reverse_half(MethodWriter& w, const Signal& x, int64_t n_band, int64_t offset) {
  const std::string mask = w.fresh("mask");
  w.line(mask + " = torch.ones([" + str(n_band) + ", " + x.var + ".size(-1)], dtype=" + x.var +
         ".dtype, device=" + x.var + ".device)");
  w.line(mask + "[1::2, " + str(offset % 2) + "::2] = -1.0");
  return w.assign(x, x.var + " * " + mask).var;
}

std::string write_pqmf(MethodWriter& w, const Signal& x, const graph::Pqmf& p) {
  const std::string m = str(p.bands);
  if (!p.synthesis) {
    const Signal folded =
        signal(w.assign(x, x.var + ".reshape([-1, 1, " + x.var + ".size(2)])").var, p.folded);
    Signal y = folded;
    y.var = reverse_half(w, Signal{write_conv(w, folded, p.conv)}, p.bands, p.sign_offset);
    return w.assign(y, y.var + ".reshape([-1, " + str(p.channels * p.bands) + ", " + y.var + ".size(-1)])")
        .var;
  }
  Signal folded =
      signal(w.assign(x, x.var + ".reshape([-1, " + m + ", " + x.var + ".size(2)])").var, p.folded);
  folded.var = reverse_half(w, folded, p.bands, p.sign_offset);
  const std::string y = write_conv(w, folded, p.conv);
  const std::string flipped =
      w.assign(folded, "(" + y + " * " + num(static_cast<double>(p.bands)) + ").flip(1).permute([0, 2, 1])")
          .var;
  return w
      .assign(folded,
              flipped + ".reshape([-1, " + str(p.channels) + ", " + flipped + ".size(1) * " + m + "])")
      .var;
}

// export --sr: RAVE's Resampler, as rave::ResamplerImpl computes it (channels folded into the
// batch; up: the phases interleaved).
std::string write_resample(MethodWriter& w, const Signal& x, const graph::Resample& r) {
  const Signal folded = signal(w.assign(x, x.var + ".reshape([-1, 1, " + x.var + ".size(2)])").var, r.folded);
  const std::string y = write_conv(w, folded, r.conv);
  if (!r.up) {
    return w.assign(folded, y + ".reshape([-1, " + str(r.channels) + ", " + y + ".size(-1)])").var;
  }
  const std::string phases = w.assign(folded, y + ".permute([0, 2, 1])").var;
  return w
      .assign(folded, phases + ".reshape([-1, " + str(r.channels) + ", " + phases + ".size(1) * " +
                          str(r.ratio) + "])")
      .var;
}

// The noise synthesis as NoiseGeneratorImpl computes it: mod_sigmoid(h − 5) as filter magnitudes,
// their impulse responses (irfft, centring roll, Hann window, padded to hop, rolled back),
// applied to uniform noise by fft_convolve.
std::string write_noise(MethodWriter& w, const Signal& h, const graph::Noise& n,
                        const std::string& noise_scale) {
  const int64_t filter = 2 * (n.bins - 1), hop = n.hop;
  const std::string amp = w.fresh("amp"), ir = w.fresh("ir"), noise = w.fresh("noise"), out = w.fresh("conv");
  w.line(amp + " = " + mod_sigmoid(h.var + " - 5.0") + ".permute([0, 2, 1])");
  w.line(amp + " = " + amp + ".reshape([" + amp + ".size(0), " + amp + ".size(1), " + str(n.data_size) +
         ", -1])");
  w.line(ir + " = torch.fft_irfft(torch.complex(" + amp + ", torch.zeros_like(" + amp + ")))");
  w.line(ir + " = torch.roll(" + ir + ", [" + str(filter / 2) + "], [-1])");
  w.line(ir + " = " + ir + " * torch.hann_window(" + str(filter) + ", dtype=" + ir + ".dtype, device=" + ir +
         ".device)");
  w.line(ir + " = torch.constant_pad_nd(" + ir + ", [0, " + str(hop - filter) + "], 0.0)");
  w.line(ir + " = torch.roll(" + ir + ", [" + str(-((filter + 1) / 2)) + "], [-1])");
  // rand_like fills in memory order: drawn for a contiguous tensor, as the model draws.
  w.line(noise + " = (torch.rand_like(" + ir + ".contiguous()) * 2.0 - 1.0) * " + noise_scale);
  // fft_convolve(noise, ir): the second half of the circular convolution of the padded pair.
  w.line(out + " = torch.fft_irfft(torch.fft_rfft(torch.constant_pad_nd(" + noise + ", [0, " + str(hop) +
         "], 0.0)) * torch.fft_rfft(torch.constant_pad_nd(" + ir + ", [" + str(hop) + ", 0], 0.0)))");
  w.line(out + " = " + out + "[:, :, :, " + str(hop) + ":].permute([0, 2, 1, 3])");
  return w.assign(h, out + ".reshape([" + out + ".size(0), " + out + ".size(1), -1])").var;
}

// aten's GRU over the frames, from a zero state at every call.
std::string write_gru(MethodWriter& w, const Signal& x, const graph::Gru& g) {
  std::string params;
  for (const auto& [name, t] : g.params) params += (params.empty() ? "" : ", ") + w.tensor(name, t);
  const std::string h0 = w.fresh("h0");
  w.line(h0 + " = torch.zeros([" + std::to_string(g.layers) + ", " + x.var + ".size(0), " +
         std::to_string(g.hidden) + "], dtype=" + x.var + ".dtype, device=" + x.var + ".device)");
  // aten::gru.input(input, hx, params, has_biases, num_layers, dropout, train, bidirectional, batch_first)
  return w
      .assign(x, "torch.gru(" + x.var + ".permute([0, 2, 1]), " + h0 + ", [" + params + "], True, " +
                     std::to_string(g.layers) + ", 0.0, False, False, True)[0].permute([0, 2, 1])")
      .var;
}

}  // namespace

std::string write_section(MethodWriter& w, const graph::Section& section, const std::string& input,
                          const std::string& noise_scale) {
  std::vector<Signal> values(section.values.size());
  values[0] = signal(input, section.values[0]);
  for (const auto& op : section.ops) {
    std::vector<Signal> in;
    for (int i : op.inputs) in.push_back(values.at(static_cast<size_t>(i)));
    const Signal out = signal("", section.values.at(static_cast<size_t>(op.output)));
    const std::string var = std::visit(
        [&](const auto& o) -> std::string {
          using T = std::decay_t<decltype(o)>;
          if constexpr (std::is_same_v<T, graph::Conv>) {
            return write_conv(w, in[0], o);
          } else if constexpr (std::is_same_v<T, graph::ConvTranspose>) {
            return write_conv_transpose(w, in[0], out, o);
          } else if constexpr (std::is_same_v<T, graph::Delay>) {
            return w.cached_pad(in[0], o.key, o.samples, /*crop=*/true);
          } else if constexpr (std::is_same_v<T, graph::Activation>) {
            return write_activation(w, in[0], o);
          } else if constexpr (std::is_same_v<T, graph::BatchNorm>) {
            return write_batch_norm(w, in[0], o);
          } else if constexpr (std::is_same_v<T, graph::Add>) {
            return w.assign(in[0], in[0].var + " + " + in[1].var).var;
          } else if constexpr (std::is_same_v<T, graph::Gate>) {
            return write_gate(w, in, o);
          } else if constexpr (std::is_same_v<T, graph::Pqmf>) {
            return write_pqmf(w, in[0], o);
          } else if constexpr (std::is_same_v<T, graph::Noise>) {
            return write_noise(w, in[0], o, noise_scale);
          } else if constexpr (std::is_same_v<T, graph::Resample>) {
            return write_resample(w, in[0], o);
          } else {
            static_assert(std::is_same_v<T, graph::Gru>);
            return write_gru(w, in[0], o);
          }
        },
        op.kind);
    values[static_cast<size_t>(op.output)] = signal(var, section.values.at(static_cast<size_t>(op.output)));
  }
  return values.at(static_cast<size_t>(section.output)).var;
}

}  // namespace rt::exporting
