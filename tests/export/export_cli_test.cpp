// `export` end to end: train tiny_rave on the demo database for a few steps, export the run,
// check the file (latent size by the fidelity rule, tensors from the checkpoint, streaming
// latency), and every refusal with its message.
#include <sys/stat.h>

#include <algorithm>
#include <cmath>
#include <fstream>

#include "config/config.h"
#include "data/audio_io.h"
#include "e2e/e2e_fixtures.h"
#include "export/rave_export.h"
#include "families/rave/rave_family.h"
#include "models/rave/latent_pca.h"
#include "models/rave/rave.h"
#include "training/checkpoint.h"
#include "util/atomic_file.h"

namespace rt::e2e {
namespace {

using testing::contains;

CommandResult run_export(const std::string& args) {
  return run_command(bin_path("export") + " " + args + " 2>&1");
}

// `text` (a config.toml) with the line of `key` set to `key = value`.
std::string with_value(const std::string& text, const std::string& key, const std::string& value) {
  std::istringstream in(text);
  std::string out, line;
  bool found = false;
  while (std::getline(in, line)) {
    if (line.rfind(key + " =", 0) == 0) {
      line = key + " = " + value;
      found = true;
    }
    out += line + "\n";
  }
  EXPECT_TRUE(found) << key;
  return out;
}

class ExportCli : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = new ScratchDir("export_cli");
    db_ = make_demo_db(dir_->path());
    // Validation every 10 steps, all in phase 1 (tiny_rave: 200 steps): the PCA is fitted.
    auto r =
        run_command(tiny_train_command(db_, dir_->path() / "runs", "--max_steps 30 --val_every 10 --seed 3"));
    output_ = r.output;
    run_ = run_dir_from_output(r.output);
  }
  static void TearDownTestSuite() {
    delete dir_;
    dir_ = nullptr;
  }
  void SetUp() override { ASSERT_TRUE(fs::is_regular_file(run_ / "checkpoints" / "best.ckpt")) << output_; }

  // A checkpoint with the run's layout but the given config text, holding a freshly built
  // (untrained, PCA-less) model of that config, or of `family`.
  static fs::path write_checkpoint(const std::string& name, const std::string& config_toml,
                                   const std::string& family = "rave") {
    const fs::path run = dir_->path() / name;
    fs::create_directories(run / "checkpoints");
    Config config;
    config.merge_toml_string(config_toml, name);
    config.finalize();
    CheckpointMeta meta;
    meta.family = family;
    meta.signature = name;
    meta.config_toml = config_toml;
    save_checkpoint(run / "checkpoints" / "last.ckpt", meta, [&](torch::serialize::OutputArchive& a) {
      if (family != "rave") return;
      rave::RaveModel model(rave_options_from(config));
      torch::serialize::OutputArchive m;
      model->save(m);
      a.write("rave", m);
      a.write("sampling_rate", c10::IValue(int64_t{44100}));
      a.write("channels", c10::IValue(int64_t{1}));
    });
    return run / "checkpoints" / "last.ckpt";
  }

  static std::string run_config() { return rt::read_file(run_ / "config.toml"); }

  static ScratchDir* dir_;
  static fs::path db_, run_;
  static std::string output_;
};
ScratchDir* ExportCli::dir_ = nullptr;
fs::path ExportCli::db_, ExportCli::run_;
std::string ExportCli::output_;

TEST_F(ExportCli, ExportsTheRunWithTheLatentSizeTheFidelityRuleGives) {
  auto r = run_export("--run " + quote(run_.string()));
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const fs::path file = run_ / "export" / "tiny_rave.ts";
  ASSERT_TRUE(fs::is_regular_file(file)) << r.output;
  auto m = torch::jit::load(file.string());
  auto fidelity = m.attr("fidelity").toTensor();
  ASSERT_TRUE(rave::has_latent_pca(fidelity)) << "validation in phase 1 fits the PCA";
  EXPECT_EQ(m.attr("latent_size").toInt(), rave::latent_size_for_fidelity(fidelity, 0.95));
  EXPECT_EQ(m.attr("full_latent_size").toInt(), 8);  // configs/tiny_rave.toml
  EXPECT_NE(r.output.find("fidelity"), std::string::npos);

  // The module's tensors are the checkpoint's: the PCA as saved, the first convolution's kernel
  // folded from its weight-norm pair (laid out [out, in · kernel] where the export emits the
  // convolution as a matrix product, export/torchscript/section_writer.h).
  auto saved = checkpoint_tensors(run_ / "checkpoints" / "best.ckpt");
  EXPECT_TRUE(torch::equal(m.attr("latent_pca").toTensor(), saved.at("model.rave.latent_pca")));
  auto kernel = torch::_weight_norm(saved.at("model.rave.encoder.encoder.net.0.weight_v"),
                                    saved.at("model.rave.encoder.encoder.net.0.weight_g"), 0);
  auto encoder = m.attr("encoder").toModule();
  const auto stored = encoder.attr("encoder_encoder_net_0_weight").toTensor();
  ASSERT_EQ(stored.numel(), kernel.numel());
  EXPECT_TRUE(torch::allclose(stored, kernel.reshape(stored.sizes())));
}

