// SSM decoders of neural activity (facts: Melina-Jingting/foundational_ssm
// models/s5.py S5Block and models/decoders.py SSMFoundationalDecoder).
//
//   S5Block:             BatchNorm (stats over batch×time, no affine) → S5 → GELU → dropout
//                        → GLU (W1x ⊙ σ(W2x)) → dropout → + residual
//   S5Decoder (s5_maze): Linear(input_dim → d_model) → n_layers × S5Block → Linear(d_model → output_dim)
//   FoundationalDecoder: per-group Linear(input_dim → d_model − context_dim) on inputs zero-padded
//                        to the widest group (input_dim), dropout, ⧺ learned context embedding of
//                        the group (context_dim) → n_layers × S5Block → one shared readout
//                        Linear(d_model → output_dim) (the reference has a single decoder for
//                        all groups; only the encoders and context are per group).
//
// All models take x [B, T, input_dim'] and a group index, and return [B, T, output_dim].
#pragma once

#include <torch/torch.h>

#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "distributed/communicator.h"
#include "models/common/module_path.h"
#include "models/ssm/diagonal_ssm.h"
#include "models/ssm/s5.h"

namespace rt::ssm {

// model.variant: the single-session S5 decoder or the multi-session foundational decoder.
enum class SsmVariant { kS5Maze, kFoundational, kMaxValue = kFoundational };
constexpr EnumNames<SsmVariant> enum_names(SsmVariant) { return {{"s5_maze", "foundational"}}; }

// The [model] SSM keys of docs/config.md, bound to them in families/ssm/ssm_family.cpp, whose key
// specs take their defaults from the initialisers below.
struct SsmOptions {
  SsmVariant variant = SsmVariant::kS5Maze;
  SsmKind kind = SsmKind::kS5;  // model.ssm: the SSM layer in each block
  int64_t input_dim = 182;
  int64_t output_dim = 2;
  int64_t d_model = 64;
  int64_t state_dim = 64;
  int64_t n_layers = 1;
  double dropout = 0.05;
  Discretization discretization = Discretization::kZoh;
  ScanKind scan = ScanKind::kParallel;
  double dt_min = 1e-3;
  double dt_max = 1e-1;
  int64_t ssm_blocks = 1;
  int64_t context_dim = 8;
  bool conj_sym = true;

  // NLB MC_Maze single-session: 182 units → 64 → 1 block (state 64) → 2 (hand velocity).
  static SsmOptions s5_maze();
  // Multi-session: 4 blocks of width 128 (state 128, HiPPO in 4 diagonal blocks), context 8.
  static SsmOptions foundational();

  // The checks across fields (ranges of single keys are in their key specs): context_dim <
  // d_model for the foundational variant, and the S5 layer's (state_dim per ssm_blocks, dt_max >
  // dt_min). Throws rt::Error naming the model.* keys and what is accepted.
  void validate() const;
  S5LayerOptions layer_options() const;
};

// With module spans on (profiling.with_modules) its forward is a span named by its path
// ("blocks.0") and the S5 layer inside one named "<path>.ssm".
class S5BlockImpl : public torch::nn::Module, public models::TracedModule {
 public:
  // batch_statistics_in_eval: the norm normalises with the batch's own statistics in eval too
  // (no running averages). The multi-session decoder needs it: its batches come from one group
  // at a time, so the context-embedding channels are constant within a batch, their running
  // variance collapses to ~0 and eval-mode normalisation would divide a per-group offset by
  // sqrt(eps), which destroys the validation predictions.
  S5BlockImpl(const S5LayerOptions& layer, double dropout, bool batch_statistics_in_eval = false);
  // [B, T, H] → [B, T, H]. With the "fused" scan on CPU (float/double) it runs forward_fused;
  // otherwise the op-by-op block (any device). Both compute the same function and use the same
  // parameters and buffers; the dropout masks differ (fused_ops.h draws them by hash).
  torch::Tensor forward(const torch::Tensor& x);
  torch::Tensor forward_fused(const torch::Tensor& x);
  // fused_kernels (default true) && scan == fused && CPU && float/double.
  bool uses_fused_kernels(const torch::Tensor& x) const;
  // Off: the op-by-op block even where the fused kernels apply (tests, A/B benchmarks).
  bool fused_kernels = true;
  // Data-parallel training: the norm's batch statistics in training are those of every rank
  // of this communicator (SyncBatchNorm, distributed/sync_batch_norm.h), on both paths, so N
  // ranks × B examples train as one process with N·B. Null or one rank: local statistics.
  std::shared_ptr<dist::Communicator> norm_sync;
  void set_module_path(std::string path) override;

