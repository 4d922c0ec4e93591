#include "export/torchscript/rave_script.h"

#include "export/torchscript/emit_rave.h"
#include "export/torchscript/nn_tilde.h"
#include "util/error.h"

namespace rt::exporting {
namespace {

// An input check that reads well in nn~'s console and in Python.
std::string expect(const std::string& condition, const std::string& message) {
  return "assert " + condition + ", \"" + message + "\"";
}

}  // namespace

int64_t exported_latent_size(const rave::RaveOptions& o, int64_t requested) {
  switch (o.encoder) {
    case rave::EncoderKind::kVariational:
      return requested > 0 ? requested : o.latent_size;
    case rave::EncoderKind::kSpherical:
      return o.latent_size - 1;
    case rave::EncoderKind::kDiscrete:
      return o.num_quantizers;
    default:
      return o.latent_size;
  }
}

void check_exportable(const rave::RaveOptions& o, const ScriptOptions& s) {
  if (o.encoder == rave::EncoderKind::kSpherical && o.latent_size < 2) {
    throw Error("a spherical latent needs model.latent_size >= 2 (it is exported as latent_size - 1 angles)");
  }
  if (o.encoder != rave::EncoderKind::kVariational && s.latent_size != 0 &&
      s.latent_size != exported_latent_size(o, 0)) {
    throw Error("model.encoder = " + std::string(enum_name(o.encoder)) + " exports its whole latent");
  }
  if (o.encoder == rave::EncoderKind::kVariational && (s.latent_size < 0 || s.latent_size > o.latent_size)) {
    throw Error("latent size " + str(s.latent_size) + " is outside 1 … " + str(o.latent_size) +
                " (the model's model.latent_size)");
  }
  if (!s.streaming) return;
  if (o.input_mode == rave::InputMode::kMel) {
    throw Error(
        "--streaming: the mel encoder (model.input_mode = mel) frames a centred STFT that needs "
        "future samples and carries no state between blocks; export without --streaming");
  }
  if (o.n_band > 1 && o.hop() % 2 != 0) {
    throw Error(
        "--streaming needs an even product of model.ratios with a PQMF (its band signs alternate per "
        "sample); the model's is " +
        str(o.hop()));
  }
  int64_t noise_hop = 1;
  for (auto r : o.noise_ratios) noise_hop *= r;
  if (o.noise_bands > 0 && o.hop() % noise_hop != 0) {
    throw Error("--streaming needs model.noise_ratios (product " + str(noise_hop) +
                ") to divide the product of model.ratios (" + str(o.hop()) + ")");
  }
}

torch::jit::Module script_rave(rave::RaveModelImpl& model, const ScriptOptions& s, ScriptInfo* info) {
  const auto& o = model.options();
  check_exportable(o, s);
  const auto mode = o.padding;
  const auto kind = o.encoder;
  const bool variational = kind == rave::EncoderKind::kVariational;
  const int64_t channels = o.channels, full = o.latent_size, ratio = o.compression();
  // What encode returns and decode takes: the PCA-cropped latent, the whole latent (wasserstein)
  // or its angles (spherical: one fewer).
  const int64_t latent = exported_latent_size(o, s.latent_size);
  const int64_t decoder_in = full + o.noise_augmentation;

  TensorLedger ledger(model_tensors(model));
  ledger.drop_prefix("discriminator.", "the discriminator (training only)");
  ledger.drop_prefix("receptive_field", "RAVE's receptive-field record (not used by inference)");
  ScriptContext ctx(s.streaming, ledger, s.quantize == Quantize::kInt8 ? s.int8_min_weights : -1);

  auto pqmf = ctx.new_module("PQMF");
  const Signal audio{"x", channels, 1, 1, 0};
  Signal bands;
  {
    MethodWriter w(ctx, pqmf);
    bands = emit_pqmf_analysis(w, audio, *model.pqmf, mode);
    w.define("forward", "x: Tensor", "Tensor", bands.var);
  }
  auto encoder = ctx.new_module("Encoder");
  Signal stats;
  const bool mel = o.input_mode == rave::InputMode::kMel;
  {
    MethodWriter w(ctx, encoder);
    Signal in = bands;
    in.var = "x";
    if (mel) {
      // The log1p mel features (mel_features below): n_mels per channel, one frame per mel_hop.
      in.channels = o.n_mels * channels;
      in.hop = o.mel_hop;
      in.rows = 1;
      in.delay = 0;
    }
    stats = emit_encoder(w, in, *model.encoder);
    w.define("forward", "x: Tensor", "Tensor", stats.var);
  }
  auto decoder = ctx.new_module("Decoder");
  Signal multiband;
  {
    MethodWriter w(ctx, decoder);
    multiband = emit_decoder(w, Signal{"z", decoder_in, ratio, 1, 0}, *model.decoder, "noise_scale");
    w.define("forward", "z: Tensor, noise_scale: float", "Tensor", multiband.var);
  }
  // A raw decoder (model.output_mode = raw) makes the audio itself: no synthesis bank.
  const bool raw = o.output_mode == rave::OutputMode::kRaw;
  Signal out = multiband;
  if (raw) ledger.drop_prefix("pqmf.inverse_conv", "the PQMF synthesis bank (model.output_mode = raw)");
  if (!raw) {
    MethodWriter w(ctx, pqmf);
    Signal in = multiband;
    in.var = "x";
    out = emit_pqmf_synthesis(w, in, *model.pqmf, mode);
    w.define("inverse", "x: Tensor", "Tensor", out.var);
  }
  const std::string synthesize = raw ? "self.decoder.forward(z, noise_scale)"
                                     : "self.pqmf.inverse(self.decoder.forward(z, noise_scale))";
  if (stats.hop != ratio || stats.channels != (variational ? 2 : 1) * full || out.hop != 1 ||
      out.channels != channels) {
    throw Error("export: internal error: the emitted model does not have the model's shapes");
  }

  ScriptInfo result;
  result.ratio = ratio;
  // Strided convolutions count the delay their input carries (emit_conv), so the encoder's
  // delay is whole latent frames.
  if (s.streaming && stats.delay % ratio != 0) {
    throw Error("export: internal error: the streaming encoder's delay " + str(stats.delay) +
                " is not whole frames of " + str(ratio));
  }
  result.encode_latency = s.streaming ? stats.delay : 0;
  result.decode_latency = s.streaming ? out.delay : 0;

  auto top = ctx.new_module("ScriptedRAVE");
  top.register_module("pqmf", pqmf);
  top.register_module("encoder", encoder);
  top.register_module("decoder", decoder);
  for (const char* name : {"latent_pca", "latent_mean", "fidelity"})
    top.register_buffer(name, ledger.take(name));
  if (mel) {
    // RAVE's _mel_encode with torchaudio's MelSpectrogram (models/rave/mel.h), written out: the
    // centred STFT's reflect padding, the window-normalised power, the HTK bank, the last frame
    // dropped, log1p, the channels folded into the bins.
    top.register_buffer("mel_window", ledger.take("spectrogram.spectrogram.window"));
    top.register_buffer("mel_fb", ledger.take("spectrogram.mel_scale.fb"));
    const std::string n_fft = str(o.mel_n_fft), hop = str(o.mel_hop), pad = str(o.mel_n_fft / 2);
    top.define(
        "def mel_features(self, x: Tensor) -> Tensor:\n"
        "    b = x.size(0)\n"
        "    c = x.size(1)\n"
        "    flat = torch.reflection_pad1d(x.reshape(b * c, 1, x.size(2)), [" +
        pad + ", " + pad +
        "])\n"
        "    spec = torch.stft(flat.reshape(b * c, -1), " +
        n_fft + ", " + hop + ", " + n_fft +
        ", self.mel_window, False, True, True)\n"
        "    spec = spec / self.mel_window.pow(2.0).sum().sqrt()\n"
        "    power = spec.abs().pow(2.0)\n"
        "    mel = torch.matmul(power.transpose(-1, -2), self.mel_fb).transpose(-1, -2)\n"
        "    mel = mel[:, :, :-1]\n"
        "    return torch.log1p(mel).reshape(b, c * " +
        str(o.n_mels) + ", mel.size(-1))\n");
  }
  const bool discrete = kind == rave::EncoderKind::kDiscrete;
  if (discrete) {
    // RAVE's DiscreteScriptedRAVE: encode returns the residual quantiser's code indices (as
    // floats), decode sums the codes they name. The codebooks travel as one (Q, K, D) buffer;
    // the training statistics stay behind.
    const std::vector<torch::Tensor> embeds = take_codebooks(ledger, o.num_quantizers);
    top.register_buffer("codebooks", torch::stack(embeds, 0).contiguous());
    const std::string d = str(full), k_max = str(o.codebook_size - 1), q = str(o.num_quantizers);
    top.define(
        "def quantize_latent(self, z: Tensor) -> Tensor:\n"
        "    residual = z.permute(0, 2, 1)\n"
        "    codes: List[Tensor] = []\n"
        "    for i in range(" +
        q +
        "):\n"
        "        embed = self.codebooks[i]\n"
        "        flat = residual.reshape(-1, " +
        d +
        ")\n"
        "        e = embed.t()\n"
        "        dist = -(flat.pow(2).sum(1, keepdim=True) - 2.0 * torch.matmul(flat, e) + e.pow(2).sum(0, "
        "keepdim=True))\n"
        "        index = torch.max(dist, -1)[1].reshape(residual.size(0), residual.size(1))\n"
        "        residual = residual - torch.embedding(embed, index)\n"
        "        codes.append(index)\n"
        "    return torch.stack(codes, 1).to(z.dtype)\n");
    top.define(
        "def dequantize_latent(self, codes: Tensor) -> Tensor:\n"
        "    index = torch.clamp(codes, 0, " +
        k_max +
        ").long()\n"
        "    out = torch.zeros([codes.size(0), " +
        d +
        ", codes.size(2)], dtype=self.codebooks.dtype, "
        "device=codes.device)\n"
        "    for i in range(" +
        q +
        "):\n"
        "        out = out + torch.embedding(self.codebooks[i], index[:, i]).permute(0, 2, 1)\n"
        "    return out\n");
  }
  auto add_int = [&](const std::string& name, int64_t v) {
    top.register_attribute(name, c10::IntType::get(), v);
  };
  add_int("sr", s.sampling_rate);
  add_int("sampling_rate", s.sampling_rate);  // the name the RAVE VST reads
  add_int("n_channels", channels);
  add_int("latent_size", latent);
  add_int("full_latent_size", full);
  add_int("encode_latency", result.encode_latency);
  add_int("decode_latency", result.decode_latency);
  add_int("forward_latency", result.forward_latency());
  top.register_attribute("streaming", c10::BoolType::get(), s.streaming);
  register_nn_float_attribute(top, "noise_scale", s.noise_scale);

  auto batch_check = [&](const std::string& var) {
    return expect(var + ".size(0) <= " + str(kMaxBatch),
                  "streaming state holds " + str(kMaxBatch) + " batch slots");
  };
  if (kind == rave::EncoderKind::kSpherical) {
    // RAVE's unit_norm_vector_to_angles and angles_to_unit_norm_vector (rave/blocks.py): the
    // L-dimensional latent as L − 1 angles scaled to [−1, 1], and back to a unit vector. Where
    // RAVE divides 0 by 0 (a latent frame whose trailing components are all zero: digital
    // silence, an all-zero input) and takes the arccos of NaN, the angle is 0, the usual
    // convention of hyperspherical coordinates; a ratio rounded past ±1 is clamped. So the file
    // never outputs NaN, and its angles equal RAVE's wherever RAVE's are finite.
    const std::string pi = num(M_PI);
    top.define(
        "def latent_to_angles(self, x: Tensor) -> Tensor:\n"
        "    norms = x.flip([1]).pow(2)\n"
        "    norms = torch.cat([norms[:, 1:2] + norms[:, 0:1], norms[:, 2:]], 1)\n"
        "    norms = norms.cumsum(1).flip([1]).sqrt()\n"
        "    defined = norms > 0.0\n"
        "    ones = torch.ones_like(norms)\n"
        "    ratio = torch.where(defined, x[:, :-1] / torch.where(defined, norms, ones), ones)\n"
        "    angles = torch.arccos(ratio.clamp(-1.0, 1.0))\n"
        "    last = torch.where(x[:, -1:] >= 0, angles[:, -1:], 2.0 * " +
        pi +
        " - angles[:, -1:])\n"
        "    angles = torch.cat([angles[:, :-1] / " +
        pi + ", last / (2.0 * " + pi +
        ")], 1)\n"
        "    return 2.0 * (angles - 0.5)\n");
    top.define(
        "def angles_to_latent(self, angles: Tensor) -> Tensor:\n"
        "    a = torch.remainder(angles / 2.0 + 0.5, 1.0)\n"
        "    a = torch.cat([a[:, :-1] * " +
        pi + ", a[:, -1:] * (2.0 * " + pi +
        ")], 1)\n"
        "    cos = a.cos()\n"
        "    sin = a.sin().cumprod(1)\n"
        "    ones = torch.ones([a.size(0), 1, a.size(2)], dtype=a.dtype, device=a.device)\n"
        "    return torch.cat([cos, ones], 1) * torch.cat([ones, sin], 1)\n");
  }
  // encode's first lines, whatever the latent: the input check and the encoder's statistics.
  auto encode_stats = [&](MethodWriter& w) {
    w.line(expect("x.dim() == 3 and x.size(1) == " + str(channels),
                  "encode expects (batch, " + str(channels) + " channels, time)"));
    if (s.streaming) w.line(batch_check("x"));
    w.line(mel ? "stats = self.encoder.forward(self.mel_features(x))"
               : "stats = self.encoder.forward(self.pqmf.forward(x))");
  };
  if (!variational) {
    // No PCA for these encoders: the buffers ride along unused, as in RAVE's scripted module.
    MethodWriter w(ctx, top);
    encode_stats(w);
    w.define("encode", "x: Tensor", "Tensor",
             kind == rave::EncoderKind::kSpherical ? "self.latent_to_angles(stats)"
             : discrete                            ? "self.quantize_latent(stats)"
                                                   : "stats");
  }
  if (!variational) {
    MethodWriter w(ctx, top);
    w.line(expect("z.dim() == 3 and z.size(1) == " + str(latent),
                  "decode expects (batch, " + str(latent) + " latent dimensions, time)"));
    if (s.streaming) w.line(batch_check("z"));
    w.line("noise_scale = self.noise_scale[0]");
    if (kind == rave::EncoderKind::kSpherical) w.line("z = self.angles_to_latent(z)");
    if (discrete) w.line("z = self.dequantize_latent(z)");
    if (o.noise_augmentation > 0) {
      // Wasserstein/DiscreteScriptedRAVE.pre_process_latent: standard normal channels for the decoder.
      w.line("fill = torch.zeros([z.size(0), " + str(o.noise_augmentation) +
             ", z.size(2)], dtype=z.dtype, device=z.device)\nif noise_scale != 0.0:\n    fill = "
             "torch.randn_like(fill) * noise_scale\nz = torch.cat([z, fill], 1)");
    }
    w.define("decode", "z: Tensor", "Tensor", synthesize);
  }
  if (variational) {
    MethodWriter w(ctx, top);
    encode_stats(w);
    w.line("halves = stats.chunk(2, 1)");
    w.line("z = halves[0]");
    w.line("noise_scale = self.noise_scale[0]");
    // As VariationalEncoderImpl::reparametrize: z = ε·(softplus(scale) + 1e-4) + mean. randn_like
    // fills in memory order, so it draws for a contiguous z as the model does (the matrix-product
    // convolutions leave their output transposed in memory).
    w.line(
        "if noise_scale != 0.0:\n    z = torch.randn_like(z.contiguous()) * (torch.softplus(halves[1], 1.0, "
        "20.0) + " +
        num(1e-4) + ") * noise_scale + z");
    w.line("z = torch.matmul(self.latent_pca, z - self.latent_mean.unsqueeze(-1))");
    w.define("encode", "x: Tensor", "Tensor", "z[:, :self.latent_size]");
  }
  if (variational) {
    MethodWriter w(ctx, top);
    w.line(expect("z.dim() == 3 and z.size(1) <= " + str(full),
                  "decode expects (batch, at most " + str(full) + " latent dimensions, time)"));
    if (s.streaming) w.line(batch_check("z"));
    w.line("noise_scale = self.noise_scale[0]");
    // RAVE pre_process_latent: the cropped dimensions are drawn from a unit Gaussian.
    w.line("if z.size(1) < " + str(full) + ":\n    fill = torch.zeros([z.size(0), " + str(full) +
           " - z.size(1), z.size(2)], dtype=z.dtype, device=z.device)\n    if noise_scale != 0.0:\n        "
           "fill = "
           "torch.randn_like(fill) * noise_scale\n    z = torch.cat([z, fill], 1)");
    w.line("z = torch.matmul(self.latent_pca.t(), z) + self.latent_mean.unsqueeze(-1)");
    w.define("decode", "z: Tensor", "Tensor", synthesize);
  }
  top.define("def forward(self, x: Tensor) -> Tensor:\n    return self.decode(self.encode(x))\n");

  register_nn_method(top,
                     {"encode", channels, 1, latent, ratio, "(signal) Channel", "(signal) Latent dimension"});
  register_nn_method(top,
                     {"decode", latent, ratio, channels, 1, "(signal) Latent dimension", "(signal) Channel"});
  register_nn_method(top, {"forward", channels, 1, channels, 1, "(signal) Channel", "(signal) Channel"});
  register_nn_lists(top, {"encode", "decode", "forward"}, {"noise_scale"});

  ledger.finish();
  result.dropped = ledger.dropped();
  result.int8_layers = ctx.int8_layers;
  result.int8_weights = ctx.int8_weights;
  for (const auto& p : top.parameters(/*recurse=*/true)) result.float_weights += p.numel();
  if (info != nullptr) *info = result;
  return top;
}

}  // namespace rt::exporting
