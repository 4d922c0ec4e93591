// The error type that reaches users. Its message must name the file, key, flag or value at
// fault and what is accepted.
#pragma once

#include <cstdint>
#include <stdexcept>
#include <string>
#include <vector>

namespace rt {

// The message is kept terminal-safe (terminal_safe below): a value echoed from the command line,
// a file or a record can neither move the cursor nor change the terminal's state.
class Error : public std::runtime_error {
 public:
  explicit Error(const std::string& what);
};

// `text` with every byte a terminal would act on written as \xNN: C0 control characters but
// newline and tab (escape sequences start with ESC, 0x1b; a carriage return overwrites the
// line), DEL, the C1 controls U+0080–U+009F, and bytes that are not valid UTF-8. Printable
// ASCII and valid UTF-8 (a folder named "Klänge") pass unchanged.
std::string terminal_safe(const std::string& text);

// "[64, 182, 1]": a tensor shape in messages.
std::string shape_text(const std::vector<int64_t>& shape);

// The first line of a message from a library that appends context or a backtrace after it
// (torch's archive and pickle readers), for a one-line error.
std::string first_line(const std::string& message);

// "1 thread", "4 threads": a count and its noun (plural by appending 's') in messages.
std::string count_text(int64_t n, const std::string& noun);

// Levenshtein edit distance, for "did you mean" suggestions.
size_t edit_distance(const std::string& a, const std::string& b);

// The candidate closest to `name`, or "" when none is reasonably close. First a typo (edit
// distance ≤ 2) or the same key in another section ("train.n_signal" → "data.n_signal"); then
// an abbreviation of the last segment either way, in the same section first (initials: "lr"
// for "learning_rate"; leading words: "batch" for "batch_size"); then any candidate within half
// the name's length. Ties go to the smaller edit distance.
std::string closest_match(const std::string& name, const std::vector<std::string>& candidates);

}  // namespace rt
