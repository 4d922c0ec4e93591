// The prior trains over a trained RAVE as `train --config tiny_prior --model RUN`: it writes the
// run files every run writes, its validation logs the loss and generated audio, it resumes
// bitwise after kill -9, and it refuses a RAVE it was not trained over, with the key named.
#include "data/audio_io.h"
#include "e2e/e2e_fixtures.h"

namespace rt::e2e {
namespace {

using testing::contains;

class PriorTrain : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = new ScratchDir("e2e_prior_train");
    db_ = make_demo_db(dir_->path());
    // Validations at steps 10 and 20 fit the latent PCA twice: step_10.ckpt's rotation is not
    // best/last's (the mismatch test uses it).
    auto r = run_command(tiny_train_command(
        db_, dir_->path() / "rave", "--name rave --seed 1 --max_steps 20 --val_every 10 --save_every 10"));
    ASSERT_EQ(r.exit_code, 0) << r.output;
    rave_ = run_dir_from_output(r.output);
  }
  static void TearDownTestSuite() {
    delete dir_;
    dir_ = nullptr;
  }
  void SetUp() override { ASSERT_FALSE(rave_.empty()); }

  static std::string prior_command(const fs::path& out, const std::string& extra) {
    return bin_path("train") + " --config tiny_prior --model " + quote(rave_.string()) + " --db_path " +
           quote(db_.string()) + " --out_path " + quote(out.string()) + " --seed 5 " + extra;
  }

  static ScratchDir* dir_;
  static fs::path db_, rave_;
};
ScratchDir* PriorTrain::dir_ = nullptr;
fs::path PriorTrain::db_, PriorTrain::rave_;

TEST_F(PriorTrain, TrainsAndWritesTheRunFiles) {
  auto r = run_command(prior_command(dir_->path() / "files",
                                     "--max_steps 20 --val_every 10 --save_every 10 "
                                     "--enable_timing_profiling --enable_memory_profiling"));
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const fs::path run = run_dir_from_output(r.output);
  EXPECT_TRUE(contains(r.output, "RAVE prior (latent ")) << r.output;
  EXPECT_TRUE(contains(r.output, "frozen RAVE v2 of '" + (rave_ / "checkpoints" / "best.ckpt").string()))
      << r.output;
  for (const char* f : {"config.toml", "training_summary.json", "timing_profile.json", "memory_profile.json",
                        "checkpoints/best.ckpt", "checkpoints/last.ckpt", "checkpoints/step_20.ckpt"}) {
    EXPECT_TRUE(fs::exists(run / f)) << f;
  }
  EXPECT_TRUE(contains(read_file(run / "config.toml"), "family = \"prior\""))
      << read_file(run / "config.toml");
  const Json summary = Json::parse(read_file(run / "training_summary.json"));
  EXPECT_EQ(summary.at("model_family"), "prior");
  EXPECT_EQ(summary.at("total_steps"), 20);

  const auto scalars = read_scalars(run);
  ASSERT_TRUE(scalars.count("latent_prediction")) << "no training loss logged";
  ASSERT_TRUE(scalars.count("validation"));
  EXPECT_EQ(scalars.at("validation").size(), 2u);
  // Cross-entropy over 8 bins: between 0 and well under ln 8 · 2 for a model this near its start.
  for (const auto& [step, v] : scalars.at("validation")) {
    EXPECT_GT(v, 0.0f);
    EXPECT_LT(v, 2.0f * std::log(8.0f)) << "step " << step;
  }
  // Each validation decodes a generated sequence: audio under its own tag.
  int generations = 0;
  for (const auto& e : fs::directory_iterator(run)) {
    if (e.path().filename().string().rfind("events.out.tfevents.", 0) != 0) continue;
    for (const auto& rec : read_tfevents(e.path()))
      if (rec.kind == TbRecord::Kind::Audio && rec.tag == "audio/generation") ++generations;
  }
  EXPECT_EQ(generations, 2);
}

