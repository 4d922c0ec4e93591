// The neural LMDB record (README "SSM neural decoders"): RAVE's AudioExample container holding
//   buffers["spikes"]   FLOAT32, shape [T, units]  binned counts (or counts smoothed at import)
//   buffers["behavior"] FLOAT32, shape [T, dims]   e.g. hand velocity
//   metadata: group (dataset/subject/task), bin_ms, smoothing_sigma_ms ("0" = raw counts),
//             plus provenance: source (file name), split (train|eval), trial.
// Data bytes are little-endian float32, row-major. Keys are "%08d" from 0 (LmdbStore).
//
// Next to data.mdb the importer writes metadata.yaml describing the database:
//   kind: neural, count, bin_ms, smoothing_sigma_ms, groups: [{name, units, behavior_dims,
//   trials, bin_ms}] — for people and `preprocess --inspect`; datasets read the records.
#pragma once

#include <torch/torch.h>

#include <filesystem>
#include <string>
#include <string_view>
#include <vector>

namespace rt::neural {

struct NeuralRecord {
  torch::Tensor spikes;    // [T, units] float32
  torch::Tensor behavior;  // [T, dims] float32
  std::string group;
  double bin_ms = 5.0;
  double smoothing_sigma_ms = 0.0;  // 0: spikes are raw counts
  std::string source;               // provenance, optional
  std::string split;                // "train" | "eval", optional
  int64_t trial = -1;               // index in its source tensor, optional
};

// Serialises to an AudioExample message. REQUIRES: 2-D spikes/behavior with equal T.
std::string encode_neural_record(const NeuralRecord& record);
// Parses a record; throws rt::Error naming `what` (e.g. "db/ key 00000012") when the bytes are
// not a neural record (missing buffers/metadata, wrong precision, sizes not matching shapes).
NeuralRecord decode_neural_record(std::string_view bytes, const std::string& what);

// Gaussian smoothing of binned counts along time (dim 0 of [T, units]), as nlb_tools'
// smooth_spk does: kernel sd = round(sigma_ms / bin_ms) bins, window 6·sd taps
// (scipy.signal.gaussian, normalised), np.convolve(..., 'same') with zero padding.
// sigma_ms == 0 (or a kernel sd that rounds to 0 bins) returns the input unchanged.
torch::Tensor gaussian_smooth(const torch::Tensor& counts, double sigma_ms, double bin_ms);

struct NeuralGroupInfo {
  std::string name;
  int64_t units = 0;
  int64_t behavior_dims = 0;
  int64_t trials = 0;
  double bin_ms = 5.0;
};

// Writes <db>/metadata.yaml atomically.
void write_neural_metadata(const std::filesystem::path& db, uint64_t count, double smoothing_sigma_ms,
                           const std::vector<NeuralGroupInfo>& groups);

}  // namespace rt::neural
