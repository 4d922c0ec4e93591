// Memory by category: which bytes are parameters, buffers, gradients, optimizer state, and
// what is left (activations and temporaries). torch's memory timeline infers this from
// operator names; here the trainer names the tensors of each category (a MemoryCategorySource:
// the model family gives its parameters and buffers, the optimizers their state) and the
// counting allocator's blocks are matched by storage: each category storage's block is tagged
// in the MemoryReporter (profiling/memory.h), so the reporter knows the category of every live
// byte it counted, at its peaks too.
//
// Thread-safety: measure() and the constructor on the trainer's thread; the gradient hooks run
// on autograd's threads and only tag blocks (atomics).
#pragma once

#include <ATen/ATen.h>

#include <cstdint>
#include <functional>
#include <memory>
#include <utility>
#include <vector>

#include "profiling/memory.h"

namespace rt::prof {

// The tensors of each category, asked for at every measurement (optimizer state appears at the
// first step; gradients are the parameters' .grad()). Any member may be empty.
struct MemoryCategorySource {
  std::function<std::vector<at::Tensor>()> parameters;
  std::function<std::vector<at::Tensor>()> buffers;
  std::function<std::vector<at::Tensor>()> optimizer_state;
};

// One measurement: bytes[kParameters…kOptimizerState] are the nbytes of the categories' distinct
// storages (each storage counted once, in the first category naming it: parameters, buffers,
// optimizer state, gradients); bytes[kOther] = bytes in use − the category bytes counted in
// it. untracked_bytes: category bytes the bytes in use does not hold (CPU blocks allocated
// before tracking began or by another allocator).
struct CategorySplit {
  CategoryBytes bytes;
  int64_t untracked_bytes = 0;
};

class MemoryCategories {
 public:
  // REQUIRES: reporter not null. Registers a hook on every parameter that requires a gradient,
  // so that a gradient is tagged when backward hands it over (peaks during backward then count
  // it as a gradient, not a temporary), and tags the categories' blocks that exist now; the
  // destructor removes the hooks.
  MemoryCategories(MemoryCategorySource source, std::shared_ptr<MemoryReporter> reporter);
  ~MemoryCategories();
  MemoryCategories(const MemoryCategories&) = delete;
  MemoryCategories& operator=(const MemoryCategories&) = delete;

  // Walks the categories, tags their blocks, and splits `bytes_in_use` (the reporter's CPU bytes
  // in use, or the CUDA allocator's allocated bytes when the tensors live on a GPU, where every
  // block counts).
  CategorySplit measure(int64_t bytes_in_use);

 private:
  MemoryCategorySource source_;
  std::shared_ptr<MemoryReporter> reporter_;
  std::vector<std::pair<at::Tensor, unsigned>> hooks_;
};

}  // namespace rt::prof
