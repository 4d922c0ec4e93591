// AudioDataset: RAVE's audio LMDB as an ExampleSource (RAVE rave/dataset.py).
//
// get(i) decodes the i-th key (keys in LMDB order, as RAVE's loader lists them), converts
// int16 → float32 by /(2^15 − 1), then: random crop to n_signal, phase mangle with
// probability phase_mangle_p, dequantize (+U[0,1)/2^16), then the options of data/augment.h.
// Output: input = [channels, n_signal].
#pragma once

#include <cstdint>
#include <filesystem>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "data/audio_example.h"
#include "data/augment.h"
#include "data/db_metadata.h"
#include "data/example.h"
#include "data/lazy_audio.h"
#include "data/lmdb_store.h"

namespace rt {

// The decoded files a lazy database's loader keeps by default (LazyDecoder): 512 MiB.
inline constexpr size_t kLazyCacheBytes = size_t{512} << 20;

struct AudioDatasetOptions {
  int64_t n_signal = 131072;
  int64_t channels = 0;  // 0 = metadata.yaml's; otherwise it must match metadata.yaml.
  bool phase_mangle = true;
  double phase_mangle_p = 0.8;
  bool dequantize = true;
  double slowdown_ms = 0.0;                   // Artificial per-example delay (bottleneck-report tests).
  size_t lazy_cache_bytes = kLazyCacheBytes;  // A lazy database's decoded files kept (0: none).
  // After the dequantisation, in RAVE's order (data/augment.h): --normalize, --derivative, then
  // each augmentation.
  std::vector<double> rand_pitch;  // --rand_pitch LO,HI before the crop (RandomPitch); empty = off
  bool normalize = false;
  bool derivative = false;
  std::vector<Augmentation> augmentations;
};

// RAVE's random phase mangle (rave/core.py): one 2nd-order allpass with a pole at
// r·e^{iω}, r = 0.99, ω = 2πf/sr, f log-uniform in [20, 2000] Hz, applied to every channel of
// x ([channels, length], contiguous float32) in place.
void random_phase_mangle(torch::Tensor& x, int sampling_rate, std::mt19937_64& rng, double min_f = 20.0,
                         double max_f = 2000.0, double amplitude = 0.99);

// The allpass itself (scipy.signal.lfilter(b, a, x) with b = [r², −2Re z0, 1],
// a = [1, −2Re z0, r²]), zero initial state, per row of x.
void allpass_filter(torch::Tensor& x, double omega, double amplitude);

// Decodes one record of an audio database and checks it against the database's metadata.yaml:
// a waveform (decode_waveform's checks), not truncated (its RAVE shape field (channels, bytes
// per channel) promising more bytes than it holds), of meta.channels channels where that field
// says otherwise, at meta.sr where the record carries a rate. Throws rt::Error naming the key and both
// values. The one validation of an audio record: the loader and `preprocess --inspect` both decode through
// it.
Waveform decode_database_waveform(std::string_view bytes, const std::string& key, const DbMetadata& meta);

class AudioDataset : public ExampleSource {
 public:
  // Opens `db` read-only and lists its keys. Throws rt::Error naming the path when it is not
  // a database, when it is empty, when its metadata.yaml is missing or out of range
  // (require_db_metadata), when its first record disagrees with it, or when options.channels
  // differs from the database's channel count (both named); rt::StopRequested after
  // SIGINT/SIGTERM. REQUIRES options.n_signal >= 1.
  AudioDataset(const std::filesystem::path& db, AudioDatasetOptions options);

  // Examples: the records of an eager database, the chunks of a lazy one's files.
  size_t size() const override { return lazy_ ? chunks_.size() : keys_.size(); }
  // Throws rt::Error naming the key when the record is corrupt or shorter than n_signal.
  Example get(size_t index, std::mt19937_64& rng) const override;

  // The whole record (a lazy database: the chunk, decoded) as float32 [channels, length],
  // without augmentation.
  torch::Tensor record(size_t index) const;
  bool lazy() const { return lazy_; }

  int channels() const { return channels_; }
  int sampling_rate() const { return sampling_rate_; }
  // The record's key; a lazy database's chunk as "<key>#<chunk>".
  std::string key(size_t index) const;
  const AudioDatasetOptions& options() const { return options_; }

 private:
  std::unique_ptr<LmdbStore> store_;
  AudioDatasetOptions options_;
  std::vector<std::string> keys_;
  DbMetadata meta_;
  int channels_ = 0;
  int sampling_rate_ = 0;
  std::shared_ptr<const RandomPitch> pitch_;
  // Lazy (data/lazy_audio.h): the files, and every chunk as (file, chunk in it), in key order.
  bool lazy_ = false;
  std::vector<LazyFile> files_;
  std::vector<std::pair<size_t, int64_t>> chunks_;
  std::unique_ptr<LazyDecoder> decoder_;
};

}  // namespace rt
