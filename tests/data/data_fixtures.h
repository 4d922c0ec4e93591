// Fixtures shared by the data tests: small LMDBs written with RAVE's exact conventions.
#pragma once

#include <cmath>
#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include "data/audio_example.h"
#include "data/db_metadata.h"
#include "data/lmdb_store.h"
#include "data/loader.h"

namespace rt::testing {

// Up to n batches of a loader's stream (fewer when it ends).
inline std::vector<Batch> take(Loader& loader, int n) {
  std::vector<Batch> out;
  for (int i = 0; i < n; ++i) {
    auto b = loader.next();
    if (!b) break;
    out.push_back(std::move(*b));
  }
  return out;
}

// The int16 sample RAVE-style records hold at (record, channel, t): a distinct sine per record
// and channel, so crops can be located and channels told apart.
inline int16_t fixture_sample(int record, int channel, int64_t t) {
  const double f = 0.01 + 0.003 * record + 0.0011 * channel;
  return static_cast<int16_t>(std::lround(12000.0 * std::sin(f * static_cast<double>(t))));
}

// Writes `records` entries the way RAVE's preprocess does: keys "%08d", waveform int16
// channel-major with shape (channels, bytes/channels), precision INT16, sampling_rate set;
// metadata.yaml written last (unless write_metadata is false, as after RAVE's map-full error).
inline void write_rave_style_db(const std::filesystem::path& db, int records, int channels, int64_t length,
                                int sr = 44100, bool write_metadata = true) {
  LmdbStore store(db, LmdbStore::Mode::kReadWrite, 64 << 20);
  LmdbStore::Writer w(store);
  std::vector<int16_t> samples(static_cast<size_t>(channels * length));
  for (int r = 0; r < records; ++r) {
    for (int c = 0; c < channels; ++c) {
      for (int64_t t = 0; t < length; ++t)
        samples[static_cast<size_t>(c * length + t)] = fixture_sample(r, c, t);
    }
    AudioExample ex;
    auto& buf = (*ex.mutable_buffers())["waveform"];
    buf.set_data(std::string(reinterpret_cast<const char*>(samples.data()), samples.size() * 2));
    buf.set_precision(AudioExample::INT16);
    buf.set_sampling_rate(sr);
    buf.add_shape(channels);
    buf.add_shape(static_cast<int32_t>(samples.size() * 2 / static_cast<size_t>(channels)));
    w.put(LmdbStore::key_for_index(static_cast<uint64_t>(r)), ex.SerializeAsString());
  }
  w.commit();
  if (write_metadata) {
    write_db_metadata(db, DbMetadata{false, channels, static_cast<double>(records * length) / sr, sr});
  }
}

}  // namespace rt::testing
