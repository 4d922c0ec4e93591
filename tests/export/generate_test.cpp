// `generate` end to end: a tiny_rave run, its offline and streaming exports, and audio files
// through each, offline and in streaming blocks; the outputs read back with libsndfile, aligned
// with the inputs; the run and its exported file give the same audio; bad inputs get a line.
#include "data/audio_io.h"
#include "e2e/e2e_fixtures.h"
#include "util/atomic_file.h"

namespace rt::e2e {
namespace {

using testing::contains;

class Generate : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = new ScratchDir("generate");
    const fs::path db = make_demo_db(dir_->path(), 1.0);
    auto r = run_command(
        tiny_train_command(db, dir_->path() / "runs", "--max_steps 10 --val_every 5 --seed 3 2>&1"));
    ASSERT_EQ(r.exit_code, 0) << r.output;
    run_ = run_dir_from_output(r.output);
    // Inputs: a mono file at the model's rate, and a stereo one at another rate.
    audio_ = dir_->path() / "inputs";
    auto g = run_command(bin_path("preprocess") + " --generate_demo " + quote(audio_.string()) +
                         " --demo_seconds 0.75 --seed 2 2>&1");
    ASSERT_EQ(g.exit_code, 0) << g.output;
    for (const char* ts : {"offline", "streaming"}) {
      auto e =
          run_command(bin_path("export") + " --run " + quote(run_.string()) + " --check_seconds 0 --output " +
                      quote((dir_->path() / (std::string(ts) + ".ts")).string()) +
                      (std::string(ts) == "streaming" ? " --streaming" : "") + " 2>&1");
      ASSERT_EQ(e.exit_code, 0) << e.output;
      e = run_command(bin_path("export") + " --run " + quote(run_.string()) +
                      " --format onnx --check_seconds 0 --output " +
                      quote((dir_->path() / (std::string(ts) + ".onnx")).string()) +
                      (std::string(ts) == "streaming" ? " --streaming" : "") + " 2>&1");
      ASSERT_EQ(e.exit_code, 0) << e.output;
    }
  }
  // A failure in SetUpTestSuite only skips the tests under ctest: each test fails instead.
  void SetUp() override {
    ASSERT_TRUE(fs::is_directory(run_)) << "the suite's training run failed";
    ASSERT_TRUE(fs::is_regular_file(mono()) && fs::is_regular_file(stereo())) << "the demo audio is missing";
    ASSERT_TRUE(fs::is_regular_file(dir_->path() / "streaming.ts")) << "the suite's exports failed";
  }
  static void TearDownTestSuite() {
    delete dir_;
    dir_ = nullptr;
  }
  static CommandResult generate(const std::string& args) {
    return run_command(bin_path("generate") + " --threads 1 --out_path " +
                       quote((dir_->path() / "generations").string()) + " " + args + " 2>&1");
  }
  static fs::path mono() { return audio_ / "tones" / "harmonic_44k_mono.wav"; }
  static fs::path stereo() { return audio_ / "tones" / "chords_48k_stereo.wav"; }
  static fs::path out(const std::string& name, const std::string& file) {
    return dir_->path() / "generations" / name / file;
  }
  static ScratchDir* dir_;
  static fs::path run_, audio_;
};
ScratchDir* Generate::dir_ = nullptr;
fs::path Generate::run_, Generate::audio_;

double max_abs_diff(const AudioData& a, const AudioData& b) {
  double d = 0.0;
  for (size_t c = 0; c < a.channels.size(); ++c)
    for (size_t i = 0; i < a.channels[c].size(); ++i)
      d = std::max(d, static_cast<double>(std::abs(a.channels[c][i] - b.channels[c][i])));
  return d;
}

