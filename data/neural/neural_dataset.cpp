#include "data/neural/neural_dataset.h"

#include <algorithm>
#include <cmath>
#include <map>

#include "data/neural/neural_record.h"
#include "util/error.h"
#include "util/path_kind.h"
#include "util/printable.h"
#include "util/signals.h"

namespace rt::neural {

NeuralDataset::NeuralDataset(const std::filesystem::path& db, const NeuralDatasetOptions& options)
    : options_(options) {
  if (options_.smoothing_sigma_ms < 0) {
    throw Error("data.smoothing_sigma_ms = " + std::to_string(options_.smoothing_sigma_ms) +
                ": must be >= 0");
  }
  if (options_.smoothing_sigma_ms > kMaxSigmaMs) {
    throw Error("data.smoothing_sigma_ms = " + std::to_string(options_.smoothing_sigma_ms) +
                ": must be <= " + std::to_string(kMaxSigmaMs));
  }
  if (options_.example_cache_mb < 0) {
    throw Error("data.example_cache_mb = " + std::to_string(options_.example_cache_mb) +
                ": must be >= 0 (0 = no cache)");
  }
  if (const std::string why = not_a_folder(db); !why.empty())
    throw Error("neural database " + db.string() + " " + why);
  store_ = std::make_unique<LmdbStore>(db, LmdbStore::Mode::kReadOnly);
  NeuralDatabaseCheck check(db);
  store_->for_each([&](std::string_view key, std::string_view value) {
    // Scanning a large database takes a while: a Ctrl-C or SIGTERM stops it here.
    throw_if_stop_requested("while reading neural database " + db.string());
    const auto r =
        check.add(groups_.size(), key, value, "neural database " + db.string() + " key " + printable(key));
    groups_.push_back(check.group_index(r.group));
    return true;
  });
  check.finish(store_->count());
  group_names_ = check.group_names();
  group_units_ = check.group_units();
  bin_ms_ = check.bin_ms();
  behavior_dims_ = check.behavior_dims();
  const double stored_sigma = check.smoothing_sigma_ms();
  stored_smoothed_ = stored_sigma > 0;
  if (stored_smoothed_ && options_.smoothing_sigma_ms > 0 &&
      std::abs(stored_sigma - options_.smoothing_sigma_ms) > 1e-9) {
    throw Error("neural database " + db.string() + " was smoothed at import with sigma " +
                std::to_string(stored_sigma) +
                " ms; data.smoothing_sigma_ms = " + std::to_string(options_.smoothing_sigma_ms) +
                " would smooth it again. Set data.smoothing_sigma_ms to " + std::to_string(stored_sigma) +
                " (or 0), or re-import raw counts");
  }
  max_units_ = *std::max_element(group_units_.begin(), group_units_.end());
  if (options_.example_cache_mb > 0) cache_.resize(size());
}

Example NeuralDataset::get(size_t index, std::mt19937_64& /*rng*/) const {
  if (options_.example_cache_mb <= 0) return prepare(index);
  {
    std::lock_guard<std::mutex> lock(cache_mutex_);
    if (index < cache_.size() && cache_[index].input.defined()) return cache_[index];
  }
  Example ex = prepare(index);
  const int64_t bytes = ex.input.nbytes() + ex.target.nbytes();
  std::lock_guard<std::mutex> lock(cache_mutex_);
  if (index < cache_.size() && !cache_[index].input.defined() &&
      cache_bytes_ + bytes <= options_.example_cache_mb * (int64_t{1} << 20)) {
    cache_[index] = ex;
    cache_bytes_ += bytes;
  }
  return ex;
}

Example NeuralDataset::prepare(size_t index) const {
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

std::vector<std::vector<size_t>> group_batches(const ExampleSource& dataset,
                                               const std::vector<size_t>& indices, size_t batch,
                                               uint64_t epoch, uint64_t seed, bool drop_last) {
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
