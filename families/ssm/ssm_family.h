// SSM neural decoders as a model family: neural LMDB → S5 decoder (s5_maze) or
// multi-session decoder (foundational); MSE, AdamW with Λ/log-step free of weight decay,
// optional cosine schedule with warm-up, validation R² per output dimension and per group.
#pragma once

#include <memory>

#include "config/family_registry.h"
#include "config/options_table.h"
#include "data/neural/neural_dataset.h"
#include "families/ssm/ssm_transfer.h"
#include "models/ssm/decoders.h"
#include "training/model_family.h"
#include "util/enum_names.h"

namespace rt {

// train.lr_schedule: constant, or cosine decay to 0 at train.max_steps (after the warm-up).
enum class LrSchedule { kConstant, kCosine, kMaxValue = kCosine };
constexpr EnumNames<LrSchedule> enum_names(LrSchedule) { return {{"constant", "cosine"}}; }

// model.family = "ssm": its factory, its [model] keys (bound to ssm::SsmOptions) and its
// [train] keys (AdamW weight decay, learning-rate schedule, transfer; bound to SsmTrainOptions).
FamilyRegistration ssm_family_registration();

// The SSM decoder's optimizer, schedule and transfer: the family's own keys, and the common
// ones it reads (lr, max_steps, seed, fused_optimizer, ckpt, distributed.batch_norm).
struct SsmTrainOptions {
  double weight_decay = 0.01;
  LrSchedule lr_schedule = LrSchedule::kConstant;
  int64_t warmup_steps = 0;
  std::string init_from;
  TransferMode transfer_mode = TransferMode::kAll;
  int64_t max_train_trials = 0;     // data.max_train_trials
  double lr = 1e-3;                 // train.lr
  int64_t max_steps = 6000000;      // train.max_steps
  int64_t seed = 0;                 // train.seed
  bool fused_optimizer = true;      // train.fused_optimizer
  std::string ckpt;                 // train.ckpt (a resumed run keeps its transferred model)
  std::string batch_norm = "sync";  // train.distributed.batch_norm
};
const OptionsTable<SsmTrainOptions>& ssm_train_keys();
// The neural data keys: data.smoothing_sigma_ms (the common schema's) and data.example_cache_mb.
const OptionsTable<neural::NeuralDatasetOptions>& ssm_data_keys();

// The [model] keys bound to ssm::SsmOptions, and the options a config describes (input_dim and
// output_dim are replaced by the database's when training).
const OptionsTable<ssm::SsmOptions>& ssm_model_keys();
ssm::SsmOptions ssm_options_from(const Config& config);

// Learning-rate factor: linear warm-up over `warmup` steps, then constant or cosine to 0 at
// `total` steps.
double ssm_lr_factor_at(int64_t step, LrSchedule schedule, int64_t warmup, int64_t total);

}  // namespace rt
