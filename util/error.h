// The error type that reaches users. Its message must name the file, key, flag or value at
// fault and what is accepted.
#pragma once

#include <stdexcept>
#include <string>
#include <vector>

namespace rt {

class Error : public std::runtime_error {
 public:
  explicit Error(const std::string& what) : std::runtime_error(what) {}
};

// Levenshtein edit distance, for "did you mean" suggestions.
size_t edit_distance(const std::string& a, const std::string& b);

// The candidate closest to `name`, or "" when none is reasonably close (distance more than
// half of the name's length).
std::string closest_match(const std::string& name, const std::vector<std::string>& candidates);

}  // namespace rt
