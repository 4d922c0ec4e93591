#include "families/rave/rave_checkpoint.h"

#include <torch/script.h>

#include <algorithm>
#include <map>
#include <sstream>
#include <vector>

#include "config/run_keys.h"
#include "data/audio_dataset.h"
#include "families/rave/rave_family.h"
#include "util/error.h"
#include "util/jit_attribute.h"

namespace rt {
namespace {

namespace fs = std::filesystem;
using TensorMap = std::map<std::string, torch::Tensor>;

std::string listed(const std::vector<std::string>& keys) {
  std::string s;
  for (const auto& k : keys) s += "\n  " + k;
  return s;
}

TensorMap module_tensors(const torch::jit::Module& m) {
  TensorMap out;
  for (const auto& p : m.named_parameters(/*recurse=*/true)) out[p.name] = p.value;
  for (const auto& b : m.named_buffers(/*recurse=*/true)) out[b.name] = b.value;
  return out;
}

TensorMap model_tensors(torch::nn::Module& m) {
  TensorMap out;
  for (const auto& p : m.named_parameters()) out[p.key()] = p.value();
  for (const auto& b : m.named_buffers()) out[b.key()] = b.value();
  return out;
}

// Checks names and shapes both ways, then copies the checkpoint's values into the model.
void load_strict(torch::nn::Module& model, const TensorMap& saved, const std::string& file,
                 const std::string& what) {
  TensorMap own = model_tensors(model);
  std::vector<std::string> missing, extra, shape;
  for (const auto& [key, t] : own) {
    auto it = saved.find(key);
    if (it == saved.end()) {
      missing.push_back(key);
    } else if (it->second.sizes() != t.sizes()) {
      std::ostringstream s;
      s << key << ": checkpoint " << it->second.sizes() << ", model " << t.sizes();
      shape.push_back(s.str());
    }
  }
  for (const auto& [key, t] : saved) {
    if (own.count(key) == 0) extra.push_back(key);
  }
  if (!missing.empty() || !extra.empty() || !shape.empty()) {
    std::string msg = "checkpoint '" + file + "' does not fit the " + what +
                      " its config describes (a checkpoint of another config?):";
    if (!missing.empty())
      msg += "\n" + std::to_string(missing.size()) + " tensor(s) missing:" + listed(missing);
    if (!extra.empty()) msg += "\n" + std::to_string(extra.size()) + " unexpected tensor(s):" + listed(extra);
    if (!shape.empty())
      msg += "\n" + std::to_string(shape.size()) + " tensor(s) of another shape:" + listed(shape);
    throw Error(msg);
  }
  torch::NoGradGuard no_grad;
  for (auto& [key, t] : own) t.copy_(saved.at(key));
}

// Channels of checkpoints saved before the audio format was: the encoder's first convolution
// reads n_band · channels.
int64_t channels_from_tensors(const TensorMap& saved, const rave::RaveOptions& o) {
  for (const char* key : {"encoder.encoder.net.0.weight_v", "encoder.encoder.net.0.weight"}) {
    auto it = saved.find(key);
    if (it != saved.end() && it->second.dim() == 3)
      return std::max<int64_t>(1, it->second.size(1) / o.n_band);
  }
  return 1;
}

AudioDataset open_database(const Config& config, const std::string& why) {
  const std::string db = run_keys(config).db_path;
  if (db.empty() || !fs::exists(db)) {
    throw Error(why + ", and the run's database (data.db_path = '" + db + "') is not available");
  }
  AudioDatasetOptions opts;
  opts.n_signal = 1;
  opts.phase_mangle = false;
  opts.dequantize = false;
  return AudioDataset(db, opts);
}

}  // namespace

RaveCheckpoint load_rave_checkpoint(const fs::path& path, RaveWeights weights, const std::string& command) {
  RaveCheckpoint c;
  c.path = path;
  c.meta = read_checkpoint_meta(path);
  if (c.meta.family != "rave") {
    throw Error(command + " supports RAVE models: checkpoint '" + path.string() +
                "' holds a model.family = '" + c.meta.family + "' model" +
                (c.meta.family == "prior" ? " (a prior goes to --prior, beside its RAVE)" : ""));
  }
  c.config.merge_toml_string(c.meta.config_toml, path.string() + " (meta/config)");
  c.config.finalize();
  rave::RaveOptions options = rave_options_from(c.config);

  torch::jit::Module archive;
  try {
    archive = torch::jit::load(path.string()).attr("model").toModule();
  } catch (const c10::Error& e) {
    throw Error("cannot read the model of checkpoint '" + path.string() + "': " + e.what_without_backtrace());
  }
  if (!archive.hasattr("rave"))
    throw Error("checkpoint '" + path.string() + "' holds no RAVE model (model/rave)");
  c.ema =
      weights == RaveWeights::kEma || (weights == RaveWeights::kEmaWhenSaved && archive.hasattr("rave_ema"));
  if (c.ema && !archive.hasattr("rave_ema")) {
    throw Error("--ema_weights: checkpoint '" + path.string() +
                "' holds no moving averages (train with --ema FACTOR, e.g. --ema 0.999)");
  }
  const TensorMap saved = module_tensors(archive.attr(c.ema ? "rave_ema" : "rave").toModule());
  options.channels = int_attribute(archive, "channels", channels_from_tensors(saved, options));
  c.sampling_rate = int_attribute(archive, "sampling_rate", 0);
  if (c.sampling_rate == 0) {
    c.sampling_rate =
        open_database(c.config, "checkpoint '" + path.string() + "' does not record its sampling rate")
            .sampling_rate();
  }
  options.sampling_rate = c.sampling_rate;
  c.model = rave::RaveModel(options);
  load_strict(*c.model, saved, path.string(), "RAVE model");
  c.model->eval();
  c.model->set_warmed_up(c.model->encoder->warmed_up_.item<int64_t>() != 0);
  return c;
}

void load_module_strict(torch::nn::Module& module, const torch::jit::Module& saved, const std::string& file,
                        const std::string& what) {
  load_strict(module, module_tensors(saved), file, what);
}

rave::LatentPca fit_latent_pca_on_database(RaveCheckpoint& c) {
  AudioDataset db = open_database(c.config, "checkpoint '" + c.path.string() + "' holds no latent PCA");
  auto& model = *c.model;
  const int64_t compression = model.options().compression();
  rave::LatentPcaAccumulator pca(model.options().latent_size);
  torch::NoGradGuard no_grad;
  for (size_t i = 0; i < std::min<size_t>(db.size(), 512); ++i) {
    torch::Tensor x = db.record(i);
    const int64_t length = x.size(1) / compression * compression;
    if (length == 0 || x.size(0) != model.options().channels) continue;
    auto stats = model.encode_stats(x.narrow(1, 0, length).unsqueeze(0));
    pca.add(stats.chunk(2, 1)[0]);
  }
  if (pca.count() < 2) {
    throw Error("the database '" + run_keys(c.config).db_path + "' holds too little audio of " +
                std::to_string(model.options().channels) + " channel(s) to fit the latent PCA");
  }
  return pca.fit();
}

torch::Tensor database_audio(RaveCheckpoint& c, int64_t samples, std::string* source) {
  AudioDataset db = open_database(c.config, "fidelity check");
  const int64_t channels = c.model->options().channels;
  std::vector<torch::Tensor> parts;
  int64_t have = 0;
  size_t used = 0;
  for (size_t i = 0; i < db.size() && have < samples; ++i) {
    torch::Tensor x = db.record(i);
    if (x.size(0) != channels) continue;
    x = x.narrow(1, 0, std::min(x.size(1), samples - have));
    have += x.size(1);
    parts.push_back(x);
    ++used;
  }
  if (source != nullptr) {
    *source = std::to_string(used) + " record(s) of '" + run_keys(c.config).db_path + "'";
  }
  if (parts.empty()) return torch::zeros({channels, 0});
  return torch::cat(parts, 1);
}

}  // namespace rt
