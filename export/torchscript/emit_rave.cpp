#include "export/torchscript/emit_rave.h"

#include "util/error.h"

namespace rt::exporting {
namespace {

using models::WNConv1dImpl;
using models::WNConv1dOptions;

// RAVE mod_sigmoid, as rave::mod_sigmoid computes it.
std::string mod_sigmoid(const std::string& x) {
  return "(2.0 * torch.sigmoid(" + x + ").pow(" + num(2.3) + ") + " + num(1e-7) + ")";
}

// RAVE reverse_half: odd bands negated at even time steps. `offset` = the streaming delay in
// band samples: the pattern follows the offline time index.
Signal reverse_half(MethodWriter& w, const Signal& x, int64_t n_band, int64_t offset) {
  const std::string mask = w.fresh("mask");
  w.line(mask + " = torch.ones([" + str(n_band) + ", " + x.var + ".size(-1)], dtype=" + x.var +
         ".dtype, device=" + x.var + ".device)");
  w.line(mask + "[1::2, " + str(offset % 2) + "::2] = -1.0");
  return w.assign(x, x.var + " * " + mask);
}

// The fixed PQMF kernels as convolutions, so that the generic convolution emitter (and its
// streaming cache) serves them too.
WNConv1dImpl pqmf_conv(const torch::Tensor& weight, int64_t stride, models::PaddingMode mode) {
  return WNConv1dImpl(pqmf_conv_options(weight, stride, mode));
}

// blocks.NoiseGenerator / NoiseGeneratorV2: strided convs → per-frame filters of `hop` taps
// (amp_to_impulse_response) applied to uniform noise (fft_convolve), as NoiseGeneratorImpl.
Signal emit_noise(MethodWriter& w, const Signal& x, rave::NoiseGeneratorImpl& n, const std::string& key,
                  const std::string& noise_scale) {
  const Signal h = emit_module(w, x, *n.net, key + ".net");
  if (w.ledger().take(key + ".target_size").item<int64_t>() != n.hop) {
    throw Error("export: '" + key + ".target_size' does not match the noise generator's ratios");
  }
  const int64_t bins = h.channels / n.data_size, filter = 2 * (bins - 1), hop = n.hop;
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
  Signal y = x;
  y.channels = n.data_size;
  y.delay = h.delay;
  return w.assign(y, out + ".reshape([" + out + ".size(0), " + out + ".size(1), -1])");
}

Signal emit_generator_v2(MethodWriter& w, const Signal& z, rave::GeneratorV2Impl& g,
                         const std::string& noise_scale) {
  Signal x = emit_module(w, z, *g.net, "decoder.net");
  Signal noise;
  if (g.noise_module) {
    noise = emit_noise(w, x, *g.noise_module, "decoder.noise_module", noise_scale);
    x = emit_conv(w, x, *g.waveform_module, "decoder.waveform_module");
    auto aligned = emit_aligned(w, {x, noise}, "decoder.noise_module");
    x = aligned[0];
    noise = aligned[1];
  }
  if (g.amplitude_modulation) {
    const std::string half = str(x.channels / 2);
    x = w.assign(x, x.var + "[:, :" + half + "] * torch.sigmoid(" + x.var + "[:, " + half + ":])");
    x.channels /= 2;
  }
  if (!noise.var.empty()) x = emit_sum(w, x, noise);
  return w.assign(x, "torch.tanh(" + x.var + ")");
}

Signal emit_generator_v1(MethodWriter& w, const Signal& z, rave::GeneratorV1Impl& g,
                         const std::string& noise_scale) {
  const Signal x = emit_module(w, z, *g.net, "decoder.net");
  w.ledger().take("decoder.warmed_up");  // the phase flag; g.warm_ mirrors it
  const std::string branches = "decoder.synth.branches.";
  std::vector<Signal> outs{emit_module(w, x, *g.synth->branches->ptr(0), branches + "0"),
                           emit_module(w, x, *g.synth->branches->ptr(1), branches + "1")};
  const bool noise = g.use_noise && g.warm_;
  if (noise) {
    auto* gen = dynamic_cast<rave::NoiseGeneratorImpl*>(g.synth->branches->ptr(2).get());
    if (gen == nullptr) throw Error("export: '" + branches + "2' is not a noise generator");
    outs.push_back(emit_noise(w, x, *gen, branches + "2", noise_scale));
  } else if (g.use_noise) {
    w.ledger().drop_prefix(branches + "2.", "v1 noise synthesis, off until phase 2 (decoder.warmed_up = 0)");
  }
  outs = emit_aligned(w, std::move(outs), "decoder.synth");
  Signal y = w.assign(outs[0], "torch.tanh(" + outs[0].var + ") * " + mod_sigmoid(outs[1].var));
  if (noise) y = emit_sum(w, y, outs[2]);
  return y;
}

}  // namespace

WNConv1dOptions pqmf_conv_options(const torch::Tensor& weight, int64_t stride, models::PaddingMode mode) {
  const auto pad = models::get_padding(weight.size(2), 1, mode);
  return WNConv1dOptions(weight.size(1), weight.size(0), weight.size(2))
      .stride(stride)
      .weight_norm(false)
      .pad_left(pad.first)
      .pad_right(pad.second);
}

std::vector<torch::Tensor> take_codebooks(TensorLedger& ledger, int64_t quantizers) {
  ledger.take("encoder.enabled");
  std::vector<torch::Tensor> embeds;
  for (int64_t i = 0; i < quantizers; ++i) {
    const std::string layer = "encoder.rvq.layers." + str(i) + "._codebook.";
    if (ledger.take(layer + "inited").item<double>() == 0.0) {
      throw Error(
          "the discrete encoder's codebook " + str(i) +
          " was never initialised (its k-means runs at the first training step from train.warmup_quantize "
          "on): export a checkpoint trained past train.warmup_quantize");
    }
    for (const char* stat : {"cluster_size", "embed_avg"})
      ledger.drop_prefix(layer + stat, "the codebooks' training statistics (EMA counts and sums)");
    embeds.push_back(ledger.take(layer + "embed"));
  }
  return embeds;
}

Signal emit_pqmf_analysis(MethodWriter& w, const Signal& x, models::PqmfImpl& pqmf,
                          models::PaddingMode mode) {
  const int64_t m = pqmf.n_band();
  if (m == 1) return x;
  auto& l = w.ledger();
  l.take("pqmf.hk");  // the prototype bank, of which forward_conv.weight is the padded copy
  l.take("pqmf.h");
  auto conv = pqmf_conv(pqmf.forward_conv->weight, m, mode);
  Signal folded = w.assign(x, x.var + ".reshape([-1, 1, " + x.var + ".size(2)])");
  folded.rows = x.channels;
  folded.channels = 1;
  Signal y = emit_conv(w, folded, conv, "pqmf.forward_conv");
  y = reverse_half(w, y, m, (y.delay - folded.delay) / y.hop);
  y = w.assign(y, y.var + ".reshape([-1, " + str(x.channels * m) + ", " + y.var + ".size(-1)])");
  y.rows = 1;
  y.channels = x.channels * m;
  return y;
}

Signal emit_pqmf_synthesis(MethodWriter& w, const Signal& x, models::PqmfImpl& pqmf,
                           models::PaddingMode mode) {
  const int64_t m = pqmf.n_band();
  if (m == 1) return x;
  const int64_t channels = x.channels / m;
  auto conv = pqmf_conv(pqmf.inverse_conv->weight, 1, mode);
  Signal folded = w.assign(x, x.var + ".reshape([-1, " + str(m) + ", " + x.var + ".size(2)])");
  folded.rows = channels;
  folded.channels = m;
  folded = reverse_half(w, folded, m, x.delay / x.hop);
  Signal y = emit_conv(w, folded, conv, "pqmf.inverse_conv");
  y = w.assign(y, "(" + y.var + " * " + num(static_cast<double>(m)) + ").flip(1).permute([0, 2, 1])");
  y = w.assign(y, y.var + ".reshape([-1, " + str(channels) + ", " + y.var + ".size(1) * " + str(m) + "])");
  y.rows = 1;
  y.channels = channels;
  y.hop = x.hop / m;
  return y;
}

Signal emit_encoder(MethodWriter& w, const Signal& bands, rave::VariationalEncoderImpl& encoder) {
  if (encoder.kind != rave::EncoderKind::kSpherical) w.ledger().take("encoder.warmed_up");  // the phase flag
  if (auto* v2 = dynamic_cast<rave::EncoderV2Impl*>(encoder.encoder.get())) {
    return emit_module(w, bands, *v2->net, "encoder.encoder.net");
  }
  if (auto* v1 = dynamic_cast<rave::EncoderV1Impl*>(encoder.encoder.get())) {
    return emit_module(w, bands, *v1->net, "encoder.encoder.net");
  }
  throw Error("export: unknown RAVE encoder type");
}

Signal emit_decoder(MethodWriter& w, const Signal& z, rave::DecoderBase& decoder,
                    const std::string& noise_scale) {
  if (auto* v2 = dynamic_cast<rave::GeneratorV2Impl*>(&decoder))
    return emit_generator_v2(w, z, *v2, noise_scale);
  if (auto* v1 = dynamic_cast<rave::GeneratorV1Impl*>(&decoder))
    return emit_generator_v1(w, z, *v1, noise_scale);
  throw Error("export: unknown RAVE decoder type");
}

}  // namespace rt::exporting
