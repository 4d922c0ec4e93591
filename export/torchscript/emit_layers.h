// TorchScript emitters for the building blocks of models/common (convolutions, activations,
// residual blocks), read off the C++ module tree: each block's options and tensors decide the
// code, so the export cannot drift from the model it comes from.
//
// Offline and streaming code come from the same emitters. Streaming follows
// acids-ircam/cached_conv v2.5.0 (convs.py): a convolution's whole padding is taken from a
// per-batch-row cache of the previous call's last samples (CachedConv1d), a strided
// convolution first delays its input so that its right padding is a whole number of strides
// (stride_delay), a transposed convolution keeps its overlap for the next call
// (CachedConvTranspose1d), and branches that meet again are delayed to the slowest one
// (AlignBranches). The streaming output then equals the offline output of the input delayed by
// the sum of the right paddings, each at its own rate; Signal::delay carries that sum.
#pragma once

#include <torch/torch.h>

#include <string>
#include <vector>

#include "export/torchscript/script_writer.h"
#include "models/common/conv.h"

namespace rt::exporting {

// Any supported module of the tree (Seq, Residual, ResidualStack, WNConv1d, WNConvTranspose1d,
// LeakyReLU, Snake, AdaIN, BatchNorm1d, Identity, and wrappers that only run their `net`:
// DilatedUnit, ResidualLayer, ResidualBlock, UpsampleLayer); `key` is its state-dict name.
// Throws rt::Error for any other type.
Signal emit_module(MethodWriter& w, const Signal& x, torch::nn::Module& m, const std::string& key);

Signal emit_conv(MethodWriter& w, const Signal& x, const models::WNConv1dImpl& conv, const std::string& key);
Signal emit_conv_transpose(MethodWriter& w, const Signal& x, const models::WNConvTranspose1dImpl& conv,
                           const std::string& key);

// Delays x by `samples` of its own rate (streaming; the identity offline or for 0).
Signal emit_delay(MethodWriter& w, const Signal& x, int64_t samples, const std::string& key);

// Delays each branch output so that all carry the largest delay (cached_conv AlignBranches,
// applied at the outputs: the branches are time-invariant at their output rate).
std::vector<Signal> emit_aligned(MethodWriter& w, std::vector<Signal> outs, const std::string& key);

// AdaIN (RAVE blocks.AdaptiveInstanceNormalization) is the identity in evaluation until
// statistics are learnt with learn_x / learn_y, which training never sets: takes its tensors from
// the ledger, and throws rt::Error for a checkpoint that says otherwise (the ONNX export shares it).
void take_adain_as_identity(TensorLedger& ledger, const std::string& key);

// x + y as a new variable, with x's description.
Signal emit_sum(MethodWriter& w, const Signal& x, const Signal& y);

}  // namespace rt::exporting