// The default export (float32, lossless) is compared with the model on the run's database and
// must stay within the fidelity budget; the CLI prints the figures.
TEST_F(ExportCli, DefaultExportStaysWithinTheFidelityBudget) {
  for (bool streaming : {false, true}) {
    exporting::ExportOptions o;
    o.run = run_;
    o.streaming = streaming;
    o.output = dir_->path() / (streaming ? "budget_streaming.ts" : "budget.ts");
    const auto r = exporting::export_rave(o);
    ASSERT_TRUE(r.check.measured) << r.check.not_measured;
    EXPECT_TRUE(r.check.within_budget()) << exporting::format_fidelity(r.check);
    EXPECT_LE(r.check.max_abs_diff, 1e-5) << exporting::format_fidelity(r.check);
    EXPECT_NE(r.check.audio.find("record(s) of"), std::string::npos) << r.check.audio;
  }
  auto r = run_export("--run " + quote(run_.string()) + " --streaming --output " +
                      quote((dir_->path() / "budget_cli.ts").string()));
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("fidelity vs the float32 model on"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("budget 5%"), std::string::npos) << r.output;
  auto q = run_export("--run " + quote(run_.string()) + " --quantize int4 --output " +
                      quote((dir_->path() / "q.ts").string()));
  EXPECT_NE(q.exit_code, 0);
  EXPECT_NE(q.output.find("--quantize"), std::string::npos) << q.output;
  EXPECT_NE(q.output.find("int8"), std::string::npos) << q.output;
}

// The same rule on recorded speech (e2e_fixtures.h: a voice, not tones or the demo's
// synthesis), the material the model never saw: the default export adds nothing to the model's
// error there either. An int8 export of the same checkpoint is measured on it too.
TEST_F(ExportCli, DefaultExportStaysWithinTheFidelityBudgetOnSpeech) {
  const fs::path speech = speech_fixture(dir_->path());
  for (bool streaming : {false, true}) {
    exporting::ExportOptions o;
    o.run = run_;
    o.streaming = streaming;
    o.check_audio = speech;
    o.check_seconds = 8.0;
    o.output = dir_->path() / (streaming ? "speech_streaming.ts" : "speech.ts");
    const auto r = exporting::export_rave(o);
    ASSERT_TRUE(r.check.measured) << r.check.not_measured;
    EXPECT_NE(r.check.audio.find(speech.string()), std::string::npos) << r.check.audio;
    EXPECT_GE(r.check.seconds, 8.0 - 1e-9);  // rounded up to whole blocks or latent frames
    EXPECT_LT(r.check.seconds, 8.1);
    EXPECT_GT(r.check.own_distance, 0.0);
    EXPECT_TRUE(r.check.within_budget()) << exporting::format_fidelity(r.check);
    EXPECT_LE(r.check.max_abs_diff, 1e-5) << exporting::format_fidelity(r.check);
  }
  auto r = run_export("--run " + quote(run_.string()) + " --streaming --quantize int8 --check_seconds 4 " +
                      "--check_audio " + quote(speech.string()) + " --output " +
                      quote((dir_->path() / "speech_int8.ts").string()));
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("fidelity vs the float32 model on '" + speech.string() + "' (4.0 s)"),
            std::string::npos)
      << r.output;
}

