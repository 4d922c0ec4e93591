// RAVE's README stacks, end to end through the real executables: `train --config v2 --config
// causal --config noise --augment gain` and `train --config discrete --config causal` on a demo
// database (shrunk by key overrides so that a run takes seconds: capacity, latent, discriminator,
// STFT scales, no receptive-field crop at this n_signal), into phase 2, with validation and
// checkpoints; then `export --streaming` of each run, whose latency report says zero encoder
// lookahead, and whose latent is what the stack promises.
#include "e2e/e2e_fixtures.h"

namespace rt::e2e {
namespace {

const char* kShrink =
    " --model.capacity 4 --model.latent_size 8 --model.discriminator_capacity 2 "
    "--model.discriminator_n_layers 2"
    " --model.stft_scales '[256, 128, 64]' --train.valid_signal_crop false --n_signal 8192 --batch 2"
    " --max_steps 4 --val_every 2 --train.phase_1_duration 2 --threads 1";

struct StackRun {
  fs::path run;
  std::string output;
};

StackRun train_stack(const fs::path& dir, const fs::path& db, const std::string& stack,
                     const std::string& extra) {
  auto r = run_command(bin_path("train") + " " + stack + " --db_path " + quote(db.string()) + " --out_path " +
                       quote((dir / "runs").string()) + kShrink + " " + extra + " 2>&1");
  EXPECT_EQ(r.exit_code, 0) << r.output;
  return {run_dir_from_output(r.output), r.output};
}

void expect_trained(const StackRun& r, const std::string& stack) {
  ASSERT_FALSE(r.run.empty()) << r.output;
  EXPECT_TRUE(fs::is_regular_file(r.run / "checkpoints" / "last.ckpt")) << stack;
  EXPECT_TRUE(fs::is_regular_file(r.run / "checkpoints" / "best.ckpt")) << stack;
  auto scalars = read_scalars(r.run);
  EXPECT_EQ(scalars["validation"].size(), 2u) << stack << ": validation at steps 2 and 4";
  EXPECT_FALSE(scalars["loss_dis"].empty()) << stack << ": phase 2 reached";
}

TEST(RaveConfigStacks, CausalNoiseWithGainAndDiscreteCausalTrainValidateAndExport) {
  ScratchDir dir("rave_config_stacks");
  const fs::path db = make_demo_db(dir.path());

  const auto noise = train_stack(dir.path(), db, "--config v2 --config causal --config noise --augment gain",
                                 "--name causal_noise");
  expect_trained(noise, "v2+causal+noise");
  EXPECT_NE(noise.output.find("causal_noise"), std::string::npos);
  const auto discrete =
      train_stack(dir.path(), db, "--config discrete --config causal",
                  "--name discrete_causal --model.num_quantizers 2 --model.codebook_size 16 "
                  "--model.noise_augmentation 2");
  expect_trained(discrete, "discrete+causal");
  EXPECT_FALSE(read_scalars(discrete.run)["regularization"].empty()) << "the commitment loss is logged";

  for (const auto& [r, latent] :
       {std::pair<const StackRun*, std::string>{&noise, "latent_size"},
        std::pair<const StackRun*, std::string>{&discrete, "one code index per codebook (2)"}}) {
    if (r->run.empty()) continue;
    const fs::path file = dir.path() / (r->run.filename().string() + ".ts");
    auto e = run_command(bin_path("export") + " --run " + quote(r->run.string()) + " --streaming --output " +
                         quote(file.string()) + " 2>&1");
    EXPECT_EQ(e.exit_code, 0) << e.output;
    EXPECT_TRUE(fs::is_regular_file(file)) << e.output;
    EXPECT_NE(e.output.find("latency: encode 0 samples"), std::string::npos) << "causal: no lookahead\n"
                                                                             << e.output;
    EXPECT_NE(e.output.find(latent), std::string::npos) << e.output;
  }
}

}  // namespace
}  // namespace rt::e2e
