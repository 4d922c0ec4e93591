#include "data/loader.h"

#include <algorithm>
#include <string>

#include "util/error.h"

namespace rt {
namespace {

uint64_t splitmix64(uint64_t x) {
  x += 0x9E3779B97F4A7C15ULL;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ULL;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBULL;
  return x ^ (x >> 31);
}

std::string describe_indices(const std::vector<size_t>& indices) {
  std::string s;
  for (size_t i = 0; i < indices.size() && i < 8; ++i) s += (i ? ", " : "") + std::to_string(indices[i]);
  if (indices.size() > 8) s += ", ...";
  return "[" + s + "]";
}

}  // namespace

uint64_t example_seed(uint64_t seed, uint64_t epoch, size_t index) {
  return splitmix64(splitmix64(splitmix64(seed) ^ epoch) ^ static_cast<uint64_t>(index));
}

std::vector<std::vector<size_t>> default_batches(const std::vector<size_t>& indices,
                                                 const LoaderOptions& options, uint64_t epoch, size_t skip) {
  std::vector<size_t> order = indices;
  if (options.shuffle) {
    // Our own Fisher–Yates so the order does not depend on the standard library's shuffle.
    std::mt19937_64 rng(splitmix64(options.seed ^ 0x5EEDBA7C4ULL) ^ splitmix64(epoch));
    for (size_t i = order.size(); i > 1; --i) {
      const size_t j = static_cast<size_t>(rng() % i);
      std::swap(order[i - 1], order[j]);
    }
  }
  order.erase(order.begin(), order.begin() + static_cast<std::ptrdiff_t>(std::min(skip, order.size())));
  std::vector<std::vector<size_t>> batches;
  const size_t b = static_cast<size_t>(options.batch) * static_cast<size_t>(std::max(1, options.world_size));
  for (size_t start = 0; start < order.size(); start += b) {
    const size_t end = std::min(order.size(), start + b);
    if (end - start < b && options.drop_last) break;
    batches.emplace_back(order.begin() + static_cast<std::ptrdiff_t>(start),
                         order.begin() + static_cast<std::ptrdiff_t>(end));
  }
  return batches;
}

std::vector<size_t> rank_slice(const std::vector<size_t>& global_batch, int rank, int world_size) {
  const size_t n = global_batch.size(), w = static_cast<size_t>(world_size), r = static_cast<size_t>(rank);
  return std::vector<size_t>(global_batch.begin() + static_cast<std::ptrdiff_t>(r * n / w),
                             global_batch.begin() + static_cast<std::ptrdiff_t>((r + 1) * n / w));
}

Batch collate(std::vector<Example>& examples) {
  Batch batch;
  if (examples.empty()) return batch;
  std::vector<torch::Tensor> inputs, targets;
  for (auto& e : examples) {
    inputs.push_back(e.input);
    if (e.target.defined()) targets.push_back(e.target);
  }
  batch.input = torch::stack(inputs);
  if (!targets.empty()) {
    if (targets.size() != examples.size())
      throw Error("collate: some examples have a target and others do not");
    batch.target = torch::stack(targets);
  }
  batch.group = examples.front().group;
  return batch;
}

Loader::Loader(std::shared_ptr<const ExampleSource> source, LoaderOptions options,
               std::vector<size_t> indices, BatchSampler sampler)
    : source_(std::move(source)), options_(options) {
  if (!source_) throw Error("Loader: no example source");
  if (options_.batch < 1) throw Error("batch must be >= 1, got " + std::to_string(options_.batch));
  if (options_.workers < 0) throw Error("workers must be >= 0, got " + std::to_string(options_.workers));
  if (options_.prefetch < 1) throw Error("prefetch must be >= 1, got " + std::to_string(options_.prefetch));
  if (options_.start_batch < 0)
    throw Error("start_batch must be >= 0, got " + std::to_string(options_.start_batch));
  if (options_.start.example < 0) {
    throw Error("start.example must be >= 0, got " + std::to_string(options_.start.example));
  }
  if (options_.start_batch > 0 && (options_.start.epoch > 0 || options_.start.example > 0)) {
    throw Error("Loader: set start_batch or start, not both");
  }
  if (options_.world_size < 1 || options_.rank < 0 || options_.rank >= options_.world_size) {
    throw Error("Loader: rank " + std::to_string(options_.rank) + " of world size " +
                std::to_string(options_.world_size) + " is not valid");
  }
  next_epoch_ = options_.start.epoch;
  split_examples_ = indices.empty() ? source_->size() : indices.size();
  if (sampler) {
    // Resuming inside an epoch: whole batches of the plan are skipped, and the one holding the
    // position is cut there (see the top of loader.h).
    planner_ = [sampler = std::move(sampler)](uint64_t epoch, size_t skip) {
      auto batches = sampler(epoch);
      std::vector<std::vector<size_t>> rest;
      size_t seen = 0;
      for (auto& b : batches) {
        const size_t size = b.size();
        if (seen >= skip) {
          rest.push_back(std::move(b));
        } else if (seen + size > skip) {
          rest.emplace_back(b.begin() + static_cast<std::ptrdiff_t>(skip - seen), b.end());
        }
        seen += size;
      }
      return rest;
    };
  } else {
    if (indices.empty()) {
      indices.resize(source_->size());
      for (size_t i = 0; i < indices.size(); ++i) indices[i] = i;
    }
    for (size_t i : indices) {
      if (i >= source_->size()) {
        throw Error("Loader: index " + std::to_string(i) + " is out of range (the source holds " +
                    std::to_string(source_->size()) + " examples)");
      }
    }
    planner_ = [indices = std::move(indices), opts = options_](uint64_t epoch, size_t skip) {
      return default_batches(indices, opts, epoch, skip);
    };
  }
  options_.pin_memory = options_.pin_memory && torch::cuda::is_available();
  for (int w = 0; w < options_.workers; ++w) threads_.emplace_back([this] { worker_loop(); });
}

Loader::~Loader() { stop_workers(); }

void Loader::stop_workers() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  for (auto& t : threads_) {
    if (t.joinable()) t.join();
  }
}

