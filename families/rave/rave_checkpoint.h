// A RAVE model restored from a trainer checkpoint (training/checkpoint.h) for export and for the
// prior, which trains over it frozen: the model is rebuilt from the checkpoint's own resolved
// config (meta/config), and the checkpoint's tensors under model/rave must be exactly the
// model's — same names, same shapes. A missing or extra name stops with a message listing them
// (RAVE's export and train_prior load with strict=False and can silently keep random weights).
#pragma once

#include <torch/script.h>

#include <filesystem>
#include <string>

#include "config/config.h"
#include "models/rave/latent_pca.h"
#include "models/rave/rave.h"
#include "training/checkpoint.h"

namespace rt {

struct RaveCheckpoint {
  std::filesystem::path path;
  CheckpointMeta meta;
  Config config;                   // the checkpoint's resolved config
  rave::RaveModel model{nullptr};  // in eval mode, phase flag as saved
  int64_t sampling_rate = 0;
  bool ema = false;  // the model holds the moving averages
};

// Which of a checkpoint's weights the model takes: the trained ones; their moving averages
// (train.ema, training/ema.h), as RAVE's `export --ema_weights`; the averages where the
// checkpoint holds them, else the weights (RAVE's train_prior: its "EMA" callback state when
// saved).
enum class RaveWeights { kTrained, kEma, kEmaWhenSaved };

// Throws rt::Error: the file is missing, unreadable or not a checkpoint of this trainer; it
// holds another family ("<command> supports RAVE models"); its tensors do not fit the model its
// config describes (the names listed); kEma and the checkpoint holds no averages. Checkpoints
// written before the audio format was saved beside the model take the sampling rate from the
// config's database.
RaveCheckpoint load_rave_checkpoint(const std::filesystem::path& path,
                                    RaveWeights weights = RaveWeights::kTrained,
                                    const std::string& command = "export");

// Checks names and shapes both ways (a missing, extra or reshaped tensor: rt::Error listing
// them, naming `file` and `what`), then copies `saved`'s values into `module`.
void load_module_strict(torch::nn::Module& module, const torch::jit::Module& saved, const std::string& file,
                        const std::string& what);

// RAVE's latent PCA fitted on the posterior means of the database the checkpoint's config
// names (data.db_path): whole records (up to 512, in key order), without augmentation.
// Throws rt::Error naming the database when it cannot be read.
rave::LatentPca fit_latent_pca_on_database(RaveCheckpoint& checkpoint);

// Up to `samples` of the run's database (data.db_path) at the model's channel count: whole
// records in key order, concatenated, without augmentation; `source` says which. Throws
// rt::Error naming the database when it cannot be read.
torch::Tensor database_audio(RaveCheckpoint& checkpoint, int64_t samples, std::string* source);

}  // namespace rt
