#include "config/cli.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <string>
#include <vector>

#include "config/config_lookup.h"
#include "profiling/trace/schedule.h"
#include "support/expect.h"
#include "support/test_support.h"
#include "trainer/trainer.h"
#include "util/atomic_file.h"
#include "util/error.h"

namespace rt {
namespace {

using testing::error_of;

// A config folder with one config file, passed to the parser as its only search folder.
struct CliFixture : ::testing::Test {
  testing::ScratchDir dir;
  std::vector<std::filesystem::path> dirs{dir.path()};
  void SetUp() override {
    write_file_atomic(dir / "base.toml",
                      "[train]\nmax_steps = 100\nbatch = 4\n[profiling]\nenabled = true\nwait = 5\n");
  }
  TrainArgs parse(std::vector<std::string> args) { return parse_train_args(args, dirs); }
};

TEST_F(CliFixture, PrecedenceIsDefaultsThenFileThenCommandLineInOrder) {
  TrainArgs a = parse({"--config", "base"});
  EXPECT_EQ(a.config.get_int("train.max_steps"), 100);    // file over default
  EXPECT_EQ(a.config.get_int("train.val_every"), 10000);  // default
  EXPECT_EQ(a.config_path, dir / "base.toml");
  EXPECT_EQ(a.config_name, "base");
  a = parse({"--max_steps", "5", "--config", "base", "train.max_steps=7"});
  EXPECT_EQ(a.config.get_int("train.max_steps"), 7);
  a = parse({"train.max_steps=7", "--config", "base", "--max_steps", "5"});
  EXPECT_EQ(a.config.get_int("train.max_steps"), 5);
  a = parse({"--config=base", "--override", "train.max_steps=9", "--train.max_steps", "11"});
  EXPECT_EQ(a.config.get_int("train.max_steps"), 11);
  EXPECT_EQ(a.config.origin("train.max_steps"), "--train.max_steps");
}

TEST_F(CliFixture, AllOverrideStylesSetTheSameKeys) {
  const TrainArgs a = parse({"--config", "base.toml", "--override", "train.lr=1e-4", "--profiling.wait", "2",
                             "--profiling.warmup=3", "profiling.active=4", "--model.ratios", "[2,2]",
                             "model.dilations=[[1,3]]", "--data.n_signal=4096", "--seed", "-3"});
  const Config& c = a.config;
  EXPECT_DOUBLE_EQ(c.get_float("train.lr"), 1e-4);
  EXPECT_EQ(c.get_int("profiling.wait"), 2);
  EXPECT_EQ(c.get_int("profiling.warmup"), 3);
  EXPECT_EQ(c.get_int("profiling.active"), 4);
  EXPECT_EQ(c.get_int_list("model.ratios"), (std::vector<int64_t>{2, 2}));
  EXPECT_EQ(c.get_int_list_list("model.dilations"), (std::vector<std::vector<int64_t>>{{1, 3}}));
  EXPECT_EQ(c.get_int("data.n_signal"), 4096);
  EXPECT_EQ(c.get_int("train.seed"), -3);
}

TEST_F(CliFixture, DedicatedFlagsMapOntoTheirKeys) {
  const TrainArgs a =
      parse({"--db_path",       "data/db", "--name",      "exp", "--out_path",   "out", "--batch",     "2",
             "--n_signal",      "2048",    "--val_every", "3",   "--save_every", "4",   "--ckpt",      "last",
             "--device",        "cpu",     "--workers",   "0",   "--threads",    "1",   "--log_every", "5",
             "--profile_steps", "7"});
  const Config& c = a.config;
  EXPECT_EQ(c.get_string("data.db_path"), "data/db");
  EXPECT_EQ(c.get_string("train.name"), "exp");
  EXPECT_EQ(c.get_string("train.out_path"), "out");
  EXPECT_EQ(c.get_int("train.batch"), 2);
  EXPECT_EQ(c.get_int("data.n_signal"), 2048);
  EXPECT_EQ(c.get_int("train.val_every"), 3);
  EXPECT_EQ(c.get_int("train.save_every"), 4);
  EXPECT_EQ(c.get_string("train.ckpt"), "last");
  EXPECT_EQ(c.get_string("train.device"), "cpu");
  EXPECT_EQ(c.get_int("data.workers"), 0);
  EXPECT_EQ(c.get_int("train.threads"), 1);
  EXPECT_EQ(c.get_int("train.log_every"), 5);
  EXPECT_EQ(c.get_int("profiling.active"), 7);  // --profile_steps is written into the schedule
  EXPECT_TRUE(a.config_path.empty());
}

TEST_F(CliFixture, ProfileStepsBecomesTheScheduleThatConfigTomlRecords) {
  // base.toml sets wait = 5: the command line's --profile_steps wins over the file, and the
  // written config says so (it once recorded the ignored wait = 5 and active = 3).
  TrainArgs a = parse({"--config", "base", "--profile_steps", "4", "--profiling.repeat_cycles", "1"});
  EXPECT_EQ(a.config.get_int("profiling.active"), 4);
  EXPECT_EQ(a.config.get_int("profiling.wait"), 0);
  EXPECT_EQ(a.config.get_int("profiling.repeat"), 1);
  EXPECT_HAS(a.config.origin("profiling.wait"), "profiling.profile_steps (--profile_steps)");
  const std::string toml = a.config.to_toml();
  EXPECT_HAS(toml, "\nactive = 4\n");
  EXPECT_HAS(toml, "\nwait = 0\n");
  EXPECT_HAS(toml, "\nprofile_steps = 0\n");
  // A run's config.toml reads back to the same config (its keys come in no usable order).
  Config back;
  back.merge_toml_string(toml, "config.toml");
  back.finalize();
  EXPECT_EQ(back, a.config);
  // A schedule key later on the command line than the file's --profile_steps wins over it.
  write_file_atomic(dir / "steps.toml", "[profiling]\nprofile_steps = 4\n");
  a = parse({"--config", "steps", "--profiling.active", "6"});
  EXPECT_EQ(a.config.get_int("profiling.active"), 6);
  EXPECT_EQ(a.config.get_int("profiling.wait"), 0);
  // Within one source, another value is a conflict naming both.
  EXPECT_HAS(
      error_of([&] {
        parse({"--profile_steps", "4", "--profiling.wait", "2"});
      }),
      "--profiling.wait: profiling.wait = 2 conflicts with profiling.profile_steps = 4 (--profile_steps)");
  write_file_atomic(dir / "both.toml", "[profiling]\nprofile_steps = 4\nactive = 6\n");
  EXPECT_HAS(error_of([&] {
               parse({"--config", "both"});
             }),
             "both.toml:3: profiling.active = 6 conflicts with profiling.profile_steps = 4");
  // profile_steps is the schedule's own arithmetic (ProfilerSchedule::for_profile_steps): the
  // file's profile_steps = 100 beside another active is a conflict like any other.
  write_file_atomic(dir / "old_run.toml", "[profiling]\nactive = 3\nprofile_steps = 100\nwait = 2\n");
  EXPECT_HAS(error_of([&] {
               parse({"--config", "old_run"});
             }),
             "old_run.toml:2: profiling.active = 3 conflicts with profiling.profile_steps = 100");
  // The same value twice is no conflict.
  EXPECT_EQ(parse({"--profile_steps", "4", "--profiling.active", "4"}).config.get_int("profiling.active"), 4);
}

TEST_F(CliFixture, ProfileStepsWritesTheScheduleThatProfilingBuildsForIt) {
  for (const int64_t n : {1, 5}) {
    const Config c = parse({"--profile_steps", std::to_string(n), "--profiling.skip_first", "3"}).config;
    const prof::ProfilerSchedule want =
        prof::ProfilerSchedule::for_profile_steps(n, 3, c.get_int("profiling.warmup"));
    EXPECT_EQ(c.get_int("profiling.active"), want.active);
    EXPECT_EQ(c.get_int("profiling.wait"), want.wait);
    EXPECT_EQ(c.get_int("profiling.repeat"), want.repeat);
    EXPECT_EQ(c.get_int("profiling.skip_first"), want.skip_first);
  }
}

TEST_F(CliFixture, BoolFlagsAcceptBareAndValuedForms) {
  TrainArgs a = parse({"--config", "base", "--enable_timing_profiling", "--enable_memory_profiling", "True",
                       "--enable_profiling=false", "--profiling.record_shapes", "--profiling.with_stack",
                       "off", "profiling.gzip=yes"});
  EXPECT_TRUE(a.config.get_bool("profiling.timing"));
  EXPECT_TRUE(a.config.get_bool("profiling.memory"));
  EXPECT_FALSE(a.config.get_bool("profiling.enabled"));  // file said true; the flag comes later
  EXPECT_TRUE(a.config.get_bool("profiling.record_shapes"));
  EXPECT_FALSE(a.config.get_bool("profiling.with_stack"));
  EXPECT_TRUE(a.config.get_bool("profiling.gzip"));
  // A bare bool flag followed by an override does not swallow it.
  a = parse({"--enable_profiling", "profiling.wait=1", "--enable_timing_profiling", "0"});
  EXPECT_TRUE(a.config.get_bool("profiling.enabled"));
  EXPECT_EQ(a.config.get_int("profiling.wait"), 1);
  EXPECT_FALSE(a.config.get_bool("profiling.timing"));
  // Guide spelling: --profiling.profile_memory True.
  a = parse({"--profiling.profile_memory", "True", "--profiling.trace_memory=false"});
  EXPECT_FALSE(a.config.get_bool("profiling.profile_memory"));
}

TEST_F(CliFixture, AliasesWorkOnTheCommandLine) {
  TrainArgs a =
      parse({"--profiling.start_step", "10", "profiling.end_step=20", "--profiling.wait_steps", "1"});
  EXPECT_EQ(a.config.get_int("profiling.skip_first"), 10);
  EXPECT_EQ(a.config.get_int("profiling.active"), 10);
  EXPECT_EQ(a.config.get_int("profiling.wait"), 1);
  a = parse({"profiling.enabled=true", "profiling.schedule_every_n_steps=25"});
  EXPECT_EQ(a.config.get_int("profiling.wait"), 21);
}

TEST_F(CliFixture, ThreadCountsAreBoundedByTheMachine) {
  // 4 × the cores: 8 on a 2-core machine; 0 (every core) and the limit itself are accepted.
  check_thread_limits(parse({"--threads", "8", "--workers", "0"}).config, 2);
  check_thread_limits(parse({"--threads", "0", "--workers", "8"}).config, 2);
  std::string msg = error_of([&] { check_thread_limits(parse({"--threads", "100000"}).config, 2); });
  EXPECT_HAS(msg, "train.threads = 100000");
  EXPECT_HAS(msg, "at most 8 (4 × its 2 cores)");
  EXPECT_HAS(msg, "--threads");  // where it was set
  msg = error_of([&] { check_thread_limits(parse({"--workers", "9"}).config, 2); });
  EXPECT_HAS(msg, "data.workers = 9");
}

TEST_F(CliFixture, UnknownFlagsAndKeysSuggestTheClosest) {
  std::string msg = error_of([&] { parse({"--max_step", "5"}); });
  EXPECT_HAS(msg, "'--max_step'");
  EXPECT_HAS(msg, "did you mean '--max_steps'?");
  msg = error_of([&] { parse({"--profiling.wiat", "1"}); });
  EXPECT_HAS(msg, "did you mean '--profiling.wait'?");
  msg = error_of([&] { parse({"profiling.wiat=1"}); });
  EXPECT_HAS(msg, "profiling.wiat");
  EXPECT_HAS(msg, "did you mean 'profiling.wait'?");
  msg = error_of([&] { parse({"--override", "train.lrr=1"}); });
  EXPECT_HAS(msg, "--override train.lrr=1");
  EXPECT_HAS(msg, "did you mean 'train.lr'?");
  // docs/cli.md's example: by edit distance alone train.lr_end_factor is closer.
  msg = error_of([&] { parse({"--override", "train.learning_rate=1e-4"}); });
  EXPECT_HAS(msg, "did you mean 'train.lr'?");
  msg = error_of([&] { parse({"--learning_rate", "1e-4"}); });
  EXPECT_HAS(msg, "did you mean '--train.lr'?");
  msg = error_of([&] { parse({"--override", "train.lr"}); });
  EXPECT_HAS(msg, "section.key=value");
  msg = error_of([&] { parse({"stray"}); });
  EXPECT_HAS(msg, "'stray'");
  msg = error_of([&] { parse({"--batch"}); });
  EXPECT_HAS(msg, "--batch needs a value");
  msg = error_of([&] { parse({"--batch", "zero"}); });
  EXPECT_HAS(msg, "--batch");
  EXPECT_HAS(msg, "train.batch = 'zero'");
  msg = error_of([&] { parse({"--device", "tpu"}); });
  EXPECT_HAS(msg, "one of auto, cpu, cuda");
}

TEST_F(CliFixture, NameDefaultsToTheConfigStem) {
  EXPECT_EQ(parse({"--config", "base"}).config.get_string("train.name"), "base");
  EXPECT_EQ(parse({"--config", "base", "--name", "mine"}).config.get_string("train.name"), "mine");
  EXPECT_EQ(parse({}).config.get_string("train.name"), "run");
}

TEST_F(CliFixture, HelpSummaryAndPrintConfig) {
  TrainArgs a = parse({"--help"});
  EXPECT_TRUE(a.help);
  for (const char* flag : {"--config",
                           "--db_path",
                           "--name",
                           "--out_path",
                           "--max_steps",
                           "--batch",
                           "--n_signal",
                           "--val_every",
                           "--save_every",
                           "--ckpt",
                           "--device",
                           "--workers",
                           "--threads",
                           "--seed",
                           "--log_every",
                           "--enable_timing_profiling",
                           "--enable_memory_profiling",
                           "--enable_profiling",
                           "--profile_steps",
                           "--override",
                           "--summary",
                           "--print_config",
                           "--config_reference",
                           "--section.key",
                           "section.key=VALUE"}) {
    EXPECT_HAS(a.help_text, flag);
  }
  // Dedicated flags name the key they set and what it accepts.
  EXPECT_HAS(a.help_text, "[train.max_steps; an integer >= 1]");
  EXPECT_HAS(a.help_text, "[profiling.timing; true or false]");
  // Each family with the keys it adds, from the registry.
  EXPECT_HAS(a.help_text, "Model families (model.family)");
  EXPECT_HAS(a.help_text, "  rave: RAVE audio autoencoder");
  EXPECT_HAS(a.help_text, "  ssm: S5-style SSM decoders");
  EXPECT_LT(a.help_text.find("model.capacity"), a.help_text.find("  ssm: "));
  EXPECT_GT(a.help_text.find("model.state_dim"), a.help_text.find("  ssm: "));
  EXPECT_GT(a.help_text.find("train.weight_decay"), a.help_text.find("  ssm: "));
  EXPECT_EQ(parse({"-h"}).help, true);
  a = parse({"--config", "base", "--summary"});
  EXPECT_TRUE(a.summary);
  EXPECT_FALSE(a.print_config);
  a = parse({"--print_config", "--batch", "3"});
  EXPECT_TRUE(a.print_config);
  EXPECT_HAS(a.config.to_toml(true), "batch = 3");
  // --config_reference resolves nothing (a broken config does not stop it).
  a = parse({"--config", "nope", "--config_reference"});
  EXPECT_TRUE(a.config_reference);
}

TEST_F(CliFixture, FamilyKeysAreSetLikeAnyKeyAndCheckedAgainstTheFamily) {
  const TrainArgs a = parse({"--model.family", "ssm", "--model.scan", "fused", "train.weight_decay=0"});
  EXPECT_EQ(a.config.get_string("model.scan"), "fused");
  EXPECT_DOUBLE_EQ(a.config.get_float("train.weight_decay"), 0.0);
  const std::string msg = error_of([&] { parse({"--config", "base", "--model.state_dim", "32"}); });
  EXPECT_HAS(msg,
             "--model.state_dim: model.state_dim belongs to model.family = ssm, but this config trains rave");
}

TEST(ConfigLookup, BareNamesAreFoundThroughRtConfigDir) {
  testing::ScratchDir dir;
  write_file_atomic(dir / "tiny.toml", "[train]\nbatch = 3\n");
  write_file_atomic(dir / "other.toml", "[train]\nbatch = 5\n");
  ::setenv("RT_CONFIG_DIR", dir.path().c_str(), 1);
  const auto dirs = config_search_dirs();
  ASSERT_FALSE(dirs.empty());
  EXPECT_EQ(dirs.front(), dir.path());
  EXPECT_EQ(find_config_file("tiny"), dir / "tiny.toml");
  EXPECT_EQ(find_config_file("tiny.toml"), dir / "tiny.toml");
  const char* argv[] = {"train", "--config", "tiny"};
  const TrainArgs a = parse_train_args(3, argv);
  EXPECT_EQ(a.config.get_int("train.batch"), 3);
  const std::string msg = error_of([] { find_config_file("tinny"); });
  EXPECT_HAS(msg, "'tinny'");
  EXPECT_HAS(msg, dir.path().string() + " (available: other, tiny)");
  EXPECT_HAS(msg, "did you mean 'tiny'?");
  ::unsetenv("RT_CONFIG_DIR");
  EXPECT_NE(config_search_dirs().front(), dir.path());
  EXPECT_HAS(error_of([&] { find_config_file((dir / "missing.toml").string()); }), "missing.toml");
}

TEST(ConfigLookup, SearchOrderFollowsTheExecutable) {
  ::unsetenv("RT_CONFIG_DIR");
  const auto dirs = config_search_dirs("/opt/rt/bin");
  ASSERT_GE(dirs.size(), 2u);
  EXPECT_EQ(dirs[0], std::filesystem::path("/opt/rt/share/rave-ssm-trainer/configs"));
  EXPECT_EQ(dirs[1], std::filesystem::path("/opt/configs"));
  EXPECT_EQ(dirs.back(), std::filesystem::path(RT_SOURCE_CONFIG_DIR));
}

}  // namespace
}  // namespace rt
