// export --prior's part of the description: the trained VariationalPrior's convolutions with the
// caches their causal padding becomes when it runs one frame at a time.
#include <string>

#include "export/graph/describe.h"
#include "export/graph/tensor_ledger.h"
#include "util/error.h"

namespace rt::exporting::graph {
namespace {

// A conv of the prior (torch::nn::Conv1d, bias on) under `key`, caching (kernel − 1) · dilation
// frames of its input.
Conv prior_conv(TensorLedger& ledger, const std::string& key, const torch::nn::detail::ConvNdOptions<1>& o) {
  Conv c;
  c.key = "prior." + key;
  const int64_t kernel = o.kernel_size()->at(0), dilation = o.dilation()->at(0);
  c.options = models::WNConv1dOptions(o.in_channels(), o.out_channels(), kernel)
                  .dilation(dilation)
                  .groups(o.groups())
                  .bias(true)
                  .weight_norm(false);
  c.kernel = ledger.take(key + ".weight");
  c.bias = ledger.take(key + ".bias");
  c.cache = (kernel - 1) * dilation;
  return c;
}

}  // namespace

void add_prior(Rave& r, rave::VariationalPriorImpl& prior) {
  if (r.rational) {
    throw Error("--prior with --sr " + std::to_string(r.host_rate) + ": a latent frame of the " +
                std::to_string(r.model_rate) + " Hz model spans " + std::to_string(r.ratio) + " · " +
                std::to_string(r.host_rate) + " / " + std::to_string(r.model_rate) +
                " host samples, not a whole number, so nn~ cannot take the prior's (or encode's and "
                "decode's) method at " +
                std::to_string(r.host_rate) + " Hz: export the prior at an integer multiple of " +
                std::to_string(r.model_rate) + " Hz or at the model's own rate");
  }
  const auto& o = prior.options();
  if (o.latent_size > r.latent.full) {
    throw Error("--prior models " + std::to_string(o.latent_size) +
                " latent dimensions, more than the RAVE's " + std::to_string(r.latent.full));
  }
  torch::NoGradGuard no_grad;
  TensorLedger ledger(model_tensors(prior));
  Prior p;
  p.latent_size = o.latent_size;
  p.resolution = o.resolution;
  p.ratio = r.ratio;
  auto conv_options = [](const torch::nn::Sequential& net, size_t i) {
    return net->ptr(i)->as<torch::nn::Conv1dImpl>()->options;
  };
  p.pre = prior_conv(ledger, "pre_net.0", conv_options(prior.pre_net, 0));
  for (size_t i = 0; i < prior.residuals->size(); ++i) {
    const auto& block = *prior.residuals->ptr(i)->as<rave::PriorResidualBlockImpl>();
    const std::string key = "residuals." + std::to_string(i);
    p.blocks.push_back({prior_conv(ledger, key + ".dconv", block.dconv->options),
                        prior_conv(ledger, key + ".rconv", block.rconv->options),
                        prior_conv(ledger, key + ".sconv", block.sconv->options)});
  }
  p.post = prior_conv(ledger, "post_net.0", conv_options(prior.post_net, 0));
  p.logits = prior_conv(ledger, "post_net.2", conv_options(prior.post_net, 2));
  ledger.finish();
  r.prior = std::move(p);
  r.methods.push_back(
      {"prior", 1, r.ratio, o.latent_size, r.ratio, "(signal) Temperature", "(signal) Latent dimension"});
}

}  // namespace rt::exporting::graph
