#include "data/neural/neural_dataset.h"

#include <algorithm>
#include <cmath>
#include <map>

#include "data/neural/neural_record.h"
#include "util/error.h"

namespace rt::neural {

NeuralDataset::NeuralDataset(const std::filesystem::path& db, const NeuralDatasetOptions& options)
    : options_(options) {
  if (options_.smoothing_sigma_ms < 0) {
    throw Error("data.smoothing_sigma_ms = " + std::to_string(options_.smoothing_sigma_ms) + ": must be >= 0");
  }
  if (!std::filesystem::is_directory(db)) throw Error("neural database " + db.string() + " does not exist");
  store_ = std::make_unique<LmdbStore>(db, LmdbStore::Mode::kReadOnly);
  std::map<std::string, int64_t> index;
  std::vector<int64_t> dims_of_group;
  bool first = true;
  double stored_sigma = 0;
  store_->for_each([&](std::string_view key, std::string_view value) {
    const size_t i = groups_.size();
    const std::string where = "neural database " + db.string() + " key " + std::string(key);
    if (key != LmdbStore::key_for_index(i)) {
      throw Error(where + ": expected key " + LmdbStore::key_for_index(i) + " (keys must be %08d from 0)");
    }
    auto r = decode_neural_record(value, where);
    auto [it, inserted] = index.emplace(r.group, static_cast<int64_t>(group_names_.size()));
    if (inserted) {
      group_names_.push_back(r.group);
      group_units_.push_back(r.spikes.size(1));
      dims_of_group.push_back(r.behavior.size(1));
    }
    const auto g = static_cast<size_t>(it->second);
    if (group_units_[g] != r.spikes.size(1) || dims_of_group[g] != r.behavior.size(1)) {
      throw Error(where + ": group \"" + r.group + "\" has " + std::to_string(r.spikes.size(1)) + " units / " +
                  std::to_string(r.behavior.size(1)) + " dims here but " + std::to_string(group_units_[g]) + " / " +
                  std::to_string(dims_of_group[g]) + " in its first record");
    }
    if (first) {
      bin_ms_ = r.bin_ms;
      behavior_dims_ = r.behavior.size(1);
      stored_sigma = r.smoothing_sigma_ms;
      first = false;
    }
    if (r.behavior.size(1) != behavior_dims_) {
      throw Error(where + ": behaviour has " + std::to_string(r.behavior.size(1)) + " dims, other records " +
                  std::to_string(behavior_dims_) + "; one model decodes one behaviour space");
    }
    if (r.smoothing_sigma_ms != stored_sigma) {
      throw Error(where + ": records mix smoothing_sigma_ms " + std::to_string(r.smoothing_sigma_ms) + " and " +
                  std::to_string(stored_sigma));
    }
    groups_.push_back(it->second);
    return true;
  });
  if (groups_.empty()) throw Error("neural database " + db.string() + " holds no records");
  stored_smoothed_ = stored_sigma > 0;
  if (stored_smoothed_ && options_.smoothing_sigma_ms > 0 &&
      std::abs(stored_sigma - options_.smoothing_sigma_ms) > 1e-9) {
    throw Error("neural database " + db.string() + " was smoothed at import with sigma " + std::to_string(stored_sigma) +
                " ms; data.smoothing_sigma_ms = " + std::to_string(options_.smoothing_sigma_ms) +
                " would smooth it again. Set data.smoothing_sigma_ms to " + std::to_string(stored_sigma) +
                " (or 0), or re-import raw counts");
  }
  max_units_ = *std::max_element(group_units_.begin(), group_units_.end());
}

Example NeuralDataset::get(size_t index, std::mt19937_64& /*rng*/) const {
  const auto key = LmdbStore::key_for_index(index);
  auto value = store_->get(key);
  if (!value) throw Error("neural database " + path().string() + ": no record under key " + key);
  auto r = decode_neural_record(*value, "neural database " + path().string() + " key " + key);
  Example ex;
  ex.input = stored_smoothed_ ? r.spikes : gaussian_smooth(r.spikes, options_.smoothing_sigma_ms, r.bin_ms);
  if (options_.pad_to_widest && ex.input.size(1) < max_units_) {
    ex.input = torch::constant_pad_nd(ex.input, {0, max_units_ - ex.input.size(1)});
  }
  ex.target = r.behavior;
  ex.group = groups_.at(index);
  return ex;
}

std::vector<std::vector<size_t>> group_batches(const ExampleSource& dataset, const std::vector<size_t>& indices,
                                               size_t batch, uint64_t epoch, uint64_t seed, bool drop_last) {
  if (batch < 1) throw Error("train.batch = " + std::to_string(batch) + ": must be >= 1");
  std::seed_seq seq{seed, epoch, uint64_t{0x9a7c4}};
  std::mt19937_64 rng(seq);
  std::map<int64_t, std::vector<size_t>> by_group;
  for (auto i : indices) by_group[dataset.group_of(i)].push_back(i);
  std::vector<std::vector<size_t>> batches;
  for (auto& [group, members] : by_group) {
    std::shuffle(members.begin(), members.end(), rng);
    for (size_t start = 0; start < members.size(); start += batch) {
      const size_t end = std::min(members.size(), start + batch);
      if (drop_last && end - start < batch) break;
      batches.emplace_back(members.begin() + static_cast<std::ptrdiff_t>(start),
                           members.begin() + static_cast<std::ptrdiff_t>(end));
    }
  }
  std::shuffle(batches.begin(), batches.end(), rng);
  return batches;
}

}  // namespace rt::neural
