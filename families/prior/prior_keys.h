// The prior's config keys (model.family = "prior"): the trained RAVE it models and the network's
// shape (acids-ircam/RAVE v2.3.1 rave/configs/prior/prior_v1.gin), and how the prior's latent
// size and its training examples follow from that RAVE.
#pragma once

#include <cstdint>
#include <string>

#include "config/options_table.h"
#include "models/rave/prior.h"

namespace rt {

// The [model] keys of the prior: the network's options (model.prior_*), with latent_size 0
// meaning "from model.prior_fidelity", and the RAVE it models.
struct PriorModelKeys : rave::PriorOptions {
  PriorModelKeys() { latent_size = 0; }
  std::string rave;        // model.rave: a run directory or checkpoint (train_prior's --model)
  double fidelity = 0.95;  // model.prior_fidelity
};
const OptionsTable<PriorModelKeys>& prior_model_keys();

// The network's options for a latent of `latent_size` dimensions (a power of two).
rave::PriorOptions prior_options(const PriorModelKeys& keys, int64_t latent_size);

// RAVE's (model.py, Prior.__init__) length of a training example: 2^ceil(log2(rf · ratio)) audio
// samples, rf the frames one logit sees, ratio the RAVE's audio samples per latent frame.
int64_t prior_example_samples(const rave::PriorOptions& options, int64_t ratio);

}  // namespace rt
