#include "data/neural/synthetic_reaching.h"

#include <array>
#include <cmath>
#include <random>

#include "data/neural/h5_file.h"
#include "data/neural/neural_record.h"
#include "util/error.h"
#include "util/path_kind.h"
#include "util/signals.h"

namespace rt::neural {
namespace {

constexpr int kLatent = 4;
constexpr double kPi = 3.14159265358979323846;

struct SplitData {
  std::vector<int32_t> heldin, heldout;
  std::vector<float> behavior;
};

}  // namespace

std::vector<std::filesystem::path> write_synthetic_reaching(const std::filesystem::path& dir,
                                                            const SyntheticOptions& o) {
  auto fail = [](const std::string& m) { throw Error("synthetic reaching data: " + m); };
  if (o.units.empty()) fail("units is empty; give one unit count per group");
  for (auto u : o.units) {
    if (u < 2) fail("units = " + std::to_string(u) + ": every group needs >= 2 units");
  }
  if (o.trials < 1) fail("trials = " + std::to_string(o.trials) + ": must be >= 1");
  if (o.eval_trials < 0) fail("eval_trials must be >= 0");
  if (o.bins < 2) fail("bins = " + std::to_string(o.bins) + ": must be >= 2");
  if (o.onset_bin >= o.bins) fail("onset_bin = " + std::to_string(o.onset_bin) + ": must be < bins (or -1)");
  const int64_t onset = o.onset_bin >= 0 ? o.onset_bin : o.bins * 50 / 140;
  if (!(o.bin_ms >= kMinBinMs && o.bin_ms <= kMaxBinMs)) {
    fail("bin_ms = " + std::to_string(o.bin_ms) + ": must be in [" + std::to_string(kMinBinMs) + ", " +
         std::to_string(kMaxBinMs) + "] ms");
  }
  if (!(o.heldout_fraction >= 0 && o.heldout_fraction < 1)) fail("heldout_fraction must be in [0, 1)");
  if (!(o.base_rate_hz > 0)) fail("base_rate_hz must be > 0");
  // Each split is built in memory whole; the importer reads at most kMaxH5Values per dataset.
  for (auto u : o.units) {
    const double values = static_cast<double>(std::max(o.trials, o.eval_trials)) *
                          static_cast<double>(o.bins) * static_cast<double>(u);
    if (values > static_cast<double>(kMaxH5Values)) {
      fail(std::to_string(std::max(o.trials, o.eval_trials)) + " trials × " + std::to_string(o.bins) +
           " bins × " + std::to_string(u) + " units is more than " + std::to_string(kMaxH5Values) +
           " values, the most the importer reads from one dataset; write fewer trials or bins");
    }
  }
  if (!o.replace) {
    for (size_t g = 0; g < o.units.size(); ++g) {
      const auto path = dir / (o.prefix + "_" + std::to_string(g) + ".h5");
      if (something_is_at(path)) {
        throw Error("--generate_neural_demo: '" + path.string() +
                    "' already exists; pass --force to replace the demo's files, or choose another folder");
      }
    }
  }
  std::filesystem::create_directories(dir);

  // Shared by all groups: the dynamics and the velocity readout.
  std::seed_seq shared_seq{o.seed, uint64_t{0x5eed}};
  std::mt19937_64 shared_rng(shared_seq);
  std::normal_distribution<double> normal(0.0, 1.0);
  std::array<std::array<double, kLatent>, 2> M{};
  for (auto& row : M) {
    for (auto& v : row) v = normal(shared_rng) * 0.7;
  }
  auto rotation = [](double period) {
    const double w = 2 * kPi / period, decay = 0.97;
    return std::array<double, 4>{decay * std::cos(w), -decay * std::sin(w), decay * std::sin(w),
                                 decay * std::cos(w)};
  };
  const auto R1 = rotation(80.0), R2 = rotation(45.0);

  std::vector<std::filesystem::path> paths;
  for (size_t g = 0; g < o.units.size(); ++g) {
    std::seed_seq seq{o.seed, static_cast<uint64_t>(g) + 1};
    std::mt19937_64 rng(seq);
    const int64_t U = o.units[g];
    const auto n_out = static_cast<int64_t>(std::floor(static_cast<double>(U) * o.heldout_fraction));
    const int64_t n_in = U - n_out;
    std::vector<std::array<double, kLatent>> W(static_cast<size_t>(U));
    std::vector<double> b(static_cast<size_t>(U));
    for (int64_t u = 0; u < U; ++u) {
      for (auto& v : W[u]) v = normal(rng) * 0.6;
      b[u] = normal(rng) * 0.3;
    }
    const double per_bin = o.base_rate_hz * o.bin_ms / 1000.0;
    std::uniform_real_distribution<double> angle(0.0, 2 * kPi);

    auto make_split = [&](int64_t trials) {
      SplitData s;
      s.heldin.reserve(static_cast<size_t>(trials * o.bins * n_in));
      s.heldout.reserve(static_cast<size_t>(trials * o.bins * n_out));
      s.behavior.reserve(static_cast<size_t>(trials * o.bins * 2));
      for (int64_t n = 0; n < trials; ++n) {
        throw_if_stop_requested("while writing synthetic reaching data to " + dir.string());
        const double th = angle(rng), th2 = th + kPi / 3;
        std::array<double, kLatent> z{};
        for (int64_t t = 0; t < o.bins; ++t) {
          if (t == onset) {
            z = {std::cos(th), std::sin(th), 0.6 * std::cos(th2), 0.6 * std::sin(th2)};
          } else if (t > onset) {
            const std::array<double, kLatent> p = z;
            z[0] = R1[0] * p[0] + R1[1] * p[1];
            z[1] = R1[2] * p[0] + R1[3] * p[1];
            z[2] = R2[0] * p[2] + R2[1] * p[3];
            z[3] = R2[2] * p[2] + R2[3] * p[3];
            for (auto& v : z) v += 0.02 * normal(rng);
          }
          for (int64_t u = 0; u < U; ++u) {
            double drive = b[u];
            for (int k = 0; k < kLatent; ++k) drive += W[u][k] * z[k];
            std::poisson_distribution<int32_t> poisson(std::max(per_bin * std::exp(drive), 1e-9));
            (u < n_in ? s.heldin : s.heldout).push_back(poisson(rng));
          }
          for (const auto& row : M) {
            double v = 0;
            for (int k = 0; k < kLatent; ++k) v += row[k] * z[k];
            s.behavior.push_back(static_cast<float>(v));
          }
        }
      }
      return s;
    };

    const auto path = dir / (o.prefix + "_" + std::to_string(g) + ".h5");
    auto file = H5File::create(path);
    file.write_root_attribute("bin_size_ms", o.bin_ms);
    auto write_split = [&](const std::string& prefix, int64_t trials) {
      auto s = make_split(trials);
      file.write_int32(prefix + "_spikes_heldin", {trials, o.bins, n_in}, s.heldin.data());
      if (n_out > 0) file.write_int32(prefix + "_spikes_heldout", {trials, o.bins, n_out}, s.heldout.data());
      file.write_float(prefix + "_behavior", {trials, o.bins, 2}, s.behavior.data());
    };
    write_split("train", o.trials);
    if (o.eval_trials > 0) write_split("eval", o.eval_trials);
    paths.push_back(path);
  }
  return paths;
}

}  // namespace rt::neural
