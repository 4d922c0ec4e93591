#include "families/rave/rave_data.h"

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "data/audio_dataset.h"
#include "data/augment.h"
#include "data/data_kind.h"
#include "data/split.h"
#include "families/common/data_keys.h"
#include "families/rave/rave_keys.h"
#include "util/error.h"

namespace rt {
namespace {

// Validation sees the audio as it is: no random phase or dither, so values are comparable, nor
// random augmentations; the deterministic ones (normalisation, derivative, the ambient
// compressor) define the signal the model learns, and stay.
AudioDatasetOptions validation_options(AudioDatasetOptions o) {
  o.phase_mangle = false;
  o.dequantize = false;
  o.slowdown_ms = 0.0;
  o.rand_pitch.clear();
  std::vector<Augmentation> fixed;
  for (Augmentation a : o.augmentations)
    if (a == Augmentation::kNormalizeAmbient) fixed.push_back(a);
  o.augmentations = fixed;
  return o;
}

void check_channels(int64_t wanted, const AudioDataset& db, const std::string& path) {
  if (wanted == 0 || wanted == db.channels()) return;
  throw Error("data.channels = " + std::to_string(wanted) + ", but database '" + path + "' holds " +
              std::to_string(db.channels()) + "-channel audio: set data.channels to " +
              std::to_string(db.channels()) + " (or 0 = from the database), or rebuild the database with " +
              "preprocess --channels " + std::to_string(wanted));
}

void check_length(const AudioDataset& db, const std::string& path, int64_t n_signal) {
  const int64_t length = db.record(0).size(1);
  if (length >= n_signal) return;
  throw Error("database '" + path + "' holds examples of " + std::to_string(length) +
              " samples, fewer than data.n_signal = " + std::to_string(n_signal) +
              ": lower --n_signal (at most " + std::to_string(length) +
              ") or rebuild the database with a larger --num_signal");
}

void check_model_fits(const rave::RaveOptions& options, int64_t n_signal, bool for_losses) {
  const int64_t compression = options.compression();
  if (n_signal % compression != 0) {
    throw Error("data.n_signal = " + std::to_string(n_signal) +
                " must be a multiple of the model's compression " + std::to_string(compression) +
                " (n_band × product of ratios)");
  }
  if (!for_losses) return;
  const int64_t band_length = n_signal / options.n_band;
  for (int64_t scale : options.stft_scales) {
    if (scale / 2 < band_length) continue;
    throw Error("model.stft_scales holds " + std::to_string(scale) +
                ", too large for data.n_signal = " + std::to_string(n_signal) + " split in " +
                std::to_string(options.n_band) + " bands (band signals of " + std::to_string(band_length) +
                " samples need scales below " + std::to_string(2 * band_length) + ")");
  }
}

}  // namespace

RaveData make_rave_data(const Config& config, const rave::RaveOptions& options, int64_t n_signal,
                        bool for_losses) {
  const DataSourceOptions source = data_source_for(config, DataKind::kAudio, "rave");
  const std::string& db = source.db_path;
  AudioDatasetOptions train_opts = rave_data_keys().from(config);
  train_opts.n_signal = n_signal;
  const int64_t want_channels = train_opts.channels;
  train_opts.channels = 0;  // From the database; checked against data.channels below.
  auto train = std::make_shared<AudioDataset>(db, train_opts);
  auto val = std::make_shared<AudioDataset>(db, validation_options(train_opts));
  check_channels(want_channels, *train, db);
  check_length(*train, db, n_signal);
  check_model_fits(options, n_signal, for_losses);

  Split split = split_indices(train->size(), source.val_fraction, static_cast<size_t>(source.val_max),
                              static_cast<uint64_t>(source.split_seed));
  if (split.val.empty()) {
    // Tiny databases: validate on one training example rather than on nothing.
    split.val.push_back(split.train.back());
  }
  RaveData r;
  r.channels = train->channels();
  r.sampling_rate = train->sampling_rate();
  r.data.train = train;
  r.data.val = val;
  r.data.train_indices = std::move(split.train);
  r.data.val_indices = std::move(split.val);
  r.data.samples_per_example = n_signal;
  r.data.sample_unit = "audio samples";
  return r;
}

}  // namespace rt
