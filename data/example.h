// What datasets hand to the loader, and what the loader hands to a trainer.
//
// Every dataset (audio for RAVE, neural for SSM decoders) implements ExampleSource; the one
// loader (data/loader.h) batches any of them by stacking each field along a new dim 0.
#pragma once

#include <torch/torch.h>

#include <cstdint>
#include <random>
#include <string>
#include <vector>

namespace rt {

// One training example. Fields a dataset does not use stay undefined tensors.
//   RAVE:  input = audio [channels, n_signal] float32; target undefined.
//   SSM:   input = smoothed spikes [T, units] float32; target = behaviour [T, dims]; group set.
struct Example {
  torch::Tensor input;
  torch::Tensor target;
  int64_t group = 0;  // Multi-session SSM: index of the dataset/subject/task group.
};

// Where a loader's stream stands: `example` examples of epoch `epoch` have been delivered,
// counted over every rank of a data-parallel job (the global stream, data/loader.h).
struct StreamPosition {
  uint64_t epoch = 0;
  int64_t example = 0;
};

// A batch: fields stacked along dim 0. `indices` are the dataset indices it was made from.
struct Batch {
  torch::Tensor input;
  torch::Tensor target;
  int64_t group = 0;  // All examples of a batch share one group (the SSM sampler guarantees it).
  std::vector<size_t> indices;
  int64_t batch_idx = 0;  // Position of this batch's global batch in the loader's stream, from 0.
  uint64_t epoch = 0;
  StreamPosition position;  // the global stream's position after this batch (resume from it)
  // Data parallelism: this batch is examples [global_offset, global_offset + size) of a global
  // batch of global_examples (one process: 0 and its own size).
  int64_t global_examples = 0;
  int64_t global_offset = 0;
};

class ExampleSource {
 public:
  virtual ~ExampleSource() = default;
  virtual size_t size() const = 0;
  // Must be thread-safe: loader workers call it concurrently. All randomness (crops,
  // augmentations) comes from `rng`, which the loader seeds per (seed, epoch, index) so that
  // results do not depend on the number of workers.
  virtual Example get(size_t index, std::mt19937_64& rng) const = 0;
  // Group of an example without decoding it (multi-session samplers); 0 by default.
  virtual int64_t group_of(size_t /*index*/) const { return 0; }
};

}  // namespace rt
