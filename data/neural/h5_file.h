// A minimal RAII reader/writer over the HDF5 C API for the Neural Latents Benchmark tensor
// layout: rank-3 numeric datasets at the file root plus scalar numeric root attributes.
//
// Every error is an rt::Error naming the file and, where there is one, the dataset/attribute
// key. HDF5's own error-stack printing is switched off (we report instead).
#pragma once

#include <hdf5.h>

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

namespace rt::neural {

// The most values one read_float returns (4 GiB as float32; the largest Neural Latents Benchmark
// dataset holds ~10^8).
inline constexpr uint64_t kMaxH5Values = uint64_t{1} << 30;

struct H5Array {
  std::vector<int64_t> shape;
  std::vector<float> data;  // row-major, converted to float by HDF5 from any integer/float type
};

class H5File {
 public:
  // Throws when the file does not exist or is not a readable HDF5 file.
  static H5File open_read(const std::filesystem::path& path);
  // Creates (truncates) a file for writing.
  static H5File create(const std::filesystem::path& path);
  ~H5File();
  H5File(H5File&& other) noexcept;
  H5File(const H5File&) = delete;
  H5File& operator=(const H5File&) = delete;
  H5File& operator=(H5File&&) = delete;

  const std::filesystem::path& path() const { return path_; }
  bool has_dataset(const std::string& key) const;
  // Reads a numeric dataset of the given rank. Throws naming file and key when it is missing,
  // not integer/float, of another rank, or larger than `max_elements` values (checked on its
  // declared shape before anything is allocated).
  H5Array read_float(const std::string& key, int rank, uint64_t max_elements = kMaxH5Values) const;
  // A scalar numeric root attribute, or nullopt when absent.
  std::optional<double> read_root_attribute(const std::string& name) const;

  void write_float(const std::string& key, const std::vector<int64_t>& shape, const float* data);
  void write_int32(const std::string& key, const std::vector<int64_t>& shape, const int32_t* data);
  void write_root_attribute(const std::string& name, double value);

 private:
  H5File(std::filesystem::path path, hid_t id) : path_(std::move(path)), id_(id) {}
  void write(const std::string& key, const std::vector<int64_t>& shape, hid_t file_type, hid_t mem_type,
             const void* data);
  std::filesystem::path path_;
  hid_t id_ = -1;
};

}  // namespace rt::neural
