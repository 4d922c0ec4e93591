// The built-in families' keys, bound to their options structs: the shipped configs describe the
// presets the benchmarks and model tests use, and the defaults are the options' initialisers.
#include <gtest/gtest.h>

#include <string>

#include "config/config.h"
#include "config/config_value.h"
#include "data/augment.h"
#include "families/common/data_keys.h"
#include "families/rave/rave_family.h"
#include "families/ssm/ssm_family.h"
#include "models/rave/rave.h"
#include "support/expect.h"
#include "support/test_support.h"

namespace rt {
namespace {

using rave::RaveOptions;
using rave::RaveVersion;

// Every bound key of `table` holds the same value in `a` and `b`.
template <typename Options>
void expect_same_keys(const OptionsTable<Options>& table, const Options& a, const Options& b,
                      const std::string& what) {
  for (const auto& binding : table.bindings()) {
    const auto va = binding.value(a), vb = binding.value(b);
    ASSERT_EQ(va.has_value(), vb.has_value()) << binding.key();
    if (va) {
      EXPECT_EQ(value_text(*va), value_text(*vb)) << what << ": " << binding.key();
    }
  }
}

// Options{} is what the default config describes: every bound field's initialiser is its key's
// default, for the keys a table declares (by construction) and for those it reads from
// elsewhere (the common schema, another table: written apart, so they could drift).
template <typename Options>
void expect_initialisers_are_the_defaults(const OptionsTable<Options>& table, const std::string& what) {
  const Config defaults;
  expect_same_keys(table, table.from(defaults), Options{}, what);
  for (const auto& binding : table.bindings()) {
    const KeySpec* spec = find_key_spec(binding.key());
    ASSERT_NE(spec, nullptr) << what << ": " << binding.key() << " is no key of the schema";
    if (binding.declares()) {
      EXPECT_FALSE(spec->owner.empty()) << what << ": " << binding.key();
    }
  }
}

TEST(RaveFamilyKeys, ConfigsV1V2V3DescribeThePresets) {
  for (RaveVersion v : {RaveVersion::kV1, RaveVersion::kV2, RaveVersion::kV3}) {
    const std::string name = enum_name(v);
    const Config c = load_config_file(testing::source_path("configs/" + name + ".toml"));
    expect_same_keys(rave_model_keys(), rave_options_from(c), RaveOptions::preset(v),
                     "configs/" + name + ".toml");
    EXPECT_DOUBLE_EQ(c.get_float("train.feature_matching_weight"),
                     rave::RaveLossOptions::preset(v).feature_matching_weight)
        << name;
    EXPECT_EQ(c.get_bool("train.valid_signal_crop"), rave::RaveLossOptions::preset(v).valid_signal_crop)
        << name;
    EXPECT_TRUE(c.get_bool("train.feature_matching_weight_twice")) << name;
    // RAVE's update_discriminator_every: v2.gin 4, v1.gin none (RAVE.__init__'s default 2).
    EXPECT_EQ(c.get_int("train.update_discriminator_every"), v == RaveVersion::kV1 ? 2 : 4) << name;
  }
}

TEST(RaveFamilyKeys, DefaultsAreTheOptionsInitialisersAndV2) {
  const Config c;
  expect_same_keys(rave_model_keys(), rave_options_from(c), RaveOptions{}, "defaults");
  expect_same_keys(rave_model_keys(), RaveOptions{}, RaveOptions::preset(RaveVersion::kV2), "v2");
  EXPECT_EQ(find_key_spec("model.capacity")->owner, "rave");
  EXPECT_TRUE(find_key_spec("model.capacity")->architecture);
  EXPECT_EQ(find_key_spec("train.phase_1_duration")->owner, "rave");
}

TEST(RaveFamilyKeys, EveryOptionsStructStartsAtTheDefaultConfig) {
  expect_initialisers_are_the_defaults(rave_model_keys(), "model");
  expect_initialisers_are_the_defaults(rave_train_keys(), "train");
  expect_initialisers_are_the_defaults(rave_loss_keys(), "losses");
  expect_initialisers_are_the_defaults(rave_data_keys(), "data");
  expect_initialisers_are_the_defaults(data_source_keys(), "data source");
  EXPECT_EQ(find_key_spec("train.lr_end_factor")->owner, "rave");
  EXPECT_EQ(find_key_spec("train.log_epsilon")->owner, "rave");
}

TEST(RaveFamilyKeys, LossKeysAreReadOverTheVersionsPreset) {
  Config c;
  c.merge_toml_string(
      "[model]\nversion = \"v1\"\n[train]\nlog_epsilon = 0.5\nfeature_matching_weight = 3.0\n"
      "valid_signal_crop = false\n",
      "t.toml");
  c.finalize();
  rave::RaveLossOptions expected = rave::RaveLossOptions::preset(RaveVersion::kV1);
  expected.log_epsilon = 0.5;
  expected.feature_matching_weight = 3.0;
  expected.valid_signal_crop = false;
  const rave::RaveLossOptions lo = rave_loss_options_from(c);
  expect_same_keys(rave_loss_keys(), lo, expected, "v1");
  EXPECT_EQ(lo.relative_feature_matching, expected.relative_feature_matching);  // unbound: the preset's
  EXPECT_EQ(lo.num_skipped_features, 0);                                        // -1: v1's
  c.set("train.num_skipped_features", "2", "t");
  EXPECT_EQ(rave_loss_options_from(c).num_skipped_features, 2);
}

TEST(RaveFamilyKeys, DataKeysReadTheAugmentationsNamingWhereTheyCameFrom) {
  Config c;
  c.set("data.augment", "gain,mute", "--augment");
  const AudioDatasetOptions o = rave_data_keys().from(c);
  EXPECT_EQ(o.augmentations, (std::vector<Augmentation>{Augmentation::kGain, Augmentation::kMute}));
  c.set("data.augment", "gain,loud", "v2.toml");
  const std::string e = testing::error_of([&] { (void)rave_data_keys().from(c); });
  EXPECT_NE(e.find("data.augment (v2.toml)"), std::string::npos) << e;
  EXPECT_NE(e.find("loud"), std::string::npos) << e;
}

TEST(SsmFamilyKeys, EveryOptionsStructStartsAtTheDefaultConfig) {
  expect_initialisers_are_the_defaults(ssm_train_keys(), "train");
  expect_initialisers_are_the_defaults(ssm_data_keys(), "data");
  Config c;
  c.merge_toml_string(
      "[model]\nfamily = \"ssm\"\n[train]\ntransfer_mode = \"freeze_a\"\nlr_schedule = \"cosine\"\n",
      "t.toml");
  c.finalize();
  const SsmTrainOptions t = ssm_train_keys().from(c);
  EXPECT_EQ(t.transfer_mode, TransferMode::kFreezeA);
  EXPECT_EQ(t.lr_schedule, LrSchedule::kCosine);
}

TEST(SsmFamilyKeys, DefaultsAreTheS5MazeOptionsAndEnumsReadBack) {
  Config c;
  c.merge_toml_string("[model]\nfamily = \"ssm\"\nscan = \"sequential\"\ndiscretization = \"bilinear\"\n",
                      "t");
  c.finalize();
  const ssm::SsmOptions o = ssm_options_from(c);
  EXPECT_EQ(o.scan, ssm::ScanKind::kSequential);
  EXPECT_EQ(o.discretization, ssm::Discretization::kBilinear);
  ssm::SsmOptions expected = ssm::SsmOptions::s5_maze();
  expected.scan = ssm::ScanKind::kSequential;
  expected.discretization = ssm::Discretization::kBilinear;
  expect_same_keys(ssm_model_keys(), o, expected, "ssm");
  EXPECT_FALSE(find_key_spec("model.scan")->architecture);
  EXPECT_EQ(find_key_spec("train.weight_decay")->owner, "ssm");
}

TEST(SsmFamilyKeys, LrScheduleIsAnEnum) {
  EXPECT_DOUBLE_EQ(ssm_lr_factor_at(50, LrSchedule::kConstant, 10, 100), 1.0);
  EXPECT_DOUBLE_EQ(ssm_lr_factor_at(55, LrSchedule::kCosine, 10, 100), 0.5);
  EXPECT_DOUBLE_EQ(ssm_lr_factor_at(4, LrSchedule::kCosine, 10, 100), 0.5);  // warm-up: (4 + 1) / 10
}

}  // namespace
}  // namespace rt