// 40 steps in one go, and a run killed with SIGKILL after a checkpoint then resumed with --ckpt
// last to step 40: the same prior and optimizer state, bit for bit (the RAVE's reparametrisation
// draws come from the checkpointed generator).
TEST_F(PriorTrain, ResumesBitwiseAfterKill9) {
  const std::string common = "--max_steps 40 --save_every 5 --val_every 15 ";
  auto a = run_command(prior_command(dir_->path() / "a", common));
  ASSERT_EQ(a.exit_code, 0) << a.output;
  const fs::path run_a = run_dir_from_output(a.output);

  const fs::path out_b = dir_->path() / "b";
  {
    // Slowed down (the loader waits 25 ms per example) so that the kill lands mid-run.
    BackgroundProcess p(prior_command(out_b, common + "--data.slowdown_ms 25"), dir_->path() / "b.log");
    fs::path run;
    ASSERT_TRUE(p.wait_until(
        [&] {
          run = run_dir_from_output(p.log());
          return !run.empty() && fs::exists(run / "checkpoints" / "step_10.ckpt");
        },
        120))
        << p.log();
    p.signal(SIGKILL);
    ASSERT_EQ(p.wait_exit(60), 128 + SIGKILL);
    ASSERT_FALSE(fs::exists(run / "checkpoints" / "step_40.ckpt")) << "the kill came after the last step";
  }
  auto b = run_command(prior_command(out_b, common + "--ckpt last"));
  ASSERT_EQ(b.exit_code, 0) << b.output;
  EXPECT_TRUE(contains(b.output, "resum")) << b.output;
  const fs::path run_b = run_dir_from_output(b.output);
  const auto ta = checkpoint_tensors(run_a / "checkpoints" / "last.ckpt");
  const auto tb = checkpoint_tensors(run_b / "checkpoints" / "last.ckpt");
  int compared = 0;
  for (const auto& [name, t] : ta) {
    if (name.rfind("model.prior", 0) != 0) continue;  // the prior, its Adam state, its RAVE's rotation
    ASSERT_TRUE(tb.count(name)) << name;
    EXPECT_TRUE(torch::equal(t, tb.at(name))) << name;
    ++compared;
  }
  EXPECT_GT(compared, 10);
}

TEST_F(PriorTrain, RefusesWhatItCannotModel) {
  const fs::path out = dir_->path() / "bad";
  struct Case {
    std::string extra, says;
  };
  const std::vector<Case> cases = {
      {"--model ''", "model.rave (--model) is empty"},
      {"--model " + quote((dir_->path() / "nothing").string()), "model.rave (--model) = '"},
      {"--model.prior_latent_size 16 --model.prior_res_size 32 --model.prior_skp_size 16",
       "model.prior_latent_size = 16 asks for 16 latent dimensions"},
      {"--derivative true", "data.derivative = true, but the RAVE (model.rave = '"},
      {"--model.prior_latent_size 2 --model.prior_res_size 5",
       "model.prior_res_size = 5: must be a multiple of model.prior_latent_size = 2"},
  };
  for (const auto& c : cases) {
    auto r = run_command(prior_command(out, "--max_steps 2 " + c.extra) + " 2>&1");
    EXPECT_NE(r.exit_code, 0) << c.extra << "\n" << r.output;
    EXPECT_TRUE(contains(r.output, c.says)) << c.extra << "\n" << r.output;
  }
}

// A prior resumed over another RAVE latent (the same run's step-10 checkpoint, whose PCA the
// step-20 validation refitted) stops before a step, naming the key.
TEST_F(PriorTrain, ResumeOverAnotherRaveLatentIsRefused) {
  const fs::path out = dir_->path() / "other";
  auto a = run_command(prior_command(out, "--max_steps 5 --save_every 5 --val_every 100"));
  ASSERT_EQ(a.exit_code, 0) << a.output;
  auto b = run_command(bin_path("train") + " --config tiny_prior --model " +
                       quote((rave_ / "checkpoints" / "step_10.ckpt").string()) + " --db_path " +
                       quote(db_.string()) + " --out_path " + quote(out.string()) +
                       " --seed 5 --max_steps 10 --ckpt last 2>&1");
  EXPECT_NE(b.exit_code, 0) << b.output;
  EXPECT_TRUE(contains(b.output, "was trained over another RAVE latent than model.rave = '")) << b.output;
}

