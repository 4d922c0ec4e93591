// SSM neural decoders as a model family: neural LMDB → S5 decoder (s5_maze) or
// multi-session decoder (foundational); MSE, AdamW with Λ/log-step free of weight decay,
// optional cosine schedule with warm-up, validation R² per output dimension and per group.
#pragma once

#include <memory>

#include "trainer/model_family.h"

namespace rt {

std::unique_ptr<ModelFamily> make_ssm_family(const Config& config);

// Learning-rate factor: linear warm-up over `warmup` steps, then constant or cosine to 0 at
// `total` steps.
double ssm_lr_factor_at(int64_t step, const std::string& schedule, int64_t warmup, int64_t total);

}  // namespace rt
