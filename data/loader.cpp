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

std::vector<std::vector<size_t>> default_batches(const std::vector<size_t>& indices, const LoaderOptions& options,
                                                 uint64_t epoch) {
  std::vector<size_t> order = indices;
  if (options.shuffle) {
    // Our own Fisher–Yates so the order does not depend on the standard library's shuffle.
    std::mt19937_64 rng(splitmix64(options.seed ^ 0x5EEDBA7C4ULL) ^ splitmix64(epoch));
    for (size_t i = order.size(); i > 1; --i) {
      const size_t j = static_cast<size_t>(rng() % i);
      std::swap(order[i - 1], order[j]);
    }
  }
  std::vector<std::vector<size_t>> batches;
  const size_t b = static_cast<size_t>(options.batch);
  for (size_t start = 0; start < order.size(); start += b) {
    const size_t end = std::min(order.size(), start + b);
    if (end - start < b && options.drop_last) break;
    batches.emplace_back(order.begin() + static_cast<std::ptrdiff_t>(start), order.begin() + static_cast<std::ptrdiff_t>(end));
  }
  return batches;
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
    if (targets.size() != examples.size()) throw Error("collate: some examples have a target and others do not");
    batch.target = torch::stack(targets);
  }
  batch.group = examples.front().group;
  return batch;
}

Loader::Loader(std::shared_ptr<const ExampleSource> source, LoaderOptions options, std::vector<size_t> indices,
               BatchSampler sampler)
    : source_(std::move(source)), options_(options), sampler_(std::move(sampler)) {
  if (!source_) throw Error("Loader: no example source");
  if (options_.batch < 1) throw Error("batch must be >= 1, got " + std::to_string(options_.batch));
  if (options_.workers < 0) throw Error("workers must be >= 0, got " + std::to_string(options_.workers));
  if (options_.prefetch < 1) throw Error("prefetch must be >= 1, got " + std::to_string(options_.prefetch));
  if (options_.start_batch < 0) throw Error("start_batch must be >= 0, got " + std::to_string(options_.start_batch));
  next_claim_ = next_deliver_ = options_.start_batch;
  if (!sampler_) {
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
    sampler_ = [indices = std::move(indices), opts = options_](uint64_t epoch) {
      return default_batches(indices, opts, epoch);
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
  while (planned_until_ <= seq) {
    if (exhausted_) return false;
    if (!options_.infinite && next_epoch_ >= 1) {
      exhausted_ = true;
      return false;
    }
    const uint64_t epoch = next_epoch_++;
    auto batches = sampler_(epoch);
    if (batches.empty()) {
      if (!options_.infinite) {
        exhausted_ = true;
        return false;
      }
      throw Error("Loader: epoch " + std::to_string(epoch) + " has no batches (" + std::to_string(source_->size()) +
                  " examples, batch " + std::to_string(options_.batch) + (options_.drop_last ? ", drop_last" : "") +
                  "); use a smaller batch or more data");
    }
    for (auto& b : batches) {
      if (b.empty()) throw Error("Loader: the batch sampler returned an empty batch in epoch " + std::to_string(epoch));
      if (planned_until_ < options_.start_batch) {
        ++planned_until_;  // Before the resume position: skipped, never loaded.
        continue;
      }
      plan_.push_back(Job{planned_until_++, epoch, std::move(b)});
    }
  }
  return true;
}

size_t Loader::batches_per_epoch() {
  std::lock_guard<std::mutex> lock(mu_);  // Samplers need not be thread-safe.
  return sampler_(0).size();
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
    batch.batch_idx = job.seq;
    batch.epoch = job.epoch;
    return batch;
  } catch (const std::exception& e) {
    throw Error("data loader: batch " + std::to_string(job.seq) + " (epoch " + std::to_string(job.epoch) +
                ", indices " + describe_indices(job.indices) + "): " + e.what());
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
      cv_.wait(lock, [&] { return stop_ || next_claim_ < next_deliver_ + options_.prefetch + options_.workers; });
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
