// Strict number parsing for values read from files (#15 item 13): the whole text is the number,
// or there is none; std::stod / std::stoll read "5abc" as 5 and fail with "stoll".
#include "util/parse.h"

#include <gtest/gtest.h>

#include <cmath>

namespace rt {
namespace {

TEST(Parse, FiniteNumbersAreTheWholeText) {
  EXPECT_EQ(parse_finite("5"), 5.0);
  EXPECT_EQ(parse_finite(" 2.5e1 "), 25.0);
  EXPECT_EQ(parse_finite("-0.1"), -0.1);
  for (const char* bad : {"", "  ", "5abc", "abc", "1e400", "nan", "inf", "-inf", "0x", "1 2"}) {
    EXPECT_FALSE(parse_finite(bad).has_value()) << "'" << bad << "'";
  }
}

TEST(Parse, IntegersAreTheWholeTextAndFitInt64) {
  EXPECT_EQ(parse_int64("7"), 7);
  EXPECT_EQ(parse_int64(" +3\n"), 3);
  EXPECT_EQ(parse_int64("-12"), -12);
  EXPECT_EQ(parse_int64("9223372036854775807"), INT64_MAX);
  for (const char* bad : {"", "seven", "5abc", "2.5", "1e3", "9223372036854775808", "+", "+-1", "0x10"}) {
    EXPECT_FALSE(parse_int64(bad).has_value()) << "'" << bad << "'";
  }
}

}  // namespace
}  // namespace rt
