// Writes TensorBoard event files (scalars, audio, images) into a run directory
// (events.out.tfevents.<ts>.<host>.<pid>; format in tfevents.h).
//
// Each record is written with one append of the whole framed record, so a crash (or kill -9)
// leaves at worst a truncated last record: every earlier record stays readable, which matters
// because TensorBoard stops at the first damaged record. Thread-safe.
#pragma once

#include <cstdint>
#include <filesystem>
#include <mutex>
#include <string>

namespace rt {

class TensorBoardWriter {
 public:
  // Creates `dir` if needed and a new file events.out.tfevents.<10-digit unix ts>.<host>.<pid>.<seq>
  // in it (seq counts writers in this process), then writes Event{wall_time, "brain.Event:2"}.
  // Throws rt::Error naming the file when it cannot be created or written.
  explicit TensorBoardWriter(const std::filesystem::path& dir);
  ~TensorBoardWriter();  // flushes and closes; never throws
  TensorBoardWriter(const TensorBoardWriter&) = delete;
  TensorBoardWriter& operator=(const TensorBoardWriter&) = delete;

  const std::filesystem::path& file_path() const { return path_; }

  // Each call appends one Event{wall_time = now, step, summary}. Throw rt::Error on write errors.
  void add_scalar(const std::string& tag, float value, int64_t step);
  // `samples`: `frames` × `channels` interleaved floats in [-1, 1] (clamped), stored as a
  // 16-bit PCM WAV with content_type "audio/wav".
  void add_audio(const std::string& tag, const float* samples, int64_t frames, int channels, int sample_rate,
                 int64_t step);
  // `png`: an encoded PNG of width × height; colorspace 1 grey, 3 RGB, 4 RGBA.
  void add_image_png(const std::string& tag, const std::string& png, int width, int height, int64_t step,
                     int colorspace = 4);
  // Makes everything written so far durable (fsync).
  void flush();

 private:
  void write_event(const std::string& serialized_event);
  std::mutex mu_;
  std::filesystem::path path_;
  int fd_ = -1;
};

// A 16-bit PCM WAV file (44-byte RIFF header + little-endian samples) in memory.
std::string encode_wav_pcm16(const float* samples, int64_t frames, int channels, int sample_rate);

}  // namespace rt
