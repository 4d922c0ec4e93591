#include "util/parse.h"

#include <charconv>
#include <cmath>
#include <cstdlib>
#include <string>

namespace rt {
namespace {

std::string_view trimmed(std::string_view s) {
  const auto b = s.find_first_not_of(" \t\r\n");
  if (b == std::string_view::npos) return {};
  return s.substr(b, s.find_last_not_of(" \t\r\n") - b + 1);
}

}  // namespace

std::optional<double> parse_finite(std::string_view text) {
  const std::string s(trimmed(text));
  if (s.empty()) return std::nullopt;
  char* end = nullptr;
  const double v = std::strtod(s.c_str(), &end);
  if (end != s.c_str() + s.size() || !std::isfinite(v)) return std::nullopt;
  return v;
}

std::optional<int64_t> parse_int64(std::string_view text) {
  const std::string_view s = trimmed(text);
  int64_t v = 0;
  // from_chars takes a '-' but not a '+'; a '+' is skipped only before a digit ("+-1" is no number).
  const bool plus = !s.empty() && s.front() == '+';
  if (plus && (s.size() < 2 || s[1] < '0' || s[1] > '9')) return std::nullopt;
  auto [p, ec] = std::from_chars(s.data() + (plus ? 1 : 0), s.data() + s.size(), v);
  if (s.empty() || ec != std::errc() || p != s.data() + s.size()) return std::nullopt;
  return v;
}

}  // namespace rt
