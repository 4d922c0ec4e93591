#include "data/neural/hdf5_import.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <optional>

#include "data/db_metadata.h"
#include "data/lmdb_store.h"
#include "data/neural/h5_file.h"
#include "util/error.h"
#include "util/signals.h"

namespace rt::neural {
namespace {

constexpr double kDefaultBinMs = 5.0;
constexpr size_t kRecordsPerTransaction = 64;
constexpr int64_t kMaxTrials = 10000000;

std::vector<std::filesystem::path> expand_inputs(const std::vector<std::filesystem::path>& inputs) {
  std::vector<std::filesystem::path> files;
  for (const auto& in : inputs) {
    if (std::filesystem::is_directory(in)) {
      std::vector<std::filesystem::path> found;
      for (const auto& e : std::filesystem::directory_iterator(in)) {
        const auto ext = e.path().extension().string();
        if (e.is_regular_file() && (ext == ".h5" || ext == ".hdf5")) found.push_back(e.path());
      }
      std::sort(found.begin(), found.end());
      if (found.empty()) throw Error("input directory " + in.string() + " holds no .h5/.hdf5 files");
      files.insert(files.end(), found.begin(), found.end());
    } else {
      files.push_back(in);
    }
  }
  return files;
}

// One split (train_* or eval_*) of one file, units already concatenated per trial on demand.
struct Split {
  std::string prefix;
  H5Array heldin;
  std::optional<H5Array> heldout;
  H5Array behavior;
  int64_t trials() const { return heldin.shape[0]; }
  int64_t bins() const { return heldin.shape[1]; }
  int64_t units() const { return heldin.shape[2] + (heldout ? heldout->shape[2] : 0); }
  int64_t dims() const { return behavior.shape[2]; }
};

Split read_split(const H5File& f, const std::string& prefix) {
  Split s;
  s.prefix = prefix;
  const std::string in_key = prefix + "_spikes_heldin", out_key = prefix + "_spikes_heldout",
                    beh_key = prefix + "_behavior";
  // Every dimension is held to the range a decoded record is (neural_record.h), so what the
  // import writes, training reads.
  auto check_dims = [&](const std::string& key, const H5Array& a, int64_t max_cols, const char* cols) {
    const std::string where =
        "dataset '" + key + "' in " + f.path().string() + " has shape " + shape_text(a.shape);
    if (a.shape[0] > kMaxTrials) throw Error(where + ": at most " + std::to_string(kMaxTrials) + " trials");
    if (a.shape[1] < 1 || a.shape[1] > kMaxBins) {
      throw Error(where + ": time bins must be in [1, " + std::to_string(kMaxBins) + "]");
    }
    if (a.shape[2] > max_cols)
      throw Error(where + ": " + cols + " must be at most " + std::to_string(max_cols));
  };
  s.heldin = f.read_float(in_key, 3);
  check_dims(in_key, s.heldin, kMaxUnits, "units");
  if (f.has_dataset(out_key)) {
    s.heldout = f.read_float(out_key, 3);
    check_dims(out_key, *s.heldout, kMaxUnits, "units");
    if (s.heldout->shape[0] != s.heldin.shape[0] || s.heldout->shape[1] != s.heldin.shape[1]) {
      throw Error("shape mismatch in " + f.path().string() + ": '" + out_key + "' is " +
                  shape_text(s.heldout->shape) + " but '" + in_key + "' is " + shape_text(s.heldin.shape) +
                  " (trials and time bins must agree)");
    }
  }
  s.behavior = f.read_float(beh_key, 3);
  check_dims(beh_key, s.behavior, kMaxBehaviorDims, "behaviour dims");
  if (s.units() < 1 || s.units() > kMaxUnits) {
    throw Error("dataset '" + in_key + "' in " + f.path().string() + " has shape " +
                shape_text(s.heldin.shape) + ": " + std::to_string(s.units()) +
                " units with the held-out ones; accepted: 1 to " + std::to_string(kMaxUnits));
  }
  if (s.behavior.shape[2] < 1) {
    throw Error("dataset '" + beh_key + "' in " + f.path().string() + " has shape " +
                shape_text(s.behavior.shape) + ": no behaviour dims to decode");
  }
  if (s.behavior.shape[0] != s.heldin.shape[0] || s.behavior.shape[1] != s.heldin.shape[1]) {
    throw Error("shape mismatch in " + f.path().string() + ": '" + beh_key + "' is " +
                shape_text(s.behavior.shape) + " but '" + in_key + "' is " + shape_text(s.heldin.shape) +
                " (trials and time bins must agree)");
  }
  return s;
}

// [T, units] spikes and [T, dims] behaviour of trial n; nullopt if any value is not finite.
std::optional<std::pair<torch::Tensor, torch::Tensor>> trial_tensors(const Split& s, int64_t n) {
  const int64_t T = s.bins(), ui = s.heldin.shape[2], uo = s.heldout ? s.heldout->shape[2] : 0, D = s.dims();
  auto spikes = torch::empty({T, ui + uo}, torch::kFloat32);
  auto beh = torch::empty({T, D}, torch::kFloat32);
  float* sp = spikes.data_ptr<float>();
  float* bp = beh.data_ptr<float>();
  bool finite = true;
  for (int64_t t = 0; t < T; ++t) {
    const float* in = s.heldin.data.data() + (n * T + t) * ui;
    std::copy(in, in + ui, sp + t * (ui + uo));
    if (uo > 0) {
      const float* out = s.heldout->data.data() + (n * T + t) * uo;
      std::copy(out, out + uo, sp + t * (ui + uo) + ui);
    }
    const float* b = s.behavior.data.data() + (n * T + t) * D;
    std::copy(b, b + D, bp + t * D);
  }
  for (int64_t i = 0; i < spikes.numel(); ++i) finite = finite && std::isfinite(sp[i]);
  for (int64_t i = 0; i < beh.numel(); ++i) finite = finite && std::isfinite(bp[i]);
  if (!finite) return std::nullopt;
  return std::make_pair(spikes, beh);
}

}  // namespace

NeuralImportReport import_neural_hdf5(const NeuralImportOptions& options) {
  if (!(options.smoothing_sigma_ms >= 0 && options.smoothing_sigma_ms <= kMaxSigmaMs)) {
    throw Error("--smoothing_sigma_ms " + std::to_string(options.smoothing_sigma_ms) + ": must be in [0, " +
                std::to_string(kMaxSigmaMs) + "] ms");
  }
  if (!(options.bin_ms == 0 || (options.bin_ms >= kMinBinMs && options.bin_ms <= kMaxBinMs))) {
    throw Error("--bin_ms " + std::to_string(options.bin_ms) + ": must be in [" + std::to_string(kMinBinMs) +
                ", " + std::to_string(kMaxBinMs) + "] ms (or 0 = from the file)");
  }
  // A failed or stopped import leaves the folder as it was (NewDatabase, declared before the
  // store, which closes first); a full map keeps what was committed.
  NewDatabase target(options.output, "--output_path");
  const auto files = expand_inputs(options.inputs);
  if (files.empty()) throw Error("no input files given for the neural import");
  if (!options.groups.empty() && options.groups.size() != files.size()) {
    throw Error("got " + std::to_string(options.groups.size()) + " group names for " +
                std::to_string(files.size()) +
                " input files; give one per file or none (file stems are used)");
  }

  LmdbStore store(options.output, LmdbStore::Mode::kReadWrite, options.max_db_size_bytes);

  NeuralImportReport report;
  std::map<std::string, size_t> group_index;
  std::vector<NeuralGroupInfo> committed_groups;  // what the last commit made durable
  uint64_t committed = 0;
  auto writer = std::make_unique<LmdbStore::Writer>(store);
  size_t pending = 0;

  auto commit = [&] {
    writer->commit();
    committed = report.trials_written;
    committed_groups = report.groups;
    writer = std::make_unique<LmdbStore::Writer>(store);
    pending = 0;
  };

  try {
    for (size_t fi = 0; fi < files.size(); ++fi) {
      const auto& path = files[fi];
      throw_if_stop_requested("before reading " + path.string() + "; the unfinished database was removed");
      auto file = H5File::open_read(path);
      const std::string group = options.groups.empty() ? path.stem().string() : options.groups[fi];
      double bin_ms = options.bin_ms;
      if (bin_ms <= 0) {
        auto attr = file.read_root_attribute("bin_size_ms");
        bin_ms = attr ? *attr : kDefaultBinMs;
        if (!(bin_ms >= kMinBinMs && bin_ms <= kMaxBinMs)) {
          throw Error("attribute 'bin_size_ms' in " + path.string() + " = " + std::to_string(bin_ms) +
                      ": must be in [" + std::to_string(kMinBinMs) + ", " + std::to_string(kMaxBinMs) +
                      "] ms");
        }
      }
      std::vector<Split> splits;
      splits.push_back(read_split(file, "train"));
      if (options.include_eval && file.has_dataset("eval_spikes_heldin")) {
        if (!file.has_dataset("eval_behavior")) {
          report.notes.push_back(path.string() + ": eval_* trials skipped: no 'eval_behavior' to decode");
        } else {
          auto eval = read_split(file, "eval");
          if (eval.units() != splits[0].units() || eval.dims() != splits[0].dims()) {
            report.notes.push_back(
                path.string() + ": eval_* trials skipped: " + std::to_string(eval.units()) + " units / " +
                std::to_string(eval.dims()) + " behaviour dims differ from train_* (" +
                std::to_string(splits[0].units()) + " / " + std::to_string(splits[0].dims()) + ")");
          } else {
            splits.push_back(std::move(eval));
          }
        }
      }

      auto [it, inserted] = group_index.emplace(group, report.groups.size());
      if (inserted) {
        report.groups.push_back({group, splits[0].units(), splits[0].dims(), 0, bin_ms});
      }
      auto& info = report.groups[it->second];
      if (info.units != splits[0].units() || info.behavior_dims != splits[0].dims() ||
          info.bin_ms != bin_ms) {
        throw Error("group \"" + group + "\": " + path.string() + " has " +
                    std::to_string(splits[0].units()) + " units, " + std::to_string(splits[0].dims()) +
                    " behaviour dims, bin " + std::to_string(bin_ms) +
                    " ms, but earlier files of that group have " + std::to_string(info.units) + ", " +
                    std::to_string(info.behavior_dims) + ", " + std::to_string(info.bin_ms) + " ms");
      }

      for (const auto& split : splits) {
        int64_t skipped = 0;
        for (int64_t n = 0; n < split.trials(); ++n) {
          throw_if_stop_requested("while importing " + path.string() +
                                  "; the unfinished database was removed");
          auto tensors = trial_tensors(split, n);
          if (!tensors) {
            ++skipped;
            continue;
          }
          NeuralRecord r;
          r.spikes = options.smoothing_sigma_ms > 0
                         ? gaussian_smooth(tensors->first, options.smoothing_sigma_ms, bin_ms)
                         : tensors->first;
          r.behavior = tensors->second;
          r.group = group;
          r.bin_ms = bin_ms;
          r.smoothing_sigma_ms = options.smoothing_sigma_ms;
          r.source = path.filename().string();
          r.split = split.prefix;
          r.trial = n;
          writer->put(LmdbStore::key_for_index(report.trials_written), encode_neural_record(r));
          ++report.trials_written;
          ++info.trials;
          if (++pending == kRecordsPerTransaction) commit();
        }
        if (skipped > 0) {
          report.notes.push_back(path.string() + ": " + std::to_string(skipped) + " " + split.prefix +
                                 " trials skipped: non-finite spikes or behaviour (NaN/Inf)");
        }
      }
    }
    if (pending > 0) commit();
  } catch (const MapFullError& e) {
    writer.reset();
    write_neural_metadata(options.output, committed, options.smoothing_sigma_ms, committed_groups);
    if (committed > 0) target.keep();
    throw MapFullError(
        "neural database " + options.output.string() + " is full after " + std::to_string(committed) +
        " trials (max_db_size = " + std::to_string(options.max_db_size_bytes) +
        " bytes); those trials are committed and usable — raise --max_db_size to import the rest (" +
        e.what() + ")");
  }
  // A stopped or failed import (StopRequested, a bad file) leaves nothing: `target` removes the
  // database on the way out.
  writer.reset();
  if (report.trials_written == 0) return report;  // nothing to train on: nothing kept
  write_neural_metadata(options.output, report.trials_written, options.smoothing_sigma_ms, report.groups);
  target.keep();
  return report;
}

}  // namespace rt::neural
