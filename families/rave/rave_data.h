// RAVE's data as the family trains on it: the audio database's training and validation
// datasets (validation without the random augmentations), checked against the model before the
// first step, and RAVE's train/validation split.
#pragma once

#include <cstdint>

#include "config/config.h"
#include "models/rave/options.h"
#include "training/model_family.h"

namespace rt {

struct RaveData {
  TrainData data;
  int64_t channels = 0;       // the database's
  int64_t sampling_rate = 0;  // the database's
};

// The datasets of data.db_path for examples of `n_signal` samples. Throws rt::Error naming the
// key and what to change when the database and the model do not fit: data.channels against the
// database's channels, examples shorter than n_signal, n_signal not a multiple of the model's
// compression, an STFT scale too large for the band signals (`for_losses`: the RAVE trains on
// them; the prior, which only encodes, skips that check).
RaveData make_rave_data(const Config& config, const rave::RaveOptions& options, int64_t n_signal,
                        bool for_losses = true);

}  // namespace rt
