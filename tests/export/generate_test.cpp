// `generate` end to end: a tiny_rave run, its offline and streaming exports, and audio files
// through each, offline and in streaming blocks; the outputs read back with libsndfile, aligned
// with the inputs; the run and its exported file give the same audio; bad inputs get a line.
#include <random>
#include <thread>

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

// Outputs are unique: two inputs that would write one file are refused naming both, before
// any model call; the same file given twice runs once.
TEST_F(Generate, TwoInputsOfOneNameAreRefusedAndTheSameFileTwiceRunsOnce) {
  const fs::path a = dir_->path() / "a", b = dir_->path() / "b";
  fs::create_directories(a);
  fs::create_directories(b);
  fs::copy_file(mono(), a / "x.wav", fs::copy_options::overwrite_existing);
  fs::copy_file(mono(), b / "x.wav", fs::copy_options::overwrite_existing);
  auto r = generate("--model " + quote(run_.string()) + " --input " + quote((a / "x.wav").string()) +
                    " --input " + quote((b / "x.wav").string()) + " --name twins");
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_TRUE(contains(r.output, "--input '" + (a / "x.wav").string() + "' and --input '" +
                                     (b / "x.wav").string() + "' would both write '" +
                                     out("twins", "x.wav").string() + "'"))
      << r.output;
  EXPECT_FALSE(fs::exists(dir_->path() / "generations" / "twins"));
  r = generate("--model " + quote(run_.string()) + " --input " + quote((a / "x.wav").string()) + " --input " +
               quote((a / "x.wav").string()) + " --input " + quote(a.string()) + " --name once");
  EXPECT_EQ(r.exit_code, 0) << r.output;
  const Json report = Json::parse(read_file(out("once", "report.json")));
  EXPECT_EQ(report["files"].size(), 1u) << report.dump(2);
  EXPECT_TRUE(fs::is_regular_file(out("once", "x.wav")));
}

// --name is a folder name under --out_path: nothing is written outside it, nor into a run.
TEST_F(Generate, ANameIsANameNotAPathAndARunsFoldersAreNotWrittenInto) {
  const fs::path escape = dir_->path() / "escape";
  for (const std::string& name :
       std::vector<std::string>{"..", ".", "../../escape", escape.string(), "a/b", "tab\tname"}) {
    auto r = generate("--model " + quote(run_.string()) + " --input " + quote(mono().string()) + " --name " +
                      quote(name));
    EXPECT_EQ(r.exit_code, 1) << name << "\n" << r.output;
    EXPECT_TRUE(contains(r.output, "is not accepted: one folder name under --out_path")) << r.output;
  }
  EXPECT_FALSE(fs::exists(escape));
  EXPECT_FALSE(fs::exists(dir_->path() / "harmonic_44k_mono.wav"));
  const fs::path before = run_ / "checkpoints";
  const size_t files = std::distance(fs::directory_iterator(before), fs::directory_iterator());
  for (const auto& [out_path, name] : std::vector<std::pair<fs::path, std::string>>{
           {run_, "checkpoints"}, {run_.parent_path(), run_.filename().string()}}) {
    auto r = run_command(bin_path("generate") + " --threads 1 --model " + quote(run_.string()) + " --input " +
                         quote(mono().string()) + " --out_path " + quote(out_path.string()) + " --name " +
                         quote(name) + " 2>&1");
    EXPECT_EQ(r.exit_code, 1) << r.output;
    EXPECT_TRUE(contains(r.output, "generate writes its audio and report.json elsewhere")) << r.output;
  }
  EXPECT_EQ(std::distance(fs::directory_iterator(before), fs::directory_iterator()),
            static_cast<long>(files));
  EXPECT_FALSE(fs::exists(run_ / "harmonic_44k_mono.wav"));
  // An --out_path that is a file (or lies under one) is named, not a raw filesystem error.
  const fs::path file = dir_->path() / "a_file";
  write_file_atomic(file, "x");
  for (const fs::path& out_path : {file, file / "sub"}) {
    auto r = run_command(bin_path("generate") + " --threads 1 --model " + quote(run_.string()) + " --input " +
                         quote(mono().string()) + " --out_path " + quote(out_path.string()) + " 2>&1");
    EXPECT_EQ(r.exit_code, 1) << r.output;
    EXPECT_TRUE(contains(r.output, "'" + file.string() + "' is a regular file, not a folder")) << r.output;
    EXPECT_FALSE(contains(r.output, "filesystem error")) << r.output;
  }
  EXPECT_EQ(read_file(file), "x");
}

