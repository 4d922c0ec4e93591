// Every rank starts from rank 0's model: parameters and buffers (BatchNorm running statistics)
// are broadcast from rank 0, as DDP does when it wraps a module (torch/nn/parallel/
// distributed.py _sync_module_states). Call it after building the model and after loading a
// checkpoint on resume, on every rank.
#pragma once

#include <torch/torch.h>

#include "distributed/communicator.h"

namespace rt::dist {

// First checks that every rank holds the same parameter and buffer names, shapes and dtypes
// (check_same_on_all_ranks), so a mismatched model stops with a clear message instead of a
// backend error or silent corruption; then broadcasts them from rank 0 (coalesced).
// One process: nothing.
void broadcast_parameters(Communicator& comm, torch::nn::Module& module);

}  // namespace rt::dist
