// RAVE as a model family: audio LMDB → PQMF/VAE/generator/discriminator, RAVE's
// two-phase schedule (phase 1 reconstruction + β·KL, phase 2 frozen encoder + adversarial).
#pragma once

#include <memory>

#include "config/family_registry.h"
#include "families/rave/rave_keys.h"
#include "models/rave/rave.h"
#include "training/model_family.h"

namespace rt {

// model.family = "rave": its factory, its [model] keys (bound to rave::RaveOptions) and its
// [train] keys (the schedule, bound to RaveTrainOptions; the losses, to rave::RaveLossOptions).
FamilyRegistration rave_family_registration();

}  // namespace rt
