// Shared fixtures of the export tests: tiny RAVE models of every version and channel count,
// with every tensor the export must carry made distinctive (random PCA, Snake slopes,
// BatchNorm statistics), and loading a module the way nn~ does (from a saved file).
#pragma once

#include <gtest/gtest.h>
#include <torch/script.h>

#include <filesystem>
#include <string>
#include <vector>

#include "export/torchscript/rave_script.h"
#include "models/rave/latent_pca.h"
#include "models/rave/rave.h"
#include "support/test_support.h"

namespace rt::exporting::testing {

struct Variant {
  std::string name;  // for messages
  rave::RaveVersion version = rave::RaveVersion::kV2;
  int64_t channels = 1;
  int64_t noise_bands = 0;  // v2: NoiseGeneratorV2; v1: on (phase 2 only)
  bool warm = false;        // phase 2 (v1: noise synthesis on)
  bool causal = false;      // model.padding = causal (causal.toml)
  bool raw = false;         // model.output_mode = raw (v2_nopqmf.toml): the generator makes the audio
};

inline std::vector<Variant> all_variants() {
  return {
      {"v1 mono", rave::RaveVersion::kV1, 1, 0, false}, {"v1 stereo", rave::RaveVersion::kV1, 2, 0, false},
      {"v2 mono", rave::RaveVersion::kV2, 1, 0, false}, {"v2 stereo", rave::RaveVersion::kV2, 2, 0, false},
      {"v3 mono", rave::RaveVersion::kV3, 1, 0, false}, {"v3 stereo", rave::RaveVersion::kV3, 2, 0, false}};
}

// How gtest prints a Variant (test listings, failures): its name.
inline void PrintTo(const Variant& v, std::ostream* os) { *os << v.name; }

// A gtest parameter name made of the variant's name.
inline std::string variant_name(const ::testing::TestParamInfo<Variant>& info) {
  std::string n = info.param.name;
  for (auto& ch : n) {
    if (!std::isalnum(static_cast<unsigned char>(ch))) ch = '_';
  }
  return n;
}

// Small enough for the suite to stay fast: capacity 4, latent 6, 16 bands, ratios 2·2 (64
// samples per latent frame).
inline rave::RaveOptions tiny_options(const Variant& v) {
  auto o = rave::RaveOptions::preset(v.version);
  o.channels = v.channels;
  o.capacity = 4;
  o.latent_size = 6;
  o.ratios = {2, 2};
  // v1: the residual layers' dilation lists; v2/v3: one list per ratio.
  o.dilations = v.version == rave::RaveVersion::kV1 ? std::vector<std::vector<int64_t>>{{1, 1}, {3, 1}}
                                                    : std::vector<std::vector<int64_t>>{{1, 3}, {1}};
  o.noise_bands = v.version == rave::RaveVersion::kV1 ? 3 : v.noise_bands;
  o.noise_ratios = {2, 2};
  o.discriminator = rave::DiscriminatorKind::kNone;
  if (v.causal) o.padding = models::PaddingMode::kCausal;
  if (v.raw) {
    o.output_mode = rave::OutputMode::kRaw;
    o.decoder_ratios = {8, 8};  // 16 bands × 2·2
  }
  return o;
}

// A model in eval mode whose every tensor matters: random PCA rotation and mean, random Snake
// slopes and BatchNorm statistics.
inline rave::RaveModel tiny_model(const rave::RaveOptions& o, bool warm = false, uint64_t seed = 1) {
  torch::manual_seed(seed);
  rave::RaveModel m(o);
  torch::NoGradGuard no_grad;
  for (auto& p : m->named_parameters()) {
    if (p.key().find("alpha") != std::string::npos) p.value().uniform_(0.5, 1.5);
  }
  for (auto& b : m->named_buffers()) {
    if (b.key().find("running_mean") != std::string::npos) b.value().normal_(0.0, 0.1);
    if (b.key().find("running_var") != std::string::npos) b.value().uniform_(0.5, 1.5);
  }
  rave::LatentPca pca;
  pca.components =
      std::get<0>(torch::linalg_qr(torch::randn({o.latent_size, o.latent_size}))).t().contiguous();
  pca.mean = torch::randn({o.latent_size}) * 0.1;
  pca.fidelity = torch::linspace(0.5, 1.0, o.latent_size);
  rave::store_latent_pca(*m, pca);
  m->eval();
  m->set_warmed_up(warm);
  return m;
}

// The tiny model of a latent kind (model.encoder) the latent-kind tests export: latent 5; the
// wasserstein and discrete ones with 3 noise channels; 3 codebooks of 8 codes.
inline rave::RaveOptions latent_kind_options(rave::EncoderKind kind) {
  auto o = tiny_options({"v2", rave::RaveVersion::kV2, 1, 0, false});
  o.encoder = kind;
  o.latent_size = 5;
  o.noise_augmentation =
      kind == rave::EncoderKind::kWasserstein || kind == rave::EncoderKind::kDiscrete ? 3 : 0;
  o.num_quantizers = 3;
  o.codebook_size = 8;
  return o;
}

// The model with its discrete codebooks through k-means and a few EMA updates, as a trained
// checkpoint's are (unchanged for the other kinds).
inline rave::RaveModel with_trained_codebooks(rave::RaveModel model) {
  if (!model->encoder->rvq) return model;
  torch::manual_seed(5);
  model->encoder->rvq->train();
  torch::NoGradGuard no_grad;
  for (int i = 0; i < 3; ++i)
    model->encoder->rvq->forward(torch::randn({2, model->options().latent_size, 16}));
  model->encoder->rvq->eval();
  return model;
}

// RAVE's hybrid.gin in miniature: the mel front end (model.input_mode = mel) and a 2-layer GRU
// in the generator.
inline rave::RaveOptions hybrid_options() {
  auto o = tiny_options({"v2", rave::RaveVersion::kV2, 1, 0, false});
  o.n_band = 4;
  o.input_mode = rave::InputMode::kMel;
  o.n_mels = 8;
  o.mel_n_fft = 32;
  o.mel_hop = 8;
  o.ratios = {2};
  o.encoder_dilations = {{1}};
  o.decoder_ratios = {2, 2};  // 16 samples per frame: 4 bands × 2·2
  o.gru_layers = 2;
  return o;
}

// The module as nn~ gets it: saved to a file and loaded back.
inline torch::jit::Module save_and_load(const torch::jit::Module& m, const std::filesystem::path& file) {
  m.save(file.string());
  return torch::jit::load(file.string());
}

inline torch::Tensor call(torch::jit::Module& m, const std::string& method, const torch::Tensor& x) {
  return m.get_method(method)({x}).toTensor();
}

inline void set_noise_scale(torch::jit::Module& m, double v) {
  ASSERT_EQ(m.get_method("set_noise_scale")({v}).toInt(), 0);
}

// max |a − b| (inf when the shapes differ).
inline double max_diff(const torch::Tensor& a, const torch::Tensor& b) {
  if (a.sizes() != b.sizes()) return std::numeric_limits<double>::infinity();
  return (a - b).abs().max().item<double>();
}

// The model's latent of x as the export defines it: PCA(z − mean), z the posterior mean
// (deterministic) or a sample drawn after torch::manual_seed(seed).
inline torch::Tensor reference_latent(rave::RaveModelImpl& m, const torch::Tensor& x, bool sample,
                                      uint64_t seed = 0) {
  torch::NoGradGuard no_grad;
  torch::Tensor z;
  if (sample) {
    torch::manual_seed(seed);
    z = std::get<0>(m.encode(x));
  } else {
    z = m.encode_stats(x).chunk(2, 1)[0];
  }
  auto pca = rave::stored_latent_pca(m);
  return torch::matmul(pca.components, z - pca.mean.unsqueeze(-1));
}

// The model's decode of a latent in the export's PCA coordinates (all dimensions given).
inline torch::Tensor reference_decode(rave::RaveModelImpl& m, const torch::Tensor& z_pca, uint64_t seed = 0) {
  torch::NoGradGuard no_grad;
  auto pca = rave::stored_latent_pca(m);
  auto z = torch::matmul(pca.components.t(), z_pca) + pca.mean.unsqueeze(-1);
  torch::manual_seed(seed);
  return m.decode(z);
}

}  // namespace rt::exporting::testing