// --check_audio: the check runs on a given file (here 22.05 kHz stereo, resampled and mixed down
// to the model's format); a file that cannot be read stops the export before anything is written.
TEST_F(ExportCli, FidelityCheckRunsOnAGivenAudioFile) {
  AudioData a;
  a.sample_rate = 22050;
  for (int ch = 0; ch < 2; ++ch) {
    std::vector<float> x(22050 * 3);
    for (size_t t = 0; t < x.size(); ++t) {
      const double s = static_cast<double>(t) / 22050.0;
      x[t] = static_cast<float>(0.3 * std::sin(2 * M_PI * (220.0 + 110.0 * ch) * s) *
                                (0.6 + 0.4 * std::sin(2 * M_PI * 3.0 * s)));
    }
    a.channels.push_back(x);
  }
  const fs::path wav = dir_->path() / "tones.wav";
  write_audio_file(wav, a, audio_format_from_name("wav16"));
  const fs::path out = dir_->path() / "checked_on_file.ts";
  auto r = run_export("--run " + quote(run_.string()) + " --streaming --check_seconds 1 --check_audio " +
                      quote(wav.string()) + " --output " + quote(out.string()));
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("fidelity vs the float32 model on '" + wav.string() + "' (1.0 s)"),
            std::string::npos)
      << r.output;

  const fs::path bad = dir_->path() / "not_audio.wav", refused = dir_->path() / "refused.ts";
  std::ofstream(bad) << "not audio";
  auto b = run_export("--run " + quote(run_.string()) + " --check_audio " + quote(bad.string()) +
                      " --output " + quote(refused.string()));
  EXPECT_NE(b.exit_code, 0);
  EXPECT_NE(b.output.find(bad.string()), std::string::npos) << b.output;
  EXPECT_FALSE(fs::exists(refused));
}

TEST_F(ExportCli, StreamingExportReportsItsLatency) {
  auto r = run_export("--run " + quote(run_.string()) + " --streaming --latent_size 3");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  auto m = torch::jit::load((run_ / "export" / "tiny_rave_streaming.ts").string());
  EXPECT_TRUE(m.attr("streaming").toBool());
  EXPECT_EQ(m.attr("latent_size").toInt(), 3);
  const int64_t latency = m.attr("forward_latency").toInt();
  EXPECT_GT(latency, 0);
  EXPECT_NE(r.output.find("forward " + std::to_string(latency)), std::string::npos) << r.output;
}

// --channels as RAVE's: the report and the file say the output channels, the fidelity check
// compares the first copy; ONNX, which RAVE's --channels does not cover, refuses it naming both.
TEST_F(ExportCli, ChannelsWidensTheTorchScriptOutputAndOnnxRefusesIt) {
  const fs::path out = dir_->path() / "channels.ts";
  auto r = run_export("--run " + quote(run_.string()) + " --channels 2 --output " + quote(out.string()));
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("1 channel(s) in, 2 out (--channels)"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("fidelity vs the float32 model"), std::string::npos) << r.output;
  EXPECT_EQ(r.output.find("not measured"), std::string::npos) << r.output;
  auto m = torch::jit::load(out.string());
  EXPECT_EQ(m.attr("target_channels").toInt(), 2);
  auto ins = run_export("--inspect " + quote(out.string()));
  EXPECT_NE(ins.output.find("→ 2 at sr"), std::string::npos) << ins.output;
  auto onnx = run_export("--run " + quote(run_.string()) + " --channels 2 --format onnx --output " +
                         quote((dir_->path() / "channels.onnx").string()));
  EXPECT_EQ(onnx.exit_code, 1) << onnx.output;
  EXPECT_NE(onnx.output.find("--channels applies to TorchScript files"), std::string::npos) << onnx.output;
  EXPECT_FALSE(fs::exists(dir_->path() / "channels.onnx"));
}

// --ema: the run's checkpoints keep the moving averages, export --ema_weights exports them (they
// differ from the weights), and a run trained without them is refused naming the flag.
TEST_F(ExportCli, EmaWeightsAreKeptAndExportedOnRequest) {
  auto r = run_command(
      tiny_train_command(db_, dir_->path() / "runs_ema", "--max_steps 12 --val_every 6 --ema 0.9 --seed 3"));
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const fs::path run = run_dir_from_output(r.output);
  auto plain = run_export("--run " + run.string() + " --output " + (dir_->path() / "plain.ts").string());
  ASSERT_EQ(plain.exit_code, 0) << plain.output;
  auto ema =
      run_export("--run " + run.string() + " --ema_weights --output " + (dir_->path() / "ema.ts").string());
  ASSERT_EQ(ema.exit_code, 0) << ema.output;
  auto a = torch::jit::load((dir_->path() / "plain.ts").string());
  auto b = torch::jit::load((dir_->path() / "ema.ts").string());
  auto pa = a.named_parameters(), pb = b.named_parameters();
  int differ = 0, n = 0;
  for (auto it = pa.begin(), jt = pb.begin(); it != pa.end() && jt != pb.end(); ++it, ++jt, ++n) {
    differ += !torch::equal((*it).value, (*jt).value);
  }
  EXPECT_GT(n, 10);
  EXPECT_GT(differ, n / 2) << "the exported averages equal the weights";
  auto refused =
      run_export("--run " + run_.string() + " --ema_weights --output " + (dir_->path() / "x.ts").string());
  EXPECT_NE(refused.exit_code, 0);
  EXPECT_NE(refused.output.find("holds no moving averages (train with --ema FACTOR"), std::string::npos)
      << refused.output;
}

