// A module tree printer for `train --summary`: one line per module with its parameter count
// (every registered parameter: weight norm's g and v both count, fixed ones such as the PQMF
// kernels too) and, separately, its buffer count.
#pragma once

#include <torch/torch.h>

#include <string>

namespace rt::models {

// Totals over a module and all its descendants.
int64_t count_parameters(const torch::nn::Module& module, bool trainable_only = false);
int64_t count_buffers(const torch::nn::Module& module);

// "1,234,567".
std::string format_count(int64_t n);

// Tree with one line per module down to `max_depth` (0 = the root only, < 0 = unlimited):
//   name (Type)  params 12,345  [buffers 678]
// Modules below the depth limit are folded into their ancestor's totals; a final line gives
// the totals (trainable and fixed parameters, buffers). `root_name` labels the first line.
std::string module_summary(const torch::nn::Module& module, const std::string& root_name = "model",
                           int max_depth = 3);

}  // namespace rt::models
