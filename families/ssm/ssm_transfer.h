// Pretrain → transfer for the SSM decoders (foundational_ssm: transfer_foundational_to_downstream
// in src/foundational_ssm/utils/downstream_utils.py, and the optimizer modes of
// create_optimizer_and_state in src/foundational_ssm/utils/training_utils.py).
//
// A model pretrained on many sessions is carried to a new one: its SSM blocks and its decoder
// (the readout) are copied, tensor by tensor where role and shape carry over (the blocks'
// BatchNorm statistics with them, as transfer_state_by_shape does); the read-in (the new
// session's units → d_model) and the session context are made anew. train.transfer_mode then
// says what trains.
#pragma once

#include <torch/torch.h>

#include <filesystem>
#include <string>
#include <vector>

#include "models/ssm/decoders.h"
#include "util/enum_names.h"

namespace rt {

// train.transfer_mode, foundational_ssm's optimizer.mode:
//   all           every parameter trains (Λ and the log step without weight decay, as always);
//   freeze_a      the SSMs' A (Λ's real and imaginary parts) and their log steps are frozen;
//   encoder_only  only the read-in and the session context train: the blocks and the decoder
//                 are frozen.
// A frozen parameter is in no optimizer group and takes no gradient: it stays bit-identical.
enum class TransferMode { kAll, kFreezeA, kEncoderOnly, kMaxValue = kEncoderOnly };
constexpr EnumNames<TransferMode> enum_names(TransferMode) { return {{"all", "freeze_a", "encoder_only"}}; }

// Whether the parameter `name` (a model's named_parameters() key) trains under `mode`.
bool trains_in_transfer_mode(const std::string& name, TransferMode mode);

// What a transfer did, tensor by tensor.
struct TransferReport {
  std::filesystem::path checkpoint;
  std::string source;                  // "ssm foundational, step 2000"
  std::vector<std::string> copied;     // parameter and buffer names
  std::vector<std::string> made_anew;  // "name (why)"
  // "init_from CKPT (source): copied …; made anew …", grouped by module.
  std::string text() const;
};

// Copies into `model` (built with `options` for the new data) every tensor of the SSM
// checkpoint `checkpoint` under blocks.* and decoder.* whose shape matches. Throws rt::Error
// naming the file when it is no SSM checkpoint or when its blocks' shape keys (d_model,
// state_dim, n_layers, ssm_blocks, conj_sym, discretization) differ from `options`.
TransferReport transfer_pretrained_ssm(const std::filesystem::path& checkpoint, torch::nn::Module& model,
                                       const ssm::SsmOptions& options);

}  // namespace rt
