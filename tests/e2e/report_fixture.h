// Shared by the report_* end-to-end tests: a tiny demo audio database and short training runs
// made with the real preprocess and train executables.
#pragma once

#include <gtest/gtest.h>

#include <filesystem>
#include <string>

#include "support/test_support.h"
#include "util/run_pointer.h"

namespace rt::report_e2e {

namespace fs = std::filesystem;

inline std::string q(const fs::path& p) { return "'" + p.string() + "'"; }

// Builds <dir>/db from a few seconds of the built-in demo audio (deterministic seed).
inline fs::path make_demo_db(const fs::path& dir) {
  const auto gen = testing::run_command(testing::bin_path("preprocess") + " --generate_demo " +
                                        q(dir / "audio") + " --demo_seconds 4 --seed 1");
  EXPECT_EQ(gen.exit_code, 0) << gen.output;
  const auto pre =
      testing::run_command(testing::bin_path("preprocess") + " --input_path " + q(dir / "audio") +
                           " --output_path " + q(dir / "db") + " --num_signal 8192 --max_db_size 1");
  EXPECT_EQ(pre.exit_code, 0) << pre.output;
  return dir / "db";
}

// Runs tiny_rave for `steps` steps with `extra` arguments; returns the run directory.
inline fs::path train_run(const fs::path& db, const fs::path& out, const std::string& name, int steps,
                          const std::string& extra) {
  const auto r = testing::run_command(testing::bin_path("train") + " --config tiny_rave --db_path " + q(db) +
                                      " --out_path " + q(out) + " --name " + name + " --max_steps " +
                                      std::to_string(steps) + " --threads 1 --seed 1 " + extra);
  EXPECT_EQ(r.exit_code, 0) << r.output;
  std::error_code ec;
  return fs::canonical(resolve_run_pointer(out / "latest"), ec);
}

inline testing::CommandResult profile_report(const std::string& args) {
  return testing::run_command(testing::bin_path("profile-report") + " " + args);
}

}  // namespace rt::report_e2e
