// Train/validation split (RAVE rave/dataset.py split_dataset(dataset, 98, 1000)):
// train = max(floor((1 − val_fraction)·n), 1) examples, validation the rest capped at val_max,
// assigned through torch.randperm(n) with a generator seeded `seed` (42), as
// torch.utils.data.random_split does — so the same indices as RAVE for the same n.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace rt {

struct Split {
  std::vector<size_t> train;
  std::vector<size_t> val;
};

// Throws rt::Error when val_fraction is not in (0, 1) or val_max < 1. Deterministic.
Split split_indices(size_t n, double val_fraction = 0.02, size_t val_max = 1000, uint64_t seed = 42);

}  // namespace rt
