// RAVE's config keys as a family binds them (config/options_table.h): the [model] keys
// (rave::RaveOptions), the training schedule and optimizers (RaveTrainOptions), the losses
// (rave::RaveLossOptions), the audio data (AudioDatasetOptions), and RAVE's β and learning-rate
// schedules (acids-ircam/RAVE v2.3.1 model.py).
#pragma once

#include <cstdint>
#include <string>

#include "config/options_table.h"
#include "data/audio_dataset.h"
#include "models/rave/losses.h"
#include "models/rave/options.h"
#include "models/rave/rave.h"

namespace rt {

// RAVE's training schedule and optimizers: the family's own [train] keys, and the common ones
// it reads (lr, fused_optimizer, distributed.batch_norm). Defaults: acids-ircam/RAVE v2.gin.
struct RaveTrainOptions {
  int64_t phase_1_duration = 1000000;
  int64_t update_discriminator_every = 4;
  double beta_start = 1e-6;
  double beta_end = 5e-2;
  int64_t beta_warmup_steps = 20000;
  double adam_beta1 = 0.5;
  double adam_beta2 = 0.9;
  double lr_end_factor = 0.1;
  double discriminator_lr = 1e-4;
  int64_t warmup_quantize = 0;
  double ema = 0.0;
  double lr = 1e-3;                 // train.lr
  bool fused_optimizer = true;      // train.fused_optimizer
  std::string batch_norm = "sync";  // train.distributed.batch_norm
};
const OptionsTable<RaveTrainOptions>& rave_train_keys();
// The loss keys ([train] weights, crop, log_epsilon, num_skipped_features; model.stft_scales),
// read over the version's preset (RaveLossOptions::preset).
const OptionsTable<rave::RaveLossOptions>& rave_loss_keys();
// The audio data keys of the common schema (data.n_signal, phase mangle, dequantisation,
// RAVE's --normalize, --derivative, --rand_pitch, --augment; data.channels as checked against
// the database).
const OptionsTable<AudioDatasetOptions>& rave_data_keys();

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