// The trained prior goes into an nn~ file (export --prior: the `prior` method, listed by --inspect,
// called at 1 and 4 batches) and into audio (generate --prior, from the run or from that file);
// what cannot go together is refused by name.
TEST_F(PriorTrain, ExportsItsNnTildeMethodAndGeneratesAudio) {
  const fs::path out = dir_->path() / "export";
  auto t = run_command(prior_command(out, "--max_steps 10 --save_every 10 --val_every 10"));
  ASSERT_EQ(t.exit_code, 0) << t.output;
  const fs::path prior = run_dir_from_output(t.output), ts = out / "with_prior.ts";
  const std::string export_rave =
      bin_path("export") + " --run " + quote(rave_.string()) + " --check_seconds 0 ";
  auto e = run_command(export_rave + "--streaming --prior " + quote(prior.string()) + " --output " +
                       quote(ts.string()) + " 2>&1");
  ASSERT_EQ(e.exit_code, 0) << e.output;
  EXPECT_TRUE(contains(e.output, "prior: " + (prior / "checkpoints" / "best.ckpt").string())) << e.output;
  auto inspect = run_command(bin_path("export") + " --inspect " + quote(ts.string()) + " 2>&1");
  ASSERT_EQ(inspect.exit_code, 0) << inspect.output;
  EXPECT_TRUE(contains(inspect.output, "    prior: 1 channel(s) at sr/128 → ")) << inspect.output;

  auto m = torch::jit::load(ts.string());
  for (int64_t batch : {1, 4}) {
    for (int64_t frames : {16, 32}) {
      const auto z = m.get_method("prior")({torch::zeros({batch, 1, frames})}).toTensor();
      ASSERT_EQ(z.dim(), 3);
      EXPECT_EQ(z.size(0), batch);
      EXPECT_EQ(z.size(2), frames);
      EXPECT_TRUE(torch::isfinite(z).all().item<bool>());
      const auto y = m.get_method("decode")({z}).toTensor();
      EXPECT_EQ(y.size(2), frames * 128);
    }
  }

  const fs::path gen = dir_->path() / "generations";
  auto g = run_command(bin_path("generate") + " --prior " + quote(prior.string()) + " --out_path " +
                       quote(gen.string()) + " --name run --seconds 1.5 --seed 2 2>&1");
  ASSERT_EQ(g.exit_code, 0) << g.output;
  const AudioData a = decode_audio_file(gen / "run" / "prior_seed2.wav");
  EXPECT_EQ(a.frames(), 66150);
  float peak = 0.0f;
  for (float v : a.channels.at(0)) peak = std::max(peak, std::abs(v));
  EXPECT_GT(peak, 0.0f) << "the generation is silent";
  auto gf = run_command(bin_path("generate") + " --prior " + quote(ts.string()) + " --out_path " +
                        quote(gen.string()) + " --name file --seconds 0.5 2>&1");
  ASSERT_EQ(gf.exit_code, 0) << gf.output;
  EXPECT_TRUE(fs::exists(gen / "file" / "prior_seed0.wav"));

  struct Case {
    std::string command, says;
  };
  const std::vector<Case> refused = {
      {export_rave + "--format onnx --prior " + quote(prior.string()), "export --format onnx has no prior"},
      {export_rave + "--prior " + quote(rave_.string()), "holds a model.family = 'rave' model, not a prior"},
      {bin_path("export") + " --ckpt " + quote((rave_ / "checkpoints" / "step_10.ckpt").string()) +
           " --check_seconds 0 --output " + quote((out / "other.ts").string()) + " --prior " +
           quote(prior.string()),
       "was trained over another RAVE latent than the RAVE of '"},
      {bin_path("generate") + " --prior " + quote(prior.string()) + " --input " + quote(db_.string()),
       "--input goes with a model to run audio through"},
      {bin_path("generate") + " --prior " + quote(prior.string()) + " --seconds 0",
       "--seconds 0 is not accepted"},
      {bin_path("generate") + " --model " + quote(prior.string()) + " --input " + quote(db_.string()),
       "generate --model supports RAVE models: checkpoint '" +
           (prior / "checkpoints" / "best.ckpt").string() +
           "' holds a model.family = 'prior' model (a prior goes to --prior, beside its RAVE)"},
      {bin_path("generate") + " --model " + quote(rave_.string()) + " --input x --temperature 2",
       "--temperature goes with --prior"},
  };
  for (const auto& c : refused) {
    auto r = run_command(c.command + " 2>&1");
    EXPECT_NE(r.exit_code, 0) << c.command << "\n" << r.output;
    EXPECT_TRUE(contains(r.output, c.says)) << c.command << "\n" << r.output;
  }
  EXPECT_FALSE(fs::exists(out / "other.ts"));
}

}  // namespace
}  // namespace rt::e2e
