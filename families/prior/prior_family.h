// RAVE's prior as a model family (acids-ircam/RAVE v2.3.1 scripts/train_prior.py, rave/prior/):
// a causal WaveNet over a trained RAVE's quantised, staggered latent, trained with the
// cross-entropy of the next frame while the RAVE stays frozen. Each validation logs its loss and
// a sequence the prior generates, decoded by the RAVE, as TensorBoard audio.
#pragma once

#include "config/family_registry.h"

namespace rt {

// model.family = "prior": its factory and its [model] keys (families/prior/prior_keys.h).
FamilyRegistration prior_family_registration();

}  // namespace rt
