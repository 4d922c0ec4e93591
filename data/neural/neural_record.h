// The neural LMDB record (docs/cli.md "preprocess"): RAVE's AudioExample container holding
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

// The ranges every decoded record is held to. No field of a crafted record may size an
// allocation or a loop beyond what real recordings need: bin_ms = 1e-7 once made the smoothing
// window 6·σ/bin_ms taps long (18 GB).
inline constexpr double kMinBinMs = 0.1;
inline constexpr double kMaxBinMs = 10000.0;
inline constexpr double kMaxSigmaMs = 10000.0;  // smoothing σ, at import or at load
inline constexpr int64_t kMaxBins = 1000000;    // time bins per trial
inline constexpr int64_t kMaxUnits = 100000;
inline constexpr int64_t kMaxBehaviorDims = 10000;
// The largest |value| a spike or behaviour buffer may hold. No recording has a billion spikes
// in a bin or a behaviour value of a billion units; a larger one is a broken record (a flag
// value, a unit error), and its square overflows float32 (3.4e38 at |x| ≈ 1.8e19), so it once
// passed inspection and stopped training as "non-finite loss" without naming the record.
inline constexpr double kMaxNeuralValue = 1e9;

// Serialises to an AudioExample message. REQUIRES: 2-D spikes/behavior with equal T.
std::string encode_neural_record(const NeuralRecord& record);
// Parses and validates a record; throws rt::Error naming `what` (e.g. "db/ key 00000012") and
// the buffer or metadata field when the bytes are not a neural record (missing buffers or
// metadata, wrong precision, sizes not matching shapes) or a field is outside its range: T in
// [1, kMaxBins], units in [1, kMaxUnits], dims in [1, kMaxBehaviorDims], finite values within
// ±kMaxNeuralValue, bin_ms
// in [kMinBinMs, kMaxBinMs], smoothing_sigma_ms in [0, kMaxSigmaMs], trial an integer >= 0.
// The one validation of a record: training and `preprocess --inspect` both decode through it.
NeuralRecord decode_neural_record(std::string_view bytes, const std::string& what);

// Gaussian smoothing of binned counts along time (dim 0 of [T, units]), as nlb_tools'
// smooth_spk does: kernel sd = round(sigma_ms / bin_ms) bins, window 6·sd taps
// (scipy.signal.gaussian, normalised), np.convolve(..., 'same') with zero padding.
// sigma_ms == 0 (or a kernel sd that rounds to 0 bins) returns the input unchanged. Throws
// rt::Error when sigma_ms or bin_ms is outside the ranges above.
torch::Tensor gaussian_smooth(const torch::Tensor& counts, double sigma_ms, double bin_ms);

// The checks a whole neural database must pass beyond each record's own: keys "%08d" from 0,
// every record of a group with that group's units and behaviour dims, one behaviour space,
// one smoothing σ, at least one record, and a metadata.yaml that the import finished and that
// agrees with the records. NeuralDataset stops at the first failure; `preprocess --inspect`
// lists them all. Both go through this one class, so what inspect passes, training accepts.
class NeuralDatabaseCheck {
 public:
  explicit NeuralDatabaseCheck(std::filesystem::path db);
  // Decodes the entry at position `index` and checks it against the records before it.
  // Throws rt::Error naming `where` (the database and key) and the field.
  NeuralRecord add(size_t index, std::string_view key, std::string_view value, const std::string& where);
  // After every entry: throws rt::Error when no record was added, or when metadata.yaml is
  // missing (an import that did not finish), is not a neural description, or disagrees with
  // the records (count, and per group units, dims and trials).
  void finish(size_t entries) const;

  const std::vector<std::string>& group_names() const { return group_names_; }
  const std::vector<int64_t>& group_units() const { return group_units_; }
  const std::vector<int64_t>& group_dims() const { return group_dims_; }
  const std::vector<int64_t>& group_records() const { return group_records_; }
  int64_t group_index(const std::string& group) const;  // -1 when unknown
  int64_t behavior_dims() const { return behavior_dims_; }
  double bin_ms() const { return bin_ms_; }
  double smoothing_sigma_ms() const { return sigma_ms_; }
  size_t records() const { return records_; }

 private:
  std::filesystem::path db_;
  std::vector<std::string> group_names_;
  std::vector<int64_t> group_units_, group_dims_, group_records_;
  int64_t behavior_dims_ = 0;
  double bin_ms_ = 0, sigma_ms_ = 0;
  size_t records_ = 0;
};

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
