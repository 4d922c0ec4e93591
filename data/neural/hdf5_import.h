// `preprocess --kind neural`: Neural Latents Benchmark–style HDF5 files → neural LMDB.
//
// Each input file holds, at its root:
//   train_spikes_heldin  [trials, T, units_in]   binned spike counts (integer or float)
//   train_spikes_heldout [trials, T, units_out]  optional; concatenated after the held-in units
//   train_behavior       [trials, T, dims]       e.g. hand velocity
//   eval_spikes_heldin / eval_spikes_heldout / eval_behavior   optional, same layout; imported
//                        as more trials when present with behaviour and the same units
//   attribute bin_size_ms (optional; else NeuralImportOptions::bin_ms, else 5 ms)
// Every file is one group (dataset/subject/task; name = option or the file stem); files naming
// the same group must agree on units and behaviour dims.
//
// Smoothing: by default the records hold raw counts and NeuralDataset smooths them with
// data.smoothing_sigma_ms at load time (so σ can change without re-importing). With
// smoothing_sigma_ms > 0 the importer stores smoothed spikes instead and records σ; a dataset
// then refuses a different σ rather than smoothing twice.
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include "data/neural/neural_record.h"

namespace rt::neural {

struct NeuralImportOptions {
  // .h5/.hdf5 files; a directory stands for every *.h5 / *.hdf5 file in it (sorted by name).
  std::vector<std::filesystem::path> inputs;
  std::filesystem::path output;     // the LMDB directory (created; must not hold entries yet)
  std::vector<std::string> groups;  // group name per input file; empty: file stems
  double smoothing_sigma_ms = 0.0;  // 0: store raw counts (the dataset smooths)
  double bin_ms = 0.0;              // 0: the file's bin_size_ms attribute, else 5
  uint64_t max_db_size_bytes = uint64_t{1} << 30;
  bool include_eval = true;
};

struct NeuralImportReport {
  uint64_t trials_written = 0;
  std::vector<NeuralGroupInfo> groups;  // in import order (= group index order of the dataset)
  std::vector<std::string> notes;       // skipped splits/trials and why
};

// Throws rt::Error naming the file and the key for: a missing or unreadable file, a missing
// train_* dataset, non-numeric data, a wrong rank, trials/T that differ between spikes and
// behaviour, or a group whose units change between files. A full map (max_db_size_bytes) throws
// rt::MapFullError. On any error the trials committed so far (batches of 64) stay, and
// metadata.yaml describes exactly those, so the database is consistent and usable.
NeuralImportReport import_neural_hdf5(const NeuralImportOptions& options);

}  // namespace rt::neural
