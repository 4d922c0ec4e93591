// Strict number parsing for values read from files (metadata.yaml, record metadata): the whole
// text must be the number, so "5abc", "" or "1e400" are refused instead of read as 5, 0 or inf
// (std::stod / std::stoll accept a prefix and throw messages that name nothing).
#pragma once

#include <cstdint>
#include <optional>
#include <string_view>

namespace rt {

// A finite decimal number (surrounding spaces allowed), or nullopt.
std::optional<double> parse_finite(std::string_view text);
// A base-10 integer that fits int64 (surrounding spaces allowed), or nullopt.
std::optional<int64_t> parse_int64(std::string_view text);

}  // namespace rt
