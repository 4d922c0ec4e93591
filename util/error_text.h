// The one-line text of an exception for the apps' top-level handlers: torch's errors
// (c10::Error) without the 20–30 lines of C++ backtrace their what() carries.
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
