// Assertions shared by the test suites: substring checks on messages, the message of an
// expected rt::Error, tensors equal within a tolerance.
#pragma once

#include <gtest/gtest.h>
#include <torch/torch.h>

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

// Same shape, and allclose with `tol` as both its relative and absolute tolerance; prints the
// largest difference otherwise.
inline void expect_allclose(const torch::Tensor& a, const torch::Tensor& b, const std::string& what,
                            double tol = 1e-5) {
  ASSERT_EQ(a.sizes(), b.sizes()) << what;
  EXPECT_TRUE(torch::allclose(a, b, tol, tol))
      << what << ": max |diff| " << (a - b).abs().max().item<double>();
}

}  // namespace rt::testing
