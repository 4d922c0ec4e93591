// Assertions shared by the test suites: substring checks on messages and the message of an
// expected rt::Error.
#pragma once

#include <gtest/gtest.h>

#include <string>

#include "util/error.h"

// Expects `text` to contain `part`; prints the whole text otherwise.
#define EXPECT_HAS(text, part) EXPECT_NE((text).find(part), std::string::npos) << "message: " << (text)

namespace rt::testing {

// The message of the rt::Error thrown by `f`, or "" (with a test failure) when none is thrown.
template <typename F>
std::string error_of(F f) {
  try {
    f();
  } catch (const Error& e) {
    return e.what();
  }
  ADD_FAILURE() << "expected an rt::Error";
  return "";
}

}  // namespace rt::testing