TEST_F(ExportCli, OutputPathAndCheckpointCanBeNamed) {
  const fs::path out = dir_->path() / "named" / "my_model.ts";
  auto r = run_export("--ckpt " + quote((run_ / "checkpoints" / "last.ckpt").string()) + " --output " +
                      quote(out.string()));
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_TRUE(fs::is_regular_file(out));
}

// --output replaces nothing it must not: the checkpoint it reads, a run's own files, a
// checkpoint, an out_path's `latest`, a device, a FIFO or a folder (never), any other existing
// file (only with --force). Each refusal exits 1 naming --output and leaves the target as it
// was. Before: `export --ckpt C --output C` exited 0 with C now a TorchScript file, and as root
// /dev/null became a regular file.
TEST_F(ExportCli, OutputNeverReplacesWhatItMustNot) {
  const fs::path ckpt = run_ / "checkpoints" / "last.ckpt";
  const fs::path other_ckpt = dir_->path() / "elsewhere.ckpt";
  fs::copy_file(ckpt, other_ckpt, fs::copy_options::overwrite_existing);
  const fs::path fifo = dir_->path() / "a_fifo";
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0644), 0);
  const fs::path folder = dir_->path() / "a_folder.ts";
  fs::create_directories(folder);
  const struct {
    std::string args;
    fs::path target;
    std::string says;
  } refused[] = {
      {"--ckpt " + quote(ckpt.string()), ckpt, "is the file this export reads"},
      {"--run " + quote(run_.string()), ckpt, "is one of the files of the training run"},
      {"--run " + quote(run_.string()), run_ / "config.toml", "is one of the files of the training run"},
      {"--run " + quote(run_.string()), run_ / "training_summary.json",
       "is one of the files of the training run"},
      {"--run " + quote(run_.string()) + " --force", dir_->path() / "runs" / "latest",
       "is a `latest` pointer"},
      {"--run " + quote(run_.string()) + " --force", other_ckpt, "is a training checkpoint"},
      {"--run " + quote(run_.string()) + " --force", fs::path("/dev/null"),
       "is a character device, not a regular file"},
      {"--run " + quote(run_.string()) + " --force", fifo, "is a FIFO, not a regular file"},
      {"--run " + quote(run_.string()) + " --force", folder, "is a folder, not a regular file"},
  };
  for (const auto& r : refused) {
    const auto before = fs::status(r.target).type();
    const std::string bytes = fs::is_regular_file(r.target) ? rt::read_file(r.target) : "";
    auto e = run_export(r.args + " --output " + quote(r.target.string()));
    EXPECT_EQ(e.exit_code, 1) << r.args << " → " << r.target << "\n" << e.output;
    EXPECT_NE(e.output.find("--output '" + r.target.string() + "' " + r.says), std::string::npos) << e.output;
    EXPECT_EQ(fs::status(r.target).type(), before) << r.target;
    if (!bytes.empty()) {
      EXPECT_EQ(rt::read_file(r.target), bytes) << r.target;
    }
  }
  // Any other existing file: refused without --force, replaced with it.
  const fs::path existing = dir_->path() / "existing.ts";
  write_file_atomic(existing, "keep me");
  auto no =
      run_export("--run " + quote(run_.string()) + " --check_seconds 0 --output " + quote(existing.string()));
  EXPECT_EQ(no.exit_code, 1) << no.output;
  EXPECT_NE(no.output.find("already exists; pass --force to replace it"), std::string::npos) << no.output;
  EXPECT_EQ(rt::read_file(existing), "keep me");
  auto yes = run_export("--run " + quote(run_.string()) + " --check_seconds 0 --force --output " +
                        quote(existing.string()));
  ASSERT_EQ(yes.exit_code, 0) << yes.output;
  EXPECT_NO_THROW(torch::jit::load(existing.string()));
  // The checkpoint and the run still train on: the refusals wrote nothing.
  EXPECT_NO_THROW(read_checkpoint_meta(ckpt));
}