bool Loader::plan_until(int64_t seq) {
  const bool sharded = options_.world_size > 1;
  while (planned_until_ <= seq) {
    if (exhausted_) return false;
    if (!options_.infinite && epochs_planned_ >= 1) {
      exhausted_ = true;
      return false;
    }
    const uint64_t epoch = next_epoch_++;
    const size_t skip = epochs_planned_++ == 0 ? static_cast<size_t>(options_.start.example) : 0;
    auto batches = planner_(epoch, skip);
    if (batches.empty() && skip > 0) continue;  // resumed at the end of an epoch
    const std::string shape =
        std::to_string(split_examples_) + " examples" +
        (split_examples_ != source_->size()
             ? " in this split (of " + std::to_string(source_->size()) + " in the database)"
             : std::string()) +
        ", batch " + std::to_string(options_.batch) +
        (sharded ? " per rank × " + std::to_string(options_.world_size) + " ranks" : "") +
        (options_.drop_last ? ", drop_last" : "");
    if (batches.empty()) {
      if (!options_.infinite) {
        exhausted_ = true;
        return false;
      }
      throw Error("Loader: epoch " + std::to_string(epoch) + " has no batches (" + shape +
                  "); use a smaller batch or more data");
    }
    StreamPosition position{epoch, static_cast<int64_t>(skip)};
    const int64_t planned_before = planned_until_;
    for (auto& b : batches) {
      if (b.empty())
        throw Error("Loader: the batch sampler returned an empty batch in epoch " + std::to_string(epoch));
      position.example += static_cast<int64_t>(b.size());
      const int64_t global_index = next_global_++;
      if (global_index < options_.start_batch) continue;  // Before the resume position: never loaded.
      // Training streams step on every rank together: a batch too small to give every rank
      // an example is skipped everywhere.
      if (options_.infinite && b.size() < static_cast<size_t>(options_.world_size)) continue;
      const auto global_size = static_cast<int64_t>(b.size());
      const int64_t offset = sharded ? static_cast<int64_t>(static_cast<size_t>(options_.rank) * b.size() /
                                                            static_cast<size_t>(options_.world_size))
                                     : 0;
      auto slice = sharded ? rank_slice(b, options_.rank, options_.world_size) : std::move(b);
      if (slice.empty()) continue;
      plan_.push_back(
          Job{planned_until_++, epoch, global_index, position, std::move(slice), global_size, offset});
    }
    if (options_.infinite && skip == 0 && planned_until_ == planned_before &&
        next_global_ > options_.start_batch) {
      throw Error("Loader: epoch " + std::to_string(epoch) +
                  " has no batch with an example for every rank (" + shape +
                  "); use a smaller batch, fewer ranks or more data");
    }
  }
  return true;
}

