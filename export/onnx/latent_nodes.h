// The ONNX nodes of the latent kinds (model.encoder), as the TorchScript file's helper methods
// compute them (export/torchscript/latent_methods.h): the spherical latent's angles, the discrete
// latent's codes.
#pragma once

#include <string>
#include <vector>

#include "export/graph/graph.h"
#include "export/onnx/section_writer.h"

namespace rt::exporting::onnx {

// RAVE's unit_norm_vector_to_angles: x (B, L, T) → (B, L − 1, T) angles in [−1, 1].
std::string latent_to_angles(SectionWriter& e, const std::string& x, int64_t L);
// RAVE's angles_to_unit_norm_vector: (B, L − 1, T) → the unit vector (B, L, T).
std::string angles_to_latent(SectionWriter& e, const std::string& angles, int64_t L);
// The residual quantiser's nearest codes: (B, D, T) → (B, Q, T) code indices as floats.
std::string quantize_latent(SectionWriter& e, const std::vector<torch::Tensor>& codebooks,
                            const std::string& z);
// The codes back to the latent: (B, Q, T) → (B, D, T), the sum of the codes they name.
std::string dequantize_latent(SectionWriter& e, const graph::Latent& l, const std::string& codes);

}  // namespace rt::exporting::onnx