// Values outside what the flags mean: --latent_size 0 (the default's own "choose by --fidelity")
// and a negative --check_seconds. Before: accepted.
// Every export records what a host needs to know, and --inspect prints it: the LibTorch it was
// written with, the nn~ methods, rate, block sizes, latency, checkpoint, the check's figures
// and the run's model config. A TorchScript file written elsewhere says what it lacks.
TEST_F(ExportCli, InspectPrintsWhatTheFileRecords) {
  const fs::path streaming = dir_->path() / "inspect_streaming.ts",
                 offline = dir_->path() / "inspect_offline.ts";
  auto e = run_export("--run " + quote(run_.string()) + " --streaming --check_seconds 1 --output " +
                      quote(streaming.string()));
  ASSERT_EQ(e.exit_code, 0) << e.output;
  e = run_export("--run " + quote(run_.string()) + " --check_seconds 0 --output " + quote(offline.string()));
  ASSERT_EQ(e.exit_code, 0) << e.output;
  auto i = run_export("--inspect " + quote(streaming.string()));
  ASSERT_EQ(i.exit_code, 0) << i.output;
  for (const std::string& says : std::vector<std::string>{
           "TorchScript, file format version ",
           "written by  rt export, LibTorch " + std::to_string(TORCH_VERSION_MAJOR) + ".",
           "forward: 1 channel(s) at sr → 1 at sr", "sampling rate     44100 Hz", "channels          1",
           "streaming         yes", "block sizes       multiples of 128 samples",
           "latency           forward ", "weights           none", "(step 30)",
           "fidelity check    fidelity vs the float32 model on ", "SNR ", "config [model] (the run's; ",
           "    version = \"v2\""}) {
    EXPECT_TRUE(contains(i.output, says)) << says << "\n" << i.output;
  }
  i = run_export("--inspect " + quote(offline.string()));
  ASSERT_EQ(i.exit_code, 0) << i.output;
  EXPECT_TRUE(contains(i.output, "streaming         no (offline)")) << i.output;
  EXPECT_TRUE(contains(i.output, "fidelity check    not measured (--check_seconds 0)")) << i.output;
  // A TorchScript file of no exporter of ours, and files that are none.
  const fs::path bare = dir_->path() / "bare.ts";
  torch::jit::Module m("Bare");
  m.save(bare.string());
  i = run_export("--inspect " + quote(bare.string()));
  ASSERT_EQ(i.exit_code, 0) << i.output;
  EXPECT_TRUE(contains(i.output, "written by  not recorded (not written by this exporter)")) << i.output;
  EXPECT_TRUE(contains(i.output, "nn~ methods: none (no _methods attribute)")) << i.output;
  const fs::path text = dir_->path() / "not_a_model.ts";
  write_file_atomic(text, "hello");
  i = run_export("--inspect " + quote(text.string()));
  EXPECT_EQ(i.exit_code, 1) << i.output;
  EXPECT_TRUE(contains(i.output, "--inspect '" + text.string() + "' is not a TorchScript file")) << i.output;
  i = run_export("--inspect " + quote(streaming.string()) + " --run " + quote(run_.string()));
  EXPECT_EQ(i.exit_code, 1) << i.output;
  EXPECT_TRUE(contains(i.output, "--inspect and --run cannot be combined")) << i.output;
}