size_t Loader::batches_per_epoch() {
  std::lock_guard<std::mutex> lock(mu_);  // Samplers need not be thread-safe.
  return planner_(0, 0).size();
}

Batch Loader::load(const Job& job) const {
  std::vector<Example> examples;
  examples.reserve(job.indices.size());
  try {
    for (size_t index : job.indices) {
      std::mt19937_64 rng(example_seed(options_.seed, job.epoch, index));
      examples.push_back(source_->get(index, rng));
    }
    Batch batch = collate(examples);
    if (options_.pin_memory) {
      batch.input = batch.input.pin_memory();
      if (batch.target.defined()) batch.target = batch.target.pin_memory();
    }
    batch.indices = job.indices;
    batch.batch_idx = job.global_index;
    batch.epoch = job.epoch;
    batch.position = job.position;
    batch.global_examples = job.global_examples;
    batch.global_offset = job.global_offset;
    return batch;
  } catch (const std::exception& e) {
    throw Error("data loader: batch " + std::to_string(job.global_index) + " (epoch " +
                std::to_string(job.epoch) + ", indices " + describe_indices(job.indices) + "): " + e.what());
  }
}

void Loader::worker_loop() {
  std::shared_ptr<void> scope;
  if (options_.worker_scope) scope = options_.worker_scope();
  for (;;) {
    Job job;
    {
      std::unique_lock<std::mutex> lock(mu_);
      // At most `prefetch` finished batches wait, plus one in flight per worker.
      cv_.wait(lock,
               [&] { return stop_ || next_claim_ < next_deliver_ + options_.prefetch + options_.workers; });
      if (stop_) return;
      try {
        if (!plan_until(next_claim_)) {
          cv_.notify_all();  // next() may be waiting to learn that the stream ended.
          return;
        }
      } catch (...) {
        failed_[next_claim_] = std::current_exception();
        stop_ = true;
        cv_.notify_all();
        return;
      }
      job = std::move(plan_.front());
      plan_.pop_front();
      ++next_claim_;
    }
    std::optional<Batch> batch;
    std::exception_ptr error;
    try {
      batch = load(job);
    } catch (...) {
      error = std::current_exception();
    }
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (error) {
        failed_[job.seq] = error;
      } else {
        ready_.emplace(job.seq, std::move(*batch));
      }
    }
    cv_.notify_all();
  }
}

std::optional<Batch> Loader::next() {
  if (options_.workers == 0) {
    Job job;
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (!plan_until(next_deliver_)) return std::nullopt;
      job = std::move(plan_.front());
      plan_.pop_front();
      ++next_deliver_;
    }
    return load(job);
  }
  std::unique_lock<std::mutex> lock(mu_);
  const int64_t seq = next_deliver_;
  for (;;) {
    auto it = ready_.find(seq);
    if (it != ready_.end()) {
      Batch b = std::move(it->second);
      ready_.erase(it);
      ++next_deliver_;
      lock.unlock();
      cv_.notify_all();
      return b;
    }
    // An error at or before this position ends the stream.
    if (!failed_.empty() && failed_.begin()->first <= seq) {
      std::exception_ptr e = failed_.begin()->second;
      stop_ = true;
      lock.unlock();
      cv_.notify_all();
      std::rethrow_exception(e);
    }
    if (exhausted_ && seq >= planned_until_) return std::nullopt;
    if (stop_ && failed_.empty()) throw Error("data loader: next() after the loader was stopped");
    cv_.wait(lock);
  }
}

}  // namespace rt
