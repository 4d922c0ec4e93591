// Synthetic center-out reaching data in the Neural Latents Benchmark HDF5 layout (see
// hdf5_import.h), so demos and tests exercise the real importer.
//
// Per trial: a reach angle θ ~ U[0, 2π); a 4-D latent z is zero until movement onset, then
// starts at (cos θ, sin θ, 0.6 cos(θ+π/3), 0.6 sin(θ+π/3)) and follows two damped rotations
// (periods 80 and 45 bins, decay 0.97/bin) plus small Gaussian noise — rotational dynamics as
// in motor cortex (Churchland et al. 2012). Spikes: Poisson counts at
// rate = base_rate_hz · exp(W z + b) per bin, with a random readout W and offsets b per group.
// Hand velocity: a linear readout M z (M shared by all groups: the same task, different
// neurons). Groups differ in unit counts and readouts. Deterministic for a given seed.
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

namespace rt::neural {

struct SyntheticOptions {
  std::vector<int64_t> units = {64, 48, 32};  // one group (file) per entry
  int64_t trials = 64;                        // train trials per group
  int64_t eval_trials = 0;                    // eval_* trials per group (0: none written)
  int64_t bins = 140;                         // −250…+450 ms around movement onset at 5 ms
  int64_t onset_bin = -1;                     // −1: at 250 ms of 700 (bin 50 of 140, scaled)
  double bin_ms = 5.0;                        // written as the bin_size_ms attribute
  double heldout_fraction = 0.25;             // last units go to *_spikes_heldout
  double base_rate_hz = 20.0;
  uint64_t seed = 0;
  std::string prefix = "synthetic_reach";  // files <prefix>_<g>.h5; group = stem
  bool replace = false;                    // write over files of those names already in `dir`
};

// Writes one HDF5 file per group into `dir` (created if needed) and returns their paths.
// Throws rt::Error on impossible options (naming the field) or write failures, and, unless
// `replace`, when a file it would write exists already (before anything is written).
std::vector<std::filesystem::path> write_synthetic_reaching(const std::filesystem::path& dir,
                                                            const SyntheticOptions& options = {});

}  // namespace rt::neural
