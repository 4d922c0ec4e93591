// --config stacks (config/config_stack.h): order, includes, provenance and the refusals, on
// config files written here and on the shipped RAVE files (configs/).
#include "config/config_stack.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "config/cli.h"
#include "support/expect.h"
#include "support/test_support.h"
#include "util/atomic_file.h"
#include "util/error.h"

namespace rt {
namespace {

using testing::error_of;

struct StackFixture : ::testing::Test {
  testing::ScratchDir dir;
  std::vector<std::filesystem::path> dirs{dir.path(), testing::source_path("configs")};
  void write(const std::string& name, const std::string& text) {
    write_file_atomic(dir / (name + ".toml"), text);
  }
  TrainArgs parse(std::vector<std::string> args) { return parse_train_args(args, dirs); }
};

TEST_F(StackFixture, LaterFilesOverlayEarlierOnesKeyByKey) {
  write("a", "[model]\nfamily = \"rave\"\ncapacity = 8\nlatent_size = 4\n[train]\nmax_steps = 10\n");
  write("b", "[stack]\nsummary = \"b\"\n[model]\ncapacity = 16\n");
  write("c", "[stack]\nsummary = \"c\"\n[train]\nmax_steps = 30\n");
  TrainArgs t = parse({"--config", "a", "--config", "b", "--config", "c"});
  EXPECT_EQ(t.config.get_int("model.capacity"), 16);
  EXPECT_EQ(t.config.get_int("model.latent_size"), 4);
  EXPECT_EQ(t.config.get_int("train.max_steps"), 30);
  EXPECT_EQ(t.config_name, "a+b+c");
  EXPECT_EQ(t.config.get_string("train.name"), "a+b+c");
  ASSERT_EQ(t.config_files.size(), 3u);
  EXPECT_EQ(t.config_files[1], dir / "b.toml");
  EXPECT_EQ(t.config.origin("model.capacity"), (dir / "b.toml").string() + ":4");
  // The command line still wins over every file.
  t = parse({"--config", "a", "--config", "b", "model.capacity=4"});
  EXPECT_EQ(t.config.get_int("model.capacity"), 4);
  // A file named again cannot overlay what came between (it merged once, at its first place):
  // refused, not silently dropped.
  EXPECT_HAS(error_of([&] {
               parse({"--config", "a", "--config", "b", "--config", "a"});
             }),
             "--config a: a.toml is already in the stack (named earlier)");
}

// `--config v3 --config v2` trained v3 (snake, the Descript discriminator): v3 includes v2, and a
// file merges once, so the later v2 did nothing, silently. Refused, naming the include.
TEST_F(StackFixture, AFileAlreadyInTheStackIsRefusedNotDropped) {
  const std::string msg = error_of([&] { parse({"--config", "v3", "--config", "v2"}); });
  EXPECT_HAS(msg, "--config v2: v2.toml is already in the stack (included by v3.toml)");
  EXPECT_HAS(msg, "would not undo what the files after it changed");
  // The other order is v3 itself: v2 first, then v3's other includes over it.
  const Config a = parse({"--config", "v2", "--config", "v3"}).config;
  EXPECT_EQ(a.get_string("model.activation"), "snake");
  // An overlay after v3 overlays it as before.
  EXPECT_NO_THROW(parse({"--config", "v3", "--config", "causal"}));
}

TEST_F(StackFixture, IncludesMergeFirstAndOnce) {
  write("base", "[model]\nfamily = \"rave\"\ncapacity = 8\nlatent_size = 4\n");
  write("mid", "[stack]\ninclude = [\"base\"]\n[model]\ncapacity = 12\n");
  write("top", "[stack]\ninclude = [\"mid\", \"base\"]\n[model]\nlatent_size = 6\n");
  const TrainArgs t = parse({"--config", "top"});
  EXPECT_EQ(t.config.get_int("model.capacity"), 12);
  EXPECT_EQ(t.config.get_int("model.latent_size"), 6);
  ASSERT_EQ(t.config.files().size(), 3u);
  EXPECT_EQ(t.config.files()[0], dir / "base.toml");
  EXPECT_EQ(t.config.files()[2], dir / "top.toml");
}

TEST_F(StackFixture, RefusesCyclesOverlaysWithoutBaseAndBadTables) {
  write("x", "[stack]\ninclude = [\"y\"]\n");
  write("y", "[stack]\ninclude = [\"x\"]\n");
  EXPECT_HAS(error_of([&] {
               parse({"--config", "x"});
             }),
             "include cycle: x.toml includes y.toml includes x.toml");
  write("over", "[stack]\nsummary = \"o\"\n[model]\ncapacity = 4\n");
  EXPECT_HAS(error_of([&] { parse({"--config", "over"}); }), "over.toml is an overlay");
  EXPECT_HAS(error_of([&] { parse({"--config", "over"}); }), "--config v2 --config over");
  write("bad", "[stack]\nincluded = [\"v2\"]\n");
  EXPECT_HAS(error_of([&] { parse({"--config", "bad"}); }), "[stack].included: unknown [stack] key");
  write("badreq", "[stack]\nrequires = { \"model.verson\" = [\"v2\"] }\n[model]\nfamily = \"rave\"\n");
  EXPECT_HAS(error_of([&] { parse({"--config", "badreq"}); }), "unknown config key 'model.verson'");
  write("missing", "[stack]\ninclude = [\"nope\"]\n");
  EXPECT_HAS(error_of([&] {
               parse({"--config", "missing"});
             }),
             "missing.toml: [stack].include: --config: no config named 'nope'");
  write("excl", "[stack]\nexclusive = [\"model.capacity\"]\n[model]\nfamily = \"rave\"\n");
  EXPECT_HAS(error_of([&] {
               parse({"--config", "excl"});
             }),
             "exclusive names model.capacity, which this file does not set");
}

// RAVE's own rule, stated in its README: the noise branch, Snake and AdaIN configure v2 blocks.
TEST_F(StackFixture, RequirementRefusalNamesBothFiles) {
  const std::string e = error_of([&] { parse({"--config", "v1", "--config", "noise"}); });
  EXPECT_NE(e.find("noise.toml needs model.version in {v2, v3}"), std::string::npos) << e;
  EXPECT_NE(e.find("rave/configs/noise.gin"), std::string::npos) << e;
  EXPECT_NE(e.find("v1.toml sets model.version = v1"), std::string::npos) << e;
  // The same stack on v2 is fine, and so is causal on v1.
  EXPECT_EQ(parse({"--config", "v2", "--config", "noise"}).config.get_int("model.noise_bands"), 5);
  EXPECT_EQ(parse({"--config", "v1", "--config", "causal"}).config.get_string("model.padding"), "causal");
  // A requirement counts the command line's value too.
  EXPECT_HAS(error_of([&] {
               parse({"--config", "v2", "--config", "snake", "model.version=v1"});
             }),
             "snake.toml needs model.version in {v2, v3}");
}

TEST_F(StackFixture, ExclusiveChoiceRefusedWhenALaterFileChangesIt) {
  write("other_disc", "[stack]\nsummary = \"d\"\n[model]\ndiscriminator = \"period_scale\"\n");
  const std::string e = error_of([&] { parse({"--config", "v3", "--config", "other_disc"}); });
  EXPECT_NE(e.find("other_disc.toml sets model.discriminator = \"period_scale\""), std::string::npos) << e;
  EXPECT_NE(e.find("descript_discriminator.toml (included by v3.toml) chose model.discriminator"),
            std::string::npos)
      << e;
  // Earlier files may set it: v3 includes v2 (period_scale) before the descript discriminator.
  EXPECT_EQ(parse({"--config", "v3"}).config.get_string("model.discriminator"), "descript");
  // The command line may change it.
  EXPECT_EQ(
      parse({"--config", "v3", "model.discriminator=period_scale"}).config.get_string("model.discriminator"),
      "period_scale");
}

TEST_F(StackFixture, PrintConfigSaysWhichFileSetEachKey) {
  const TrainArgs t = parse({"--config", "v2", "--config", "causal", "--batch", "2"});
  const std::string toml = t.config.to_toml(/*with_help=*/true);
  const auto line_of = [&](const std::string& start) {
    const size_t at = toml.find("\n" + start);
    return at == std::string::npos ? std::string() : toml.substr(at + 1, toml.find('\n', at + 1) - at - 1);
  };
  EXPECT_NE(
      line_of("padding = ").find("set by " + testing::source_path("configs/causal.toml").string() + ":"),
      std::string::npos)
      << line_of("padding = ");
  EXPECT_NE(line_of("capacity = ").find("configs/v2.toml:"), std::string::npos) << line_of("capacity = ");
  EXPECT_NE(line_of("batch = ").find("set by --batch"), std::string::npos) << line_of("batch = ");
  EXPECT_EQ(line_of("log_every = ").find("set by"), std::string::npos) << "a default names no source";
}

// v3 is stacked from v2, adain, snake and the descript discriminator as v3.gin is, and gives
// the preset the models library builds for v3.
TEST_F(StackFixture, V3IsItsIncludes) {
  const Config a = parse({"--config", "v3"}).config;
  const Config b = parse({"--config", "v2", "--config", "adain", "--config", "snake", "--config",
                          "descript_discriminator", "model.version=v3", "train.name=v3"})
                       .config;
  EXPECT_EQ(a, b);
  EXPECT_EQ(a.get_string("model.activation"), "snake");
  EXPECT_TRUE(a.get_bool("model.adain"));
}

}  // namespace
}  // namespace rt
