#include "util/tensor_manifest.h"

#include <cstring>
#include <set>
#include <utility>

#include "util/atomic_file.h"
#include "util/error.h"

namespace rt::tensor_manifest {
namespace {

namespace fs = std::filesystem;

bool little_endian_host() {
  const uint32_t probe = 1;
  unsigned char first = 0;
  std::memcpy(&first, &probe, 1);
  return first == 1;
}

const Dtype kDtypes[] = {Dtype::kFloat32, Dtype::kFloat64, Dtype::kPcm16};

int64_t product(const std::vector<int64_t>& shape) {
  int64_t n = 1;
  for (const int64_t d : shape) n *= d;
  return n;
}

bool has_negative(const std::vector<int64_t>& shape) {
  for (const int64_t d : shape) {
    if (d < 0) return true;
  }
  return false;
}

}  // namespace

const char* dtype_name(Dtype dtype) {
  switch (dtype) {
    case Dtype::kFloat32:
      return "float32";
    case Dtype::kFloat64:
      return "float64";
    case Dtype::kPcm16:
      return "pcm16";
  }
  return "?";
}

size_t dtype_width(Dtype dtype) {
  switch (dtype) {
    case Dtype::kFloat32:
      return 4;
    case Dtype::kFloat64:
      return 8;
    case Dtype::kPcm16:
      return 2;
  }
  return 0;
}

fs::path manifest_path(const fs::path& stem) { return fs::path(stem.string() + kManifestExtension); }
fs::path data_path(const fs::path& stem) { return fs::path(stem.string() + kDataExtension); }

int64_t TensorEntry::numel() const { return product(shape); }

const TensorEntry* TensorFile::find(const std::string& name) const {
  for (const auto& e : tensors) {
    if (e.name == name) return &e;
  }
  return nullptr;
}

TensorFile read_tensor_file(const fs::path& stem) {
  const fs::path json_path = manifest_path(stem), bin_path = data_path(stem);
  TensorFile f;
  f.manifest = read_json(json_path);
  const std::string where = json_path.string();
  if (!f.manifest.is_object() || f.manifest.value(kFormatKey, "") != kFormat) {
    throw Error(where + " is not format " + kFormat + " (its \"" + kFormatKey + "\" must be \"" + kFormat +
                "\")");
  }
  if (!little_endian_host())
    throw Error(where + ": " + kFormat + " files are little-endian; this host is not");
  f.data = read_file(bin_path);
  const auto list = f.manifest.find(kTensorsKey);
  if (list == f.manifest.end() || !list->is_array()) {
    throw Error(where + ": \"" + kTensorsKey + "\" must be a list of {name, shape, offset[, dtype]}");
  }
  std::set<std::string> names;
  size_t expected_offset = 0;
  for (const Json& j : *list) {
    TensorEntry e;
    try {
      e.name = j.at(kNameKey).get<std::string>();
      e.shape = j.at(kShapeKey).get<std::vector<int64_t>>();
      e.offset = j.at(kOffsetKey).get<size_t>();
    } catch (const Json::exception& ex) {
      throw Error(where + ": a tensor entry lacks name, shape or offset (" + ex.what() + "): " + j.dump());
    }
    if (!names.insert(e.name).second) throw Error(where + ": tensor '" + e.name + "' is listed twice");
    if (has_negative(e.shape)) throw Error(where + ": tensor '" + e.name + "' has a negative dimension");
    const std::string dtype = j.value(kDtypeKey, std::string(dtype_name(Dtype::kFloat32)));
    bool known = false;
    for (const Dtype d : kDtypes) {
      if (dtype == dtype_name(d)) e.dtype = d, known = true;
    }
    if (!known) {
      throw Error(where + ": tensor '" + e.name + "' has dtype '" + dtype +
                  "' (accepted: float32, float64, pcm16)");
    }
    e.bytes = static_cast<size_t>(e.numel()) * dtype_width(e.dtype);
    if (e.offset != expected_offset || e.offset + e.bytes > f.data.size()) {
      throw Error(bin_path.string() + ": tensor '" + e.name + "' at offset " + std::to_string(e.offset) +
                  " (" + std::to_string(e.bytes) + " bytes): expected offset " +
                  std::to_string(expected_offset) + " in a file of " + std::to_string(f.data.size()) +
                  " bytes");
    }
    expected_offset = e.offset + e.bytes;
    f.tensors.push_back(std::move(e));
  }
  if (expected_offset != f.data.size()) {
    throw Error(bin_path.string() + " has " + std::to_string(f.data.size() - expected_offset) +
                " bytes after its last tensor");
  }
  return f;
}

void TensorFileWriter::add(const std::string& name, const std::vector<int64_t>& shape, Dtype dtype,
                           const void* values) {
  for (const auto& e : entries_) {
    if (e.name == name) throw Error("tensor '" + name + "' was already added");
  }
  if (has_negative(shape)) throw Error("tensor '" + name + "' has a negative dimension");
  TensorEntry e;
  e.name = name;
  e.shape = shape;
  e.dtype = dtype;
  e.offset = data_.size();
  e.bytes = static_cast<size_t>(product(shape)) * dtype_width(dtype);
  data_.append(static_cast<const char*>(values), e.bytes);
  entries_.push_back(std::move(e));
}

void TensorFileWriter::write(const fs::path& stem, Json manifest) const {
  if (!little_endian_host()) throw Error(std::string(kFormat) + " files are little-endian; this host is not");
  if (!manifest.is_object()) throw Error("a " + std::string(kFormat) + " manifest must be a JSON object");
  manifest[kFormatKey] = kFormat;
  manifest.erase(kTensorsKey);
  // The file's own keys indented, then the tensors one per line (as the Python writers lay it out).
  const std::string head = manifest.dump(1);  // "{\n \"k\": v,\n …\n}"
  std::string text = head.substr(0, head.size() - 2) + ",\n \"" + kTensorsKey + "\": [";
  for (size_t i = 0; i < entries_.size(); ++i) {
    const TensorEntry& e = entries_[i];
    Json j = {{kNameKey, e.name}, {kShapeKey, e.shape}, {kOffsetKey, e.offset}};
    if (e.dtype != Dtype::kFloat32) j[kDtypeKey] = dtype_name(e.dtype);
    text += (i == 0 ? "\n  " : ",\n  ") + j.dump();
  }
  text += entries_.empty() ? "]\n}\n" : "\n ]\n}\n";
  write_file_atomic(data_path(stem), data_);
  write_file_atomic(manifest_path(stem), text);
}

}  // namespace rt::tensor_manifest
