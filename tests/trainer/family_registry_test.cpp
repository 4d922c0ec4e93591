// The model-family registry: a family registered from a test translation unit
// (tests/support/fake_family.cpp) adds its keys to the schema, --help and --print_config, is
// chosen by model.family and trains through the real loop.
#include "config/family_registry.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <string>

#include "config/cli.h"
#include "config/config.h"
#include "config/config_reference.h"
#include "support/expect.h"
#include "support/fake_family.h"
#include "support/test_support.h"
#include "trainer/trainer.h"
#include "util/json.h"
#include "util/run_pointer.h"

namespace rt {
namespace {

using testing::error_of;
using testing::kFakeFamily;

Config fake_config(const std::string& extra = "") {
  Config c;
  c.merge_toml_string("[model]\nfamily = \"fake\"\n" + extra, "fake.toml");
  c.finalize();
  return c;
}

TEST(FamilyRegistry, ATestFamilyAddsItsNameAndKeysToTheSchema) {
  const auto names = model_family_names();
  ASSERT_GE(names.size(), 3u);
  EXPECT_EQ(names[0], "rave");  // the built-ins come first
  EXPECT_EQ(names[1], "ssm");
  EXPECT_NE(std::find(names.begin(), names.end(), kFakeFamily), names.end());
  const KeySpec* width = find_key_spec("model.fake_width");
  ASSERT_NE(width, nullptr);
  EXPECT_EQ(width->owner, kFakeFamily);
  EXPECT_EQ(width->type, KeyType::Int);
  EXPECT_EQ(std::get<int64_t>(width->default_value), 4);  // FakeOptions' initialiser
  // model.family's choices are the registered names.
  const std::string msg = error_of([] { fake_config().set("model.family", "fak", "--model.family"); });
  EXPECT_HAS(msg, "one of rave, ssm");
  EXPECT_HAS(msg, "fake");
  EXPECT_HAS(msg, "did you mean 'fake'?");
}

TEST(FamilyRegistry, FamilyKeysAppearOnlyUnderTheirFamily) {
  // --print_config: the chosen family's keys only.
  const std::string fake = fake_config("fake_width = 7\n").to_toml(true);
  EXPECT_HAS(fake, "fake_width = 7");
  EXPECT_EQ(fake.find("capacity ="), std::string::npos) << fake;
  EXPECT_EQ(fake.find("state_dim ="), std::string::npos) << fake;
  EXPECT_HAS(fake, "max_steps = ");  // common keys stay
  const std::string rave = Config().to_toml(true);
  EXPECT_EQ(rave.find("fake_width"), std::string::npos) << rave;
  EXPECT_HAS(rave, "capacity = 96");
  // --help: the key is listed under its family's name.
  const std::string help = train_help_text();
  const auto fake_at = help.find("  fake: ");
  ASSERT_NE(fake_at, std::string::npos) << help;
  EXPECT_GT(help.find("model.fake_width"), fake_at);
  EXPECT_LT(help.find("model.capacity"), fake_at);
  // The reference: the key in the fake family's section, not in the common one.
  const std::string doc = config_reference_markdown();
  const auto section = doc.find("## model.family = \"fake\"");
  ASSERT_NE(section, std::string::npos);
  EXPECT_GT(doc.find("`model.fake_width`"), section);
}

TEST(FamilyRegistry, BadValuesAndKeysOfAnotherFamilyNameTheKey) {
  std::string msg = error_of([] { fake_config("fake_width = 65\n"); });
  EXPECT_HAS(msg, "fake.toml:3: model.fake_width = 65 is not allowed");
  EXPECT_HAS(msg, "an integer in [1, 64]");
  msg = error_of([] { fake_config("capacity = 8\n"); });
  EXPECT_HAS(msg, "model.capacity belongs to model.family = rave, but this config trains fake");
  msg = error_of([] {
    Config c;
    c.set("model.fake_width", "8", "--model.fake_width");
    c.finalize();
  });
  EXPECT_HAS(
      msg,
      "--model.fake_width: model.fake_width belongs to model.family = fake, but this config trains rave");
  // The family may be chosen after its keys, in the same file.
  Config c;
  c.merge_toml_string("[model]\nfake_width = 8\nfamily = \"fake\"\n", "late.toml");
  c.finalize();
  EXPECT_EQ(testing::fake_model_keys().from(c).width, 8);
}

TEST(FamilyRegistry, RegisteringANameOrAKeyTwiceThrows) {
  EXPECT_HAS(error_of([] { register_model_family(testing::fake_family_registration()); }),
             "model family 'fake' is registered twice");
  FamilyRegistration copy = testing::fake_family_registration();
  copy.name = "fake2";
  EXPECT_HAS(error_of([&] { register_model_family(copy); }),
             "model family 'fake2': key 'model.fake_width' is declared already");
  copy.keys = {keys::I("train.batch", 2, "clash with a common key")};
  EXPECT_HAS(error_of([&] { register_model_family(copy); }), "key 'train.batch' is declared already");
  copy.keys = {keys::I("model.fake2_width", 0, "a default outside its range").ge(1)};
  EXPECT_HAS(error_of([&] { register_model_family(copy); }), "has the default 0; expected an integer >= 1");
  EXPECT_EQ(find_model_family("fake2"), nullptr);
  EXPECT_EQ(find_key_spec("model.fake2_width"), nullptr);
}

TEST(FamilyRegistry, TheTestFamilyTrainsThroughTheRealLoop) {
  testing::ScratchDir dir;
  const Config c = testing::fake_run_config(dir.path(), "fake", {{"model.fake_width", "3"}});
  ASSERT_EQ(run_training(c), 0);
  const std::filesystem::path run = resolve_run_pointer(dir / "latest");
  const Json summary = read_json(run / "training_summary.json");
  EXPECT_EQ(summary.at("status"), "completed");
  EXPECT_EQ(summary.at("total_steps"), 6);
  EXPECT_EQ(summary.at("model_family"), kFakeFamily);
  EXPECT_TRUE(summary.at("metrics").contains("val/loss")) << summary.dump();
  EXPECT_TRUE(std::filesystem::exists(run / "checkpoints" / "best.ckpt"));
  const Config back = load_config_file(run / "config.toml");
  EXPECT_EQ(back.get_string("model.family"), kFakeFamily);
  EXPECT_EQ(back.get_int("model.fake_width"), 3);
}

}  // namespace
}  // namespace rt
