// SSM neural decoders as a model family: neural LMDB → S5 decoder (s5_maze) or
// multi-session decoder (foundational); MSE, AdamW with Λ/log-step free of weight decay,
// optional cosine schedule with warm-up, validation R² per output dimension and per group.
#pragma once

#include <memory>

#include "config/family_registry.h"
#include "config/options_table.h"
#include "models/ssm/decoders.h"
#include "trainer/model_family.h"
#include "util/enum_names.h"

namespace rt {

// train.lr_schedule: constant, or cosine decay to 0 at train.max_steps (after the warm-up).
enum class LrSchedule { kConstant, kCosine, kMaxValue = kCosine };
constexpr EnumNames<LrSchedule> enum_names(LrSchedule) { return {{"constant", "cosine"}}; }

// model.family = "ssm": its factory, its [model] keys (bound to ssm::SsmOptions) and its
// [train] keys (AdamW weight decay, learning-rate schedule).
FamilyRegistration ssm_family_registration();

// The [model] keys bound to ssm::SsmOptions, and the options a config describes (input_dim and
// output_dim are replaced by the database's when training).
const OptionsTable<ssm::SsmOptions>& ssm_model_keys();
ssm::SsmOptions ssm_options_from(const Config& config);

// Learning-rate factor: linear warm-up over `warmup` steps, then constant or cosine to 0 at
// `total` steps.
double ssm_lr_factor_at(int64_t step, LrSchedule schedule, int64_t warmup, int64_t total);

}  // namespace rt