// --target_libtorch X.Y: a release that cannot load the file refuses it in one line naming the
// reason and the releases that can, and nothing is written; a release that can gets the file,
// which records what it was checked for. --inspect checks an existing file the same way.
TEST_F(ExportCli, ATooOldTargetLibTorchIsRefusedInOneLineAndNothingIsWritten) {
  const fs::path file = dir_->path() / "target.ts";
  auto e = run_export("--run " + quote(run_.string()) + " --check_seconds 0 --target_libtorch 1.4 --output " +
                      quote(file.string()));
  EXPECT_EQ(e.exit_code, 1) << e.output;
  EXPECT_EQ(
      e.output.rfind("export: error: --target_libtorch 1.4: LibTorch 1.4 cannot load '" + file.string() +
                         "': file format version 3, and LibTorch 1.4 reads versions up to 2 (it loads in "
                         "LibTorch 1.5 … ",
                     0),
      0u)
      << e.output;
  EXPECT_TRUE(contains(e.output, "; nothing written\n")) << e.output;
  EXPECT_EQ(std::count(e.output.begin(), e.output.end(), '\n'), 1) << e.output;
  EXPECT_FALSE(fs::exists(file));

  e = run_export("--run " + quote(run_.string()) + " --check_seconds 0 --target_libtorch 1.13 --output " +
                 quote(file.string()));
  ASSERT_EQ(e.exit_code, 0) << e.output;
  EXPECT_TRUE(contains(e.output, "  loads in LibTorch 1.5 … ")) << e.output;
  auto i = run_export("--inspect " + quote(file.string()));
  ASSERT_EQ(i.exit_code, 0) << i.output;
  EXPECT_TRUE(contains(i.output, "  loads in          LibTorch 1.5 … ")) << i.output;
  EXPECT_TRUE(contains(i.output, "  checked for       LibTorch 1.13\n")) << i.output;
  i = run_export("--inspect " + quote(file.string()) + " --target_libtorch 1.4");
  EXPECT_EQ(i.exit_code, 1) << i.output;
  EXPECT_TRUE(contains(i.output, "TorchScript, file format version 3")) << i.output;
  EXPECT_TRUE(contains(i.output, "\nexport: error: --target_libtorch 1.4: LibTorch 1.4 cannot load '" +
                                     file.string() + "': file format version 3"))
      << i.output;

  for (const auto& [args, says] : std::vector<std::pair<std::string, std::string>>{
           {"--inspect " + quote(file.string()) + " --target_libtorch 1.14",
            "--target_libtorch 1.14: there was no LibTorch 1.14 release"},
           {"--run " + quote(run_.string()) + " --format onnx --target_libtorch 1.13",
            "--target_libtorch applies to TorchScript files; export --format onnx writes opset 17"},
           {"--benchmark " + quote(file.string()) + " --target_libtorch 1.13",
            "--benchmark and --target_libtorch cannot be combined"}}) {
    e = run_export(args);
    EXPECT_EQ(e.exit_code, 1) << args << "\n" << e.output;
    EXPECT_TRUE(contains(e.output, says)) << args << "\n" << e.output;
  }
}

