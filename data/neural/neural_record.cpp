#include "data/neural/neural_record.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <map>
#include <optional>
#include <sstream>

#include "audio_example.pb.h"
#include "data/lmdb_store.h"
#include "util/atomic_file.h"
#include "util/error.h"
#include "util/json.h"
#include "util/parse.h"
#include "util/printable.h"

namespace rt::neural {
namespace {

using audio_example::AudioExample;

void put_buffer(AudioExample& ex, const std::string& name, const torch::Tensor& t) {
  auto c = t.to(torch::kFloat32).contiguous();
  auto& buf = (*ex.mutable_buffers())[name];
  for (auto d : c.sizes()) buf.add_shape(static_cast<int32_t>(d));
  buf.set_precision(AudioExample::FLOAT32);
  buf.set_data(c.data_ptr(), static_cast<size_t>(c.numel()) * sizeof(float));
}

torch::Tensor get_buffer(const AudioExample& ex, const std::string& name, const std::string& what,
                         int64_t max_cols, const char* cols_name) {
  auto it = ex.buffers().find(name);
  if (it == ex.buffers().end()) throw Error(what + ": no buffers[\"" + name + "\"] (not a neural record)");
  const auto& buf = it->second;
  const std::string field = what + ": buffers[\"" + name + "\"]";
  if (buf.precision() != AudioExample::FLOAT32) {
    throw Error(field + " has precision " + std::to_string(buf.precision()) +
                "; neural records are FLOAT32 (1)");
  }
  if (buf.shape_size() != 2)
    throw Error(field + " must have a 2-D shape [T, n], not " + std::to_string(buf.shape_size()) + "-D");
  const int64_t rows = buf.shape(0), cols = buf.shape(1);
  const std::string shape = shape_text({rows, cols});
  if (rows < 1 || rows > kMaxBins) {
    throw Error(field + " has shape " + shape + ": its time bins must be in [1, " + std::to_string(kMaxBins) +
                "]" + (rows == 0 ? " (a zero-length trial)" : ""));
  }
  if (cols < 1 || cols > max_cols) {
    throw Error(field + " has shape " + shape + ": its " + cols_name + " must be in [1, " +
                std::to_string(max_cols) + "]");
  }
  // Both factors are bounded above, so the product cannot overflow.
  const auto need = static_cast<uint64_t>(rows) * static_cast<uint64_t>(cols) * sizeof(float);
  if (buf.data().size() != need) {
    throw Error(field + " holds " + std::to_string(buf.data().size()) + " bytes, but its shape " + shape +
                " needs " + std::to_string(need) + (buf.data().size() < need ? " (truncated)" : ""));
  }
  auto t = torch::empty({rows, cols}, torch::kFloat32);
  std::memcpy(t.data_ptr(), buf.data().data(), buf.data().size());
  const float* v = t.data_ptr<float>();
  for (int64_t i = 0; i < rows * cols; ++i) {
    if (!std::isfinite(v[i]) || std::fabs(v[i]) > kMaxNeuralValue) {
      std::ostringstream shown;
      shown << v[i];
      throw Error(field + " holds " + shown.str() + " at [" + std::to_string(i / cols) + ", " +
                  std::to_string(i % cols) +
                  "]; values must be finite and within ±1e9 (larger is no "
                  "recording's value, and its square overflows the float32 loss)");
    }
  }
  return t;
}

std::string meta(const AudioExample& ex, const std::string& key) {
  auto it = ex.metadata().find(key);
  return it == ex.metadata().end() ? std::string() : it->second;
}

std::string number(double v) {
  std::ostringstream s;
  s.precision(17);
  s << v;
  return s.str();
}

// A value in a message: as people write it ("0.1", "1e-07"), not round-trip exact.
std::string shown(double v) {
  std::ostringstream s;
  s << v;
  return s.str();
}

}  // namespace

std::string encode_neural_record(const NeuralRecord& r) {
  TORCH_CHECK(r.spikes.dim() == 2 && r.behavior.dim() == 2 && r.spikes.size(0) == r.behavior.size(0),
              "encode_neural_record: spikes [T, units] and behavior [T, dims] must share T; got ",
              r.spikes.sizes(), " and ", r.behavior.sizes());
  AudioExample ex;
  put_buffer(ex, "spikes", r.spikes);
  put_buffer(ex, "behavior", r.behavior);
  auto& m = *ex.mutable_metadata();
  m["group"] = r.group;
  m["bin_ms"] = number(r.bin_ms);
  m["smoothing_sigma_ms"] = number(r.smoothing_sigma_ms);
  if (!r.source.empty()) m["source"] = r.source;
  if (!r.split.empty()) m["split"] = r.split;
  if (r.trial >= 0) m["trial"] = std::to_string(r.trial);
  std::string out;
  ex.SerializeToString(&out);
  return out;
}

NeuralRecord decode_neural_record(std::string_view bytes, const std::string& what) {
  AudioExample ex;
  // protobuf sizes messages with an int: anything larger is no message it could have written.
  if (bytes.size() > static_cast<size_t>(std::numeric_limits<int>::max()) ||
      !ex.ParseFromArray(bytes.data(), static_cast<int>(bytes.size()))) {
    throw Error(what + ": not a valid AudioExample protobuf message");
  }
  NeuralRecord r;
  r.spikes = get_buffer(ex, "spikes", what, kMaxUnits, "units");
  r.behavior = get_buffer(ex, "behavior", what, kMaxBehaviorDims, "behaviour dims");
  if (r.spikes.size(0) != r.behavior.size(0)) {
    throw Error(what + ": spikes have " + std::to_string(r.spikes.size(0)) + " time bins but behavior has " +
                std::to_string(r.behavior.size(0)));
  }
  if (ex.metadata().find("group") == ex.metadata().end()) throw Error(what + ": metadata has no \"group\"");
  r.group = meta(ex, "group");
  // A number field: parsed whole and held to [lo, hi].
  auto number_field = [&](const char* key, double lo, double hi, bool required, double fallback) {
    const auto it = ex.metadata().find(key);
    if (it == ex.metadata().end()) {
      if (required) throw Error(what + ": metadata has no \"" + key + "\"");
      return fallback;
    }
    const auto v = parse_finite(it->second);
    if (!v || *v < lo || *v > hi) {
      throw Error(what + ": metadata " + key + " = \"" + printable(it->second) + "\": must be a number in [" +
                  shown(lo) + ", " + shown(hi) + "] ms");
    }
    return *v;
  };
  r.bin_ms = number_field("bin_ms", kMinBinMs, kMaxBinMs, true, 0.0);
  r.smoothing_sigma_ms = number_field("smoothing_sigma_ms", 0.0, kMaxSigmaMs, false, 0.0);
  r.source = meta(ex, "source");
  r.split = meta(ex, "split");
  if (const auto it = ex.metadata().find("trial"); it != ex.metadata().end()) {
    const auto trial = parse_int64(it->second);
    if (!trial || *trial < 0) {
      throw Error(what + ": metadata trial = \"" + printable(it->second) +
                  "\": must be an integer >= 0 (the trial's index in its source)");
    }
    r.trial = *trial;
  }
  return r;
}

torch::Tensor gaussian_smooth(const torch::Tensor& counts, double sigma_ms, double bin_ms) {
  if (counts.dim() != 2)
    throw Error("gaussian_smooth: spikes must be [T, units], not " + shape_text(counts.sizes().vec()));
  if (!(bin_ms >= kMinBinMs && bin_ms <= kMaxBinMs)) {
    throw Error("bin width " + shown(bin_ms) + " ms: must be in [" + shown(kMinBinMs) + ", " +
                shown(kMaxBinMs) + "] ms");
  }
  if (!(sigma_ms >= 0 && sigma_ms <= kMaxSigmaMs)) {
    throw Error("smoothing sigma " + shown(sigma_ms) + " ms: must be in [0, " + shown(kMaxSigmaMs) + "] ms");
  }
  // Bounded by the ranges above: at most 6·kMaxSigmaMs/kMinBinMs taps.
  const auto sd = static_cast<int64_t>(std::lround(sigma_ms / bin_ms));
  if (sigma_ms <= 0 || sd <= 0) return counts.to(torch::kFloat32);
  const int64_t M = 6 * sd;
  std::vector<double> w(static_cast<size_t>(M));
  double total = 0;
  for (int64_t k = 0; k < M; ++k) {
    const double n = static_cast<double>(k) - (static_cast<double>(M) - 1.0) / 2.0;
    w[k] = std::exp(-n * n / (2.0 * static_cast<double>(sd * sd)));
    total += w[k];
  }
  for (auto& v : w) v /= total;
  auto x = counts.to(torch::kFloat32).contiguous();
  const int64_t T = x.size(0), U = x.size(1);
  auto out = torch::zeros({T, U}, torch::kFloat32);
  const float* in = x.data_ptr<float>();
  float* o = out.data_ptr<float>();
  // np.convolve(x, w, 'same') with a symmetric window: out[i] = Σ_k x[i + k − M/2]·w[k], over
  // the taps that land inside [0, T) only, so the work is T·min(M, T)·U however wide the window.
  std::vector<double> acc(static_cast<size_t>(U));
  for (int64_t i = 0; i < T; ++i) {
    std::fill(acc.begin(), acc.end(), 0.0);
    const int64_t k_begin = std::max<int64_t>(0, M / 2 - i), k_end = std::min<int64_t>(M, T + M / 2 - i);
    for (int64_t k = k_begin; k < k_end; ++k) {
      const float* row = in + (i + k - M / 2) * U;
      for (int64_t u = 0; u < U; ++u) acc[u] += w[k] * row[u];
    }
    for (int64_t u = 0; u < U; ++u) o[i * U + u] = static_cast<float>(acc[u]);
  }
  return out;
}

void write_neural_metadata(const std::filesystem::path& db, uint64_t count, double smoothing_sigma_ms,
                           const std::vector<NeuralGroupInfo>& groups) {
  std::ostringstream y;
  y << "kind: neural\n";
  y << "count: " << count << "\n";
  bool uniform = !groups.empty();
  for (const auto& g : groups) uniform = uniform && g.bin_ms == groups.front().bin_ms;
  if (uniform) y << "bin_ms: " << number(groups.front().bin_ms) << "\n";
  y << "smoothing_sigma_ms: " << number(smoothing_sigma_ms) << "\n";
  y << "spikes: " << (smoothing_sigma_ms > 0 ? "smoothed" : "counts") << "\n";
  y << "groups:\n";
  for (const auto& g : groups) {
    y << "  - name: " << Json(g.name).dump() << "\n";  // a JSON string is a valid YAML scalar
    y << "    units: " << g.units << "\n";
    y << "    behavior_dims: " << g.behavior_dims << "\n";
    y << "    trials: " << g.trials << "\n";
    y << "    bin_ms: " << number(g.bin_ms) << "\n";
  }
  write_file_atomic(db / "metadata.yaml", y.str());
}

namespace {

// The fields of the importer's metadata.yaml (write_neural_metadata) the check compares: our
// own fixed layout, so a line reader suffices.
struct NeuralYaml {
  bool neural = false;
  std::optional<int64_t> count;
  std::map<std::string, std::map<std::string, int64_t>> groups;  // name → units/behavior_dims/trials
};

NeuralYaml read_neural_yaml(const std::filesystem::path& path) {
  NeuralYaml y;
  std::istringstream in(read_file(path));
  std::string line, group;
  int line_no = 0;
  auto trim = [](const std::string& t) {
    const auto b = t.find_first_not_of(" \t\r");
    return b == std::string::npos ? std::string() : t.substr(b, t.find_last_not_of(" \t\r") - b + 1);
  };
  while (std::getline(in, line)) {
    ++line_no;
    const auto colon = line.find(':');
    if (colon == std::string::npos) continue;
    std::string key = trim(line.substr(0, colon));
    const std::string value = trim(line.substr(colon + 1));
    if (key.rfind("- ", 0) == 0) key = trim(key.substr(2));
    const std::string at =
        path.string() + " line " + std::to_string(line_no) + ": " + key + " = '" + value + "'";
    if (key == "kind") {
      y.neural = value == "neural";
    } else if (key == "name") {
      try {
        group = value.size() >= 2 && value.front() == '"' ? Json::parse(value).get<std::string>() : value;
      } catch (const std::exception&) {
        throw Error(at + ": not a group name (a quoted string)");
      }
      y.groups[group];
    } else if (key == "count" ||
               ((key == "units" || key == "behavior_dims" || key == "trials") && !group.empty())) {
      const auto v = parse_int64(value);
      if (!v || *v < 0) throw Error(at + ": must be an integer >= 0");
      if (key == "count")
        y.count = *v;
      else
        y.groups[group][key] = *v;
    }
  }
  return y;
}

}  // namespace

NeuralDatabaseCheck::NeuralDatabaseCheck(std::filesystem::path db) : db_(std::move(db)) {}

int64_t NeuralDatabaseCheck::group_index(const std::string& group) const {
  const auto it = std::find(group_names_.begin(), group_names_.end(), group);
  return it == group_names_.end() ? -1 : static_cast<int64_t>(it - group_names_.begin());
}

NeuralRecord NeuralDatabaseCheck::add(size_t index, std::string_view key, std::string_view value,
                                      const std::string& where) {
  if (key != LmdbStore::key_for_index(index)) {
    throw Error(where + ": expected key " + LmdbStore::key_for_index(index) + " (keys must be %08d from 0)");
  }
  NeuralRecord r = decode_neural_record(value, where);
  const int64_t units = r.spikes.size(1), dims = r.behavior.size(1);
  if (records_ == 0) {
    behavior_dims_ = dims;
    bin_ms_ = r.bin_ms;
    sigma_ms_ = r.smoothing_sigma_ms;
  }
  int64_t g = group_index(r.group);
  if (g >= 0 && (group_units_[g] != units || group_dims_[g] != dims)) {
    throw Error(where + ": group \"" + printable(r.group) + "\" has " + std::to_string(units) + " units / " +
                std::to_string(dims) + " dims here but " + std::to_string(group_units_[g]) + " / " +
                std::to_string(group_dims_[g]) + " in its first record");
  }
  if (dims != behavior_dims_) {
    throw Error(where + ": behaviour has " + std::to_string(dims) + " dims, other records " +
                std::to_string(behavior_dims_) + "; one model decodes one behaviour space");
  }
  if (r.smoothing_sigma_ms != sigma_ms_) {
    throw Error(where + ": records mix smoothing_sigma_ms " + number(r.smoothing_sigma_ms) + " and " +
                number(sigma_ms_));
  }
  if (g < 0) {
    g = static_cast<int64_t>(group_names_.size());
    group_names_.push_back(r.group);
    group_units_.push_back(units);
    group_dims_.push_back(dims);
    group_records_.push_back(0);
  }
  ++group_records_[static_cast<size_t>(g)];
  ++records_;
  return r;
}

void NeuralDatabaseCheck::finish(size_t entries) const {
  const std::string db = "neural database " + db_.string();
  if (entries == 0) throw Error(db + " holds no records");
  const auto path = db_ / "metadata.yaml";
  std::error_code ec;
  if (!std::filesystem::is_regular_file(path, ec)) {
    throw Error(db + " has no metadata.yaml: its import did not finish (interrupted?); import it again");
  }
  const NeuralYaml y = read_neural_yaml(path);
  if (!y.neural) throw Error(path.string() + " does not say 'kind: neural'");
  if (!y.count || static_cast<uint64_t>(*y.count) != entries) {
    throw Error(path.string() + " says count " +
                (y.count ? std::to_string(*y.count) : std::string("(none)")) + " but the database holds " +
                std::to_string(entries) + " records; import it again");
  }
  // Per-group figures only when every record was read (inspect goes on past bad ones).
  for (size_t g = 0; records_ == entries && g < group_names_.size(); ++g) {
    const auto it = y.groups.find(group_names_[g]);
    if (it == y.groups.end())
      throw Error(path.string() + " says nothing of group \"" + printable(group_names_[g]) + "\"");
    const std::pair<const char*, int64_t> fields[] = {
        {"units", group_units_[g]}, {"behavior_dims", group_dims_[g]}, {"trials", group_records_[g]}};
    for (const auto& [field, actual] : fields) {
      const auto f = it->second.find(field);
      if (f != it->second.end() && f->second != actual) {
        throw Error(path.string() + ": group \"" + printable(group_names_[g]) + "\" " + field + ": " +
                    std::to_string(f->second) + ", but its records hold " + std::to_string(actual));
      }
    }
  }
}

}  // namespace rt::neural
