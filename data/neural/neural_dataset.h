// The SSM decoders' dataset over a neural LMDB (neural_record.h), and the sampler that keeps
// every batch inside one group (foundational_ssm data_utils/samplers.py
// GroupedRandomFixedWindowSampler: shuffle within each group, cut into batches, shuffle the
// batches).
#pragma once

#include <cstdint>
#include <filesystem>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "data/example.h"
#include "data/lmdb_store.h"

namespace rt::neural {

struct NeuralDatasetOptions {
  // data.smoothing_sigma_ms: Gaussian σ applied at load to records holding raw counts.
  double smoothing_sigma_ms = 40.0;
  // Zero-pad every example's units to the widest group (what the multi-session model and a
  // batch stacking examples of different groups need); false keeps each group's own width.
  bool pad_to_widest = true;
  // data.example_cache_mb: examples are kept once prepared (decoded, smoothed, padded), up to
  // this many MiB in all, and later epochs read them from memory; the examples past the budget
  // are prepared on every read. 0 = prepare every read. Smoothing raw counts is most of a
  // batch's loading, and it gives the same example every epoch.
  int64_t example_cache_mb = 1024;
};

class NeuralDataset : public ExampleSource {
 public:
  // Opens `db` read-only and scans its records once (groups, units, dims) through
  // NeuralDatabaseCheck, the checks `preprocess --inspect` applies too. Throws rt::Error naming
  // the database, key and field when a record is not a valid neural record (decode_neural_record's
  // ranges), keys are not "%08d" from 0, records of one group disagree on units/dims, the
  // database is empty or its metadata.yaml is missing or disagrees with the records, or the
  // records were smoothed at import with a σ other than options.smoothing_sigma_ms (which must
  // be in [0, kMaxSigmaMs]); rt::StopRequested after SIGINT/SIGTERM.
  NeuralDataset(const std::filesystem::path& db, const NeuralDatasetOptions& options = {});

  size_t size() const override { return groups_.size(); }
  // input = smoothed spikes [T, units or max_units()] float32, target = behaviour [T, dims],
  // group = index into group_names(). Thread-safe; uses no randomness. A cached example's
  // tensors are shared with the cache: read them, never write into them.
  Example get(size_t index, std::mt19937_64& rng) const override;
  int64_t group_of(size_t index) const override { return groups_.at(index); }

  const std::vector<std::string>& group_names() const { return group_names_; }
  const std::vector<int64_t>& group_units() const { return group_units_; }  // per group
  int64_t max_units() const { return max_units_; }
  int64_t behavior_dims() const { return behavior_dims_; }
  double bin_ms() const { return bin_ms_; }  // of the first record
  const std::filesystem::path& path() const { return store_->path(); }

 private:
  std::unique_ptr<LmdbStore> store_;
  NeuralDatasetOptions options_;
  std::vector<int64_t> groups_;  // per record
  std::vector<std::string> group_names_;
  std::vector<int64_t> group_units_;
  int64_t max_units_ = 0;
  int64_t behavior_dims_ = 0;
  double bin_ms_ = 5.0;
  bool stored_smoothed_ = false;
  Example prepare(size_t index) const;
  // The examples prepared so far (example_cache_mb), by index, sized at construction when the
  // cache is on; undefined input = not cached.
  mutable std::mutex cache_mutex_;
  mutable std::vector<Example> cache_;
  mutable int64_t cache_bytes_ = 0;
};

// Batches of dataset indices drawn from `indices` such that every batch holds one group only:
// indices are bucketed by group, shuffled within their group, cut into batches of `batch` (the
// last batch of a group may be smaller; drop_last drops it), and the batches are shuffled
// together. Deterministic in (seed, epoch). Data parallelism: pass the global batch
// (per-rank batch × world size); the loader splits every batch by rank, so all ranks of a step
// train on one group. Throws rt::Error when batch < 1.
std::vector<std::vector<size_t>> group_batches(const ExampleSource& dataset,
                                               const std::vector<size_t>& indices, size_t batch,
                                               uint64_t epoch, uint64_t seed, bool drop_last = false);

}  // namespace rt::neural
