// The prior and the RAVE it models: loading the frozen RAVE a prior trains over (model.rave), the
// prior's latent size, and reading a trained prior back (export --prior, generate --prior), with
// the check that a RAVE is the one the prior was trained over.
//
// A prior predicts the RAVE's latent rotated by the RAVE's latent PCA (latent_mean,
// latent_pca): the same audio under another rotation is another latent, so a prior is bound to
// the rotation it saw. Its checkpoints keep that rotation; resuming, exporting or generating
// beside a RAVE whose rotation differs stops with a message naming both.
#pragma once

#include <torch/torch.h>

#include <cstdint>
#include <filesystem>
#include <string>

#include "config/config.h"
#include "families/prior/prior_keys.h"
#include "families/rave/rave_checkpoint.h"
#include "models/rave/prior.h"

namespace rt {

// model.rave resolved (a run directory's best.ckpt, else last.ckpt, or a checkpoint) and loaded,
// frozen in eval mode, its moving averages where it holds them (RAVE's train_prior loads its
// "EMA" callback state). A RAVE whose latent PCA was never fitted (no phase-1 validation) gets it
// fitted on its own database, as export does. Throws rt::Error naming model.rave when the value is
// empty or names no RAVE checkpoint, and when the RAVE's encoder is not variational (RAVE's
// train_prior: "prior not implemented for encoder of type …").
RaveCheckpoint load_frozen_rave(const std::string& value);

// The prior's latent dimensions over `rave`: model.prior_latent_size rounded up to a power of two,
// or (0) the fewest that reach model.prior_fidelity, as a power of two. Throws rt::Error naming the
// key when that exceeds the RAVE's latent size.
int64_t prior_latent_size_over(const PriorModelKeys& keys, rave::RaveModelImpl& rave);

// Throws rt::Error when `rave`'s latent rotation is not (mean, pca), naming `prior` and `rave_name`.
void check_same_rotation(const torch::Tensor& mean, const torch::Tensor& pca, rave::RaveModelImpl& rave,
                         const std::string& prior, const std::string& rave_name);

// A prior checkpoint as export and generate use it.
struct PriorCheckpoint {
  std::filesystem::path path;
  Config config;                          // the checkpoint's resolved config
  rave::VariationalPrior prior{nullptr};  // in eval mode
  std::string rave;                       // model.rave as it trained
  torch::Tensor latent_mean, latent_pca;  // the RAVE's rotation it was trained over
  int64_t sampling_rate = 0, channels = 0;
};

// A run directory (best.ckpt, else last.ckpt) or a checkpoint of model.family = "prior", named
// `name` (the flag) in errors. Throws rt::Error when it is another family's or does not fit.
PriorCheckpoint load_prior_checkpoint(const std::string& value, const std::string& name);

// The model.rave a prior checkpoint (or run) was trained with, from its meta block alone.
std::string prior_rave(const std::string& value, const std::string& name);

// load_prior_checkpoint, then checked against the RAVE it is to run beside (export --prior,
// generate --prior): the same latent rotation (so the same latent size), channels and sampling
// rate, else rt::Error naming `name` and the RAVE's checkpoint.
PriorCheckpoint load_prior_over(const std::string& value, const std::string& name, RaveCheckpoint& rave);

}  // namespace rt
