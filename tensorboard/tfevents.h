// TensorBoard event files: TFRecord framing with CRC-32C, and a verifying reader
// (tensorflow/tensorboard: tensorboard/summary/writer/record_writer.py, crc32c.py). The writer is
// tensorboard_writer.h.
//
// Record layout: uint64 length (LE) | uint32 masked CRC-32C of the 8 length bytes | data |
// uint32 masked CRC-32C of data; mask(crc) = ((crc >> 15) | (crc << 17)) + 0xa282ead8.
#pragma once

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <string>
#include <string_view>
#include <vector>

namespace rt {

// CRC-32C (Castagnoli, reflected polynomial 0x82F63B78): crc32c("123456789") == 0xE3069283.
// crc32c_extend continues a CRC over more bytes: crc32c(ab) == crc32c_extend(crc32c(a), b).
uint32_t crc32c_extend(uint32_t crc, const void* data, size_t n);
inline uint32_t crc32c(const void* data, size_t n) { return crc32c_extend(0, data, n); }
uint32_t crc32c_mask(uint32_t crc);
uint32_t crc32c_unmask(uint32_t masked);

// One framed record holding `payload`.
std::string tfrecord_frame(std::string_view payload);

// One summary value (or the file_version record) read back from an events file.
struct TbRecord {
  enum class Kind { FileVersion, Scalar, Audio, Image, Other };
  Kind kind = Kind::Other;
  uint64_t offset = 0;  // byte offset of the record in the file
  double wall_time = 0;
  int64_t step = 0;
  std::string tag;
  float value = 0;                   // Scalar
  std::string file_version;          // FileVersion ("brain.Event:2")
  std::string encoded;               // Audio: the WAV bytes; Image: the PNG bytes
  std::string content_type;          // Audio
  float sample_rate = 0;             // Audio
  int64_t channels = 0, frames = 0;  // Audio
  int width = 0, height = 0;         // Image
};

// Reads every record of an events file, verifying both CRCs of each. An event with several
// summary values yields one TbRecord per value.
// With `damage` == nullptr, a damaged or truncated record throws rt::Error naming the file and
// the record's byte offset. Otherwise reading stops there (as TensorBoard does), the records
// before it are returned and *damage holds that message ("" when the file is whole).
std::vector<TbRecord> read_tfevents(const std::filesystem::path& path, std::string* damage = nullptr);

}  // namespace rt
