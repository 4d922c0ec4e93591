#include "families/prior/prior_keys.h"

namespace rt {

namespace {

// A field of the network's options as a field of the keys struct, for the table's bindings.
constexpr int64_t PriorModelKeys::*net(int64_t rave::PriorOptions::*field) {
  return static_cast<int64_t PriorModelKeys::*>(field);
}

}  // namespace

const OptionsTable<PriorModelKeys>& prior_model_keys() {
  using keys::Field;
  using K = PriorModelKeys;
  using N = rave::PriorOptions;
  // Defaults: prior_v1.gin. The RAVE is frozen: which run it is names no part of the prior's
  // shape (a run directory may move), its latent rotation is checked where it matters (resume,
  // export; families/prior/prior_checkpoint.h).
  static const OptionsTable<K> table = {
      {&K::rave,
       Field("model.rave",
             "prior: the trained RAVE whose latent the prior models, a run directory (its best.ckpt, "
             "else last.ckpt) or a checkpoint; frozen, its moving averages when it holds them "
             "(RAVE's train_prior --model)")
           .cli("model")},
      {net(&N::latent_size),
       Field("model.prior_latent_size",
             "prior: latent dimensions modelled, rounded up to a power of two as RAVE's Prior does; 0 = as "
             "many as reach model.prior_fidelity of the RAVE's latent variance")
           .ge(0)
           .defines_architecture()},
      {&K::fidelity,
       Field("model.prior_fidelity",
             "prior: with model.prior_latent_size = 0, the share of the RAVE's latent variance (its PCA "
             "fidelity curve) the modelled dimensions reach")
           .gt(0)
           .lt(1)},
      {net(&N::resolution),
       Field("model.prior_resolution", "prior: quantisation bins per latent dimension (QuantizedNormal)")
           .ge(2)
           .defines_architecture()},
      {net(&N::res_size),
       Field("model.prior_res_size", "prior: residual channels (a multiple of the latent size)")
           .ge(1)
           .defines_architecture()},
      {net(&N::skp_size),
       Field("model.prior_skp_size", "prior: skip channels (a multiple of the latent size)")
           .ge(1)
           .defines_architecture()},
      {net(&N::kernel_size), Field("model.prior_kernel_size", "prior: causal convolution kernel size")
                                 .ge(1)
                                 .defines_architecture()},
      {net(&N::cycle_size),
       Field("model.prior_cycle_size", "prior: dilation cycle (layer i dilated 2^(i mod cycle))")
           .ge(1)
           .defines_architecture()},
      {net(&N::n_layers),
       Field("model.prior_n_layers", "prior: gated residual layers").ge(1).defines_architecture()},
  };
  return table;
}

rave::PriorOptions prior_options(const PriorModelKeys& keys, int64_t latent_size) {
  rave::PriorOptions o = keys;
  o.latent_size = latent_size;
  return o;
}

int64_t prior_example_samples(const rave::PriorOptions& options, int64_t ratio) {
  // The next power of two.
  return rave::prior_latent_size(rave::prior_receptive_field(options) * ratio);
}

}  // namespace rt
