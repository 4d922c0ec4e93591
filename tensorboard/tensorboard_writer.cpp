#include "tensorboard/tensorboard_writer.h"

#include <fcntl.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <ctime>

#include "tensorboard/tfevents.h"
#include "tensorboard_event.pb.h"
#include "util/error.h"

namespace rt {
namespace {

std::atomic<int> g_writer_seq{0};

double now_seconds() {
  using namespace std::chrono;
  return duration<double>(system_clock::now().time_since_epoch()).count();
}

std::string host_name() {
  char buf[256] = {0};
  if (::gethostname(buf, sizeof buf - 1) != 0 || buf[0] == '\0') return "localhost";
  return buf;
}

void put_le(std::string& out, uint32_t v, int bytes) {
  for (int i = 0; i < bytes; ++i) out.push_back(static_cast<char>((v >> (8 * i)) & 0xff));
}

}  // namespace

std::string encode_wav_pcm16(const float* samples, int64_t frames, int channels, int sample_rate) {
  if (frames < 0 || channels < 1 || sample_rate < 1) {
    throw Error("encode_wav_pcm16: frames " + std::to_string(frames) + ", channels " +
                std::to_string(channels) + ", sample_rate " + std::to_string(sample_rate) +
                "; expected frames >= 0, channels >= 1, rate >= 1");
  }
  const uint64_t data_bytes = static_cast<uint64_t>(frames) * static_cast<uint64_t>(channels) * 2;
  if (data_bytes > 0xffffffffull - 36) throw Error("encode_wav_pcm16: audio too long for a WAV file");
  std::string out;
  out.reserve(44 + data_bytes);
  out += "RIFF";
  put_le(out, static_cast<uint32_t>(36 + data_bytes), 4);
  out += "WAVEfmt ";
  put_le(out, 16, 4);  // fmt chunk size
  put_le(out, 1, 2);   // PCM
  put_le(out, static_cast<uint32_t>(channels), 2);
  put_le(out, static_cast<uint32_t>(sample_rate), 4);
  put_le(out, static_cast<uint32_t>(sample_rate * channels * 2), 4);  // byte rate
  put_le(out, static_cast<uint32_t>(channels * 2), 2);                // block align
  put_le(out, 16, 2);                                                 // bits per sample
  out += "data";
  put_le(out, static_cast<uint32_t>(data_bytes), 4);
  const int64_t n = frames * channels;
  for (int64_t i = 0; i < n; ++i) {
    float x = samples[i];
    x = std::isnan(x) ? 0.f : std::fmax(-1.f, std::fmin(1.f, x));
    const auto s = static_cast<int16_t>(std::lrintf(x * 32767.f));
    put_le(out, static_cast<uint16_t>(s), 2);
  }
  return out;
}

TensorBoardWriter::TensorBoardWriter(const std::filesystem::path& dir) {
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) throw Error("cannot create TensorBoard folder '" + dir.string() + "': " + ec.message());
  const double wall = now_seconds();
  char ts[32];
  std::snprintf(ts, sizeof ts, "%010lld", static_cast<long long>(wall));
  const std::string prefix =
      std::string("events.out.tfevents.") + ts + "." + host_name() + "." + std::to_string(::getpid()) + ".";
  for (int attempt = 0; attempt < 1000 && fd_ < 0; ++attempt) {
    path_ = dir / (prefix + std::to_string(g_writer_seq.fetch_add(1)));
    fd_ = ::open(path_.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_APPEND | O_CLOEXEC, 0644);
    if (fd_ < 0 && errno != EEXIST) {
      throw Error("cannot create TensorBoard file '" + path_.string() + "': " + std::strerror(errno));
    }
  }
  if (fd_ < 0)
    throw Error("cannot create a TensorBoard file '" + prefix + "<seq>' in '" + dir.string() + "'");
  tensorboard::Event event;
  event.set_wall_time(wall);
  event.set_file_version("brain.Event:2");
  write_event(event.SerializeAsString());
}

TensorBoardWriter::~TensorBoardWriter() {
  if (fd_ >= 0) {
    ::fsync(fd_);
    ::close(fd_);
  }
}

void TensorBoardWriter::write_event(const std::string& serialized_event) {
  const std::string record = tfrecord_frame(serialized_event);
  std::lock_guard<std::mutex> lock(mu_);
  const char* p = record.data();
  size_t left = record.size();
  while (left > 0) {
    const ssize_t n = ::write(fd_, p, left);
    if (n < 0) {
      if (errno == EINTR) continue;
      throw Error("cannot write TensorBoard file '" + path_.string() + "': " + std::strerror(errno));
    }
    p += n;
    left -= static_cast<size_t>(n);
  }
}

void TensorBoardWriter::add_scalar(const std::string& tag, float value, int64_t step) {
  tensorboard::Event event;
  event.set_wall_time(now_seconds());
  event.set_step(step);
  auto* v = event.mutable_summary()->add_value();
  v->set_tag(tag);
  v->set_simple_value(value);
  write_event(event.SerializeAsString());
}

void TensorBoardWriter::add_audio(const std::string& tag, const float* samples, int64_t frames, int channels,
                                  int sample_rate, int64_t step) {
  tensorboard::Event event;
  event.set_wall_time(now_seconds());
  event.set_step(step);
  auto* v = event.mutable_summary()->add_value();
  v->set_tag(tag);
  auto* audio = v->mutable_audio();
  audio->set_sample_rate(static_cast<float>(sample_rate));
  audio->set_num_channels(channels);
  audio->set_length_frames(frames);
  audio->set_encoded_audio_string(encode_wav_pcm16(samples, frames, channels, sample_rate));
  audio->set_content_type("audio/wav");
  write_event(event.SerializeAsString());
}

void TensorBoardWriter::add_image_png(const std::string& tag, const std::string& png, int width, int height,
                                      int64_t step, int colorspace) {
  tensorboard::Event event;
  event.set_wall_time(now_seconds());
  event.set_step(step);
  auto* v = event.mutable_summary()->add_value();
  v->set_tag(tag);
  auto* image = v->mutable_image();
  image->set_width(width);
  image->set_height(height);
  image->set_colorspace(colorspace);
  image->set_encoded_image_string(png);
  write_event(event.SerializeAsString());
}

void TensorBoardWriter::flush() {
  std::lock_guard<std::mutex> lock(mu_);
  if (::fsync(fd_) != 0) {
    throw Error("cannot flush TensorBoard file '" + path_.string() + "': " + std::strerror(errno));
  }
}

}  // namespace rt
