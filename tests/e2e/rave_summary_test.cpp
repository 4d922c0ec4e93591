// `train --config vN --summary` through the binary: the part totals of RAVE's
// v2/v3 models (acids-ircam/RAVE v2.3.1 configs, weight-norm g and v counted).
#include <regex>

#include "e2e/e2e_fixtures.h"

namespace rt::e2e {
namespace {

// "encoder:       16,056,928" → 16056928 (-1 when the line is missing).
int64_t part_count(const std::string& output, const std::string& part) {
  std::smatch m;
  if (!std::regex_search(output, m, std::regex("(^|\\n)" + part + ":\\s+([0-9,]+)"))) return -1;
  std::string digits;
  for (char c : m[2].str())
    if (c != ',') digits += c;
  return std::stoll(digits);
}

struct Expected {
  const char* config;
  int64_t encoder, decoder, discriminator, pqmf;
};

void PrintTo(const Expected& e, std::ostream* os) { *os << e.config; }

class RaveSummary : public ::testing::TestWithParam<Expected> {};

TEST_P(RaveSummary, PrintsThePartCountsOfTheReferenceModel) {
  const Expected e = GetParam();
  auto r = run_command(bin_path("train") + " --config " + e.config + " --summary");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_EQ(part_count(r.output, "encoder"), e.encoder) << r.output;
  EXPECT_EQ(part_count(r.output, "decoder"), e.decoder) << r.output;
  EXPECT_EQ(part_count(r.output, "discriminator"), e.discriminator) << r.output;
  EXPECT_EQ(part_count(r.output, "pqmf"), e.pqmf) << r.output;
  // The module tree is printed too, not only the totals.
  EXPECT_NE(r.output.find("encoder"), std::string::npos);
  EXPECT_NE(r.output.find("params"), std::string::npos) << r.output;
}

INSTANTIATE_TEST_SUITE_P(V2AndV3, RaveSummary,
                         ::testing::Values(Expected{"v2", 16056928, 15479072, 27130952, 16656},
                                           Expected{"v3", 16059904, 15482048, 42519760, 16656}),
                         [](const auto& info) { return std::string(info.param.config); });

TEST(RaveSummaryV1, BuildsTheV1ModelWithItsNoiseGeneratorAndScaleOnlyDiscriminator) {
  auto r = run_command(bin_path("train") + " --config v1 --summary");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("RAVE v1 (capacity 64, latent 128, 16 bands, ratios 4 4 4 2)"), std::string::npos)
      << r.output;
  const int64_t enc = part_count(r.output, "encoder"), dec = part_count(r.output, "decoder"),
                dis = part_count(r.output, "discriminator");
  EXPECT_GT(enc, 0);
  EXPECT_GT(dec, 0);
  EXPECT_GT(dis, 0);
  EXPECT_EQ(part_count(r.output, "pqmf"), 16656);
  // Capacity 64 and no period discriminators: smaller than v2 in every trained part.
  EXPECT_LT(enc, 16056928);
  EXPECT_LT(dis, 27130952);
}

TEST(RaveSummaryV1, ConfigHoldsV1ValuesWithAFixedKlWeight) {
  auto r = run_command(bin_path("train") + " --config v1 --print_config");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  for (const char* line : {"version = \"v1\"", "capacity = 64", "noise_bands = 5", "periods = []",
                           "beta_start = 0.1", "beta_end = 0.1", "amplitude_modulation = false"}) {
    EXPECT_NE(r.output.find(line), std::string::npos) << line << "\n" << r.output;
  }
}

}  // namespace
}  // namespace rt::e2e
