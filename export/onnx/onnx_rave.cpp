#include "export/onnx/onnx_rave.h"

#include "export/graph/describe.h"
#include "export/onnx/latent_nodes.h"
#include "export/onnx/section_writer.h"
#include "util/error.h"

namespace rt::exporting::onnx {
namespace {

// ONNX's own limits, then the TorchScript export's (export/graph/export_options.h check_exportable).
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
  if (o.gru_layers > 0) {
    throw Error(
        "export --format onnx: the generator's GRU (model.gru_layers) is not exported to ONNX; export it "
        "as TorchScript (the default format)");
  }
  ScriptOptions script;
  script.streaming = s.streaming;
  script.latent_size = s.latent_size;
  exporting::check_exportable(o, script);
}

// The latent as encode returns it, from the graph's audio input.
std::string write_encode(SectionWriter& e, const graph::Rave& d) {
  const std::string stats = e.write(d.encoder, e.write(d.analysis, "audio_in"));
  const graph::Latent& l = d.latent;
  if (l.kind == rave::EncoderKind::kSpherical) return latent_to_angles(e, stats, l.full);
  if (l.kind == rave::EncoderKind::kDiscrete) return quantize_latent(e, l.codebooks, stats);
  if (l.kind != rave::EncoderKind::kVariational) return stats;  // wasserstein: the whole latent
  // VariationalEncoderImpl::reparametrize, then the PCA rotation and the crop, as the TorchScript encode.
  auto& g = e.graph();
  const std::string mean = g.slice(stats, 1, 0, l.full), scale = g.slice(stats, 1, l.full, 2 * l.full);
  const std::string std_dev = g.node("Add", {g.node("Softplus", {scale}), g.scalar("min_std", 1e-4)});
  const std::string z =
      g.node("Add", {g.node("Mul", {e.gaussian_like(mean), std_dev}), mean}, {}, "posterior_sample");
  const std::string centred = g.node("Sub", {z, g.initializer("latent_mean", l.mean.reshape({-1, 1}))});
  const std::string rotated = g.node("MatMul", {g.initializer("latent_pca", l.pca), centred});
  return l.exported < l.full ? g.slice(rotated, 1, 0, l.exported) : rotated;
}

// The audio decode makes from the latent value `z_in` (latent channels).
std::string write_decode(SectionWriter& e, const graph::Rave& d, const std::string& z_in) {
  auto& g = e.graph();
  const graph::Latent& l = d.latent;
  std::string z = z_in;
  if (l.kind == rave::EncoderKind::kVariational) {
    if (l.exported < l.full) {
      // RAVE pre_process_latent: the cropped dimensions are drawn from a unit Gaussian.
      z = g.concat({z, e.gaussian_like(e.zeros_like_channels(z, l.full - l.exported))}, 1);
    }
    z = g.node("Add", {g.node("MatMul", {g.initializer("latent_pca_t", l.pca.t().contiguous()), z}),
                       g.initializer("latent_mean", l.mean.reshape({-1, 1}))});
  }
  if (l.kind == rave::EncoderKind::kSpherical) z = angles_to_latent(e, z, l.full);
  if (l.kind == rave::EncoderKind::kDiscrete) z = dequantize_latent(e, l, z);
  if (l.noise_augmentation > 0) {
    // Wasserstein/Discrete pre_process_latent: standard normal channels for the decoder.
    z = g.concat({z, e.gaussian_like(e.zeros_like_channels(z_in, l.noise_augmentation))}, 1);
  }
  const std::string bands = e.write(d.decoder, z);
  return d.synthesis ? e.write(*d.synthesis, bands) : bands;
}

// What one graph holds: the encoder half, the decoder half, or both.
struct Halves {
  bool encode = false, decode = false;
};

void build(Graph& g, std::vector<StateSpec>& states, const graph::Rave& d, const RaveGraphOptions& s,
           Halves halves, RaveGraphs& r) {
  const int64_t latent = d.latent.exported;
  if (halves.encode) {
    g.input(ValueSpec{"audio_in",
                      {"batch", d.channels, "time"},
                      false,
                      "audio, (batch, channels, samples); samples a multiple of the ratio"});
  } else {
    g.input(
        ValueSpec{"latent_in", {"batch", latent, "frames"}, false, "latent, (batch, dimensions, frames)"});
  }
  const std::string noise_scale =
      g.input_with_default(ValueSpec{"noise_scale", {}, false, "scales every random draw; 0: deterministic"},
                           torch::tensor(static_cast<float>(s.noise_scale)));
  SectionWriter e(g, s.streaming, states, noise_scale, s.int8_min_weights);
  std::string value = "latent_in";
  if (halves.encode) {
    value = write_encode(e, d);
    if (!halves.decode)
      g.output(
          value,
          ValueSpec{"latent_out", {"batch", latent, "frames"}, false, "latent, (batch, dimensions, frames)"});
  }
  if (halves.decode) {
    value = write_decode(e, d, value);
    g.output(
        value,
        ValueSpec{"audio_out", {"batch", d.channels, "time"}, false, "audio, (batch, channels, samples)"});
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
  const graph::Rave d = graph::describe_rave(model, {s.streaming, s.latent_size, 0});
  RaveGraphs r;
  r.channels = d.channels;
  r.ratio = d.ratio;
  r.full_latent_size = d.latent.full;
  r.latent_size = d.latent.exported;
  r.encode_latency = d.encode_latency;
  r.decode_latency = d.decode_latency;
  r.dropped = d.dropped;
  std::vector<StateSpec> forward_states;
  build(r.encode, r.encode_states, d, s, {true, false}, r);
  build(r.decode, r.decode_states, d, s, {false, true}, r);
  build(r.forward, forward_states, d, s, {true, true}, r);
  return r;
}

}  // namespace rt::exporting::onnx
