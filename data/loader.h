// The one batch loader (data loading must never be the bottleneck): native worker threads, a bounded prefetch queue,
// batches delivered in a fixed order whatever the number of workers.
//
// Determinism: the batch plan of epoch e comes from the sampler (default: the index subset
// shuffled with a generator seeded from (seed, e), cut into `batch`-sized pieces), and each
// example is loaded with an rng seeded from (seed, epoch, index) — so the stream of batches is
// identical for workers = 0, 1, 3, ...
//
// Errors: an exception in a worker stops the loader; next() rethrows it as rt::Error with the
// batch position, epoch and indices added. Destruction never hangs: workers finish the example
// they are loading and exit.
#pragma once

#include <condition_variable>
#include <deque>
#include <cstdint>
#include <exception>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <thread>
#include <vector>

#include "data/example.h"

namespace rt {

struct LoaderOptions {
  int64_t batch = 8;
  int workers = 2;      // 0 = load on the caller's thread inside next().
  int prefetch = 4;     // Finished batches queued ahead of the consumer (>= 1), plus one in
                        // flight per worker.
  uint64_t seed = 0;
  bool shuffle = true;  // Default sampler only.
  bool drop_last = true;  // Default sampler only: drop the last incomplete batch.
  bool infinite = true;   // false: the stream ends after one epoch (next() returns nullopt).
  bool pin_memory = false;  // Honoured only when CUDA is available.
  // Position of the first delivered batch in the stream (resuming at training step N: N).
  // The batches before it are planned but never loaded, so the stream from here on is the
  // one an uninterrupted loader would deliver (same epochs, same per-example seeds).
  int64_t start_batch = 0;
  // Called once at the start of each worker thread; what it returns is kept alive until the
  // thread ends (e.g. a memory-tracking scope, so that batch allocations made by workers are
  // accounted to the process like the trainer's own).
  std::function<std::shared_ptr<void>()> worker_scope;
};

// Returns the batches of one epoch as lists of dataset indices.
using BatchSampler = std::function<std::vector<std::vector<size_t>>(uint64_t epoch)>;

// The default plan: `indices` (shuffled per epoch when options.shuffle) cut into batches.
std::vector<std::vector<size_t>> default_batches(const std::vector<size_t>& indices, const LoaderOptions& options,
                                                 uint64_t epoch);

// Stacks each field of `examples` along a new dim 0.
Batch collate(std::vector<Example>& examples);

// The seed of the rng that loads example `index` in `epoch`.
uint64_t example_seed(uint64_t seed, uint64_t epoch, size_t index);

class Loader {
 public:
  // Iterates over `indices` (empty: every example of `source`) with the default sampler, or
  // over the plans `sampler` returns when given. Throws rt::Error on invalid options.
  Loader(std::shared_ptr<const ExampleSource> source, LoaderOptions options, std::vector<size_t> indices = {},
         BatchSampler sampler = {});
  ~Loader();
  Loader(const Loader&) = delete;
  Loader& operator=(const Loader&) = delete;

  // The next batch, or nullopt at the end of a finite stream. Rethrows worker errors.
  std::optional<Batch> next();

  const LoaderOptions& options() const { return options_; }
  // Batches in epoch 0 (the plan of one epoch).
  size_t batches_per_epoch();

 private:
  struct Job {
    int64_t seq = 0;
    uint64_t epoch = 0;
    std::vector<size_t> indices;
  };
  // REQUIRES mu_ held. Fills the plan until it covers `seq`; false when the stream ends first.
  bool plan_until(int64_t seq);
  Batch load(const Job& job) const;
  void worker_loop();
  void stop_workers();

  std::shared_ptr<const ExampleSource> source_;
  LoaderOptions options_;
  BatchSampler sampler_;

  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<Job> plan_;       // Jobs planned and not yet claimed, in seq order.
  int64_t planned_until_ = 0;  // Seq of the next job to plan.
  uint64_t next_epoch_ = 0;
  bool exhausted_ = false;     // Finite stream fully planned.
  int64_t next_claim_ = 0;
  int64_t next_deliver_ = 0;
  std::map<int64_t, Batch> ready_;
  std::map<int64_t, std::exception_ptr> failed_;
  bool stop_ = false;
  std::vector<std::thread> threads_;
};

}  // namespace rt
