#include "data/audio_dataset.h"

#include <chrono>
#include <cmath>
#include <thread>

#include "data/audio_example.h"
#include "data/db_metadata.h"
#include "util/error.h"

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

void random_phase_mangle(torch::Tensor& x, int sampling_rate, std::mt19937_64& rng, double min_f, double max_f,
                         double amplitude) {
  const double u = std::uniform_real_distribution<double>(0.0, 1.0)(rng);
  const double f = std::exp(u * (std::log(max_f) - std::log(min_f)) + std::log(min_f));
  allpass_filter(x, 2.0 * M_PI * f / sampling_rate, amplitude);
}

AudioDataset::AudioDataset(const std::filesystem::path& db, AudioDatasetOptions options)
    : options_(options) {
  if (options_.n_signal < 1) throw Error("n_signal must be >= 1, got " + std::to_string(options_.n_signal));
  if (options_.channels < 0) throw Error("channels must be >= 0 (0 = from the database), got " + std::to_string(options_.channels));
  if (options_.phase_mangle_p < 0 || options_.phase_mangle_p > 1) {
    throw Error("phase_mangle_p must be in [0, 1], got " + std::to_string(options_.phase_mangle_p));
  }
  store_ = std::make_unique<LmdbStore>(db, LmdbStore::Mode::kReadOnly);
  store_->for_each([&](std::string_view key, std::string_view) {
    keys_.emplace_back(key);
    return true;
  });
  if (keys_.empty()) throw Error("database '" + db.string() + "' holds no records");

  const auto meta = read_db_metadata(db);
  int db_channels = meta ? meta->channels : 0;
  const auto first = store_->get(keys_.front());
  Waveform w = decode_waveform(*first, keys_.front(), db_channels);
  if (db_channels == 0) db_channels = w.channels;
  sampling_rate_ = meta ? meta->sr : w.sampling_rate;
  if (sampling_rate_ <= 0) sampling_rate_ = 44100;
  if (options_.channels != 0 && options_.channels != db_channels) {
    throw Error("channels = " + std::to_string(options_.channels) + " was requested, but database '" + db.string() +
                "' holds " + std::to_string(db_channels) + "-channel audio" +
                (meta ? " (metadata.yaml)" : " (first record)") + "; set channels to " +
                std::to_string(db_channels) + " or 0");
  }
  channels_ = db_channels;
}

torch::Tensor AudioDataset::record(size_t index) const {
  const std::string& k = keys_.at(index);
  const auto bytes = store_->get(k);
  if (!bytes) throw Error("record '" + k + "' vanished from database '" + store_->path().string() + "'");
  return waveform_to_tensor(decode_waveform(*bytes, k, channels_));
}

Example AudioDataset::get(size_t index, std::mt19937_64& rng) const {
  if (options_.slowdown_ms > 0) {
    std::this_thread::sleep_for(std::chrono::duration<double, std::milli>(options_.slowdown_ms));
  }
  torch::Tensor full = record(index);
  const int64_t length = full.size(1);
  if (length < options_.n_signal) {
    throw Error("record '" + keys_[index] + "' holds " + std::to_string(length) + " samples per channel, fewer than n_signal = " +
                std::to_string(options_.n_signal) + " (preprocess with --num_signal >= " + std::to_string(options_.n_signal / 2) + ")");
  }
  // RandomCrop: randint(0, length - n_signal) inclusive.
  const int64_t start = std::uniform_int_distribution<int64_t>(0, length - options_.n_signal)(rng);
  torch::Tensor x = full.narrow(1, start, options_.n_signal).contiguous();
  if (options_.phase_mangle && std::uniform_real_distribution<double>(0.0, 1.0)(rng) < options_.phase_mangle_p) {
    random_phase_mangle(x, sampling_rate_, rng);
  }
  if (options_.dequantize) {
    // Dequantize(16): x += rand / 2**16.
    std::uniform_real_distribution<float> u(0.0f, 1.0f);
    float* d = x.data_ptr<float>();
    for (int64_t i = 0, n = x.numel(); i < n; ++i) d[i] += u(rng) * (1.0f / 65536.0f);
  }
  Example e;
  e.input = x;
  return e;
}

}  // namespace rt