// The outputs' extension follows --format, and the file is what the extension says.
TEST_F(Generate, TheExtensionFollowsTheFormat) {
  auto r = generate("--model " + quote(run_.string()) + " --input " + quote(mono().string()) +
                    " --name flac --format flac16");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_FALSE(fs::exists(out("flac", "harmonic_44k_mono.wav")));
  ASSERT_TRUE(fs::is_regular_file(out("flac", "harmonic_44k_mono.flac"))) << r.output;
  EXPECT_EQ(read_file(out("flac", "harmonic_44k_mono.flac")).substr(0, 4), "fLaC");
  EXPECT_GT(decode_audio_file(out("flac", "harmonic_44k_mono.flac")).frames(), 0);
  r = generate("--model " + quote(run_.string()) + " --input " + quote(mono().string()) +
               " --name flac --format flac99");
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_TRUE(contains(r.output, "--format: unknown audio format 'flac99' (accepted: wav16")) << r.output;
}

// A file exported with --channels 2 (RAVE's): a mono model's two decoded copies written as a
// stereo file, its distance measured on the first copy.
TEST_F(Generate, AFileExportedWithMoreChannelsWritesThemAll) {
  const fs::path file = dir_->path() / "two_channels.ts";
  auto e = run_command(bin_path("export") + " --run " + quote(run_.string()) +
                       " --channels 2 --check_seconds 0 --force --output " + quote(file.string()) + " 2>&1");
  ASSERT_EQ(e.exit_code, 0) << e.output;
  auto r = generate("--model " + quote(file.string()) + " --input " + quote(mono().string()) + " --name two");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const AudioData a = decode_audio_file(out("two", "harmonic_44k_mono.wav"));
  EXPECT_EQ(a.num_channels(), 2);
  EXPECT_GT(a.frames(), 0);
}

// --threads and --chunk_size at their ranges' edges and one past each, in one line each; a
// value past the range never reaches the model (no C++ backtrace, no thread storm).
TEST_F(Generate, ThreadsAndChunkSizesAreHeldToTheirRanges) {
  const std::string base = bin_path("generate") + " --out_path " +
                           quote((dir_->path() / "generations").string()) + " --model " +
                           quote((dir_->path() / "streaming.ts").string()) + " --stream --force --input " +
                           quote(mono().string()) + " --name edges ";
  const int64_t max_threads = 4 * static_cast<int64_t>(std::max(1u, std::thread::hardware_concurrency()));
  const struct {
    std::string args;
    bool accepted;
  } cases[] = {
      {"--threads 0", false},
      {"--threads 1", true},
      {"--threads " + std::to_string(max_threads), true},
      {"--threads " + std::to_string(max_threads + 1), false},
      {"--threads 100000", false},
      {"--threads 1 --chunk_size 0", false},
      {"--threads 1 --chunk_size -4096", false},
      {"--threads 1 --chunk_size 128", true},  // the model's ratio
      {"--threads 1 --chunk_size 1048576", true},
      {"--threads 1 --chunk_size 1048704", false},
      {"--threads 1 --chunk_size 2147483648", false},
  };
  for (const auto& c : cases) {
    auto r = run_command(base + c.args + " 2>&1");
    EXPECT_EQ(r.exit_code, c.accepted ? 0 : 1) << c.args << "\n" << r.output;
    EXPECT_FALSE(contains(r.output, "frame #")) << r.output;
    if (!c.accepted) {
      EXPECT_TRUE(contains(r.output, c.args.substr(c.args.rfind("--")) + " is not accepted")) << r.output;
      EXPECT_EQ(std::count(r.output.begin(), r.output.end(), '\n'), 1) << r.output;
    }
  }
}

// SIGTERM while the model runs over a long file offline (one call of many seconds) ends the
// command at once with 143; the file before it stays written and is listed in report.json,
// the interrupted one is not written.
TEST_F(Generate, SigtermDuringALongModelCallEndsTheCommandAndKeepsTheFilesBefore) {
  const fs::path long_file = dir_->path() / "long" / "long.wav";
  fs::create_directories(long_file.parent_path());
  AudioData noise;
  noise.sample_rate = 44100;
  noise.channels.resize(1);
  std::mt19937 rng(1);
  std::normal_distribution<float> n(0.f, 0.1f);
  noise.channels[0].resize(44100 * 300);  // five minutes: tens of seconds of one offline call
  for (auto& v : noise.channels[0]) v = n(rng);
  write_audio_file(long_file, noise, audio_format_from_name("wav16"));
  BackgroundProcess p(bin_path("generate") + " --threads 1 --out_path " +
                          quote((dir_->path() / "generations").string()) + " --name stopped --model " +
                          quote(run_.string()) + " --input " + quote(mono().string()) + " --input " +
                          quote(long_file.string()),
                      dir_->path() / "stopped.log");
  ASSERT_TRUE(p.wait_until([&] { return contains(p.log(), "[2/2]"); }, 120)) << p.log();
  std::this_thread::sleep_for(std::chrono::seconds(1));  // decoded; inside the model's call
  p.signal(SIGTERM);
  EXPECT_EQ(p.wait_exit(60), 143) << p.log();
  EXPECT_TRUE(contains(p.log(), "stopped by SIGTERM while generating '" + long_file.string() + "'"))
      << p.log();
  EXPECT_TRUE(fs::is_regular_file(out("stopped", "harmonic_44k_mono.wav")));
  EXPECT_FALSE(fs::exists(out("stopped", "long.wav")));
  const Json report = Json::parse(read_file(out("stopped", "report.json")));
  ASSERT_EQ(report["files"].size(), 1u) << report.dump(2);
  EXPECT_EQ(report["files"][0]["input"], mono().string());
}

