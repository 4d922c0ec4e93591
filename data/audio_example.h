// RAVE's dataset record: encode/decode audio_example::AudioExample.
//
// Waveforms: buffers["waveform"] holds little-endian int16 samples, channels concatenated
// channel-major, precision INT16, sampling_rate set. RAVE writes `shape` as
// (channels, bytes / channels) and its loader ignores it; so do we: the length always comes
// from the size of `data` and the channel count the caller expects (metadata.yaml).
//
// Generic buffers (neural "spikes"/"behavior"): little-endian float32 with a real shape.
//
// Every decode error throws rt::Error naming the record's key and what was expected.
#pragma once

#include <torch/torch.h>

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "audio_example.pb.h"
#include "util/error.h"

namespace rt {

using AudioExample = audio_example::AudioExample;

inline constexpr const char* kWaveformBuffer = "waveform";

// Name of a Precision value ("INT16", "FLOAT32", ...), or "UNKNOWN(<n>)".
std::string precision_name(int precision);

// --- Whole records --------------------------------------------------------------------------

// Parses a serialized record. Throws rt::Error naming `key` when the bytes are not one.
AudioExample parse_example(std::string_view bytes, const std::string& key);
std::string serialize_example(const AudioExample& example);

// --- Waveforms ------------------------------------------------------------------------------

// Decoded int16 waveform, channel-major: samples[c * length + t].
struct Waveform {
  int channels = 0;
  int64_t length = 0;  // Samples per channel.
  int sampling_rate = 0;
  std::vector<int16_t> samples;
};

// Stores `samples` (channel-major, channels * length values) as buffers["waveform"] exactly as
// RAVE's preprocess does. REQUIRES: samples.size() == channels * length, channels >= 1.
void put_waveform(AudioExample& example, const int16_t* samples, int channels, int64_t length,
                  int sampling_rate);

// Convenience: a record holding only a waveform, serialized.
std::string encode_waveform(const int16_t* samples, int channels, int64_t length, int sampling_rate);

// Reads buffers["waveform"]. `channels` is the channel count of the database (metadata.yaml);
// 0 means "take shape[0] when present, else 1". Throws rt::Error naming `key` when the buffer
// is missing, its precision is not INT16, or its byte count is odd or not a multiple of
// 2 * channels.
Waveform get_waveform(const AudioExample& example, const std::string& key, int channels);

// parse_example + get_waveform.
Waveform decode_waveform(std::string_view bytes, const std::string& key, int channels);

// int16 → float32 [channels, length] by /(2^15 − 1), as RAVE's loader does.
torch::Tensor waveform_to_tensor(const Waveform& waveform);

// --- Generic float32 buffers ----------------------------------------------------------------

// Stores a float32 tensor (any shape, made contiguous) under `name` with its real shape.
// Throws rt::Error when the tensor is not float32.
void put_float_buffer(AudioExample& example, const std::string& name, const torch::Tensor& values);

// Reads a FLOAT32 buffer back as a tensor of its stored shape. Throws rt::Error naming `key`
// and `name` when it is missing, not FLOAT32, or its byte count does not match its shape.
torch::Tensor get_float_buffer(const AudioExample& example, const std::string& name, const std::string& key);

// Checks every FLOAT32 buffer other than the waveform as get_float_buffer does (its shape fits
// its bytes, without overflow) without copying it: training and `preprocess --inspect` refuse
// the same records (decode_database_waveform calls it). Throws rt::Error naming `key` and the
// buffer, both escaped (util/printable.h).
void check_record_buffers(const AudioExample& example, const std::string& key);

// --- Metadata -------------------------------------------------------------------------------

void set_metadata(AudioExample& example, const std::string& name, const std::string& value);
std::optional<std::string> get_metadata(const AudioExample& example, const std::string& name);

}  // namespace rt
