// The LibTorch the tests were built against, for messages and for skipping what needs another
// (defined in test_support.cpp; util/torch_compat.h keeps the production code's version tests).
#pragma once

#include <string>

namespace rt::testing {

std::string libtorch_version();      // "2.11.0"
std::string libtorch_major_minor();  // "2.11."

}  // namespace rt::testing
