// The built-in families' keys, bound to their options structs: the shipped configs describe the
// presets the benchmarks and model tests use, and the defaults are the options' initialisers.
#include <gtest/gtest.h>

#include <string>

#include "config/config.h"
#include "config/config_value.h"
#include "families/rave/rave_family.h"
#include "families/ssm/ssm_family.h"
#include "models/rave/rave.h"
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
    EXPECT_EQ(value_text(binding.value(a)), value_text(binding.value(b)))
        << what << ": " << binding.spec().key;
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
