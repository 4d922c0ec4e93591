#include "export/torchscript/rave_script.h"

#include "export/graph/describe.h"
#include "export/torchscript/latent_methods.h"
#include "export/torchscript/nn_tilde.h"
#include "export/torchscript/prior_method.h"
#include "export/torchscript/rational_rate.h"
#include "export/torchscript/section_writer.h"
#include "util/error.h"

namespace rt::exporting {
namespace {

// An input check that reads well in nn~'s console and in Python.
std::string expect(const std::string& condition, const std::string& message) {
  return "assert " + condition + ", \"" + message + "\"";
}

// The submodules (pqmf, encoder, decoder), each a section of the description, written in the
// order their class types are made: PQMF, Encoder, Decoder.
struct Parts {
  torch::jit::Module pqmf, encoder, decoder;
};

Parts write_parts(ScriptContext& ctx, const graph::Rave& r) {
  Parts p{ctx.new_module("PQMF"), ctx.new_module("Encoder"), ctx.new_module("Decoder")};
  {
    MethodWriter w(ctx, p.pqmf);
    w.define("forward", "x: Tensor", "Tensor", write_section(w, r.analysis, "x"));
  }
  {
    MethodWriter w(ctx, p.encoder);
    w.define("forward", "x: Tensor", "Tensor", write_section(w, r.encoder, "x"));
  }
  {
    MethodWriter w(ctx, p.decoder);
    w.define("forward", "z: Tensor, noise_scale: float", "Tensor",
             write_section(w, r.decoder, "z", "noise_scale"));
  }
  if (r.synthesis) {
    MethodWriter w(ctx, p.pqmf);
    w.define("inverse", "x: Tensor", "Tensor", write_section(w, *r.synthesis, "x"));
  }
  return p;
}

void register_attributes(torch::jit::Module& top, const graph::Rave& r, const ScriptOptions& s) {
  auto add_int = [&](const std::string& name, int64_t v) {
    top.register_attribute(name, c10::IntType::get(), v);
  };
  // export --sr: the host's rate, the file resampling to the model's own and back inside.
  const bool resampled = r.host_rate != r.model_rate;
  add_int("sr", resampled ? r.host_rate : s.sampling_rate);
  add_int("sampling_rate", resampled ? r.host_rate : s.sampling_rate);  // the name the RAVE VST reads
  if (resampled) {
    add_int("model_sampling_rate", r.model_rate);
    // nn_tilde's Python Module API (python_tools/module.py): the rate the file runs at. No
    // set_sample_rate: the rate is fixed at export, and nn~ 1.6's Backend::load would not call it
    // (it checks has_method before marking the model loaded; reload passes an unset rate).
    top.define("def get_sample_rate(self) -> int:\n    return self.sr\n");
  }
  add_int("n_channels", r.channels);
  add_int("latent_size", r.latent.exported);
  add_int("full_latent_size", r.latent.full);
  add_int("encode_latency", r.encode_latency);
  add_int("decode_latency", r.decode_latency);
  add_int("forward_latency", r.forward_latency());
  top.register_attribute("streaming", c10::BoolType::get(), r.streaming);
  // RAVE's ScriptedRAVE attribute, where export --channels changed the output.
  if (r.output_channels != r.channels) add_int("target_channels", r.output_channels);
  register_nn_float_attribute(top, "noise_scale", s.noise_scale);
}

std::string batch_check(const std::string& var, int64_t copies = 1) {
  if (copies > 1) {
    return expect(var + ".size(0) * " + str(copies) + " <= " + str(kMaxBatch),
                  "streaming state holds " + str(kMaxBatch) + " batch slots, " + str(copies) +
                      " per stream with " + str(copies) + " decoded copies");
  }
  return expect(var + ".size(0) <= " + str(kMaxBatch),
                "streaming state holds " + str(kMaxBatch) + " batch slots");
}

int64_t copies_of(const graph::Rave& r) { return graph::decoded_copies(r.channels, r.output_channels); }

// decode's result for export --channels: `k` copies of the latent were decoded over the batch
// (copy-major); their channels are stacked per stream and cut to the channels asked for.
std::string output_channels(MethodWriter& w, const graph::Rave& r, const std::string& y) {
  if (r.output_channels == r.channels) return y;
  if (r.output_channels < r.channels) return y + "[:, :" + str(r.output_channels) + "]";
  const int64_t k = copies_of(r);
  w.line("y = " + y);
  w.line("y = y.reshape(" + str(k) + ", b, " + str(r.channels) +
         ", y.size(-1)).permute(1, 0, 2, 3).reshape(b, " + str(k * r.channels) + ", y.size(-1))");
  return k * r.channels == r.output_channels ? "y" : "y[:, :" + str(r.output_channels) + "]";
}

// decode's first lines for export --channels: the latent repeated over the batch, one copy per
// `k`, before its random fill, so that each copy draws its own.
void repeat_latent(MethodWriter& w, const graph::Rave& r) {
  const int64_t k = copies_of(r);
  if (k == 1) return;
  w.line("b = z.size(0)");
  w.line("z = z.repeat(" + str(k) + ", 1, 1)");
}

// The names of encode and decode: nn~'s methods, or with a rational --sr forward's model-rate stages.
std::string encode_name(const graph::Rave& r) { return r.rational ? "encode_at_model_rate" : "encode"; }
std::string decode_name(const graph::Rave& r) { return r.rational ? "decode_at_model_rate" : "decode"; }

// encode: the input check, the encoder's statistics, then the latent as its kind is exported.
void write_encode(ScriptContext& ctx, torch::jit::Module& top, const graph::Rave& r) {
  const auto kind = r.latent.kind;
  MethodWriter w(ctx, top);
  w.line(expect("x.dim() == 3 and x.size(1) == " + str(r.channels),
                "encode expects (batch, " + str(r.channels) + " channels, time)"));
  if (r.streaming) w.line(batch_check("x"));
  w.line(r.mel ? "stats = self.encoder.forward(self.mel_features(x))"
               : "stats = self.encoder.forward(self.pqmf.forward(x))");
  if (kind != rave::EncoderKind::kVariational) {
    // No PCA for these encoders: the buffers ride along unused, as in RAVE's scripted module.
    w.define(encode_name(r), "x: Tensor", "Tensor",
             kind == rave::EncoderKind::kSpherical  ? "self.latent_to_angles(stats)"
             : kind == rave::EncoderKind::kDiscrete ? "self.quantize_latent(stats)"
                                                    : "stats");
    return;
  }
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
  w.define(encode_name(r), "x: Tensor", "Tensor", "z[:, :self.latent_size]");
}

// decode: the input check, the latent back to the decoder's input, the decoder, the synthesis.
void write_decode(ScriptContext& ctx, torch::jit::Module& top, const graph::Rave& r) {
  const auto& l = r.latent;
  std::string synthesize = r.synthesis ? "self.pqmf.inverse(self.decoder.forward(z, noise_scale))"
                                       : "self.decoder.forward(z, noise_scale)";
  if (r.upsampling) {
    // export --sr: back to the host's rate (RAVE's Resampler.from_model_sampling_rate).
    MethodWriter up(ctx, top);
    up.define("from_model_rate", "x: Tensor", "Tensor", write_section(up, *r.upsampling, "x"));
    synthesize = "self.from_model_rate(" + synthesize + ")";
  }
  MethodWriter w(ctx, top);
  if (l.kind != rave::EncoderKind::kVariational) {
    w.line(expect("z.dim() == 3 and z.size(1) == " + str(l.exported),
                  "decode expects (batch, " + str(l.exported) + " latent dimensions, time)"));
    if (r.streaming) w.line(batch_check("z", copies_of(r)));
    repeat_latent(w, r);
    w.line("noise_scale = self.noise_scale[0]");
    if (l.kind == rave::EncoderKind::kSpherical) w.line("z = self.angles_to_latent(z)");
    if (l.kind == rave::EncoderKind::kDiscrete) w.line("z = self.dequantize_latent(z)");
    if (l.noise_augmentation > 0) {
      // Wasserstein/DiscreteScriptedRAVE.pre_process_latent: standard normal channels for the decoder.
      w.line("fill = torch.zeros([z.size(0), " + str(l.noise_augmentation) +
             ", z.size(2)], dtype=z.dtype, device=z.device)\nif noise_scale != 0.0:\n    fill = "
             "torch.randn_like(fill) * noise_scale\nz = torch.cat([z, fill], 1)");
    }
    w.define(decode_name(r), "z: Tensor", "Tensor", output_channels(w, r, synthesize));
    return;
  }
  const std::string full = str(l.full);
  w.line(expect("z.dim() == 3 and z.size(1) <= " + full,
                "decode expects (batch, at most " + full + " latent dimensions, time)"));
  if (r.streaming) w.line(batch_check("z", copies_of(r)));
  repeat_latent(w, r);
  w.line("noise_scale = self.noise_scale[0]");
  // RAVE pre_process_latent: the cropped dimensions are drawn from a unit Gaussian.
  w.line("if z.size(1) < " + full + ":\n    fill = torch.zeros([z.size(0), " + full +
         " - z.size(1), z.size(2)], dtype=z.dtype, device=z.device)\n    if noise_scale != 0.0:\n        "
         "fill = "
         "torch.randn_like(fill) * noise_scale\n    z = torch.cat([z, fill], 1)");
  w.line("z = torch.matmul(self.latent_pca.t(), z) + self.latent_mean.unsqueeze(-1)");
  w.define(decode_name(r), "z: Tensor", "Tensor", output_channels(w, r, synthesize));
}

}  // namespace

torch::jit::Module script_description(const graph::Rave& r, const ScriptOptions& s, ScriptInfo* info) {
  if (r.streaming && copies_of(r) > kMaxBatch) {
    throw Error("--channels " + str(r.output_channels) + " with --streaming: each stream decodes " +
                str(copies_of(r)) + " copies of the latent, and the streaming state holds " + str(kMaxBatch) +
                " batch slots; at most " + str(kMaxBatch * r.channels) + " channels stream");
  }
  ScriptContext ctx(r.streaming, s.quantize == Quantize::kInt8 ? s.int8_min_weights : -1);
  Parts parts = write_parts(ctx, r);
  auto top = ctx.new_module("ScriptedRAVE");
  top.register_module("pqmf", parts.pqmf);
  top.register_module("encoder", parts.encoder);
  top.register_module("decoder", parts.decoder);
  top.register_buffer("latent_pca", r.latent.pca);
  top.register_buffer("latent_mean", r.latent.mean);
  top.register_buffer("fidelity", r.latent.fidelity);
  if (r.mel) define_mel_features(top, *r.mel);
  if (r.latent.kind == rave::EncoderKind::kDiscrete) define_codebook_methods(top, r.latent);
  register_attributes(top, r, s);
  if (r.latent.kind == rave::EncoderKind::kSpherical) define_angle_methods(top);
  write_encode(ctx, top, r);
  write_decode(ctx, top, r);
  if (r.prior) define_prior_method(ctx, top, *r.prior);
  if (r.rational) {
    std::string checks = "    " +
                         expect("x.dim() == 3 and x.size(1) == " + str(r.channels),
                                "forward expects (batch, " + str(r.channels) + " channels, time)") +
                         "\n";
    if (r.streaming) checks += "    " + batch_check("x", copies_of(r)) + "\n";
    define_rational_forward(top, r, checks);
  } else {
    top.define("def forward(self, x: Tensor) -> Tensor:\n    return self.decode(self.encode(x))\n");
  }
  std::vector<std::string> names;
  for (const auto& m : r.methods) {
    register_nn_method(top, m);
    names.push_back(m.name);
  }
  register_nn_lists(top, names, {"noise_scale"});
  if (info != nullptr) {
    info->ratio = r.ratio;
    info->encode_latency = r.encode_latency;
    info->decode_latency = r.decode_latency;
    info->rational_latency = r.rational ? r.rational->latency : -1;
    info->rational_model_delay = r.rational ? r.rational->model_delay : 0;
    info->rational_host_delay = r.rational ? r.rational->host_delay : 0;
    info->dropped = r.dropped;
    info->int8_layers = ctx.int8_layers;
    info->int8_weights = ctx.int8_weights;
    info->float_weights = 0;
    for (const auto& p : top.parameters(/*recurse=*/true)) info->float_weights += p.numel();
  }
  return top;
}

torch::jit::Module script_rave(rave::RaveModelImpl& model, const ScriptOptions& s, ScriptInfo* info) {
  graph::Rave r = graph::describe_rave(model, {s.streaming, s.latent_size, s.channels, s.host_rate});
  if (s.prior != nullptr) graph::add_prior(r, *s.prior);
  return script_description(r, s, info);
}

}  // namespace rt::exporting
