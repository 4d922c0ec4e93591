#include "data/neural/neural_record.h"

#include <cmath>
#include <cstring>
#include <sstream>

#include "audio_example.pb.h"
#include "util/atomic_file.h"
#include "util/error.h"
#include "util/json.h"

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

torch::Tensor get_buffer(const AudioExample& ex, const std::string& name, const std::string& what) {
  auto it = ex.buffers().find(name);
  if (it == ex.buffers().end()) throw Error(what + ": no buffers[\"" + name + "\"] (not a neural record)");
  const auto& buf = it->second;
  if (buf.precision() != AudioExample::FLOAT32) {
    throw Error(what + ": buffers[\"" + name + "\"] has precision " + std::to_string(buf.precision()) +
                "; neural records are FLOAT32 (1)");
  }
  if (buf.shape_size() != 2) throw Error(what + ": buffers[\"" + name + "\"] must have a 2-D shape [T, n]");
  const int64_t rows = buf.shape(0), cols = buf.shape(1);
  if (rows < 0 || cols < 0 || buf.data().size() != static_cast<size_t>(rows * cols) * sizeof(float)) {
    throw Error(what + ": buffers[\"" + name + "\"] holds " + std::to_string(buf.data().size()) +
                " bytes, which does not match its shape [" + std::to_string(rows) + ", " + std::to_string(cols) + "]");
  }
  auto t = torch::empty({rows, cols}, torch::kFloat32);
  std::memcpy(t.data_ptr(), buf.data().data(), buf.data().size());
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

}  // namespace

std::string encode_neural_record(const NeuralRecord& r) {
  TORCH_CHECK(r.spikes.dim() == 2 && r.behavior.dim() == 2 && r.spikes.size(0) == r.behavior.size(0),
              "encode_neural_record: spikes [T, units] and behavior [T, dims] must share T; got ", r.spikes.sizes(),
              " and ", r.behavior.sizes());
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
  if (!ex.ParseFromArray(bytes.data(), static_cast<int>(bytes.size()))) {
    throw Error(what + ": not a valid AudioExample protobuf message");
  }
  NeuralRecord r;
  r.spikes = get_buffer(ex, "spikes", what);
  r.behavior = get_buffer(ex, "behavior", what);
  if (r.spikes.size(0) != r.behavior.size(0)) {
    throw Error(what + ": spikes have " + std::to_string(r.spikes.size(0)) + " time bins but behavior has " +
                std::to_string(r.behavior.size(0)));
  }
  if (ex.metadata().find("group") == ex.metadata().end()) throw Error(what + ": metadata has no \"group\"");
  r.group = meta(ex, "group");
  try {
    r.bin_ms = std::stod(meta(ex, "bin_ms"));
    const auto sigma = meta(ex, "smoothing_sigma_ms");
    r.smoothing_sigma_ms = sigma.empty() ? 0.0 : std::stod(sigma);
  } catch (const std::exception&) {
    throw Error(what + ": metadata bin_ms = \"" + meta(ex, "bin_ms") + "\" / smoothing_sigma_ms = \"" +
                meta(ex, "smoothing_sigma_ms") + "\" must be numbers");
  }
  r.source = meta(ex, "source");
  r.split = meta(ex, "split");
  const auto trial = meta(ex, "trial");
  r.trial = trial.empty() ? -1 : std::stoll(trial);
  return r;
}

torch::Tensor gaussian_smooth(const torch::Tensor& counts, double sigma_ms, double bin_ms) {
  TORCH_CHECK(counts.dim() == 2, "gaussian_smooth: expected [T, units], got ", counts.sizes());
  TORCH_CHECK(bin_ms > 0, "gaussian_smooth: bin_ms must be > 0, got ", bin_ms);
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
  // np.convolve(x, w, 'same') with a symmetric window: out[i] = Σ_k x[i + k − M/2]·w[k].
  std::vector<double> acc(static_cast<size_t>(U));
  for (int64_t i = 0; i < T; ++i) {
    std::fill(acc.begin(), acc.end(), 0.0);
    for (int64_t k = 0; k < M; ++k) {
      const int64_t j = i + k - M / 2;
      if (j < 0 || j >= T) continue;
      const float* row = in + j * U;
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

}  // namespace rt::neural