  torch::nn::BatchNorm1d norm{nullptr};
  std::shared_ptr<SsmLayerBase> ssm;  // model.ssm's kind (make_ssm_layer)
  torch::nn::Linear glu_w1{nullptr}, glu_w2{nullptr};
  torch::nn::Dropout drop{nullptr};

 private:
  std::string ssm_path_;
};
TORCH_MODULE(S5Block);

// What the trainer sees of any SSM decoder.
class SsmModelImpl : public torch::nn::Module {
 public:
  // x [B, T, units] float; `group` selects the encoder/context (ignored by single-session models).
  virtual torch::Tensor forward(const torch::Tensor& x, int64_t group) = 0;
  // Switches every S5 layer between the parallel and the sequential scan.
  void set_scan(ScanKind scan);
  // Sets S5BlockImpl::fused_kernels on every block.
  void set_fused_kernels(bool on);
  // Sets S5BlockImpl::norm_sync on every block.
  void set_batch_norm_sync(std::shared_ptr<dist::Communicator> comm);
  std::vector<S5Block> blocks;  // registered as "blocks.<i>"

 protected:
  void add_blocks(const SsmOptions& options, bool batch_statistics_in_eval = false);
};

class S5DecoderImpl : public SsmModelImpl {
 public:
  explicit S5DecoderImpl(const SsmOptions& options);
  torch::Tensor forward(const torch::Tensor& x, int64_t group = 0) override;

  torch::nn::Linear encoder{nullptr}, decoder{nullptr};
};
TORCH_MODULE(S5Decoder);

class FoundationalDecoderImpl : public SsmModelImpl {
 public:
  // `n_groups` encoders, each Linear(options.input_dim → d_model − context_dim). Inputs
  // narrower than input_dim are zero-padded here. REQUIRES: n_groups ≥ 1.
  FoundationalDecoderImpl(const SsmOptions& options, int64_t n_groups);
  torch::Tensor forward(const torch::Tensor& x, int64_t group) override;
  int64_t n_groups() const { return static_cast<int64_t>(encoders.size()); }

  std::vector<torch::nn::Linear> encoders;  // registered as "encoders.<g>"
  torch::nn::Embedding context{nullptr};    // absent when context_dim == 0
  torch::nn::Dropout encoder_drop{nullptr};
  torch::nn::Linear decoder{nullptr};

 private:
  int64_t input_dim_;
};
TORCH_MODULE(FoundationalDecoder);

// Builds the variant named by options.variant (n_groups is used by kFoundational only).
// Validates the options first.
std::shared_ptr<SsmModelImpl> make_ssm_model(const SsmOptions& options, int64_t n_groups = 1);

// AdamW groups: first = parameters with weight decay, second = SSM parameters (Λ, log-step)
// that S5 trains without weight decay (see is_ssm_parameter_name).
std::pair<std::vector<torch::Tensor>, std::vector<torch::Tensor>> split_weight_decay_parameters(
    const torch::nn::Module& model);

// R² per output dim, averaged: mean_d [1 − SS_res_d / (SS_tot_d + 1e-8)], over every leading
// dim of pred/target [..., D]. Returns a 0-dim tensor (no grad needed; detach the inputs).
torch::Tensor r2_score(const torch::Tensor& pred, const torch::Tensor& target);

}  // namespace rt::ssm
