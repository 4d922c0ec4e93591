#include "data/neural/h5_file.h"

#include <functional>

#include "util/error.h"
#include "util/path_kind.h"

namespace rt::neural {
namespace {

void silence_hdf5_errors() {
  static const bool once = [] {
    H5Eset_auto2(H5E_DEFAULT, nullptr, nullptr);
    return true;
  }();
  (void)once;
}

// Closes an HDF5 handle on scope exit.
struct Handle {
  hid_t id;
  herr_t (*close)(hid_t);
  ~Handle() {
    if (id >= 0) close(id);
  }
};

}  // namespace

H5File H5File::open_read(const std::filesystem::path& path) {
  silence_hdf5_errors();
  if (const std::string why = not_a_regular_file(path); !why.empty())
    throw Error("HDF5 file " + path.string() + " " + why);
  if (H5Fis_hdf5(path.c_str()) <= 0) {
    throw Error("cannot read " + path.string() + ": not an HDF5 file (or unreadable)");
  }
  hid_t id = H5Fopen(path.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT);
  if (id < 0) throw Error("cannot open HDF5 file " + path.string() + " for reading");
  return H5File(path, id);
}

H5File H5File::create(const std::filesystem::path& path) {
  silence_hdf5_errors();
  hid_t id = H5Fcreate(path.c_str(), H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT);
  if (id < 0) throw Error("cannot create HDF5 file " + path.string());
  return H5File(path, id);
}

H5File::H5File(H5File&& other) noexcept : path_(std::move(other.path_)), id_(other.id_) { other.id_ = -1; }

H5File::~H5File() {
  if (id_ >= 0) H5Fclose(id_);
}

bool H5File::has_dataset(const std::string& key) const {
  if (H5Lexists(id_, key.c_str(), H5P_DEFAULT) <= 0) return false;
  Handle obj{H5Oopen(id_, key.c_str(), H5P_DEFAULT), H5Oclose};
  return obj.id >= 0 && H5Iget_type(obj.id) == H5I_DATASET;
}

H5Array H5File::read_float(const std::string& key, int rank, uint64_t max_elements) const {
  const std::string where = "dataset '" + key + "' in " + path_.string();
  if (!has_dataset(key)) throw Error("missing " + where + " (the Neural Latents Benchmark layout needs it)");
  Handle ds{H5Dopen2(id_, key.c_str(), H5P_DEFAULT), H5Dclose};
  if (ds.id < 0) throw Error("cannot open " + where);
  Handle type{H5Dget_type(ds.id), H5Tclose};
  const H5T_class_t cls = H5Tget_class(type.id);
  if (cls != H5T_INTEGER && cls != H5T_FLOAT) {
    throw Error(where + " is not numeric (HDF5 type class " + std::to_string(static_cast<int>(cls)) +
                "); accepted: integer or floating-point data");
  }
  Handle space{H5Dget_space(ds.id), H5Sclose};
  const int ndims = H5Sget_simple_extent_ndims(space.id);
  std::vector<hsize_t> dims(static_cast<size_t>(std::max(ndims, 0)));
  if (ndims > 0) H5Sget_simple_extent_dims(space.id, dims.data(), nullptr);
  H5Array out;
  for (auto d : dims) out.shape.push_back(static_cast<int64_t>(d));
  if (ndims != rank) {
    throw Error(where + " has shape " + shape_text(out.shape) + "; expected " + std::to_string(rank) +
                " dims [trials, time bins, " +
                (key.find("behavior") != std::string::npos ? "dims" : "units") + "]");
  }
  // The shape is the file's word, not its size: a few bytes can declare petabytes.
  uint64_t n = 1;
  for (auto d : dims) {
    if (d != 0 && n > max_elements / d) {
      n = max_elements + 1;
      break;
    }
    n *= d;
  }
  if (n > max_elements) {
    throw Error(where + " has shape " + shape_text(out.shape) + ": more than " +
                std::to_string(max_elements) + " values, the most one import reads at once; split the file");
  }
  out.data.resize(static_cast<size_t>(n));
  if (n > 0 && H5Dread(ds.id, H5T_NATIVE_FLOAT, H5S_ALL, H5S_ALL, H5P_DEFAULT, out.data.data()) < 0) {
    throw Error("cannot read " + where + " as float");
  }
  return out;
}

std::optional<double> H5File::read_root_attribute(const std::string& name) const {
  if (H5Aexists(id_, name.c_str()) <= 0) return std::nullopt;
  Handle attr{H5Aopen(id_, name.c_str(), H5P_DEFAULT), H5Aclose};
  Handle type{H5Aget_type(attr.id), H5Tclose};
  const H5T_class_t cls = H5Tget_class(type.id);
  Handle space{H5Aget_space(attr.id), H5Sclose};
  if ((cls != H5T_INTEGER && cls != H5T_FLOAT) || H5Sget_simple_extent_npoints(space.id) != 1) {
    throw Error("attribute '" + name + "' in " + path_.string() + " must be a single number");
  }
  double v = 0;
  if (H5Aread(attr.id, H5T_NATIVE_DOUBLE, &v) < 0) {
    throw Error("cannot read attribute '" + name + "' in " + path_.string());
  }
  return v;
}

void H5File::write(const std::string& key, const std::vector<int64_t>& shape, hid_t file_type, hid_t mem_type,
                   const void* data) {
  std::vector<hsize_t> dims(shape.begin(), shape.end());
  Handle space{H5Screate_simple(static_cast<int>(dims.size()), dims.data(), nullptr), H5Sclose};
  Handle ds{H5Dcreate2(id_, key.c_str(), file_type, space.id, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT),
            H5Dclose};
  if (space.id < 0 || ds.id < 0 || H5Dwrite(ds.id, mem_type, H5S_ALL, H5S_ALL, H5P_DEFAULT, data) < 0) {
    throw Error("cannot write dataset '" + key + "' to " + path_.string());
  }
}

void H5File::write_float(const std::string& key, const std::vector<int64_t>& shape, const float* data) {
  write(key, shape, H5T_IEEE_F32LE, H5T_NATIVE_FLOAT, data);
}

void H5File::write_int32(const std::string& key, const std::vector<int64_t>& shape, const int32_t* data) {
  write(key, shape, H5T_STD_I32LE, H5T_NATIVE_INT32, data);
}

void H5File::write_root_attribute(const std::string& name, double value) {
  Handle space{H5Screate(H5S_SCALAR), H5Sclose};
  Handle attr{H5Acreate2(id_, name.c_str(), H5T_IEEE_F64LE, space.id, H5P_DEFAULT, H5P_DEFAULT), H5Aclose};
  if (attr.id < 0 || H5Awrite(attr.id, H5T_NATIVE_DOUBLE, &value) < 0) {
    throw Error("cannot write attribute '" + name + "' to " + path_.string());
  }
}

}  // namespace rt::neural
