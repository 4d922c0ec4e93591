#include "data/split.h"

#include <ATen/CPUGeneratorImpl.h>
#include <torch/torch.h>

#include <algorithm>
#include <cmath>

#include "util/error.h"

namespace rt {

Split split_indices(size_t n, double val_fraction, size_t val_max, uint64_t seed) {
  if (!(val_fraction > 0 && val_fraction < 1)) {
    throw Error("val_fraction must be in (0, 1), got " + std::to_string(val_fraction));
  }
  if (val_max < 1) throw Error("val_max must be >= 1");
  Split split;
  if (n == 0) return split;
  // RAVE: split1 = max((percent * n) // 100, 1); the epsilon keeps 0.98·50 from flooring to 48.
  size_t n_train = std::max<size_t>(
      static_cast<size_t>(std::floor((1.0 - val_fraction) * static_cast<double>(n) + 1e-9)), 1);
  n_train = std::min(n_train, n);
  size_t n_val = n - n_train;
  if (n_val > val_max) {
    n_val = val_max;
    n_train = n - n_val;
  }
  at::Generator gen = at::detail::createCPUGenerator(seed);
  torch::Tensor perm =
      torch::randperm(static_cast<int64_t>(n), gen, torch::TensorOptions().dtype(torch::kLong));
  const int64_t* p = perm.data_ptr<int64_t>();
  split.train.assign(p, p + n_train);
  split.val.assign(p + n_train, p + n);
  return split;
}

}  // namespace rt
