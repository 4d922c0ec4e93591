#include "data/audio_example.h"

#include <cstring>
#include <limits>

#include "util/printable.h"

namespace rt {
namespace {

// The on-disk format is little-endian (numpy's default on every platform RAVE runs on).
constexpr bool kHostIsLittleEndian = __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__;

template <class T>
void copy_le(const void* src, T* dst, size_t count) {
  if (count == 0) return;  // dst may be an empty vector's null data(): memcpy's arguments must not be null
  std::memcpy(dst, src, count * sizeof(T));
  if constexpr (!kHostIsLittleEndian) {
    for (size_t i = 0; i < count; ++i) {
      auto* b = reinterpret_cast<unsigned char*>(dst + i);
      for (size_t j = 0; j < sizeof(T) / 2; ++j) std::swap(b[j], b[sizeof(T) - 1 - j]);
    }
  }
}

template <class T>
std::string to_le_bytes(const T* values, size_t count) {
  std::string out(count * sizeof(T), '\0');
  if (count == 0) return out;
  std::memcpy(out.data(), values, out.size());
  if constexpr (!kHostIsLittleEndian) {
    for (size_t i = 0; i < count; ++i) {
      auto* b = reinterpret_cast<unsigned char*>(out.data() + i * sizeof(T));
      for (size_t j = 0; j < sizeof(T) / 2; ++j) std::swap(b[j], b[sizeof(T) - 1 - j]);
    }
  }
  return out;
}

// `name` is a C string so that a call with a literal (kWaveformBuffer) binds no temporary to a
// reference parameter of this reference-returning function (g++ 14 -Wdangling-reference).
const AudioExample::AudioBuffer& find_buffer(const AudioExample& example, const char* name,
                                             const std::string& key) {
  auto it = example.buffers().find(name);
  if (it == example.buffers().end()) {
    std::string found;
    for (const auto& [n, _] : example.buffers()) found += (found.empty() ? "" : ", ") + printable(n);
    throw Error("record '" + printable(key) + "' has no buffer '" + printable(name) +
                "' (buffers: " + (found.empty() ? "none" : found) + ")");
  }
  return it->second;
}

}  // namespace

std::string precision_name(int precision) {
  if (AudioExample::Precision_IsValid(precision)) {
    return AudioExample::Precision_Name(static_cast<AudioExample::Precision>(precision));
  }
  return "UNKNOWN(" + std::to_string(precision) + ")";
}

AudioExample parse_example(std::string_view bytes, const std::string& key) {
  AudioExample example;
  // protobuf sizes messages with an int: anything larger is no message it could have written.
  if (bytes.size() > static_cast<size_t>(std::numeric_limits<int>::max()) ||
      !example.ParseFromArray(bytes.data(), static_cast<int>(bytes.size()))) {
    throw Error("record '" + printable(key) + "' (" + std::to_string(bytes.size()) +
                " bytes) is not a valid AudioExample protobuf message");
  }
  return example;
}

std::string serialize_example(const AudioExample& example) {
  std::string out;
  if (!example.SerializeToString(&out)) throw Error("cannot serialize AudioExample record");
  return out;
}

void put_waveform(AudioExample& example, const int16_t* samples, int channels, int64_t length,
                  int sampling_rate) {
  if (channels < 1) throw Error("put_waveform: channels must be >= 1, got " + std::to_string(channels));
  auto& buffer = (*example.mutable_buffers())[kWaveformBuffer];
  const size_t count = static_cast<size_t>(channels) * static_cast<size_t>(length);
  buffer.set_data(to_le_bytes(samples, count));
  buffer.set_precision(AudioExample::INT16);
  buffer.set_sampling_rate(sampling_rate);
  // RAVE's preprocess: shape = (channels, len(bytes) // channels) — bytes, not samples.
  buffer.clear_shape();
  buffer.add_shape(channels);
  buffer.add_shape(static_cast<int32_t>(buffer.data().size() / static_cast<size_t>(channels)));
}

std::string encode_waveform(const int16_t* samples, int channels, int64_t length, int sampling_rate) {
  AudioExample example;
  put_waveform(example, samples, channels, length, sampling_rate);
  return serialize_example(example);
}

Waveform get_waveform(const AudioExample& example, const std::string& key, int channels) {
  const auto& buffer = find_buffer(example, kWaveformBuffer, key);
  if (buffer.precision() != AudioExample::INT16) {
    throw Error("record '" + printable(key) + "': buffer 'waveform' has precision " +
                precision_name(buffer.precision()) + ", expected INT16");
  }
  if (channels <= 0) channels = buffer.shape_size() > 0 && buffer.shape(0) > 0 ? buffer.shape(0) : 1;
  const size_t bytes = buffer.data().size();
  if (bytes == 0) throw Error("record '" + printable(key) + "': buffer 'waveform' holds no samples");
  if (bytes % 2 != 0) {
    throw Error("record '" + printable(key) + "': buffer 'waveform' has an odd byte count (" +
                std::to_string(bytes) + "), not int16 samples");
  }
  const size_t count = bytes / 2;
  if (count % static_cast<size_t>(channels) != 0) {
    throw Error("record '" + printable(key) + "': buffer 'waveform' holds " + std::to_string(count) +
                " samples, not a multiple of " + std::to_string(channels) + " channels");
  }
  Waveform w;
  w.channels = channels;
  w.length = static_cast<int64_t>(count / static_cast<size_t>(channels));
  w.sampling_rate = buffer.sampling_rate();
  w.samples.resize(count);
  copy_le(buffer.data().data(), w.samples.data(), count);
  return w;
}

Waveform decode_waveform(std::string_view bytes, const std::string& key, int channels) {
  return get_waveform(parse_example(bytes, key), key, channels);
}

torch::Tensor waveform_to_tensor(const Waveform& waveform) {
  auto out = torch::empty({waveform.channels, waveform.length}, torch::kFloat32);
  float* dst = out.data_ptr<float>();
  constexpr float kScale = 1.0f / 32767.0f;  // RAVE dataset.py: x / (2**15 - 1)
  for (size_t i = 0; i < waveform.samples.size(); ++i)
    dst[i] = static_cast<float>(waveform.samples[i]) * kScale;
  return out;
}

void put_float_buffer(AudioExample& example, const std::string& name, const torch::Tensor& values) {
  if (values.scalar_type() != torch::kFloat32) {
    throw Error("buffer '" + name + "' must be float32, got " +
                std::string(c10::toString(values.scalar_type())));
  }
  auto t = values.to(torch::kCPU).contiguous();
  auto& buffer = (*example.mutable_buffers())[name];
  buffer.set_data(to_le_bytes(t.data_ptr<float>(), static_cast<size_t>(t.numel())));
  buffer.set_precision(AudioExample::FLOAT32);
  buffer.clear_shape();
  for (int64_t d : t.sizes()) buffer.add_shape(static_cast<int32_t>(d));
}

namespace {

// The number of floats a FLOAT32 buffer holds, after checking that its shape fits its bytes.
uint64_t checked_float_count(const AudioExample::AudioBuffer& buffer, const std::string& name,
                             const std::string& key) {
  if (buffer.precision() != AudioExample::FLOAT32) {
    throw Error("record '" + printable(key) + "': buffer '" + printable(name) + "' has precision " +
                precision_name(buffer.precision()) + ", expected FLOAT32");
  }
  std::vector<int64_t> shape(buffer.shape().begin(), buffer.shape().end());
  const std::string field =
      "record '" + printable(key) + "': buffer '" + printable(name) + "' of shape " + shape_text(shape);
  // The product is checked against the bytes held as it grows, so a crafted shape can neither
  // overflow it nor size an allocation beyond the data.
  const uint64_t held = buffer.data().size() / sizeof(float);
  bool empty = false;
  for (int64_t d : shape) {
    if (d < 0) throw Error(field + " has a negative dimension");
    empty = empty || d == 0;
  }
  uint64_t numel = empty ? 0 : 1;
  bool over = false;
  for (size_t i = 0; !empty && !over && i < shape.size(); ++i) {
    const auto d = static_cast<uint64_t>(shape[i]);
    over = numel > held / d;
    if (!over) numel *= d;
  }
  if (over || buffer.data().size() != numel * sizeof(float)) {
    throw Error(field + " holds " + std::to_string(buffer.data().size()) + " bytes, " +
                (over || buffer.data().size() < numel * sizeof(float)
                     ? "fewer than its shape needs (truncated)"
                     : "more than its shape needs (" + std::to_string(numel * sizeof(float)) + ")"));
  }
  return numel;
}

}  // namespace

void check_record_buffers(const AudioExample& example, const std::string& key) {
  for (const auto& [name, buffer] : example.buffers()) {
    if (name != kWaveformBuffer && buffer.precision() == AudioExample::FLOAT32) {
      checked_float_count(buffer, name, key);
    }
  }
}

torch::Tensor get_float_buffer(const AudioExample& example, const std::string& name, const std::string& key) {
  const auto& buffer = find_buffer(example, name.c_str(), key);
  const uint64_t numel = checked_float_count(buffer, name, key);
  std::vector<int64_t> shape(buffer.shape().begin(), buffer.shape().end());
  auto out = torch::empty(shape, torch::kFloat32);
  copy_le(buffer.data().data(), out.data_ptr<float>(), static_cast<size_t>(numel));
  return out;
}

void set_metadata(AudioExample& example, const std::string& name, const std::string& value) {
  (*example.mutable_metadata())[name] = value;
}

std::optional<std::string> get_metadata(const AudioExample& example, const std::string& name) {
  auto it = example.metadata().find(name);
  if (it == example.metadata().end()) return std::nullopt;
  return it->second;
}

}  // namespace rt
