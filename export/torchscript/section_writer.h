// The TorchScript writer of the description's ops (export/graph/graph.h): one small function per
// op kind writes its statements into the method being written. What each op computes and the
// streaming state it keeps are the description's; how it is written is decided here:
//   - convolutions with groups 1 as one matrix product on a weight laid out at export (at nn~'s
//     block sizes the large layers see one or two time steps, where a convolution's set-up costs
//     more than one read of the weight); streaming transposed convolutions with kernel s or 2s
//     likewise; with export --quantize int8 the large ones on int8 weights
//     (quantized::linear_dynamic);
//   - the noise synthesis with FFTs, as the model computes it.
#pragma once

#include <string>

#include "export/graph/graph.h"
#include "export/torchscript/script_writer.h"

namespace rt::exporting {

// Writes the ops of `section` into `w`'s method, from the variable `input` (the section's value 0);
// returns the variable holding its output. `noise_scale` names the method's float variable that
// scales the noise synthesis (sections without a Noise op need none).
std::string write_section(MethodWriter& w, const graph::Section& section, const std::string& input,
                          const std::string& noise_scale = "");

}  // namespace rt::exporting
