// `export --benchmark FILE.ts` (export/checks/realtime_check.h): the check on tiny exported files,
// streaming and offline, mono and stereo; its table; the CLI through the real binary; every
// refusal with its message. No assertion on speed: only that the figures are consistent.
#include "export/checks/realtime_check.h"

#include <torch/version.h>

#include <cmath>
#include <fstream>

#include "export/export_fixtures.h"
#include "export/onnx_fixtures.h"
#include "util/error.h"

namespace rt::exporting::testing {
namespace {

namespace fs = std::filesystem;
using rt::testing::bin_path;
using rt::testing::run_command;
using rt::testing::ScratchDir;

// A tiny v2 (64 samples per latent frame, 44.1 kHz) exported to `file`.
fs::path export_tiny(const fs::path& file, bool streaming, int64_t channels = 1) {
  auto model = tiny_model(tiny_options({"v2", rave::RaveVersion::kV2, channels, 0, false}));
  ScriptOptions s;
  s.streaming = streaming;
  s.sampling_rate = 44100;
  script_rave(*model, s, nullptr).save(file.string());
  return file;
}

std::string error_of(const RealtimeCheckOptions& o) {
  try {
    run_realtime_check(o);
  } catch (const Error& e) {
    return e.what();
  }
  return "(no error)";
}

std::string parse_error(const std::string& text) {
  try {
    parse_block_sizes(text);
  } catch (const Error& e) {
    return e.what();
  }
  return "(no error)";
}

class RealtimeCheckFiles : public ::testing::TestWithParam<bool> {};

TEST_P(RealtimeCheckFiles, GivesOneConsistentRowPerBlockSize) {
  const bool streaming = GetParam();
  ScratchDir dir("realtime_check");
  for (int64_t channels : {1, 2}) {
    RealtimeCheckOptions o;
    o.file = export_tiny(dir / "m.ts", streaming, channels);
    o.blocks = {256, 128};
    o.seconds = 0.2;
    const int threads_before = torch::get_num_threads();
    const auto r = run_realtime_check(o);
    EXPECT_EQ(torch::get_num_threads(), threads_before) << "the thread count is restored";

    EXPECT_EQ(r.channels, channels);
    EXPECT_EQ(r.sampling_rate, 44100);
    EXPECT_EQ(r.frame, 64);  // 16 bands × 2 · 2
    EXPECT_EQ(r.streaming, streaming ? 1 : 0);
    EXPECT_EQ(r.threads, 1);
    EXPECT_GE(r.cores, 1);
    EXPECT_FALSE(r.cpu_model.empty());
    EXPECT_EQ(r.torch_version, TORCH_VERSION);
    ASSERT_EQ(r.rows.size(), 2u);
    for (size_t i = 0; i < r.rows.size(); ++i) {
      const auto& t = r.rows[i];
      SCOPED_TRACE("block " + std::to_string(t.block));
      EXPECT_EQ(t.block, o.blocks[i]);
      EXPECT_EQ(t.calls, static_cast<int64_t>(std::ceil(0.2 * 44100.0 / static_cast<double>(t.block))));
      EXPECT_NEAR(t.deadline_ms, 1000.0 * static_cast<double>(t.block) / 44100.0, 1e-9);
      EXPECT_NEAR(t.audio_s, static_cast<double>(t.calls * t.block) / 44100.0, 1e-9);
      EXPECT_GT(t.median_ms, 0.0);
      EXPECT_GE(t.max_ms, t.median_ms);
      EXPECT_GE(t.late, 0);
      EXPECT_LE(t.late, t.calls);
      EXPECT_GT(t.compute_s, 0.0);
      EXPECT_GE(t.compute_s * 1000.0, t.max_ms);
      EXPECT_GT(t.rtf_total, 0.0);
      EXPECT_GT(t.rtf_median, 0.0);
      EXPECT_NEAR(t.rtf_total, t.audio_s / t.compute_s, 1e-9);
      EXPECT_NEAR(t.rtf_median, t.deadline_ms / t.median_ms, 1e-9);
      EXPECT_GT(t.cpu_percent, 0.0);
      EXPECT_EQ(t.voices, static_cast<int64_t>(std::floor(t.rtf_total)));
      // One thread asked for: the calling thread does the work.
      EXPECT_EQ(t.busy_threads, 1);
      EXPECT_GE(t.process_threads, t.busy_threads);
    }
    const std::string table = format_realtime_check(r);
    EXPECT_NE(table.find("LibTorch " TORCH_VERSION), std::string::npos) << table;
    EXPECT_NE(table.find(r.cpu_model), std::string::npos) << table;
    EXPECT_NE(table.find("1 thread "), std::string::npos) << table;
    EXPECT_NE(table.find(streaming ? "streaming" : "offline"), std::string::npos) << table;
    EXPECT_NE(table.find("\n    256 "), std::string::npos) << table;
    EXPECT_NE(table.find("\n    128 "), std::string::npos) << table;
  }
}

INSTANTIATE_TEST_SUITE_P(OfflineAndStreaming, RealtimeCheckFiles, ::testing::Values(false, true),
                         [](const auto& info) { return std::string(info.param ? "Streaming" : "Offline"); });

TEST(RealtimeCheck, DefaultBlocksAreNnTildesUsualBuffers) {
  ScratchDir dir("realtime_check");
  RealtimeCheckOptions o;
  o.file = export_tiny(dir / "m.ts", true);
  o.seconds = 0.2;
  o.threads = 2;
  const auto r = run_realtime_check(o);
  ASSERT_EQ(r.rows.size(), 2u);
  EXPECT_EQ(r.rows[0].block, 2048);
  EXPECT_EQ(r.rows[1].block, 4096);
  EXPECT_EQ(r.threads, 2);
  EXPECT_NE(format_realtime_check(r).find("on the 2 threads given"), std::string::npos);
  for (const auto& t : r.rows) {
    EXPECT_GE(t.busy_threads, 1);
    EXPECT_LE(t.busy_threads, t.process_threads);
  }
}

// The table from known figures: the voices rule and "does not keep up".
TEST(RealtimeCheck, TableSaysHowManyVoicesFitOrThatItDoesNotKeepUp) {
  RealtimeCheck r;
  r.file = "m.ts";
  r.sampling_rate = 48000;
  r.channels = 2;
  r.frame = 2048;
  r.streaming = 1;
  r.threads = 1;
  r.cores = 8;
  r.cpu_model = "Some CPU";
  r.torch_version = "9.9.9";
  r.seconds = 10;
  BlockTiming fast;
  fast.block = 4096;
  fast.deadline_ms = 85.3;
  fast.calls = 118;
  fast.median_ms = 20.0;
  fast.max_ms = 90.0;
  fast.late = 1;
  fast.rtf_median = 4.27;
  fast.rtf_total = 3.9;
  fast.cpu_percent = 25.6;
  fast.voices = 3;
  BlockTiming slow = fast;
  slow.block = 2048;
  slow.rtf_total = 0.8;
  slow.voices = 0;
  r.rows = {slow, fast};
  const std::string table = format_realtime_check(r);
  EXPECT_NE(table.find("2 channels at 48000 Hz, streaming"), std::string::npos) << table;
  EXPECT_NE(table.find("Some CPU, 8 cores available; LibTorch 9.9.9; 1 thread"), std::string::npos) << table;
  const auto row_of = [&](const std::string& block) {
    const auto at = table.find("\n  " + block + " ");
    return at == std::string::npos ? std::string() : table.substr(at + 1, table.find('\n', at + 1) - at - 1);
  };
  EXPECT_NE(row_of(" 2048").find("0: does not keep up"), std::string::npos) << table;
  EXPECT_NE(row_of(" 4096").find("1/118"), std::string::npos) << table;
  EXPECT_NE(row_of(" 4096").find("25.6 %"), std::string::npos) << table;
  EXPECT_EQ(row_of(" 4096").substr(row_of(" 4096").size() - 3), "  3") << table;
  EXPECT_NE(table.find("voices: floor(RTF total)"), std::string::npos) << table;
  EXPECT_NE(table.find("deadline: the block's duration"), std::string::npos) << table;
}

TEST(RealtimeCheck, BlockListsAreParsedOrRefusedNamingTheFlag) {
  EXPECT_EQ(parse_block_sizes("2048,4096"), (std::vector<int64_t>{2048, 4096}));
  EXPECT_EQ(parse_block_sizes(" 4096 , 2048,4096"), (std::vector<int64_t>{4096, 2048}));
  for (const char* bad :
       {"", "abc", "2k", "-2048", "0", "2048,", "2048,,4096", "1e3", "2048;4096", "20.48"}) {
    const std::string e = parse_error(bad);
    EXPECT_NE(e.find("--block '" + std::string(bad) + "'"), std::string::npos) << bad << ": " << e;
    EXPECT_NE(e.find("whole numbers of samples above 0"), std::string::npos) << bad << ": " << e;
  }
}

TEST(RealtimeCheck, BadSettingsAndFilesAreRefusedWithTheirMessage) {
  ScratchDir dir("realtime_check");
  RealtimeCheckOptions o;
  o.file = export_tiny(dir / "m.ts", true);
  o.seconds = 0.2;

  auto e = [&](auto change) {
    RealtimeCheckOptions c = o;
    change(c);
    return error_of(c);
  };
  std::string m = e([](auto& c) { c.blocks = {2048, 100}; });
  EXPECT_NE(m.find("--block 100 is not a whole number of latent frames"), std::string::npos) << m;
  EXPECT_NE(m.find("multiples of 64 samples"), std::string::npos) << m;
  EXPECT_NE(m.find("encode_params [1, 1, 6, 64]"), std::string::npos) << m;
  EXPECT_NE(m.find("e.g. --block 64,128"), std::string::npos) << m;
  m = e([](auto& c) { c.threads = 0; });
  EXPECT_NE(m.find("--threads 0 is outside 1"), std::string::npos) << m;
  m = e([](auto& c) { c.seconds = 0; });
  EXPECT_NE(m.find("--seconds 0 is outside"), std::string::npos) << m;

  m = e([&](auto& c) { c.file = dir / "missing.ts"; });
  EXPECT_NE(m.find("'" + (dir / "missing.ts").string() + "' does not exist"), std::string::npos) << m;
  std::ofstream(dir / "garbage.ts") << "not a TorchScript file";
  m = e([&](auto& c) { c.file = dir / "garbage.ts"; });
  EXPECT_NE(m.find("'" + (dir / "garbage.ts").string() + "' cannot be read as a TorchScript file"),
            std::string::npos)
      << m;
  m = e([&](auto& c) { c.file = dir.path(); });
  EXPECT_NE(m.find("is a folder, not a file"), std::string::npos) << m;

  torch::jit::Module encoder_only("EncoderOnly");
  encoder_only.define("def encode(self, x):\n  return x\n");
  encoder_only.save((dir / "encoder_only.ts").string());
  m = e([&](auto& c) { c.file = dir / "encoder_only.ts"; });
  EXPECT_NE(m.find("'" + (dir / "encoder_only.ts").string() + "' has no forward method"), std::string::npos)
      << m;
  EXPECT_NE(m.find("forward(x) takes audio blocks"), std::string::npos) << m;
}

// The real `export` binary: the table, and the refusals with exit code 1.
TEST(RealtimeCheckCli, PrintsTheTableOrRefusesNamingTheFlag) {
  ScratchDir dir("realtime_check_cli");
  const fs::path file = export_tiny(dir / "tiny_streaming.ts", true);
  const std::string bench = bin_path("export") + " --benchmark '" + file.string() + "'";
  auto tiny = tiny_model(tiny_options({"v2", rave::RaveVersion::kV2, 1, 0, false}));
  const fs::path onnx_file = write_onnx(*tiny, true, dir.path()).forward;
  auto r = run_command(bench + " --block 128,256 --seconds 0.2 2>&1");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  for (const char* part : {"realtime check of ", "LibTorch " TORCH_VERSION, "1 thread", "median ms",
                           "slowest ms", "RTF total", "voices", "\n    128 ", "\n    256 "}) {
    EXPECT_NE(r.output.find(part), std::string::npos) << part << "\n" << r.output;
  }

  const std::vector<std::pair<std::string, std::string>> refusals{
      {bench + " --block 2k", "--block '2k': '2k' is not a block size"},
      {bench + " --block 0", "--block '0': 0 is out of range"},
      {bench + " --block 100", "--block 100 is not a whole number of latent frames"},
      {bench + " --threads 0", "--threads 0 is outside 1"},
      {bench + " --run " + dir.path().string(), "--benchmark and --run cannot be combined"},
      {bench + " --ckpt x.ckpt", "--benchmark and --ckpt cannot be combined"},
      {bench + " --streaming", "--benchmark and --streaming cannot be combined"},
      {bin_path("export") + " --run " + dir.path().string() + " --block 2048",
       "--block goes with --benchmark"},
      {bin_path("export") + " --benchmark '" + (dir / "none.ts").string() + "'",
       "--benchmark '" + (dir / "none.ts").string() + "' does not exist"},
      {bin_path("export") + " --benchmark '" + onnx_file.string() + "'",
       "--benchmark '" + onnx_file.string() + "' is an ONNX file: its speed is ONNX Runtime's"}};
  for (const auto& [command, message] : refusals) {
    auto bad = run_command(command + " 2>&1");
    EXPECT_EQ(bad.exit_code, 1) << command << "\n" << bad.output;
    EXPECT_NE(bad.output.find("export: error: " + message), std::string::npos) << command << "\n"
                                                                               << bad.output;
  }
}

}  // namespace
}  // namespace rt::exporting::testing
