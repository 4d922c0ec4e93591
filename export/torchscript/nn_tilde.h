// The module interface nn~ reads (acids-ircam/nn_tilde v1.5–v1.6, src/backend/backend.cpp;
// the nn_tilde Python package's Module writes the same layout):
//   get_methods() -> List[str]            the methods nn~ offers (from `_methods`)
//   <method>_params: int64 [in_channels, in_ratio, out_channels, out_ratio]
//   <method>_input_labels / _output_labels: List[str]  inlet / outlet names (Max)
//   get_attributes() -> List[str]         settable attributes (from `_attributes`)
//   <attr>_params: int64 type ids (0 bool, 1 int, 2 float, 3 str, 4 tensor), one per value
//   get_<attr>() -> Tuple[...]            nn~ 1.6 reads a list or a tuple, nothing else
//   set_<attr>(values...) -> int          0 = accepted
// A method is called with one (B, in_channels, n/in_ratio) float tensor and must return one
// (B, out_channels, n/out_ratio) tensor.
#pragma once

#include <torch/script.h>

#include <string>
#include <vector>

#include "export/graph/graph.h"

namespace rt::exporting {

using NnMethod = graph::NnMethod;

// Registers `<name>_params` and the labels of a method the caller defines.
void register_nn_method(torch::jit::Module& m, const NnMethod& method);

// A float attribute nn~ can get and set: `<name>` (Tuple[float]), `<name>_params` = [2],
// get_<name>() and set_<name>(value: float) -> int. TorchScript code reads it as
// self.<name>[0].
void register_nn_float_attribute(torch::jit::Module& m, const std::string& name, double value);

// `_methods` and `_attributes` (List[str]) with get_methods() and get_attributes().
void register_nn_lists(torch::jit::Module& m, const std::vector<std::string>& methods,
                       const std::vector<std::string>& attributes);

}  // namespace rt::exporting
