#include "data/lazy_audio.h"

#include <sys/stat.h>

#include <cmath>
#include <cstdio>

#include "data/audio_io.h"
#include "util/error.h"
#include "util/parse.h"
#include "util/printable.h"

namespace rt {
namespace fs = std::filesystem;

namespace {

std::string real_text(double v) {
  char buf[64];
  std::snprintf(buf, sizeof(buf), "%.17g", v);
  return buf;
}

}  // namespace

void stat_source(const fs::path& path, uint64_t* size, int64_t* mtime_ns) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) throw Error("cannot stat '" + path.string() + "'");
  *size = static_cast<uint64_t>(st.st_size);
  *mtime_ns =
      static_cast<int64_t>(st.st_mtim.tv_sec) * 1000000000LL + static_cast<int64_t>(st.st_mtim.tv_nsec);
}

std::string source_change(const LazyFile& f) {
  std::error_code ec;
  if (!fs::is_regular_file(f.path, ec)) return kSourceGone;
  uint64_t size = 0;
  int64_t mtime = 0;
  stat_source(f.path, &size, &mtime);
  if (size != f.size) return "size " + std::to_string(f.size) + " → " + std::to_string(size) + " bytes";
  return mtime != f.mtime_ns ? "modification time" : "";
}

std::string encode_lazy_record(const LazyFile& f) {
  AudioExample ex;
  set_metadata(ex, "path", f.path.string());
  set_metadata(ex, "length", real_text(f.length_seconds));
  set_metadata(ex, "channels", std::to_string(f.source_channels));
  set_metadata(ex, "rt_frames", std::to_string(f.frames));
  set_metadata(ex, "rt_chunk", std::to_string(f.chunk));
  set_metadata(ex, "rt_chunks", std::to_string(f.chunks));
  set_metadata(ex, "rt_size", std::to_string(f.size));
  set_metadata(ex, "rt_mtime_ns", std::to_string(f.mtime_ns));
  return serialize_example(ex);
}

LazyFile decode_lazy_record(std::string_view bytes, const std::string& key) {
  const AudioExample ex = parse_example(bytes, key);
  const std::string at = "lazy record '" + printable(key) + "'";
  const auto path = get_metadata(ex, "path");
  if (!path) throw Error(at + " holds no metadata 'path': it is no reference to a file");
  if (!get_metadata(ex, "rt_chunks")) {
    throw Error(at +
                " is a lazy record of RAVE's own preprocess (path, length, channels): its chunks follow "
                "ffmpeg's seeking, which this trainer does not reproduce; run `preprocess --lazy` on the "
                "same folders");
  }
  auto integer = [&](const char* name, int64_t lo) {
    const auto v = get_metadata(ex, name);
    const std::optional<int64_t> parsed = v ? parse_int64(*v) : std::nullopt;
    const int64_t n = parsed.value_or(lo - 1);
    if (!parsed || n < lo) {
      throw Error(at + ": metadata '" + name + "' is " +
                  (v ? "'" + printable(*v) + "'" : std::string("missing")) +
                  "; a whole number >= " + std::to_string(lo) + " is expected");
    }
    return n;
  };
  LazyFile f;
  f.path = *path;
  f.frames = integer("rt_frames", 1);
  f.chunk = integer("rt_chunk", 1);
  f.chunks = integer("rt_chunks", 1);
  f.size = static_cast<uint64_t>(integer("rt_size", 0));
  f.mtime_ns = integer("rt_mtime_ns", 0);
  f.source_channels = static_cast<int>(integer("channels", 1));
  if (f.chunks > f.frames / f.chunk) {
    throw Error(at + ": " + std::to_string(f.chunks) + " chunks of " + std::to_string(f.chunk) +
                " samples do not fit in its " + std::to_string(f.frames) + " frames");
  }
  if (const auto len = get_metadata(ex, "length")) f.length_seconds = std::atof(len->c_str());
  return f;
}

LazyDecoder::LazyDecoder(int sampling_rate, int channels, size_t cache_bytes)
    : sampling_rate_(sampling_rate), channels_(channels), cache_bytes_(cache_bytes) {}

LazyDecoder::Samples LazyDecoder::decoded(const LazyFile& f, const std::string& key) const {
  const std::string id = f.path.string();
  {
    std::lock_guard<std::mutex> lock(mu_);
    for (auto it = recent_.begin(); it != recent_.end(); ++it) {
      if (it->first != id) continue;
      recent_.splice(recent_.begin(), recent_, it);
      return it->second;
    }
  }
  const std::string at = "lazy record '" + printable(key) + "' ('" + printable(id) + "')";
  const std::string change = source_change(f);
  if (change == kSourceGone) throw Error(at + ": the file is gone; run `preprocess --lazy` again");
  if (!change.empty()) {
    throw Error(at + ": the file changed since `preprocess --lazy` read it (" + change +
                "); run `preprocess --lazy` again");
  }
  // As preprocess decodes it for an eager database (data/preprocess.cpp process_file).
  const AudioData audio = load_audio(f.path, sampling_rate_, channels_);
  if (audio.frames() != f.frames) {
    throw Error(at + ": decodes to " + std::to_string(audio.frames()) + " frames where preprocess found " +
                std::to_string(f.frames) + "; run `preprocess --lazy` again");
  }
  auto samples = std::make_shared<std::vector<int16_t>>(static_cast<size_t>(f.frames * channels_));
  to_int16(audio, 0, f.frames, samples->data());
  const size_t bytes = samples->size() * sizeof(int16_t);
  std::lock_guard<std::mutex> lock(mu_);
  recent_.emplace_front(id, samples);
  cached_ += bytes;
  while (cached_ > cache_bytes_ && !recent_.empty()) {
    cached_ -= recent_.back().second->size() * sizeof(int16_t);
    recent_.pop_back();
  }
  return samples;
}

Waveform LazyDecoder::chunk(const LazyFile& f, int64_t index, const std::string& key) const {
  if (index < 0 || index >= f.chunks) {
    throw Error("lazy record '" + printable(key) + "': chunk " + std::to_string(index) + " of " +
                std::to_string(f.chunks));
  }
  const Samples all = decoded(f, key);
  Waveform w;
  w.channels = channels_;
  w.length = f.chunk;
  w.sampling_rate = sampling_rate_;
  w.samples.resize(static_cast<size_t>(f.chunk * channels_));
  for (int c = 0; c < channels_; ++c) {
    const int16_t* src = all->data() + static_cast<size_t>(c) * static_cast<size_t>(f.frames) +
                         static_cast<size_t>(index * f.chunk);
    std::copy(src, src + f.chunk, w.samples.data() + static_cast<size_t>(c) * static_cast<size_t>(f.chunk));
  }
  return w;
}

}  // namespace rt
