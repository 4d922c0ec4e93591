// nn~'s `prior` method (export --prior, export/torchscript/prior_method.h) against the prior model
// it was written from: at a temperature near 0 each draw is the most likely bin, so the file's
// frames must be the bins the model's own argmax generation (rave::prior_generate) picks from the
// same start, realigned as DiagonalShift.inverse does; the state carries over between calls and
// per batch row; without --prior the file has no such method.
#include <cmath>

#include "export/export_fixtures.h"
#include "models/rave/prior.h"

namespace rt::exporting::testing {
namespace {

rave::PriorOptions tiny_prior_options(int64_t latent_size) {
  rave::PriorOptions o;
  o.resolution = 8;
  o.res_size = 16;
  o.skp_size = 8;
  o.kernel_size = 3;
  o.cycle_size = 2;
  o.n_layers = 3;
  o.latent_size = latent_size;
  return o;
}

// A prior whose logits are far apart (weights scaled up), so that the argmax is not a near tie
// that float rounding could flip between the two implementations.
rave::VariationalPrior sharp_prior(int64_t latent_size) {
  torch::manual_seed(3);
  rave::VariationalPrior p(tiny_prior_options(latent_size));
  torch::NoGradGuard no_grad;
  for (auto& t : p->parameters()) t.mul_(3.0);
  p->eval();
  return p;
}

// The bin each exported value lies in: floor(Φ(v) · resolution), as QuantizedNormal.encode.
torch::Tensor bins_of(const torch::Tensor& v, int64_t resolution) {
  const auto cdf = 0.5 * (1.0 + torch::erf(v.to(torch::kDouble) / std::sqrt(2.0)));
  return torch::floor(cdf * static_cast<double>(resolution)).clamp(0, resolution - 1).to(torch::kLong);
}

struct Exported {
  torch::jit::Module module;
  rave::VariationalPrior prior{nullptr};
  int64_t ratio = 0;
};

Exported export_with_prior(const std::string& name, bool streaming, int64_t latent_size) {
  auto model = tiny_model(tiny_options({"v2", rave::RaveVersion::kV2, 1, 0, false}));
  Exported e;
  e.prior = sharp_prior(latent_size);
  ScriptOptions s;
  s.streaming = streaming;
  s.latent_size = 4;
  s.prior = e.prior.get();
  ScriptInfo info;
  rt::testing::ScratchDir dir("export_prior");
  e.module = save_and_load(script_rave(*model, s, &info), dir / (name + ".ts"));
  e.ratio = info.ratio;
  return e;
}

// The model's argmax generation over `frames` frames from every dimension's middle bin, as the
// file starts: bins (D, frames) of frames 1 … frames (frame 0 is the start).
torch::Tensor reference_bins(rave::VariationalPriorImpl& prior, int64_t frames) {
  const auto& o = prior.options();
  auto start_bins = torch::full({1, o.latent_size, frames + 1}, o.resolution / 2, torch::kLong);
  const auto generated =
      rave::prior_generate(prior, rave::stack_one_hot(start_bins, o.resolution).to(torch::kFloat),
                           /*argmax=*/true);
  return rave::split_classes(generated, o.latent_size).argmax(-1)[0].slice(1, 1, frames + 1);
}

TEST(PriorMethod, ColdDrawsAreTheModelsArgmaxGenerationRealigned) {
  for (bool streaming : {false, true}) {
    const int64_t d = 4, frames = 12;
    auto e = export_with_prior(streaming ? "s" : "o", streaming, d);
    // softplus(−60) / ln 2 ≈ 1e-26: the softmax is one-hot at the most likely bin.
    const auto out = call(e.module, "prior", torch::full({1, 1, frames}, -60.0));
    ASSERT_EQ(out.sizes(), (at::IntArrayRef{1, d, frames}));
    const auto got = bins_of(out[0], 8);
    const auto want = reference_bins(*e.prior, frames);
    // Output frame i holds dimension k's value of generated frame i − (D − 1) + k (the stagger
    // undone); before the first generated frame it is the realignment cache's 0, the middle bin.
    int compared = 0;
    for (int64_t i = 0; i < frames; ++i) {
      for (int64_t k = 0; k < d; ++k) {
        const int64_t g = i - (d - 1) + k;
        const int64_t expected = g < 0 ? 4 : want[k][g].item<int64_t>();
        EXPECT_EQ(got[k][i].item<int64_t>(), expected)
            << "streaming " << streaming << " frame " << i << " dim " << k;
        ++compared;
      }
    }
    EXPECT_EQ(compared, frames * d);
  }
}

TEST(PriorMethod, StateCarriesOverBetweenCallsAndPerBatchRow) {
  const int64_t d = 2;
  auto once = export_with_prior("once", true, d);
  auto twice = export_with_prior("twice", true, d);
  const auto whole = call(once.module, "prior", torch::full({3, 1, 10}, -60.0));
  const auto first = call(twice.module, "prior", torch::full({3, 1, 4}, -60.0));
  const auto second = call(twice.module, "prior", torch::full({3, 1, 6}, -60.0));
  EXPECT_TRUE(torch::equal(bins_of(whole, 8), bins_of(torch::cat({first, second}, 2), 8)));
  // At temperature 1 the rows draw on their own: four rows of 64 frames are not all alike.
  const auto warm = call(once.module, "prior", torch::zeros({4, 1, 64}));
  EXPECT_TRUE(torch::isfinite(warm).all().item<bool>());
  EXPECT_LE(warm.abs().max().item<double>(), 4.0);
  EXPECT_FALSE(torch::equal(bins_of(warm[0], 8), bins_of(warm[1], 8)));
}

TEST(PriorMethod, NnTildeParamsAndNoMethodWithoutAPrior) {
  auto e = export_with_prior("p", true, 2);
  const auto params = e.module.attr("prior_params").toTensor();
  EXPECT_TRUE(torch::equal(params, torch::tensor({int64_t{1}, e.ratio, int64_t{2}, e.ratio})));
  auto methods = e.module.get_method("get_methods")({}).toList();
  ASSERT_EQ(methods.size(), 4u);
  EXPECT_EQ(static_cast<c10::IValue>(methods.get(3)).toStringRef(), "prior");
  EXPECT_ANY_THROW(call(e.module, "prior", torch::zeros({1, 2, 4})));  // one temperature channel

  auto model = tiny_model(tiny_options({"v2", rave::RaveVersion::kV2, 1, 0, false}));
  ScriptOptions s;
  s.streaming = true;
  auto plain = script_rave(*model, s, nullptr);
  EXPECT_FALSE(plain.find_method("prior").has_value());
  EXPECT_EQ(plain.get_method("get_methods")({}).toList().size(), 3u);
}

}  // namespace
}  // namespace rt::exporting::testing
