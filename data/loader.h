// The one batch loader (data loading must never be the bottleneck): native worker threads, a bounded prefetch
// queue, batches delivered in a fixed order whatever the number of workers.
//
// Determinism: the batch plan of epoch e comes from the sampler (default: the index subset
// shuffled with a generator seeded from (seed, e), cut into global batches), and each example
// is loaded with an rng seeded from (seed, epoch, index) — never from the worker or the rank — so
// the stream of batches is identical for workers = 0, 1, 3, ...
//
// Data parallelism (rank, world_size): the plan is global — batches of batch × world_size
// examples — and every rank takes its slice of each global batch: the batch is cut into
// world_size contiguous slices whose sizes differ by at most one (exactly `batch` each for a
// full global batch), rank r taking slice r. So the union over ranks of one step's batches is,
// in rank order, the single-process batch of batch × world_size examples, with the same
// examples and the same per-example randomness. A global batch with fewer examples than ranks
// leaves some slices empty: an infinite (training) stream skips it on every rank, so ranks
// always step together; a finite (evaluation) stream lets those ranks skip it, so every example
// is still seen by exactly one rank.
//
// Resuming: a batch's `position` is the global stream's position after it ({epoch, examples of
// that epoch delivered over all ranks}); a loader started at that position continues the
// stream, also with another world size (a different global batch). The default sampler then
// continues the epoch's permutation at exactly that example, cut into the new global batches;
// a custom sampler (whose plan may depend on the batch size) skips whole batches of its plan
// summing to that many examples, and the batch holding the position is delivered from there
// on as a smaller batch. From the next epoch on, the stream is the one a fresh loader with the
// new size delivers.
//
// Errors: an exception in a worker stops the loader; next() rethrows it as rt::Error with the
// batch position, epoch and indices added. Destruction never hangs: workers finish the example
// they are loading and exit.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <deque>
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
  int workers = 2;   // 0 = load on the caller's thread inside next().
  int prefetch = 4;  // Finished batches queued ahead of the consumer (>= 1), plus one in
                     // flight per worker.
  uint64_t seed = 0;
  bool shuffle = true;      // Default sampler only.
  bool drop_last = true;    // Default sampler only: drop the last incomplete batch.
  bool infinite = true;     // false: the stream ends after one epoch (next() returns nullopt).
  bool pin_memory = false;  // Honoured only when CUDA is available.
  // Data parallelism: this process is rank `rank` of `world_size`; `batch` is the per-rank
  // batch (see the top of this file).
  int rank = 0;
  int world_size = 1;
  // Where the stream starts, as the number of global batches before it (resuming at step N
  // with an unchanged global batch: N) or as a position (Batch::position; resuming across a
  // change of world size). The batches before it are planned but never loaded, so the stream
  // from here on is the one an uninterrupted loader would deliver (same epochs, same
  // per-example seeds). At most one of the two is set.
  int64_t start_batch = 0;
  StreamPosition start;
  // Called once at the start of each worker thread; what it returns is kept alive until the
  // thread ends (e.g. a memory-tracking scope, so that batch allocations made by workers are
  // accounted to the process like the trainer's own).
  std::function<std::shared_ptr<void>()> worker_scope;
};

// Returns the global batches of one epoch as lists of dataset indices (with world_size > 1,
// batches of the global size: a multi-session sampler builds its group batches at that size).
using BatchSampler = std::function<std::vector<std::vector<size_t>>(uint64_t epoch)>;

// The default plan: `indices` (shuffled per epoch when options.shuffle), without the first
// `skip` of that order (resuming inside the epoch), cut into global batches of
// options.batch × options.world_size.
std::vector<std::vector<size_t>> default_batches(const std::vector<size_t>& indices,
                                                 const LoaderOptions& options, uint64_t epoch,
                                                 size_t skip = 0);

// Rank `rank`'s slice of a global batch (see the top of this file); empty when the batch has
// fewer examples than ranks and this rank's slice is empty.
std::vector<size_t> rank_slice(const std::vector<size_t>& global_batch, int rank, int world_size);

// Stacks each field of `examples` along a new dim 0.
Batch collate(std::vector<Example>& examples);

// The seed of the rng that loads example `index` in `epoch`.
uint64_t example_seed(uint64_t seed, uint64_t epoch, size_t index);

// What a training loop pulls its batches from: a Loader, or a stream around one (the tests'
// fault injection, tests/support/nan_batches.h).
class BatchStream {
 public:
  virtual ~BatchStream() = default;
  // The next batch, or nullopt at the end of a finite stream.
  virtual std::optional<Batch> next() = 0;
};

class Loader final : public BatchStream {
 public:
  // Iterates over `indices` (empty: every example of `source`) with the default sampler, or
  // over the plans `sampler` returns when given. Throws rt::Error on invalid options.
  Loader(std::shared_ptr<const ExampleSource> source, LoaderOptions options, std::vector<size_t> indices = {},
         BatchSampler sampler = {});
  ~Loader();
  Loader(const Loader&) = delete;
  Loader& operator=(const Loader&) = delete;

  // The next batch, or nullopt at the end of a finite stream. Rethrows worker errors.
  std::optional<Batch> next() override;

  const LoaderOptions& options() const { return options_; }
  // Global batches in epoch 0 (the plan of one epoch).
  size_t batches_per_epoch();

 private:
  struct Job {
    int64_t seq = 0;  // delivery order on this rank, from 0
    uint64_t epoch = 0;
    int64_t global_index = 0;  // the global batch's position in the stream (Batch::batch_idx)
    StreamPosition position;   // after this global batch
    std::vector<size_t> indices;
    int64_t global_examples = 0;  // the global batch's size
    int64_t global_offset = 0;    // where this rank's slice starts in it
  };
  // The global batches of `epoch` without its first `skip` examples.
  using Planner = std::function<std::vector<std::vector<size_t>>(uint64_t epoch, size_t skip)>;
  // REQUIRES mu_ held. Fills the plan until it covers `seq`; false when the stream ends first.
  bool plan_until(int64_t seq);
  Batch load(const Job& job) const;
  size_t split_examples_ = 0;  // the examples this loader iterates over (its split), for messages
  void worker_loop();
  void stop_workers();

  std::shared_ptr<const ExampleSource> source_;
  LoaderOptions options_;
  Planner planner_;

  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<Job> plan_;       // Jobs planned and not yet claimed, in seq order.
  int64_t planned_until_ = 0;  // Seq of the next job to plan.
  int64_t next_global_ = 0;    // Global index of the next global batch to plan.
  uint64_t next_epoch_ = 0;
  uint64_t epochs_planned_ = 0;
  bool exhausted_ = false;  // Finite stream fully planned.
  int64_t next_claim_ = 0;
  int64_t next_deliver_ = 0;
  std::map<int64_t, Batch> ready_;
  std::map<int64_t, std::exception_ptr> failed_;
  bool stop_ = false;
  std::vector<std::thread> threads_;
};

}  // namespace rt
