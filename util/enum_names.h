// One table of spellings per enum, shared by parsing, printing and the config schema's choices
// (config/config_schema.h), so that no enum value is ever compared as text.
//
// An enum opts in next to its declaration: its values are dense from 0, the last one is aliased
// as kMaxValue, and an enum_names overload in the enum's namespace (found by argument-dependent
// lookup) lists the spellings in enumerator order:
//
//   enum class ScanKind { kParallel, kSequential, kFused, kMaxValue = kFused };
//   constexpr EnumNames<ScanKind> enum_names(ScanKind) { return {{"parallel", "sequential", "fused"}}; }
//
// EnumNames<E> holds exactly kMaxValue + 1 names: a longer list does not compile and a shorter
// one fails the static_assert in enum_table().
#pragma once

#include <cstddef>
#include <iterator>
#include <string>
#include <vector>

#include "util/error.h"

namespace rt {

template <typename E>
struct EnumNames {
  static constexpr size_t kSize = static_cast<size_t>(E::kMaxValue) + 1;
  const char* names[kSize];

  constexpr bool complete() const {
    for (const char* n : names) {
      if (n == nullptr || *n == '\0') return false;
    }
    return true;
  }
};

template <typename E>
constexpr EnumNames<E> enum_table() {
  constexpr EnumNames<E> table = enum_names(E{});
  static_assert(table.complete(), "enum_names must name every enumerator from 0 to kMaxValue");
  return table;
}

// The spelling of `value` ("fused").
template <typename E>
const char* enum_name(E value) {
  static constexpr EnumNames<E> table = enum_table<E>();
  const auto i = static_cast<size_t>(value);
  return i < EnumNames<E>::kSize ? table.names[i] : "?";
}

// Every spelling, in enumerator order.
template <typename E>
std::vector<std::string> enum_choices() {
  static constexpr EnumNames<E> table = enum_table<E>();
  return std::vector<std::string>(std::begin(table.names), std::end(table.names));
}

// The enumerator spelled `text`; throws rt::Error naming `key`, the text and the accepted
// spellings otherwise (`model.scan = "fast" is not allowed; expected one of parallel, …`).
template <typename E>
E parse_enum(const std::string& text, const std::string& key) {
  const std::vector<std::string> choices = enum_choices<E>();
  for (size_t i = 0; i < choices.size(); ++i) {
    if (choices[i] == text) return static_cast<E>(i);
  }
  std::string accepted;
  for (const auto& c : choices) accepted += (accepted.empty() ? "" : ", ") + c;
  const std::string best = closest_match(text, choices);
  throw Error(key + " = \"" + text + "\" is not allowed; expected one of " + accepted +
              (best.empty() ? "" : "; did you mean '" + best + "'?"));
}

}  // namespace rt
