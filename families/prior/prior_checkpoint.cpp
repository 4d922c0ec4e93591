#include "families/prior/prior_checkpoint.h"

#include <torch/script.h>

#include <algorithm>
#include <sstream>
#include <tuple>
#include <utility>

#include "models/rave/latent_pca.h"
#include "training/checkpoint.h"
#include "util/enum_names.h"
#include "util/error.h"
#include "util/jit_attribute.h"

namespace rt {

namespace fs = std::filesystem;

RaveCheckpoint load_frozen_rave(const std::string& value) {
  if (value.empty()) {
    throw Error(
        "model.rave (--model) is empty: name the trained RAVE the prior models, a run directory or a "
        "checkpoint (train --config prior --model runs/<run> --db_path <database>)");
  }
  const fs::path path = resolve_run_or_checkpoint(value, "model.rave (--model)");
  RaveCheckpoint c = load_rave_checkpoint(path, RaveWeights::kEmaWhenSaved,
                                          "model.rave (--model), the RAVE the prior models,");
  const auto kind = c.model->options().encoder;
  if (kind != rave::EncoderKind::kVariational) {
    throw Error("model.rave = '" + value + "': the RAVE has a " + std::string(enum_name(kind)) +
                " encoder (model.encoder); the prior models a variational RAVE's latent, as RAVE's "
                "train_prior does (it refuses other encoders)");
  }
  for (auto& p : c.model->parameters()) p.set_requires_grad(false);
  if (!rave::has_latent_pca(rave::stored_latent_pca(*c.model).fidelity)) {
    rave::store_latent_pca(*c.model, fit_latent_pca_on_database(c));
  }
  return c;
}

int64_t prior_latent_size_over(const PriorModelKeys& keys, rave::RaveModelImpl& rave) {
  const int64_t full = rave.options().latent_size;
  int64_t n = 0;
  std::string from;
  if (keys.latent_size > 0) {
    n = rave::prior_latent_size(keys.latent_size);
    from = "model.prior_latent_size = " + std::to_string(keys.latent_size);
  } else {
    const torch::Tensor fidelity = rave::stored_latent_pca(rave).fidelity;
    n = rave::latent_size_for_fidelity(fidelity, keys.fidelity);
    n = rave::prior_latent_size(n);
    std::ostringstream s;
    s << "model.prior_fidelity = " << keys.fidelity;
    from = s.str();
  }
  if (n > full) {
    throw Error(from + " asks for " + std::to_string(n) +
                " latent dimensions (a power of two), more than the " + "RAVE's " + std::to_string(full) +
                " (model.latent_size): set model.prior_latent_size to a " + "power of two of at most " +
                std::to_string(full));
  }
  return n;
}

void check_same_rotation(const torch::Tensor& mean, const torch::Tensor& pca, rave::RaveModelImpl& rave,
                         const std::string& prior, const std::string& rave_name) {
  const rave::LatentPca own = rave::stored_latent_pca(rave);
  const bool same =
      own.mean.sizes() == mean.sizes() && own.components.sizes() == pca.sizes() &&
      torch::equal(own.mean.to(torch::kCPU, torch::kDouble), mean.to(torch::kCPU, torch::kDouble)) &&
      torch::equal(own.components.to(torch::kCPU, torch::kDouble), pca.to(torch::kCPU, torch::kDouble));
  if (!same) {
    throw Error(prior + " was trained over another RAVE latent than " + rave_name +
                "'s (its latent_mean / latent_pca differ: another run, or the same run after more phase-1 "
                "validations): use the RAVE checkpoint the prior was trained over (its model.rave)");
  }
}

namespace {

// The checkpoint `value` names and its resolved config, read from its meta block alone; throws
// rt::Error naming `name` when it is not a prior's.
std::pair<fs::path, Config> prior_config(const std::string& value, const std::string& name) {
  const fs::path path = resolve_run_or_checkpoint(value, name);
  const CheckpointMeta meta = read_checkpoint_meta(path);
  if (meta.family != "prior") {
    throw Error(name + " = '" + value + "': checkpoint '" + path.string() + "' holds a model.family = '" +
                meta.family +
                "' model, not a prior (train one with train --config prior --model <RAVE run>)");
  }
  Config config;
  config.merge_toml_string(meta.config_toml, path.string() + " (meta/config)");
  config.finalize();
  return {path, std::move(config)};
}

}  // namespace

std::string prior_rave(const std::string& value, const std::string& name) {
  return prior_model_keys().from(prior_config(value, name).second).rave;
}

PriorCheckpoint load_prior_checkpoint(const std::string& value, const std::string& name) {
  PriorCheckpoint c;
  std::tie(c.path, c.config) = prior_config(value, name);
  const PriorModelKeys keys = prior_model_keys().from(c.config);
  c.rave = keys.rave;
  torch::jit::Module archive;
  try {
    archive = torch::jit::load(c.path.string()).attr("model").toModule();
  } catch (const c10::Error& e) {
    throw Error("cannot read the model of checkpoint '" + c.path.string() +
                "': " + e.what_without_backtrace());
  }
  for (const char* attr : {"prior", "prior_latent_size", "rave_latent_mean", "rave_latent_pca"}) {
    if (!archive.hasattr(attr))
      throw Error("checkpoint '" + c.path.string() + "' holds no " + attr + " (not a prior checkpoint)");
  }
  c.prior = rave::VariationalPrior(prior_options(keys, archive.attr("prior_latent_size").toInt()));
  load_module_strict(*c.prior, archive.attr("prior").toModule(), c.path.string(), "prior");
  c.prior->eval();
  c.latent_mean = archive.attr("rave_latent_mean").toTensor();
  c.latent_pca = archive.attr("rave_latent_pca").toTensor();
  c.sampling_rate = int_attribute(archive, "sampling_rate", 0);
  c.channels = int_attribute(archive, "channels", 0);
  return c;
}

PriorCheckpoint load_prior_over(const std::string& value, const std::string& name, RaveCheckpoint& rave) {
  PriorCheckpoint p = load_prior_checkpoint(value, name);
  const std::string rave_name = "the RAVE of '" + rave.path.string() + "'";
  check_same_rotation(p.latent_mean, p.latent_pca, *rave.model, name + " '" + p.path.string() + "'",
                      rave_name);
  const int64_t channels = rave.model->options().channels;
  if (p.sampling_rate != rave.sampling_rate || p.channels != channels) {
    throw Error(name + " '" + p.path.string() + "' was trained on " + std::to_string(p.channels) +
                "-channel audio at " + std::to_string(p.sampling_rate) + " Hz, " + rave_name + " is " +
                std::to_string(channels) + "-channel at " + std::to_string(rave.sampling_rate) + " Hz");
  }
  return p;
}

}  // namespace rt