// An exported file with one byte changed is refused by generate, export --inspect and
// export --benchmark, naming the file; the untouched file passes and says it was checked.
TEST_F(Generate, AnExportWithOneByteChangedIsRefusedBeforeItRuns) {
  for (const char* name : {"streaming.ts", "streaming.onnx"}) {
    const fs::path good = dir_->path() / name, bad = dir_->path() / (std::string("flipped_") + name);
    std::string bytes = read_file(good);
    bytes[bytes.size() / 2] = static_cast<char>(bytes[bytes.size() / 2] ^ 0x01);
    write_file_atomic(bad, bytes);
    auto r = generate("--model " + quote(bad.string()) + " --stream --input " + quote(mono().string()) +
                      " --name flipped");
    EXPECT_EQ(r.exit_code, 1) << r.output;
    EXPECT_TRUE(contains(r.output, "'" + bad.string() + "' is damaged")) << r.output;
    EXPECT_TRUE(contains(r.output, "export it again")) << r.output;
    EXPECT_FALSE(fs::exists(dir_->path() / "generations" / "flipped"));
    auto i = run_command(bin_path("export") + " --inspect " + quote(bad.string()) + " 2>&1");
    EXPECT_EQ(i.exit_code, 1) << i.output;
    EXPECT_TRUE(contains(i.output, "is damaged")) << i.output;
    i = run_command(bin_path("export") + " --inspect " + quote(good.string()) + " 2>&1");
    EXPECT_EQ(i.exit_code, 0) << i.output;
    EXPECT_TRUE(contains(i.output, std::string(name).find(".ts") != std::string::npos
                                       ? "matches the CRC-32 its writer recorded"
                                       : "(metadata rt_crc32) matches the content"))
        << i.output;
  }
  auto b = run_command(bin_path("export") + " --benchmark " +
                       quote((dir_->path() / "flipped_streaming.ts").string()) + " --seconds 0.1 2>&1");
  EXPECT_EQ(b.exit_code, 1) << b.output;
  EXPECT_TRUE(contains(b.output, "is damaged (entry '")) << b.output;
}

// What is not a model is called what it is; a `latest` pointer to a deleted run says so.
TEST_F(Generate, WhatIsNotAModelIsNamedForWhatItIs) {
  const fs::path garbage = dir_->path() / "garbage.onnx", pointer = dir_->path() / "gone" / "latest";
  write_file_atomic(garbage, "not a model\n");
  fs::create_directories(pointer.parent_path());
  write_file_atomic(pointer, (dir_->path() / "gone" / "deleted_run").string() + "\n");
  const struct {
    std::string model, says;
  } cases[] = {
      {mono().string(), "is not a model: expected a run directory"},
      {garbage.string(), "'" + garbage.string() + "' is not an ONNX model"},
      {pointer.string(), "is a `latest` pointer naming the run '" +
                             (dir_->path() / "gone" / "deleted_run").string() + "', which no longer exists"},
  };
  for (const auto& c : cases) {
    auto r =
        generate("--model " + quote(c.model) + " --input " + quote(mono().string()) + " --name notmodel");
    EXPECT_EQ(r.exit_code, 1) << r.output;
    EXPECT_TRUE(contains(r.output, c.says)) << r.output;
    EXPECT_FALSE(contains(r.output, "checkpoint '")) << r.output;  // not "checkpoint '…' is damaged"
  }
  auto i = run_command(bin_path("export") + " --inspect " + quote(garbage.string()) + " 2>&1");
  EXPECT_TRUE(contains(i.output, "is not an ONNX model")) << i.output;
  EXPECT_FALSE(contains(i.output, "TorchScript")) << i.output;
  const fs::path ckpt = run_ / "checkpoints" / "last.ckpt";
  i = run_command(bin_path("export") + " --inspect " + quote(ckpt.string()) + " 2>&1");
  EXPECT_EQ(i.exit_code, 1) << i.output;
  EXPECT_TRUE(contains(i.output, "is a training checkpoint (step 10), not an exported file")) << i.output;
  EXPECT_FALSE(contains(i.output, "loads in")) << i.output;
}

// A skipped input's name with an escape sequence is shown escaped, never raw.
TEST_F(Generate, PathsAreShownEscaped) {
  const fs::path folder = dir_->path() / "esc";
  fs::create_directories(folder);
  write_file_atomic(folder / "bad\x1b[2Jname.wav", "not audio");
  auto r = generate("--model " + quote(run_.string()) + " --input " + quote(folder.string()) + " --name esc");
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_FALSE(contains(r.output, "\x1b")) << r.output;
  EXPECT_TRUE(contains(r.output, "bad\\x1b[2Jname.wav")) << r.output;
}

}  // namespace
}  // namespace rt::e2e
