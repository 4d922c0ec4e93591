// The GPU side of a run that every machine can check: the device a train.device value or RAVE's
// --gpu names, the CUDA math settings RAVE's train.py makes, the out-of-memory message, and the
// memory-snapshot keys refused where they cannot work. What needs a GPU skips without one.
#include "trainer/gpu.h"

#include <gtest/gtest.h>
#include <torch/torch.h>

#include <string>
#include <vector>

#include "config/cli.h"
#include "config/config.h"
#include "config/config_reference.h"
#include "support/expect.h"
#include "support/test_support.h"
#include "trainer/run_profilers.h"
#include "util/atomic_file.h"
#include "util/error.h"

namespace rt {
namespace {

using testing::error_of;

TrainArgs parse(std::vector<std::string> args) { return parse_train_args(args, {}); }

TEST(GpuDevice, CudaIndexIsReadFromCudaColonN) {
  EXPECT_EQ(cuda_index_of("cuda:0"), 0);
  EXPECT_EQ(cuda_index_of("cuda:3"), 3);
  EXPECT_EQ(cuda_index_of("cuda"), std::nullopt);
  EXPECT_EQ(cuda_index_of("cuda:"), std::nullopt);
  EXPECT_EQ(cuda_index_of("cuda:x"), std::nullopt);
  EXPECT_EQ(cuda_index_of("cuda:-1"), std::nullopt);
  EXPECT_EQ(cuda_index_of("cpu"), std::nullopt);
}

TEST(GpuDevice, ConfigAcceptsCudaColonNAndNamesItWhenRefusing) {
  Config c;
  c.set("train.device", "cuda:1", "t");
  EXPECT_EQ(c.get_string("train.device"), "cuda:1");
  for (const std::string bad : {"cuda:x", "gpu:1", "cuda:", "cuda:-1"}) {
    const std::string msg = error_of([&] { c.set("train.device", bad, "t"); });
    EXPECT_HAS(msg, "train.device");
    EXPECT_HAS(msg, bad);
    EXPECT_HAS(msg, "one of auto, cpu, cuda, cuda:N");
  }
}

TEST(GpuDevice, GpuFlagIsRavesSpellingOfTheDevice) {
  EXPECT_EQ(parse({"--gpu", "2"}).config.get_string("train.device"), "cuda:2");
  EXPECT_EQ(parse({"--gpu", "0"}).config.get_string("train.device"), "cuda:0");
  EXPECT_EQ(parse({"--gpu", "-1"}).config.get_string("train.device"), "cpu");
  // Command-line order decides, as for every key.
  EXPECT_EQ(parse({"--gpu", "1", "--device", "cpu"}).config.get_string("train.device"), "cpu");
  EXPECT_EQ(parse({"--device", "cpu", "--gpu", "1"}).config.get_string("train.device"), "cuda:1");
  for (const std::string bad : {"x", "-2", "1.5"}) {
    const std::string msg = error_of([&] { parse({"--gpu", bad}); });
    EXPECT_HAS(msg, "--gpu " + bad);
    EXPECT_HAS(msg, "-1 for the CPU");
  }
  const std::string help = parse({"--help"}).help_text;
  EXPECT_HAS(help, "--gpu");
  EXPECT_HAS(help, "cuda:N");
  EXPECT_HAS(help, "--precision");
  EXPECT_HAS(parse({"--precision", "bf16"}).config.get_string("train.precision"), "bf16");
  // docs/config.md (generated from the schema) names the flag and every new key.
  const std::string reference = config_reference_markdown();
  for (const std::string part : {"--gpu N", "`train.tf32`", "`train.cudnn_benchmark`", "`train.precision`",
                                 "`profiling.memory_snapshot_step`", "`profiling.memory_snapshot_on_oom`",
                                 "`profiling.memory_snapshot_entries`", "cuda:N"})
    EXPECT_HAS(reference, part);
}

TEST(GpuDevice, ResolvesCpuAndRefusesWhatIsNotThere) {
  EXPECT_EQ(resolve_device("cpu", 0, false), torch::Device(torch::kCPU));
  // A named GPU in a data-parallel job is refused before anything looks for GPUs.
  std::string msg = error_of([] { resolve_device("cuda:1", 0, true); });
  EXPECT_HAS(msg, "train.device = 'cuda:1'");
  EXPECT_HAS(msg, "data-parallel");
  if (!torch::cuda::is_available()) {
    EXPECT_EQ(resolve_device("auto", 0, false), torch::Device(torch::kCPU));
    for (const std::string dev : {"cuda", "cuda:0"}) {
      msg = error_of([&] { resolve_device(dev, 0, false); });
      EXPECT_HAS(msg, "train.device = '" + dev + "'");
      EXPECT_HAS(msg, "no CUDA device is available");
    }
    return;
  }
  const int count = static_cast<int>(torch::cuda::device_count());
  EXPECT_EQ(resolve_device("cuda:0", 0, false), torch::Device(torch::kCUDA, 0));
  EXPECT_EQ(resolve_device("cuda", 1, true),
            torch::Device(torch::kCUDA, static_cast<c10::DeviceIndex>(1 % count)));
  msg = error_of([&] { resolve_device("cuda:" + std::to_string(count), 0, false); });
  EXPECT_HAS(msg, "sees " + std::to_string(count) + " GPU(s)");
}

// torch.set_float32_matmul_precision('high') and torch.backends.cudnn.benchmark = True set
// these flags of ATen's global context (they live on the host, GPU or not).
TEST(GpuMath, SettingsReachAtenAsRavesTrainPySetsThem) {
  auto& ctx = at::globalContext();
  const auto precision = ctx.float32MatmulPrecision();
  const bool benchmark = ctx.benchmarkCuDNN();
  Config c;
  const auto defaults = cuda_math_settings(run_keys(c));
  EXPECT_TRUE(defaults.tf32);
  EXPECT_TRUE(defaults.cudnn_benchmark);
  apply_cuda_math_settings(defaults);
  EXPECT_EQ(ctx.float32MatmulPrecision(), at::Float32MatmulPrecision::HIGH);
  EXPECT_TRUE(ctx.allowTF32CuBLAS());
  EXPECT_TRUE(ctx.benchmarkCuDNN());
  c.set("train.tf32", "false", "t");
  c.set("train.cudnn_benchmark", "false", "t");
  apply_cuda_math_settings(cuda_math_settings(run_keys(c)));
  EXPECT_EQ(ctx.float32MatmulPrecision(), at::Float32MatmulPrecision::HIGHEST);
  EXPECT_FALSE(ctx.allowTF32CuBLAS());
  EXPECT_FALSE(ctx.benchmarkCuDNN());
  // The setter takes the Python spelling in every LibTorch (1.13 to 2.11).
  ctx.setFloat32MatmulPrecision(precision == at::Float32MatmulPrecision::HIGHEST ? "highest"
                                : precision == at::Float32MatmulPrecision::HIGH  ? "high"
                                                                                 : "medium");
  ctx.setBenchmarkCuDNN(benchmark);
}

TEST(OutOfMemory, MessageSaysWhereAndWhatToTry) {
  OutOfMemoryContext c;
  c.step = 1000012;
  c.step_phase = "backward";
  c.phase_1_duration = 1000000;
  c.batch = 8;
  c.device = "cuda:0";
  const std::string msg =
      out_of_memory_message("CUDA out of memory. Tried to allocate 2.00 GiB\nbacktrace line", c);
  EXPECT_HAS(msg, "out of memory on cuda:0 at step 1000012, in the backward phase");
  EXPECT_HAS(msg, "RAVE phase 2 (adversarial: since step 1000000)");
  EXPECT_HAS(msg, "Tried to allocate 2.00 GiB");
  EXPECT_EQ(msg.find("backtrace line"), std::string::npos);
  EXPECT_HAS(msg, "RAVE issue #59");
  EXPECT_HAS(msg, "--batch 4");
  EXPECT_HAS(msg, "expandable_segments:True");
  EXPECT_HAS(msg, "--profiling.memory_snapshot_on_oom true");

  c.step = 10;
  c.phase_1_duration = 1000000;
  c.snapshot = "/runs/x/memory_snapshot_oom.pickle";
  const std::string early = out_of_memory_message("CUDA out of memory.", c);
  EXPECT_HAS(early, "RAVE phase 1 (phase 2 starts at step 1000000)");
  EXPECT_EQ(early.find("RAVE issue #59"), std::string::npos);
  EXPECT_HAS(
      early,
      "Memory snapshot: /runs/x/memory_snapshot_oom.pickle (open it at https://pytorch.org/memory_viz)");

  c.phase_1_duration = -1;  // an SSM run
  c.step_phase = "";
  c.batch = 1;
  const std::string ssm = out_of_memory_message("CUDA out of memory.", c);
  EXPECT_EQ(ssm.find("RAVE"), std::string::npos);
  EXPECT_EQ(ssm.find("phase,"), std::string::npos);
  EXPECT_HAS(ssm, "--batch 1");
}

TEST(MemorySnapshot, KeysAreRefusedOnTheCpuNamingTheKey) {
  testing::ScratchDir dir("gpu_snapshot");
  Config c;
  c.set("profiling.memory_snapshot_step", "5", "t");
  std::string msg = error_of(
      [&] { RunProfilers p(profiling_keys(c), 100, torch::Device(torch::kCPU), dir.path(), nullptr); });
  EXPECT_HAS(msg, "profiling.memory_snapshot_step = 5");
  EXPECT_HAS(msg, "needs a CUDA device");
  Config oom;
  oom.set("profiling.memory_snapshot_on_oom", "true", "t");
  msg = error_of(
      [&] { RunProfilers p(profiling_keys(oom), 100, torch::Device(torch::kCPU), dir.path(), nullptr); });
  EXPECT_HAS(msg, "profiling.memory_snapshot_on_oom = true");
  EXPECT_HAS(msg, "needs a CUDA device");
  // Off (the default), a CPU run makes no recorder and writes no snapshot.
  RunProfilers off(profiling_keys(Config{}), 100, torch::Device(torch::kCPU), dir.path(), nullptr);
  EXPECT_EQ(off.write_oom_snapshot(), "");
}

TEST(MemorySnapshot, StepAndOutOfMemorySnapshotsOnCuda) {
  if (!torch::cuda::is_available()) GTEST_SKIP() << "needs a CUDA device (none is usable here)";
  testing::ScratchDir dir("gpu_snapshot_cuda");
  Config c;
  c.set("profiling.memory_snapshot_step", "1", "t");
  c.set("profiling.memory_snapshot_on_oom", "true", "t");
  const torch::Device cuda(torch::kCUDA, 0);
  RunProfilers p(profiling_keys(c), 100, cuda, dir.path(), nullptr);
  auto x = torch::ones({1024, 1024}, torch::TensorOptions().device(cuda));
  p.after_step(0, 0, 1, 1, 0.01);
  EXPECT_FALSE(std::filesystem::exists(dir.path() / "memory_snapshot_step0.pickle"));
  p.after_step(1, 1, 1, 1, 0.01);
  const auto step_file = dir.path() / "memory_snapshot_step1.pickle";
  ASSERT_TRUE(std::filesystem::exists(step_file));
  const std::string oom = p.write_oom_snapshot();
  EXPECT_EQ(oom, (dir.path() / "memory_snapshot_oom.pickle").string());
  for (const auto& f : {step_file, std::filesystem::path(oom)}) {
    const std::string bytes = read_file(f);
    ASSERT_GT(bytes.size(), 2u);
    EXPECT_EQ(static_cast<unsigned char>(bytes[0]), 0x80) << "not a pickle: " << f;  // PROTO opcode
    EXPECT_HAS(bytes, "segments");
    EXPECT_HAS(bytes, "device_traces");
  }
  p.finish();
}

TEST(OutOfMemory, AllocatorThrowsTheErrorTheLoopCatches) {
  if (!torch::cuda::is_available()) GTEST_SKIP() << "needs a CUDA device (none is usable here)";
  try {
    auto huge =
        torch::empty({int64_t{1} << 48}, torch::TensorOptions().device(torch::kCUDA).dtype(torch::kByte));
    FAIL() << "a 256 TiB allocation succeeded";
  } catch (const c10::OutOfMemoryError& e) {
    EXPECT_HAS(std::string(e.what_without_backtrace()), "out of memory");
  }
}

}  // namespace
}  // namespace rt
