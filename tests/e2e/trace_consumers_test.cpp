// Our trace opened with the consumers' own code (scripts/check_trace_consumers.sh): Holistic
// Trace Analysis's call graph with its default settings, and TensorBoard's PyTorch-profiler
// plugin's loader (Overview DataLoader share, Module view). CI has no checkout of either, so
// each test skips unless HTA_DIR / TB_PLUGIN_DIR point at one; the invariants themselves are
// tested without them (tests/profiling/trace_whole_us_test.cpp, trace_tb_plugin_test.cpp).
#include <gtest/gtest.h>

#include <cstdlib>
#include <string>

#include "support/test_support.h"

namespace rt {
namespace {

using rt::testing::run_command;

std::string env(const char* name) {
  const char* v = std::getenv(name);
  return v == nullptr ? std::string() : std::string(v);
}

// Runs the script with only `var` set to its checkout.
rt::testing::CommandResult check_with(const std::string& var, const std::string& dir) {
  rt::testing::ScratchDir out("trace_consumers");
  const std::string build =
      std::filesystem::path(rt::testing::bin_path("train")).parent_path().parent_path().string();
  return run_command("env -u HTA_DIR -u TB_PLUGIN_DIR " + var + "='" + dir + "' OUT_DIR='" +
                     out.path().string() + "' bash " +
                     rt::testing::source_path("scripts/check_trace_consumers.sh").string() + " '" + build +
                     "' 2>&1");
}

TEST(TraceConsumers, HtaBuildsItsCallGraphWithDefaultSettings) {
  const std::string dir = env("HTA_DIR");
  if (dir.empty())
    GTEST_SKIP() << "HTA_DIR not set: point it at a facebookresearch/HolisticTraceAnalysis checkout";
  const auto r = check_with("HTA_DIR", dir);
  EXPECT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("HTA call graph (default settings)"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find(", 0 mismatches"), std::string::npos) << r.output;
}

TEST(TraceConsumers, TensorBoardPluginSeesDataLoaderAndModules) {
  const std::string dir = env("TB_PLUGIN_DIR");
  if (dir.empty())
    GTEST_SKIP() << "TB_PLUGIN_DIR not set: point it at pytorch/kineto's tb_plugin/ (commit 041e7ce9, the "
                    "last with it)";
  const auto r = check_with("TB_PLUGIN_DIR", dir);
  EXPECT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("Module view: "), std::string::npos) << r.output;
  EXPECT_EQ(r.output.find("DataLoader 0.0%"), std::string::npos) << r.output;
}

}  // namespace
}  // namespace rt