TEST_F(Generate, ARunAndItsExportsWriteAudioAlignedWithTheInputOfflineAndStreaming) {
  const std::string inputs = " --input " + quote(mono().string()) + " --input " + quote(stereo().string());
  const struct {
    std::string name, args;
  } cases[] = {
      {"run_offline", "--model " + quote(run_.string())},
      {"run_stream", "--model " + quote(run_.string()) + " --stream --chunk_size 2048"},
      {"ts_offline", "--model " + quote((dir_->path() / "offline.ts").string())},
      {"ts_stream",
       "--model " + quote((dir_->path() / "streaming.ts").string()) + " --stream --chunk_size 2048"},
      {"onnx_offline", "--model " + quote((dir_->path() / "offline.onnx").string())},
      {"onnx_stream",
       "--model " + quote((dir_->path() / "streaming.onnx").string()) + " --stream --chunk_size 2048"},
  };
  for (const auto& c : cases) {
    auto r = generate(c.args + inputs + " --name " + c.name);
    ASSERT_EQ(r.exit_code, 0) << c.name << "\n" << r.output;
    EXPECT_TRUE(contains(r.output, "realtime factor")) << r.output;
    EXPECT_TRUE(contains(r.output, "2 channel(s) mapped to the model's 1 (averaged)")) << r.output;
    EXPECT_TRUE(contains(r.output, "resampled from 48000 Hz to the model's 44100 Hz")) << r.output;
    for (const auto& [in, file] :
         {std::pair{mono(), "harmonic_44k_mono.wav"}, {stereo(), "chords_48k_stereo.wav"}}) {
      const AudioData source = load_audio(in, 44100, 1), made = decode_audio_file(out(c.name, file));
      EXPECT_EQ(made.sample_rate, 44100) << c.name;
      EXPECT_EQ(made.num_channels(), 1) << c.name;
      EXPECT_EQ(made.frames(), source.frames()) << c.name << " " << file;
      float peak = 0.0f;
      for (float v : made.channels[0]) peak = std::max(peak, std::abs(v));
      EXPECT_GT(peak, 0.0f) << c.name << " " << file << " is silent";
      EXPECT_TRUE(std::isfinite(peak)) << c.name;
    }
    const Json report = Json::parse(read_file(out(c.name, "report.json")));
    EXPECT_EQ(report.at("files").size(), 2u);
    EXPECT_GT(report.at("files")[0].at("spectral_distance").get<double>(), 0.0);
  }
  // The run, scripted in memory, and its exported file are the same model with the same draws.
  for (const char* file : {"harmonic_44k_mono.wav", "chords_48k_stereo.wav"}) {
    EXPECT_LT(
        max_abs_diff(decode_audio_file(out("run_offline", file)), decode_audio_file(out("ts_offline", file))),
        1e-6)
        << file;
    EXPECT_LT(
        max_abs_diff(decode_audio_file(out("run_stream", file)), decode_audio_file(out("ts_stream", file))),
        1e-6)
        << file;
  }
}

TEST_F(Generate, BadInputGetsALineAndNothingWrittenIsLost) {
  const fs::path folder = dir_->path() / "mixed";
  fs::create_directories(folder);
  fs::copy_file(mono(), folder / "good.wav");
  write_file_atomic(folder / "notes.txt", "not audio");
  auto r =
      generate("--model " + quote(run_.string()) + " --input " + quote(folder.string()) + " --name mixed");
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_TRUE(contains(r.output, "skipped " + (folder / "notes.txt").string() + ": cannot decode"))
      << r.output;
  EXPECT_TRUE(contains(r.output, "1 of 2 input(s) skipped")) << r.output;
  ASSERT_TRUE(fs::is_regular_file(out("mixed", "good.wav")));
  const std::string written = read_file(out("mixed", "good.wav"));
  // Again: refused before any model call, the file left as it was; --force replaces it.
  r = generate("--model " + quote(run_.string()) + " --input " + quote(folder.string()) + " --name mixed");
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_TRUE(contains(r.output,
                       "--out_path '" + out("mixed", "good.wav").string() + "' already exists; pass --force"))
      << r.output;
  EXPECT_EQ(read_file(out("mixed", "good.wav")), written);
  r = generate("--model " + quote(run_.string()) + " --input " + quote(mono().string()) +
               " --name mixed --force " + "--input " + quote((folder / "good.wav").string()));
  EXPECT_EQ(r.exit_code, 0) << r.output;

  const struct {
    std::string args, says;
  } refused[] = {
      {"--model " + quote((dir_->path() / "offline.ts").string()) + " --stream",
       "was exported offline (no streaming caches)"},
      {"--model " + quote((dir_->path() / "streaming.ts").string()), "is a streaming export"},
      {"--model " + quote((dir_->path() / "offline.onnx").string()) + " --stream",
       "was exported offline (no state inputs)"},
      {"--model " + quote((dir_->path() / "streaming.onnx").string()), "is a streaming export"},
      {"--model " + quote((dir_->path() / "streaming.encode.onnx").string()) + " --stream",
       "is not an ONNX forward graph"},
      {"--model " + quote(run_.string()) + " --stream --chunk_size 1000",
       "--chunk_size 1000 is not a multiple"},
      {"--model " + quote(run_.string()) + " --chunk_size 2048", "--chunk_size goes with --stream"},
      {"--model " + quote((dir_->path() / "nowhere").string()),
       "--model = '" + (dir_->path() / "nowhere").string()},
  };
  for (const auto& c : refused) {
    auto e = generate(c.args + " --input " + quote(mono().string()) + " --name refused");
    EXPECT_EQ(e.exit_code, 1) << c.args << "\n" << e.output;
    EXPECT_TRUE(contains(e.output, c.says)) << e.output;
    EXPECT_FALSE(fs::exists(dir_->path() / "generations" / "refused")) << c.args;
  }
}

}  // namespace
}  // namespace rt::e2e
