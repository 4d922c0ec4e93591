// Builds one Section of the description from the model's module tree (export/graph/describe.cpp
// for the RAVE parts, section_builder.cpp for the blocks of models/common): each call appends
// the ops of one block and returns its output value, with the streaming rules of graph.h
// (stride delays, caches, aligned branches) decided here, once.
#pragma once

#include <torch/torch.h>

#include <string>
#include <vector>

#include "export/graph/graph.h"
#include "export/graph/tensor_ledger.h"
#include "models/common/pqmf.h"
#include "models/rave/generator.h"
#include "models/rave/resampler.h"

namespace rt::exporting::graph {

class SectionBuilder {
 public:
  SectionBuilder(Section& section, TensorLedger& ledger, bool streaming, const Flow& input);

  TensorLedger& ledger() { return ledger_; }
  const Flow& flow(int value) const { return section_.values.at(static_cast<size_t>(value)); }
  // Ends the section at `value`.
  void finish(int value) { section_.output = value; }

  // Any supported module of the tree (Seq, Residual, ResidualStack, WNConv1d, WNConvTranspose1d,
  // LeakyReLU, Snake, AdaIN, BatchNorm1d, Identity, GRU, and wrappers that only run their `net`:
  // DilatedUnit, ResidualLayer, ResidualBlock, UpsampleLayer); `key` is its state-dict name.
  // Throws rt::Error for any other type.
  int module(int x, torch::nn::Module& m, const std::string& key);
  // A convolution of the model (its kernel folded from the ledger) or with the kernel given.
  int conv(int x, const models::WNConv1dImpl& conv, const std::string& key);
  int conv(int x, const models::WNConv1dOptions& options, const torch::Tensor& kernel,
           const torch::Tensor& bias, const std::string& key);
  int conv_transpose(int x, const models::WNConvTranspose1dImpl& conv, const std::string& key);
  // x delayed by `samples` of its own steps (streaming; x itself offline or for 0).
  int delay(int x, int64_t samples, const std::string& key);
  // Each branch output delayed so that all carry the largest delay (cached_conv AlignBranches,
  // applied at the outputs: the branches are time-invariant at their output rate).
  std::vector<int> aligned(std::vector<int> outs, const std::string& key);
  int add(int x, int y);
  int activation(int x, Activation a);
  int gate(Gate::Kind kind, const std::vector<int>& inputs);
  int pqmf(int x, models::PqmfImpl& pqmf, models::PaddingMode mode, bool synthesis);
  int noise(int x, rave::NoiseGeneratorImpl& n, const std::string& key);
  // export --sr: audio down to the model's rate (x at the host's) or up from it.
  int resample(int x, rave::ResamplerImpl& r, bool up);

 private:
  int append(OpKind kind, std::vector<int> inputs, Flow out);
  // The stride delay and cache of a convolution on an input of flow `x` (streaming).
  void stream_conv(Conv& c, const Flow& x, Flow& in) const;
  int residual(int x, models::ResidualImpl& r, const std::string& key);
  int residual_stack(int x, models::ResidualStackImpl& s, const std::string& key);
  int batch_norm(int x, const torch::nn::BatchNorm1dImpl& bn, const std::string& key);
  int gru(int x, rave::GruLayerImpl& g, const std::string& key);

  Section& section_;
  TensorLedger& ledger_;
  bool streaming_;
};

// The fixed PQMF kernel `weight` [out, in, k] as a convolution without weight norm or bias, padded
// as `mode` pads.
models::WNConv1dOptions pqmf_conv_options(const torch::Tensor& weight, int64_t stride,
                                          models::PaddingMode mode);

// AdaIN (RAVE blocks.AdaptiveInstanceNormalization) is the identity in evaluation until
// statistics are learnt with learn_x / learn_y, which training never sets: takes its tensors from
// the ledger, and throws rt::Error for a checkpoint that says otherwise.
void take_adain_as_identity(TensorLedger& ledger, const std::string& key);

}  // namespace rt::exporting::graph
