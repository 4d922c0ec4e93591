// The project's one file format for named tensors, `rt-golden/1` (spec: tests/assets/README.md
// "Format rt-golden/1"): <stem>.json, a JSON object whose "tensors" lists each tensor's name,
// shape, byte offset and dtype, and <stem>.bin, the values one after another, little-endian,
// row-major, with no gaps. The committed goldens (tests/assets/golden/, read through
// tests/support/golden.h) and ssm_step_bench's --export use it; the Python side is
// tests/oracle/rt_golden.py.
//
// Raw values only, no LibTorch: a caller turns them into tensors (and a tensor into bytes).
#pragma once

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include "util/json.h"

namespace rt::tensor_manifest {

inline constexpr const char* kFormat = "rt-golden/1";
inline constexpr const char* kManifestExtension = ".json";
inline constexpr const char* kDataExtension = ".bin";

// The manifest's keys that belong to the format; any other key is the file's own.
inline constexpr const char* kFormatKey = "format";    // kFormat
inline constexpr const char* kTensorsKey = "tensors";  // [entry, …] in file order
// An entry's keys.
inline constexpr const char* kNameKey = "name";      // string, unique in the file
inline constexpr const char* kShapeKey = "shape";    // [int, …]; [] is a scalar
inline constexpr const char* kOffsetKey = "offset";  // int: bytes into <stem>.bin
inline constexpr const char* kDtypeKey = "dtype";    // absent: float32

// How a tensor's values are stored. kPcm16: 16-bit integers standing for value / 32768.
enum class Dtype { kFloat32, kFloat64, kPcm16 };
const char* dtype_name(Dtype dtype);  // "float32", "float64", "pcm16"
size_t dtype_width(Dtype dtype);      // bytes per value: 4, 8, 2

// <stem>.json and <stem>.bin beside each other; `stem` is a path without the extension.
std::filesystem::path manifest_path(const std::filesystem::path& stem);
std::filesystem::path data_path(const std::filesystem::path& stem);

struct TensorEntry {
  std::string name;
  std::vector<int64_t> shape;
  Dtype dtype = Dtype::kFloat32;
  size_t offset = 0;  // into TensorFile::data
  size_t bytes = 0;   // numel() × dtype_width(dtype)
  int64_t numel() const;
};

struct TensorFile {
  Json manifest;                     // all of <stem>.json
  std::vector<TensorEntry> tensors;  // in file order
  std::string data;                  // all of <stem>.bin
  // The entry named `name`; null when there is none.
  const TensorEntry* find(const std::string& name) const;
  const char* values(const TensorEntry& e) const { return data.data() + e.offset; }
};

// Reads <stem>.json and <stem>.bin. Throws rt::Error naming the file when either cannot be
// read, the manifest is not format rt-golden/1, an entry is malformed (no name, a repeated
// name, a negative dimension, an unknown dtype), the tensors do not follow one another from
// offset 0 with every byte of the .bin in exactly one of them, or this host is not
// little-endian.
TensorFile read_tensor_file(const std::filesystem::path& stem);

// Collects tensors in order, then writes both files.
class TensorFileWriter {
 public:
  // Appends a tensor: `values` holds the product of `shape` values of `dtype`, in this host's
  // byte order (little-endian; write() refuses another). Throws rt::Error on a repeated name or
  // a negative dimension.
  void add(const std::string& name, const std::vector<int64_t>& shape, Dtype dtype, const void* values);
  // Writes <stem>.bin, then <stem>.json: `manifest` (an object: the file's own keys) with
  // "format" and "tensors" set by the writer, one line per tensor. Each file is replaced
  // atomically; the directory must exist. Throws rt::Error naming the file on failure.
  void write(const std::filesystem::path& stem, Json manifest) const;

  size_t size() const { return entries_.size(); }
  size_t bytes() const { return data_.size(); }

 private:
  std::vector<TensorEntry> entries_;
  std::string data_;
};

}  // namespace rt::tensor_manifest
