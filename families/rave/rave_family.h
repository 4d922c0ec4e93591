// RAVE as a model family: audio LMDB → PQMF/VAE/generator/discriminator, RAVE's
// two-phase schedule (phase 1 reconstruction + β·KL, phase 2 frozen encoder + adversarial).
#pragma once

#include <memory>

#include "config/family_registry.h"
#include "config/options_table.h"
#include "models/rave/options.h"
#include "models/rave/rave.h"
#include "trainer/model_family.h"

namespace rt {

// model.family = "rave": its factory, its [model] keys (bound to rave::RaveOptions) and its
// [train] keys (phase 1, β warm-up, discriminator, Adam betas).
FamilyRegistration rave_family_registration();

// The [model] keys bound to rave::RaveOptions, and the options a config describes.
// Channels and sampling rate come from the database (RaveFamily::build), and are saved beside
// the model in its checkpoints.
const OptionsTable<rave::RaveOptions>& rave_model_keys();
rave::RaveOptions rave_options_from(const Config& config);
// The loss settings a config describes: the version's (RaveLossOptions::preset) under the
// [train] keys (weights, crop, log_epsilon, num_skipped_features) and model.stft_scales.
rave::RaveLossOptions rave_loss_options_from(const Config& config);

// RAVE's β warm-up: log-linear from beta_start to beta_end over beta_warmup_steps.
double rave_beta_at(int64_t step, double beta_start, double beta_end, int64_t warmup_steps);
// LinearLR 1.0 → end_factor over `total` steps (RAVE v2: phase 1), then constant.
double rave_lr_factor_at(int64_t step, double end_factor, int64_t total);

}  // namespace rt
