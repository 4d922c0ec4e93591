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
  const char* first = s.data() + (!s.empty() && s.front() == '+' ? 1 : 0);
  auto [p, ec] = std::from_chars(first, s.data() + s.size(), v);
  if (s.empty() || ec != std::errc() || p != s.data() + s.size()) return std::nullopt;
  return v;
}

}  // namespace rt