// --format onnx: three graphs (forward at --output, encode and decode beside it), run once and
// put through the fidelity check as written, carrying the export's facts as metadata_props,
// which --inspect prints. ONNX Runtime runs such files in onnx_runtime_test.cpp.
TEST_F(ExportCli, OnnxFormatWritesThreeGraphsCheckedAndInspectable) {
  for (bool streaming : {false, true}) {
    exporting::ExportOptions o;
    o.run = run_;
    o.format = exporting::ExportFormat::kOnnx;
    o.streaming = streaming;
    o.check_seconds = 2;
    o.output = dir_->path() / (streaming ? "onnx_budget_streaming.onnx" : "onnx_budget.onnx");
    const auto r = exporting::export_rave(o);
    ASSERT_TRUE(r.check.measured) << r.check.not_measured;
    EXPECT_TRUE(r.check.within_budget()) << exporting::format_fidelity(r.check);
    EXPECT_LE(r.check.max_abs_diff, 1e-4) << exporting::format_fidelity(r.check);
    EXPECT_TRUE(fs::is_regular_file(r.onnx_encode)) << r.onnx_encode;
    EXPECT_TRUE(fs::is_regular_file(r.onnx_decode)) << r.onnx_decode;
    EXPECT_EQ(r.onnx_states.empty(), !streaming);
  }
  const fs::path file = dir_->path() / "cli.onnx";
  auto e = run_export("--run " + quote(run_.string()) +
                      " --format onnx --streaming --check_seconds 1 --output " + quote(file.string()));
  ASSERT_EQ(e.exit_code, 0) << e.output;
  for (const std::string& says :
       {std::string("ONNX (opset 17, IR version 8, for ONNX Runtime 1.17 or later)"),
        std::string("cli.encode.onnx"), std::string("cli.decode.onnx"), std::string("streaming state: "),
        std::string("fidelity vs the float32 model on ")}) {
    EXPECT_TRUE(contains(e.output, says)) << says << "\n" << e.output;
  }
  auto i = run_export("--inspect " + quote(file.string()));
  ASSERT_EQ(i.exit_code, 0) << i.output;
  for (const std::string& says : std::vector<std::string>{
           "ONNX, IR version 8, opset 17",
           "written by  rt export, LibTorch " + std::to_string(TORCH_VERSION_MAJOR) + ".",
           "    audio_in (batch, 1, time) float32", "    noise_scale () float32",
           "    audio_out (batch, 1, time) float32", "method            forward",
           "sampling rate     44100 Hz", "streaming         yes",
           "block sizes       multiples of 128 samples", "latency           forward ", "(step 30)",
           "fidelity check    fidelity vs the float32 model on ", "config [model] (the run's; ",
           "    version = \"v2\""}) {
    EXPECT_TRUE(contains(i.output, says)) << says << "\n" << i.output;
  }
  i = run_export("--inspect " + quote((dir_->path() / "cli.encode.onnx").string()));
  EXPECT_TRUE(contains(i.output, "method            encode")) << i.output;
  EXPECT_TRUE(contains(i.output, "    latent_out (batch, ")) << i.output;
  // --quantize int8 writes ONNX too (its layers: OnnxInt8.*; this tiny run has none of 2^18
  // weights, so none is on int8), checked and recorded as such.
  auto q =
      run_export("--run " + quote(run_.string()) + " --format onnx --streaming --quantize int8 --output " +
                 quote((dir_->path() / "q.onnx").string()));
  ASSERT_EQ(q.exit_code, 0) << q.output;
  EXPECT_TRUE(contains(q.output, "--quantize int8: 0 layer(s) on int8 weights")) << q.output;
  EXPECT_TRUE(contains(q.output, "fidelity vs the float32 model on ")) << q.output;
  auto qi = run_export("--inspect " + quote((dir_->path() / "q.onnx").string()));
  EXPECT_TRUE(contains(qi.output, "weights           int8")) << qi.output;
  auto f = run_export("--run " + quote(run_.string()) + " --format tflite");
  EXPECT_EQ(f.exit_code, 1) << f.output;
  EXPECT_TRUE(contains(f.output, "--format")) << f.output;
  EXPECT_TRUE(contains(f.output, "onnx")) << f.output;
}

TEST_F(ExportCli, LatentSizeZeroAndNegativeCheckSecondsAreRefused) {
  for (const auto& [bad, says] : std::vector<std::pair<std::string, std::string>>{
           {"--latent_size 0", "--latent_size 0 is not accepted"},
           {"--check_seconds -1", "--check_seconds -1 is not accepted"}}) {
    auto r = run_export("--run " + quote(run_.string()) + " " + bad + " --output " +
                        quote((dir_->path() / "never.ts").string()));
    EXPECT_EQ(r.exit_code, 1) << bad << "\n" << r.output;
    EXPECT_NE(r.output.find(says), std::string::npos) << r.output;
    EXPECT_FALSE(fs::exists(dir_->path() / "never.ts"));
  }
}

TEST_F(ExportCli, InvalidLatentSizeOrFidelityIsRefused) {
  for (const char* bad : {"--latent_size 9", "--latent_size -1", "--fidelity 1.5", "--fidelity 0"}) {
    auto r = run_export("--run " + quote(run_.string()) + " " + bad);
    EXPECT_EQ(r.exit_code, 1) << bad << "\n" << r.output;
    EXPECT_TRUE(r.output.find("--latent_size") != std::string::npos ||
                r.output.find("--fidelity") != std::string::npos)
        << r.output;
  }
}

TEST_F(ExportCli, ARunWithoutCheckpointIsRefused) {
  const fs::path run = dir_->path() / "untrained";
  fs::create_directories(run / "checkpoints");
  auto r = run_export("--run " + quote(run.string()));
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.output.find("has no checkpoint"), std::string::npos) << r.output;
}

TEST_F(ExportCli, AnSsmRunIsRefused) {
  const fs::path ckpt =
      write_checkpoint("ssm_run", rt::read_file(rt::testing::source_path("configs/tiny_ssm.toml")), "ssm");
  auto r = run_export("--ckpt " + quote(ckpt.string()));
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.output.find("export supports RAVE models"), std::string::npos) << r.output;
}

