#include "data/audio_dataset.h"

#include <chrono>
#include <cmath>
#include <thread>

#include "util/error.h"
#include "util/printable.h"
#include "util/signals.h"

namespace rt {

void allpass_filter(torch::Tensor& x, double omega, double amplitude) {
  // Direct form II transposed, in double like scipy's lfilter on float64 input.
  const double b0 = amplitude * amplitude, b1 = -2.0 * amplitude * std::cos(omega), b2 = 1.0;
  const double a1 = b1, a2 = b0;
  const int64_t rows = x.size(0), n = x.size(1);
  float* data = x.data_ptr<float>();
  for (int64_t r = 0; r < rows; ++r) {
    float* row = data + r * n;
    double z1 = 0.0, z2 = 0.0;
    for (int64_t t = 0; t < n; ++t) {
      const double in = row[t];
      const double out = b0 * in + z1;
      z1 = b1 * in - a1 * out + z2;
      z2 = b2 * in - a2 * out;
      row[t] = static_cast<float>(out);
    }
  }
}

void random_phase_mangle(torch::Tensor& x, int sampling_rate, std::mt19937_64& rng, double min_f,
                         double max_f, double amplitude) {
  const double u = std::uniform_real_distribution<double>(0.0, 1.0)(rng);
  const double f = std::exp(u * (std::log(max_f) - std::log(min_f)) + std::log(min_f));
  allpass_filter(x, 2.0 * M_PI * f / sampling_rate, amplitude);
}

Waveform decode_database_waveform(std::string_view bytes, const std::string& key, const DbMetadata& meta) {
  const AudioExample ex = parse_example(bytes, key);
  // RAVE writes the shape as (channels, bytes / channels) and reads nothing from it; where it
  // is that self-consistent pair, it is the record's own word on its channels, which the
  // sample count alone cannot give (mono read as stereo is just half as long).
  if (const auto it = ex.buffers().find(kWaveformBuffer); it != ex.buffers().end()) {
    const auto& b = it->second;
    // RAVE's pair never promises more bytes than it wrote (len(bytes) // channels rounds down):
    // one that does belongs to a record cut short, which the length alone would report as a
    // record too short for n_signal.
    if (b.shape_size() == 2 && b.shape(0) > 0 && b.shape(1) > 0 &&
        static_cast<uint64_t>(b.shape(0)) * static_cast<uint64_t>(b.shape(1)) > b.data().size()) {
      throw Error("record '" + printable(key) + "': buffer 'waveform' is truncated: its shape field " +
                  shape_text({b.shape(0), b.shape(1)}) + " (RAVE's (channels, bytes per channel)) promises " +
                  std::to_string(static_cast<uint64_t>(b.shape(0)) * static_cast<uint64_t>(b.shape(1))) +
                  " bytes, but it holds " + std::to_string(b.data().size()));
    }
    if (b.shape_size() == 2 && b.shape(0) > 0 &&
        static_cast<uint64_t>(b.shape(0)) * static_cast<uint64_t>(std::max(b.shape(1), 0)) ==
            b.data().size() &&
        b.shape(0) != meta.channels) {
      throw Error("record '" + printable(key) + "' holds " + std::to_string(b.shape(0)) +
                  "-channel audio (its shape field " + shape_text({b.shape(0), b.shape(1)}) +
                  " is RAVE's (channels, bytes per channel)), but metadata.yaml " +
                  "says channels: " + std::to_string(meta.channels));
    }
  }
  Waveform w = get_waveform(ex, key, meta.channels);
  check_record_buffers(ex, key);
  if (w.sampling_rate != 0 && w.sampling_rate != meta.sr) {
    throw Error("record '" + printable(key) + "' holds audio at " + std::to_string(w.sampling_rate) +
                " Hz, but metadata.yaml says sr: " + std::to_string(meta.sr));
  }
  return w;
}

AudioDataset::AudioDataset(const std::filesystem::path& db, AudioDatasetOptions options) : options_(options) {
  if (options_.n_signal < 1) throw Error("n_signal must be >= 1, got " + std::to_string(options_.n_signal));
  if (options_.channels < 0)
    throw Error("channels must be >= 0 (0 = from the database), got " + std::to_string(options_.channels));
  if (options_.phase_mangle_p < 0 || options_.phase_mangle_p > 1) {
    throw Error("phase_mangle_p must be in [0, 1], got " + std::to_string(options_.phase_mangle_p));
  }
  store_ = std::make_unique<LmdbStore>(db, LmdbStore::Mode::kReadOnly);
  store_->for_each([&](std::string_view key, std::string_view) {
    if (keys_.size() % 4096 == 0) throw_if_stop_requested("while listing database '" + db.string() + "'");
    keys_.emplace_back(key);
    return true;
  });
  if (keys_.empty()) throw Error("database '" + db.string() + "' holds no records");
  meta_ = require_db_metadata(db);
  lazy_ = meta_.lazy;
  try {
    if (lazy_) {
      for (size_t i = 0; i < keys_.size(); ++i) {
        files_.push_back(decode_lazy_record(*store_->get(keys_[i]), keys_[i]));
        for (int64_t c = 0; c < files_.back().chunks; ++c) chunks_.emplace_back(i, c);
      }
      decoder_ = std::make_unique<LazyDecoder>(meta_.sr, meta_.channels, options_.lazy_cache_bytes);
      record(0);  // the first file decodes as preprocess read it
    } else {
      decode_database_waveform(*store_->get(keys_.front()), keys_.front(), meta_);
    }
  } catch (const Error& e) {
    throw Error("database '" + db.string() + "': " + e.what());
  }
  sampling_rate_ = meta_.sr;
  if (options_.channels != 0 && options_.channels != meta_.channels) {
    throw Error("channels = " + std::to_string(options_.channels) + " was requested, but database '" +
                db.string() + "' holds " + std::to_string(meta_.channels) +
                "-channel audio (metadata.yaml); set channels to " + std::to_string(meta_.channels) +
                " or 0");
  }
  channels_ = meta_.channels;
  if (!options_.rand_pitch.empty()) {
    if (options_.rand_pitch.size() != 2) {
      throw Error("data.rand_pitch must hold two factors LO, HI (RAVE's --rand_pitch 0.7,1.3), got " +
                  std::to_string(options_.rand_pitch.size()));
    }
    pitch_ = std::make_shared<RandomPitch>(options_.rand_pitch[0], options_.rand_pitch[1], options_.n_signal);
  }
}

std::string AudioDataset::key(size_t index) const {
  if (!lazy_) return keys_.at(index);
  const auto& [file, chunk] = chunks_.at(index);
  return keys_[file] + "#" + std::to_string(chunk);
}

torch::Tensor AudioDataset::record(size_t index) const {
  if (lazy_) {
    const auto& [file, chunk] = chunks_.at(index);
    return waveform_to_tensor(decoder_->chunk(files_[file], chunk, keys_[file]));
  }
  const std::string& k = keys_.at(index);
  const auto bytes = store_->get(k);
  if (!bytes)
    throw Error("record '" + printable(k) + "' vanished from database '" + store_->path().string() + "'");
  return waveform_to_tensor(decode_database_waveform(*bytes, k, meta_));
}

Example AudioDataset::get(size_t index, std::mt19937_64& rng) const {
  if (options_.slowdown_ms > 0) {
    std::this_thread::sleep_for(std::chrono::duration<double, std::milli>(options_.slowdown_ms));
  }
  torch::Tensor full = record(index);
  if (pitch_) full = (*pitch_)(full, rng);  // RAVE: before the crop
  const int64_t length = full.size(1);
  if (length < options_.n_signal) {
    throw Error("record '" + printable(key(index)) + "' holds " + std::to_string(length) +
                " samples per channel, fewer than n_signal = " + std::to_string(options_.n_signal) +
                " (preprocess with --num_signal >= " + std::to_string(options_.n_signal / 2) + ")");
  }
  // RandomCrop: randint(0, length - n_signal) inclusive.
  const int64_t start = std::uniform_int_distribution<int64_t>(0, length - options_.n_signal)(rng);
  torch::Tensor x = full.narrow(1, start, options_.n_signal).contiguous();
  if (options_.phase_mangle &&
      std::uniform_real_distribution<double>(0.0, 1.0)(rng) < options_.phase_mangle_p) {
    random_phase_mangle(x, sampling_rate_, rng);
  }
  if (options_.dequantize) {
    // Dequantize(16): x += rand / 2**16.
    std::uniform_real_distribution<float> u(0.0f, 1.0f);
    float* d = x.data_ptr<float>();
    for (int64_t i = 0, n = x.numel(); i < n; ++i) d[i] += u(rng) * (1.0f / 65536.0f);
  }
  if (options_.normalize) normalize_peak(x);
  if (options_.derivative) take_derivative(x);
  for (Augmentation a : options_.augmentations) apply_augmentation(a, x, sampling_rate_, rng);
  Example e;
  e.input = x;
  return e;
}

}  // namespace rt
