// TorchScript emitters for the parts of the RAVE model (models/rave, models/common/pqmf.h):
// PQMF analysis and synthesis, the encoders, the v1 / v2 generators with their noise
// synthesis and amplitude modulation. Keys are the model's state-dict names.
#pragma once

#include <string>
#include <vector>

#include "export/torchscript/emit_layers.h"
#include "models/common/pqmf.h"
#include "models/rave/rave.h"

namespace rt::exporting {

// The fixed PQMF kernel `weight` [out, in, k] as a convolution without weight norm or bias, padded
// as `mode` pads (the ONNX emitters use it too).
models::WNConv1dOptions pqmf_conv_options(const torch::Tensor& weight, int64_t stride,
                                          models::PaddingMode mode);

// The discrete encoder's codebooks [K, D], one per quantizer, from the ledger: its `enabled` flag
// taken, the EMA statistics dropped. Throws rt::Error when a codebook was never initialised.
std::vector<torch::Tensor> take_codebooks(TensorLedger& ledger, int64_t quantizers);

// (B, C, T) audio → (B, C·M, T/M) bands, as PqmfImpl::forward (M = 1: the identity).
Signal emit_pqmf_analysis(MethodWriter& w, const Signal& x, models::PqmfImpl& pqmf, models::PaddingMode mode);
// (B, C·M, T') bands → (B, C, T'·M) audio, as PqmfImpl::inverse. Streaming: the sign pattern of
// the odd bands (RAVE reverse_half) follows the offline sample index, behind by x.delay.
Signal emit_pqmf_synthesis(MethodWriter& w, const Signal& x, models::PqmfImpl& pqmf,
                           models::PaddingMode mode);

// Bands → raw posterior statistics (B, 2L, T/ratio): the network of the variational encoder.
Signal emit_encoder(MethodWriter& w, const Signal& bands, rave::VariationalEncoderImpl& encoder);

// Latent (B, L, T) → bands: GeneratorV2 or the v1 Generator. `noise_scale` names a float
// variable of the method that scales the noise synthesis (1: the model as trained).
Signal emit_decoder(MethodWriter& w, const Signal& z, rave::DecoderBase& decoder,
                    const std::string& noise_scale);

}  // namespace rt::exporting