TEST_F(ExportCli, ACorruptCheckpointIsRefused) {
  const fs::path run = dir_->path() / "corrupt";
  fs::create_directories(run / "checkpoints");
  std::ofstream(run / "checkpoints" / "best.ckpt") << "not a checkpoint";
  auto r = run_export("--run " + quote(run.string()));
  EXPECT_EQ(r.exit_code, 1);
  // Refused by the integrity check that every reader runs first (training/zip_integrity.h).
  EXPECT_NE(r.output.find("checkpoint '" + (run / "checkpoints" / "best.ckpt").string() + "' is damaged"),
            std::string::npos)
      << r.output;
}

TEST_F(ExportCli, ACheckpointOfAnotherConfigIsRefused) {
  // The run's config.toml says one model, the checkpoint another.
  const fs::path other = dir_->path() / "other_config";
  fs::create_directories(other / "checkpoints");
  fs::copy_file(run_ / "checkpoints" / "best.ckpt", other / "checkpoints" / "best.ckpt");
  std::ofstream(other / "config.toml") << with_value(run_config(), "capacity", "16");
  auto r = run_export("--run " + quote(other.string()));
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.output.find("another config"), std::string::npos) << r.output;

  // The checkpoint's own config does not describe its tensors: every misfit is listed.
  const fs::path ckpt = write_checkpoint("mismatch", run_config());
  CheckpointMeta meta = read_checkpoint_meta(ckpt);
  meta.config_toml = with_value(run_config(), "latent_size", "16");
  save_checkpoint(ckpt, meta, [&](torch::serialize::OutputArchive& a) {
    Config config;
    config.merge_toml_string(run_config(), "run");
    config.finalize();
    rave::RaveModel model(rave_options_from(config));
    torch::serialize::OutputArchive m;
    model->save(m);
    a.write("rave", m);
  });
  r = run_export("--ckpt " + quote(ckpt.string()));
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.output.find("does not fit"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("decoder.net.0.weight_v"), std::string::npos) << r.output;
}

TEST_F(ExportCli, AMissingPcaIsFittedOnTheRunsDatabaseOrRefused) {
  const fs::path ckpt = write_checkpoint("no_pca", run_config());
  auto r = run_export("--ckpt " + quote(ckpt.string()));
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("fitted now on"), std::string::npos) << r.output;
  auto m = torch::jit::load((ckpt.parent_path().parent_path() / "export" / "tiny_rave.ts").string());
  EXPECT_TRUE(rave::has_latent_pca(m.attr("fidelity").toTensor()));

  const fs::path gone =
      write_checkpoint("no_pca_no_db", with_value(run_config(), "db_path", "\"/nonexistent/db\""));
  r = run_export("--ckpt " + quote(gone.string()));
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.output.find("holds no latent PCA"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("/nonexistent/db"), std::string::npos) << r.output;
}

// The file is written beside --output, loaded and checked from there, and only then written at
// --output: SIGTERM during the check (here the moment the scratch file appears) ends export
// with 143, the file --force would have replaced untouched and nothing of the export left.
TEST_F(ExportCli, ASignalDuringTheCheckLeavesTheOutputAsItWas) {
  for (const std::string& format : std::vector<std::string>{"torchscript", "onnx"}) {
    const fs::path folder = dir_->path() / ("stopped_" + format),
                   out = folder / (format == "onnx" ? "model.onnx" : "model.ts");
    fs::create_directories(folder);
    write_file_atomic(out, "the user's earlier file\n");
    BackgroundProcess p(bin_path("export") + " --run " + quote(run_.string()) + " --format " + format +
                            " --streaming --force --check_seconds 20 --output " + quote(out.string()),
                        folder.parent_path() / ("stopped_" + format + ".log"));
    auto scratch = [&] {
      for (const auto& e : fs::directory_iterator(folder))
        if (e.path().filename().string().find(".checking.") != std::string::npos) return true;
      return false;
    };
    ASSERT_TRUE(p.wait_until(scratch, 120)) << p.log();
    p.signal(SIGTERM);
    EXPECT_EQ(p.wait_exit(120), 143) << p.log();
    // Stopped in the check, or while it read its audio from the run's database.
    EXPECT_TRUE(contains(p.log(), "export: stopped by SIGTERM while ")) << p.log();
    EXPECT_EQ(read_file(out), "the user's earlier file\n");
    std::vector<std::string> left;
    for (const auto& e : fs::directory_iterator(folder)) left.push_back(e.path().filename().string());
    EXPECT_EQ(left, std::vector<std::string>{out.filename().string()});
  }
}

}  // namespace
}  // namespace rt::e2e
