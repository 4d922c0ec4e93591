// The one-line text of an exception for the top-level handlers of the apps that link LibTorch:
// torch's errors (c10::Error) without the 20–30 lines of C++ backtrace their what() carries.
// Its dynamic_cast needs c10::Error's type information, which some LibTorch and compiler
// pairs leave to libc10 (Debian 13's LibTorch 2.6 with g++ 14) rather than emit in the program:
// profile-report, which links no LibTorch, does not use it.
#pragma once

#include <c10/util/Exception.h>

#include <exception>
#include <string>

#include "util/error.h"

namespace rt {

// Terminal-safe, as rt::Error's messages are (util/error.h): a library's message may quote a
// value or a path the user gave.
inline std::string error_text(const std::exception& e) {
  if (const auto* c10 = dynamic_cast<const c10::Error*>(&e))
    return terminal_safe(c10->what_without_backtrace());
  return terminal_safe(e.what());
}

}  // namespace rt
