#include "models/rave/rave.h"

#include <gtest/gtest.h>
#include <torch/torch.h>

#include <set>

#include "models/common/summary.h"
#include "models/rave/generator.h"
#include "models/rave/losses.h"
#include "util/error.h"

namespace {

using rt::models::count_parameters;
using rt::rave::RaveLossOptions;
using rt::rave::RaveModel;
using rt::rave::RaveOptions;
using rt::rave::RaveStep;
using rt::rave::RaveVersion;

RaveOptions tiny(RaveVersion version) {
  auto o = RaveOptions::preset(version);
  o.capacity = 8;
  o.latent_size = 4;
  o.ratios = {2, 2};
  if (version != RaveVersion::kV1) o.dilations = {{1, 3}, {1}};
  o.discriminator_capacity = 4;
  o.discriminator_n_layers = 2;
  o.periods = version == RaveVersion::kV1 ? std::vector<int64_t>{} : std::vector<int64_t>{2, 3};
  o.n_scales = 2;
  o.mrd_n_ffts = {256, 128};
  o.stft_scales = {128, 64, 32};
  o.noise_ratios = {2, 2, 2};
  return o;
}

RaveLossOptions tiny_loss(RaveVersion version) {
  auto l = RaveLossOptions::preset(version);
  l.stft_scales = {128, 64, 32};
  return l;
}

struct Counts {
  int64_t encoder, decoder, discriminator, pqmf;
};

Counts counts(RaveVersion version) {
  RaveModel m(RaveOptions::preset(version));
  return {count_parameters(*m->encoder), count_parameters(*m->decoder), count_parameters(*m->discriminator),
          count_parameters(*m->pqmf)};
}

TEST(RaveModel, V2ParameterCountsMatchSpec) {
  const auto c = counts(RaveVersion::kV2);
  EXPECT_EQ(c.encoder, 16056928);
  EXPECT_EQ(c.decoder, 15479072);
  EXPECT_EQ(c.discriminator, 27130952);
  EXPECT_EQ(c.pqmf, 16656);
}

TEST(RaveModel, V3ParameterCountsMatchSpec) {
  const auto c = counts(RaveVersion::kV3);
  // acids-rave 2.3.1's v3 (rave_configs golden): Snake between stages only, so 7,104 fewer
  // than with Snake in the dilated units too.
  EXPECT_EQ(c.encoder, 16059904);
  EXPECT_EQ(c.decoder, 15482048);
  EXPECT_EQ(c.discriminator, 42519760);
  EXPECT_EQ(c.pqmf, 16656);
}

TEST(RaveModel, StateDictKeysMirrorRave) {
  RaveModel m(tiny(RaveVersion::kV2));
  auto params = m->named_parameters();
  auto buffers = m->named_buffers();
  for (const char* key : {"encoder.encoder.net.0.weight_g", "encoder.encoder.net.0.weight_v",
                          "encoder.encoder.net.1.aligned.branches.0.net.1.weight_g",
                          "encoder.encoder.net.1.aligned.branches.0.net.3.weight_v", "decoder.net.0.weight_g",
                          "decoder.net.2.weight_v", "pqmf.forward_conv.weight", "pqmf.inverse_conv.weight",
                          "discriminator.discriminators.0.layers.0.net.0.weight_g",
                          "discriminator.discriminators.0.layers.0.net.0.bias",
                          "discriminator.discriminators.1.layers.1.net.4.weight"}) {
    EXPECT_TRUE(params.contains(key)) << key;
  }
  for (const char* key : {"pqmf.hk", "pqmf.h", "encoder.warmed_up", "latent_pca"})
    EXPECT_TRUE(buffers.contains(key)) << key;
  EXPECT_FALSE(params.contains("encoder.encoder.net.0.bias"));  // convs without bias

  RaveModel v3(tiny(RaveVersion::kV3));
  auto p3 = v3->named_parameters();
  // Snake between stages only: RAVE's v3 dilated units keep LeakyReLU (models::kRaveUnitActivation).
  EXPECT_FALSE(p3.contains("encoder.encoder.net.2.aligned.branches.0.net.0.alpha"));
  int snakes = 0;
  for (const auto& p : p3) {
    const auto& key = p.key();
    if (key.size() < 6 || key.compare(key.size() - 6, 6, ".alpha") != 0) continue;
    EXPECT_EQ(key.find("aligned"), std::string::npos) << key;
    ++snakes;
  }
  EXPECT_GT(snakes, 0);
  for (const char* key : {"discriminator.discriminators.0.convs.0.0.weight_g",
                          "discriminator.discriminators.0.conv_post.weight_v",
                          "discriminator.discriminators.2.band_convs.4.4.0.weight_g",
                          "discriminator.discriminators.2.conv_post.bias"}) {
    EXPECT_TRUE(p3.contains(key)) << key;
  }
  EXPECT_TRUE(v3->named_buffers().contains("encoder.encoder.net.1.mean_x"));  // AdaIN
  EXPECT_TRUE(v3->named_buffers().contains("discriminator.discriminators.2.stft.window"));
}

TEST(RaveModel, TinyV2ShapesThroughEncodeDecodeAndDiscriminators) {
  torch::manual_seed(0);
  RaveModel m(tiny(RaveVersion::kV2));
  auto x = torch::randn({2, 1, 4096}) * 0.1;
  auto [z, kl] = m->encode(x);
  EXPECT_EQ(z.sizes(), (std::vector<int64_t>{2, 4, 4096 / 64}));
  EXPECT_EQ(kl.dim(), 0);
  EXPECT_GT(kl.item<double>(), 0.0);
  auto y = m->decode(z);
  EXPECT_EQ(y.sizes(), x.sizes());
  EXPECT_LE(y.abs().max().item<double>(), 1.5);  // tanh per band, then synthesis
  auto f = m->forward_train(x);
  EXPECT_EQ(f.x_multiband.sizes(), (std::vector<int64_t>{2, 16, 256}));
  EXPECT_EQ(f.y_multiband.sizes(), f.x_multiband.sizes());
  EXPECT_EQ(m->forward(x).sizes(), x.sizes());
  auto features = m->discriminator->forward(torch::cat({x, y}, 0));
  ASSERT_EQ(features.size(), 4u);  // 2 periods + 2 scales
  for (const auto& d : features) {
    ASSERT_EQ(d.size(), 3u);  // 2 layers + post conv
    EXPECT_EQ(d.back().size(0), 4);
    EXPECT_EQ(d.back().size(1), 1);
  }
}

TEST(RaveModel, TinyV3DescriptDiscriminatorShapes) {
  torch::manual_seed(0);
  RaveModel m(tiny(RaveVersion::kV3));
  auto x = torch::randn({2, 1, 4096}) * 0.1;
  EXPECT_EQ(m->forward(x).sizes(), x.sizes());
  auto features = m->discriminator->forward(x);
  ASSERT_EQ(features.size(), 4u);  // 2 MPD + 2 MRD
  EXPECT_EQ(features[0].size(), 6u);
  EXPECT_EQ(features[2].size(), 26u);  // 5 bands × 5 convs + post
  EXPECT_EQ(features[0].back().size(1), 1);
  EXPECT_EQ(features[3].back().size(1), 1);
}

TEST(RaveModel, SpectralDistanceIsZeroOnlyForIdenticalInputs) {
  torch::manual_seed(0);
  auto x = torch::randn({2, 1, 2048});
  const std::vector<int64_t> scales{256, 128, 64};
  EXPECT_NEAR(rt::rave::spectral_distance(x, x, scales).item<double>(), 0.0, 1e-7);
  auto d = rt::rave::spectral_distance(x, x + 0.1 * torch::randn_like(x), scales).item<double>();
  EXPECT_GT(d, 1e-3);
  auto far = rt::rave::spectral_distance(x, torch::randn_like(x), scales).item<double>();
  EXPECT_GT(far, d);
  // Multiband layout (B, 16, T/16) folds bands into the batch.
  auto mb = torch::randn({2, 16, 512});
  EXPECT_NEAR(rt::rave::spectral_distance(mb, mb, {128, 64}).item<double>(), 0.0, 1e-7);
  EXPECT_THROW(rt::rave::spectral_distance(mb, mb, {2048}), c10::Error);
}

// train.precision bf16 / fp16: a decoder's output reaches the spectral distance and the noise
// synthesis in the reduced precision, which cuFFT (and the CPU's FFT for float16) cannot
// transform: they run in float32 and give float32's values. On CUDA too where there is one.
TEST(RaveModel, FftPathsTakeReducedPrecisionSignals) {
  std::vector<torch::Device> devices{torch::kCPU};
  if (torch::cuda::is_available()) devices.emplace_back(torch::kCUDA, 0);
  for (const auto& device : devices) {
    for (auto dtype : {torch::kBFloat16, torch::kHalf}) {
      torch::manual_seed(1);
      const auto o = torch::TensorOptions().device(device);
      auto x = torch::randn({2, 1, 1024}, o);
      auto y = torch::randn({2, 1, 1024}, o);
      const std::vector<int64_t> scales{256, 64};
      const auto ref = rt::rave::spectral_distance(x, y.to(dtype).to(torch::kFloat), scales);
      const auto low = rt::rave::spectral_distance(x, y.to(dtype), scales);
      EXPECT_EQ(low.scalar_type(), torch::kFloat) << device << " " << dtype;
      EXPECT_NEAR(low.item<double>(), ref.item<double>(), 1e-5) << device << " " << dtype;
      auto amp = torch::rand({2, 3, 5}, o).to(dtype);
      const auto ir = rt::rave::amp_to_impulse_response(amp, 16);
      EXPECT_TRUE(torch::allclose(ir, rt::rave::amp_to_impulse_response(amp.to(torch::kFloat), 16)))
          << device << " " << dtype;
      auto noise = torch::rand({2, 3, 16}, o).to(dtype);
      EXPECT_TRUE(torch::allclose(rt::rave::fft_convolve(noise, ir),
                                  rt::rave::fft_convolve(noise.to(torch::kFloat), ir), 1e-5, 1e-6))
          << device << " " << dtype;
    }
  }
}

// A data-parallel step computes the real audio's magnitudes early (for the denominators) and
// passes them in: the distance, its gradient and the energies are those of the plain call.
TEST(RaveModel, PrecomputedRealSpectraGiveTheSameDistanceAndGradient) {
  torch::manual_seed(1);
  const auto x = torch::randn({2, 16, 512});
  const std::vector<int64_t> scales{128, 64, 32};
  auto y1 = (x + 0.2 * torch::randn_like(x)).requires_grad_(true);
  auto y2 = y1.detach().clone().requires_grad_(true);
  auto plain = rt::rave::spectral_distance(x, y1, scales);
  const auto spectra = rt::rave::stft_magnitudes(x, scales);
  ASSERT_EQ(spectra.size(), scales.size());
  auto reused = rt::rave::spectral_distance(x, y2, scales, 1e-7, {}, &spectra);
  EXPECT_TRUE(torch::equal(plain, reused));
  plain.backward();
  reused.backward();
  EXPECT_TRUE(torch::equal(y1.grad(), y2.grad()));
  // The energies are mean |STFT(x)|² per scale, the STFT as spectral_distance takes it.
  const auto energy = rt::rave::spectral_energy(spectra);
  for (size_t i = 0; i < scales.size(); ++i) {
    const int64_t n = scales[i];
    const auto mag = torch::stft(x.reshape({-1, x.size(-1)}), n, n / 4, n, torch::hann_window(n), true,
                                 "reflect", false, true, true)
                         .abs();
    EXPECT_TRUE(torch::equal(energy[static_cast<int64_t>(i)], mag.pow(2).mean())) << "scale " << n;
  }
  const std::vector<torch::Tensor> too_few(spectra.begin(), spectra.begin() + 2);
  EXPECT_THROW(rt::rave::spectral_distance(x, y2, scales, 1e-7, {}, &too_few), c10::Error);
}

// The tags of RaveLosses::scalars(); each value must be a detached 0-d tensor (a step reads
// nothing on the host).
std::set<std::string> scalar_tags(const rt::rave::RaveLosses& l) {
  std::set<std::string> tags;
  for (const auto& [tag, value] : l.scalars()) {
    EXPECT_EQ(value.dim(), 0) << tag;
    EXPECT_FALSE(value.requires_grad()) << tag;
    tags.insert(tag);
  }
  return tags;
}

TEST(RaveModel, GeneratorStepGradientsReachEncoderAndDecoderOnly) {
  torch::manual_seed(0);
  RaveModel m(tiny(RaveVersion::kV2));
  auto x = torch::randn({2, 1, 4096}) * 0.1;
  auto l = rt::rave::rave_losses(*m, x, tiny_loss(RaveVersion::kV2), 1e-2, RaveStep::kGenerator);
  EXPECT_FALSE(l.adversarial_active);
  EXPECT_GT(l.loss_gen.item<double>(), 0.0);
  l.loss_gen.backward();
  for (const auto& p : m->generator_parameters()) {
    ASSERT_TRUE(p.grad().defined());
  }
  EXPECT_GT(m->encoder->encoder->parameters()[0].grad().abs().sum().item<double>(), 0.0);
  for (const auto& p : m->discriminator_parameters()) EXPECT_FALSE(p.grad().defined());
  for (const auto& p : m->pqmf->parameters()) EXPECT_FALSE(p.grad().defined());
  auto s = scalar_tags(l);
  EXPECT_TRUE(s.count("fullband_spectral_distance") && s.count("multiband_spectral_distance") &&
              s.count("regularization"));
  EXPECT_FALSE(s.count("loss_dis"));
}

TEST(RaveModel, PhaseTwoFreezesEncoderAndTrainsDiscriminator) {
  torch::manual_seed(0);
  RaveModel m(tiny(RaveVersion::kV2));
  m->set_warmed_up(true);
  auto x = torch::randn({2, 1, 4096}) * 0.1;
  auto l = rt::rave::rave_losses(*m, x, tiny_loss(RaveVersion::kV2), 1e-2, RaveStep::kGenerator);
  EXPECT_TRUE(l.adversarial_active);
  EXPECT_GT(l.feature_matching.item<double>(), 0.0);
  l.loss_gen.backward();
  for (const auto& p : m->encoder_parameters()) EXPECT_FALSE(p.grad().defined());
  EXPECT_GT(m->decoder_parameters()[0].grad().abs().sum().item<double>(), 0.0);

  m->zero_grad();
  auto d = rt::rave::rave_losses(*m, x, tiny_loss(RaveVersion::kV2), 1e-2, RaveStep::kDiscriminator);
  EXPECT_FALSE(d.loss_gen.requires_grad());
  ASSERT_TRUE(d.loss_dis.requires_grad());
  d.loss_dis.backward();
  for (const auto& p : m->discriminator_parameters()) ASSERT_TRUE(p.grad().defined());
  for (const auto& p : m->decoder_parameters())  // zero_grad may leave zeros or undefined
    EXPECT_TRUE(!p.grad().defined() || p.grad().abs().sum().item<double>() == 0.0);
  auto s = scalar_tags(d);
  EXPECT_TRUE(s.count("loss_dis") && s.count("pred_real") && s.count("pred_fake") && s.count("adversarial") &&
              s.count("feature_matching"));
}

TEST(RaveModel, HingeAndRelativeFeatureMatching) {
  auto real = torch::tensor({2.0, 0.0}), fake = torch::tensor({-2.0, 0.5});
  auto [dis, gen] = rt::rave::hinge_gan(real, fake);
  // relu(1−r) = {0, 1}; relu(1+f) = {0, 1.5} → mean 1.25; gen = −mean(f) = 0.75.
  EXPECT_NEAR(dis.item<double>(), 1.25, 1e-6);
  EXPECT_NEAR(gen.item<double>(), 0.75, 1e-6);
  auto r = torch::tensor({1.0, -3.0}), f = torch::tensor({2.0, -1.0});
  EXPECT_NEAR(rt::rave::mean_difference(r, f, false).item<double>(), 1.5, 1e-6);
  EXPECT_NEAR(rt::rave::mean_difference(r, f, true).item<double>(), 0.75, 1e-6);
}

TEST(RaveModel, V1BuildsAndRunsTiny) {
  torch::manual_seed(0);
  RaveModel m(tiny(RaveVersion::kV1));
  auto params = m->named_parameters();
  EXPECT_TRUE(params.contains("encoder.encoder.net.0.weight"));  // plain conv, no weight norm
  EXPECT_TRUE(params.contains("encoder.encoder.net.1.weight"));  // BatchNorm1d
  EXPECT_TRUE(params.contains("decoder.synth.branches.0.weight_g"));
  EXPECT_TRUE(params.contains("decoder.synth.branches.2.net.0.weight"));  // noise generator
  EXPECT_TRUE(params.contains("decoder.net.1.net.1.weight_g"));           // upsample
  EXPECT_TRUE(params.contains("decoder.net.2.net.branches.0.net.0.net.aligned.branches.0.1.weight_g"));
  EXPECT_TRUE(params.contains("discriminator.layers.0.net.0.weight_g"));  // scales only
  auto x = torch::randn({2, 1, 4096}) * 0.1;
  auto y = m->forward(x);
  EXPECT_EQ(y.sizes(), x.sizes());
  m->set_warmed_up(true);  // adds the noise branch
  auto l = rt::rave::rave_losses(*m, x, tiny_loss(RaveVersion::kV1), 0.1, RaveStep::kGenerator);
  EXPECT_TRUE(std::isfinite(l.loss_gen.item<double>()));
  l.loss_gen.backward();
  EXPECT_TRUE(m->decoder_parameters()[0].grad().defined());
  EXPECT_EQ(m->discriminator->forward(x).size(), 2u);
}

TEST(RaveModel, NoiseGeneratorV2AndCausalPaddingKeepShapes) {
  torch::manual_seed(0);
  auto o = tiny(RaveVersion::kV2);
  o.noise_bands = 5;
  o.padding = rt::models::PaddingMode::kCausal;
  RaveModel m(o);
  EXPECT_TRUE(m->named_parameters().contains("decoder.waveform_module.weight_g"));
  EXPECT_TRUE(m->named_parameters().contains("decoder.noise_module.net.0.weight"));
  auto x = torch::randn({1, 1, 4096}) * 0.1;
  EXPECT_EQ(m->forward(x).sizes(), x.sizes());
}

TEST(RaveModel, CausalEncoderIgnoresTheFuture) {
  torch::manual_seed(0);
  auto o = tiny(RaveVersion::kV2);
  o.padding = rt::models::PaddingMode::kCausal;
  RaveModel m(o);
  m->eval();
  torch::NoGradGuard ng;
  auto x = torch::randn({1, 1, 4096}) * 0.1;
  auto x2 = x.clone();
  x2.narrow(-1, 3072, 1024).normal_();
  auto a = m->encode_stats(x), b = m->encode_stats(x2);
  // Latent frames well before the change are identical (PQMF and convs pad on the left only).
  EXPECT_TRUE(torch::equal(a.narrow(-1, 0, 40), b.narrow(-1, 0, 40)));
  EXPECT_FALSE(torch::equal(a, b));
}

// Ranges of single keys are checked by their key specs (tests/trainer/config_test.cpp); the
// options check what spans several fields.
TEST(RaveModel, InvalidOptionsNameTheKey) {
  auto o = RaveOptions::preset(RaveVersion::kV2);
  o.ratios = {4, 2};  // 4 dilation lists for 2 blocks
  try {
    o.validate();
    FAIL() << "expected rt::Error";
  } catch (const rt::Error& e) {
    EXPECT_NE(std::string(e.what()).find("model.dilations: needs one list per ratio (2)"), std::string::npos)
        << e.what();
  }
  EXPECT_THROW(RaveModel{o}, rt::Error);
  o = RaveOptions::preset(RaveVersion::kV3);
  o.periods = {};
  o.mrd_n_ffts = {};
  EXPECT_THROW(o.validate(), rt::Error);
  o = RaveOptions::preset(RaveVersion::kV1);
  o.noise_ratios = {};
  EXPECT_THROW(o.validate(), rt::Error);
  EXPECT_THROW(rt::parse_enum<RaveVersion>("v4", "model.version"), rt::Error);
}

TEST(ModuleSummary, ListsParametersAndBuffersPerModule) {
  RaveModel m(tiny(RaveVersion::kV2));
  const auto text = rt::models::module_summary(*m, "rave", 2);
  EXPECT_NE(text.find("pqmf (Pqmf)  params 16,656"), std::string::npos) << text;
  EXPECT_NE(text.find("encoder (VariationalEncoder)  params " +
                      rt::models::format_count(count_parameters(*m->encoder))),
            std::string::npos);
  EXPECT_NE(text.find("[buffers"), std::string::npos);
  EXPECT_NE(text.find("fixed 16,656"), std::string::npos);
  EXPECT_EQ(rt::models::format_count(16056928), "16,056,928");
  EXPECT_EQ(rt::models::format_count(12), "12");
}

}  // namespace
