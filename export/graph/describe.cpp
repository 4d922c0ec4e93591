#include "export/graph/describe.h"

#include "export/graph/section_builder.h"
#include "util/error.h"

namespace rt::exporting::graph {
namespace {

using Kind = rave::EncoderKind;

// The discrete encoder's codebooks [K, D], one per quantizer, from the ledger: its `enabled` flag
// taken, the EMA statistics dropped. Throws rt::Error when a codebook was never initialised.
std::vector<torch::Tensor> take_codebooks(TensorLedger& ledger, int64_t quantizers) {
  ledger.take("encoder.enabled");
  std::vector<torch::Tensor> embeds;
  for (int64_t i = 0; i < quantizers; ++i) {
    const std::string layer = "encoder.rvq.layers." + std::to_string(i) + "._codebook.";
    if (ledger.take(layer + "inited").item<double>() == 0.0) {
      throw Error(
          "the discrete encoder's codebook " + std::to_string(i) +
          " was never initialised (its k-means runs at the first training step from train.warmup_quantize "
          "on): export a checkpoint trained past train.warmup_quantize");
    }
    for (const char* stat : {"cluster_size", "embed_avg"})
      ledger.drop_prefix(layer + stat, "the codebooks' training statistics (EMA counts and sums)");
    embeds.push_back(ledger.take(layer + "embed"));
  }
  return embeds;
}

// Bands → raw posterior statistics (B, 2L, T/ratio): the network of the variational encoder.
int encoder(SectionBuilder& b, rave::VariationalEncoderImpl& encoder) {
  if (encoder.kind != Kind::kSpherical) b.ledger().take("encoder.warmed_up");  // the phase flag
  if (auto* v2 = dynamic_cast<rave::EncoderV2Impl*>(encoder.encoder.get()))
    return b.module(0, *v2->net, "encoder.encoder.net");
  if (auto* v1 = dynamic_cast<rave::EncoderV1Impl*>(encoder.encoder.get()))
    return b.module(0, *v1->net, "encoder.encoder.net");
  throw Error("export: unknown RAVE encoder type");
}

// GeneratorV2: its network, the noise synthesis beside the waveform layer, the amplitude
// modulation, tanh.
int generator_v2(SectionBuilder& b, rave::GeneratorV2Impl& g) {
  int x = b.module(0, *g.net, "decoder.net");
  int noise = -1;
  if (g.noise_module) {
    noise = b.noise(x, *g.noise_module, "decoder.noise_module");
    x = b.conv(x, *g.waveform_module, "decoder.waveform_module");
    const auto aligned = b.aligned({x, noise}, "decoder.noise_module");
    x = aligned[0];
    noise = aligned[1];
  }
  if (g.amplitude_modulation) x = b.gate(Gate::Kind::kAmplitude, {x});
  if (noise >= 0) x = b.add(x, noise);
  return b.activation(x, Activation{Activation::Kind::kTanh, 0.0, "", {}});
}

// The v1 Generator: tanh(waveform) · mod_sigmoid(loudness), plus the noise branch once warm.
int generator_v1(SectionBuilder& b, rave::GeneratorV1Impl& g) {
  const int x = b.module(0, *g.net, "decoder.net");
  b.ledger().take("decoder.warmed_up");  // the phase flag; g.warm_ mirrors it
  const std::string branches = "decoder.synth.branches.";
  std::vector<int> outs{b.module(x, *g.synth->branches->ptr(0), branches + "0"),
                        b.module(x, *g.synth->branches->ptr(1), branches + "1")};
  const bool noise = g.use_noise && g.warm_;
  if (noise) {
    auto* gen = dynamic_cast<rave::NoiseGeneratorImpl*>(g.synth->branches->ptr(2).get());
    if (gen == nullptr) throw Error("export: '" + branches + "2' is not a noise generator");
    outs.push_back(b.noise(x, *gen, branches + "2"));
  } else if (g.use_noise) {
    b.ledger().drop_prefix(branches + "2.", "v1 noise synthesis, off until phase 2 (decoder.warmed_up = 0)");
  }
  outs = b.aligned(std::move(outs), "decoder.synth");
  const int y = b.gate(Gate::Kind::kTanhTimesModSigmoid, {outs[0], outs[1]});
  return noise ? b.add(y, outs[2]) : y;
}

int decoder(SectionBuilder& b, rave::DecoderBase& decoder) {
  if (auto* v2 = dynamic_cast<rave::GeneratorV2Impl*>(&decoder)) return generator_v2(b, *v2);
  if (auto* v1 = dynamic_cast<rave::GeneratorV1Impl*>(&decoder)) return generator_v1(b, *v1);
  throw Error("export: unknown RAVE decoder type");
}

// The four sections, each from the one before.
void describe_sections(rave::RaveModelImpl& model, TensorLedger& ledger, rave::ResamplerImpl* resampler,
                       Rave& r) {
  const auto& o = model.options();
  {
    SectionBuilder b(r.analysis, ledger, r.streaming, Flow{o.channels, 1, 1, 0});
    const int x = resampler != nullptr ? b.resample(0, *resampler, /*up=*/false) : 0;
    b.finish(b.pqmf(x, *model.pqmf, o.padding, /*synthesis=*/false));
  }
  // The mel front end (log1p mel features, n_mels per channel, one frame per mel_hop) replaces
  // the bands as the encoder's input.
  const bool mel = o.input_mode == rave::InputMode::kMel;
  {
    SectionBuilder b(r.encoder, ledger, r.streaming,
                     mel ? Flow{o.n_mels * o.channels, o.mel_hop, 1, 0} : r.analysis.out());
    b.finish(encoder(b, *model.encoder));
  }
  {
    SectionBuilder b(r.decoder, ledger, r.streaming,
                     Flow{o.latent_size + o.noise_augmentation, r.ratio, 1, 0});
    b.finish(decoder(b, *model.decoder));
  }
  // A raw decoder (model.output_mode = raw) makes the audio itself: no synthesis bank.
  if (o.output_mode == rave::OutputMode::kRaw) {
    ledger.drop_prefix("pqmf.inverse_conv", "the PQMF synthesis bank (model.output_mode = raw)");
  } else {
    r.synthesis.emplace();
    SectionBuilder b(*r.synthesis, ledger, r.streaming, r.decoder.out());
    b.finish(b.pqmf(0, *model.pqmf, o.padding, /*synthesis=*/true));
  }
  if (resampler != nullptr) {
    r.upsampling.emplace();
    SectionBuilder b(*r.upsampling, ledger, r.streaming, r.synthesis ? r.synthesis->out() : r.decoder.out());
    b.finish(b.resample(0, *resampler, /*up=*/true));
  }
}

// The shapes the model promises, and the latencies: strided convolutions count the delay their
// input carries, so the encoder's delay is whole latent frames.
void check_shapes(const rave::RaveOptions& o, Rave& r) {
  const Flow& stats = r.encoder.out();
  const Flow& out = r.upsampling ? r.upsampling->out() : r.synthesis ? r.synthesis->out() : r.decoder.out();
  const bool variational = o.encoder == Kind::kVariational;
  if (stats.hop != r.ratio || stats.channels != (variational ? 2 : 1) * o.latent_size || out.hop != 1 ||
      out.channels != o.channels) {
    throw Error("export: internal error: the described model does not have the model's shapes");
  }
  if (r.streaming && stats.delay % r.ratio != 0) {
    throw Error("export: internal error: the streaming encoder's delay " + std::to_string(stats.delay) +
                " is not whole frames of " + std::to_string(r.ratio));
  }
  r.encode_latency = r.streaming ? stats.delay : 0;
  r.decode_latency = r.streaming ? out.delay : 0;
}

// A rational --sr: the converters, the queues' priming and forward's latency (graph.h
// RationalRate), and forward as the only nn~ method.
void describe_rational(Rave& r) {
  RationalRate q;
  q.down = rave::design_rational_resampling(r.host_rate, r.model_rate, "--sr " + std::to_string(r.host_rate));
  q.up = rave::design_rational_resampling(r.model_rate, r.host_rate, "--sr " + std::to_string(r.host_rate));
  if (r.streaming) {
    // The model's latency (model samples) made whole cycles of the up converter.
    const int64_t model_latency = r.encode_latency + r.decode_latency, per_cycle = q.up.down;
    q.model_delay = (per_cycle - model_latency % per_cycle) % per_cycle;
    // After n host samples in, the down converter has given at least (n − its lookahead) · model /
    // host samples, the model all but ratio − 1 of them plus its priming, the up converter all but
    // its lookahead of those, at host / model: the output queue never runs dry when primed with
    // the host samples that leaves short.
    const int64_t short_by = r.ratio - 1 + q.up.lookahead() - q.model_delay;  // model samples
    q.host_delay =
        q.down.lookahead() + std::max<int64_t>(0, (short_by * r.host_rate + r.model_rate - 1) / r.model_rate);
    q.latency = q.host_delay + (model_latency + q.model_delay) / per_cycle * q.up.up;
  }
  r.rational = std::move(q);
  const int64_t c = r.channels;
  r.methods = {{"forward", c, 1, r.output_channels, 1, "(signal) Channel", "(signal) Channel"}};
}

void describe_latent(rave::RaveModelImpl& model, TensorLedger& ledger, int64_t latent_size, Rave& r) {
  const auto& o = model.options();
  Latent& l = r.latent;
  l.kind = o.encoder;
  l.full = o.latent_size;
  l.exported = exported_latent_size(o, latent_size);
  l.noise_augmentation = o.noise_augmentation;
  // No PCA for the other kinds: the buffers ride along unused, as in RAVE's scripted modules.
  l.pca = ledger.take("latent_pca");
  l.mean = ledger.take("latent_mean");
  l.fidelity = ledger.take("fidelity");
  if (o.input_mode == rave::InputMode::kMel) {
    r.mel = Mel{ledger.take("spectrogram.spectrogram.window"), ledger.take("spectrogram.mel_scale.fb"),
                o.mel_n_fft, o.mel_hop, o.n_mels};
  }
  if (o.encoder == Kind::kDiscrete) {
    l.codebooks = take_codebooks(ledger, o.num_quantizers);
    l.codebook_size = o.codebook_size;
  }
  const int64_t c = o.channels, out = r.output_channels, z = l.exported;
  r.methods = {{"encode", c, 1, z, r.ratio, "(signal) Channel", "(signal) Latent dimension"},
               {"decode", z, r.ratio, out, 1, "(signal) Latent dimension", "(signal) Channel"},
               {"forward", c, 1, out, 1, "(signal) Channel", "(signal) Channel"}};
}

}  // namespace

void check_output_channels(int64_t channels) {
  if (channels < 1 || channels > kMaxExportChannels) {
    throw Error("--channels " + std::to_string(channels) +
                " is not accepted: decode's and forward's output channels, 1 to " +
                std::to_string(kMaxExportChannels) + " (omit the flag for the model's own)");
  }
}

int64_t decoded_copies(int64_t channels, int64_t output_channels) {
  return output_channels > channels ? (output_channels + channels - 1) / channels : 1;
}

Rave describe_rave(rave::RaveModelImpl& model, const DescribeOptions& d) {
  const auto& o = model.options();
  ScriptOptions s;
  s.streaming = d.streaming;
  s.latent_size = d.latent_size;
  check_exportable(o, s);
  torch::NoGradGuard no_grad;
  Rave r;
  r.streaming = d.streaming;
  r.channels = o.channels;
  r.ratio = o.compression();
  r.model_rate = o.sampling_rate;
  r.host_rate = d.host_rate > 0 ? d.host_rate : o.sampling_rate;
  std::optional<rave::Resampler> resampler;
  if (r.host_rate != r.model_rate) {
    if (o.input_mode == rave::InputMode::kMel) {
      throw Error("--sr: a model with a mel front end (model.input_mode = mel) is exported at its own rate");
    }
    if (rave::integer_resampling(r.host_rate, r.model_rate, d.streaming)) {
      resampler.emplace(r.host_rate, r.model_rate, d.streaming);
      r.ratio *= (*resampler)->ratio;
    }
  }
  if (d.channels != 0) check_output_channels(d.channels);
  r.output_channels = d.channels > 0 ? d.channels : o.channels;
  TensorLedger ledger(model_tensors(model));
  ledger.drop_prefix("discriminator.", "the discriminator (training only)");
  ledger.drop_prefix("receptive_field", "RAVE's receptive-field record (not used by inference)");
  describe_sections(model, ledger, resampler ? resampler->get() : nullptr, r);
  check_shapes(o, r);
  describe_latent(model, ledger, d.latent_size, r);
  if (r.host_rate != r.model_rate && !resampler) describe_rational(r);
  ledger.finish();
  r.dropped = ledger.dropped();
  return r;
}

}  // namespace rt::exporting::graph
