// Text from a file or a record (an LMDB key, a buffer name, a metadata value) as an error
// message may show it on a terminal: every byte that is not printable ASCII (control
// characters, DEL, bytes from 0x80) as \xNN, so a crafted record can neither move the cursor nor
// change colours, and the user sees which bytes are there.
#pragma once

#include <string>
#include <string_view>

namespace rt {

inline std::string printable(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  for (const char c : text) {
    const auto u = static_cast<unsigned char>(c);
    if (u >= 0x20 && u < 0x7f && u != '\\') {
      out += c;
    } else if (u == '\\') {
      out += "\\\\";
    } else {
      out += "\\x";
      out += "0123456789abcdef"[u >> 4];
      out += "0123456789abcdef"[u & 0xf];
    }
  }
  return out;
}

}  // namespace rt
