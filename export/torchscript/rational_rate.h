// forward at a rational --sr (export/graph/graph.h RationalRate): the host's audio converted down
// to the model's rate (models/rave/rational_resampler.h, as a strided convolution of one output
// channel per phase), the model's encode and decode (defined beside it as encode_at_model_rate
// and decode_at_model_rate), converted back up.
//
//   to_model_rate / from_model_rate   the whole-signal conversions (offline, zero history)
//   forward (offline)                 to_model_rate, the model on whole latent frames (zero
//                                     padded), from_model_rate, cut to the input's length
//   forward (streaming)               blocks of any length through four queues kept per file:
//                                     host samples awaiting a whole converter cycle, model
//                                     samples awaiting a whole latent frame (primed with
//                                     model_delay zeros), model output awaiting a cycle, host
//                                     output (primed with host_delay zeros); each call returns as
//                                     many samples as it takes. A call with another batch size
//                                     than the last starts the queues again.
#pragma once

#include <torch/script.h>

#include <string>

#include "export/graph/graph.h"

namespace rt::exporting {

// `checks`: forward's input checks (lines of TorchScript, each ending in a newline).
void define_rational_forward(torch::jit::Module& top, const graph::Rave& r, const std::string& checks);

}  // namespace rt::exporting
