// Assertions shared by the test suites: substring checks on messages, the message of an
// expected rt::Error, tensors equal within a tolerance, gradients against central differences.
#pragma once

#include <gtest/gtest.h>
#include <torch/torch.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <string>
#include <vector>

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

// max |a − b| / max |b| (in double): the relative error of a against the reference b.
inline double max_rel_error(const torch::Tensor& a, const torch::Tensor& b) {
  return ((a.to(torch::kDouble) - b.to(torch::kDouble)).abs().max() /
          (b.abs().max().to(torch::kDouble) + 1e-300))
      .item<double>();
}

// Same shape, and allclose with `tol` as both its relative and absolute tolerance; prints the
// largest difference otherwise.
inline void expect_allclose(const torch::Tensor& a, const torch::Tensor& b, const std::string& what,
                            double tol = 1e-5) {
  ASSERT_EQ(a.sizes(), b.sizes()) << what;
  EXPECT_TRUE(torch::allclose(a, b, tol, tol))
      << what << ": max |diff| " << (a - b).abs().max().item<double>();
}

// Central differences of L = Σ f(inputs) ⊙ w (w random, float64 inputs) against the analytic
// gradients, element by element: |analytic − numeric| ≤ tol, times max(1, |numeric|) when
// `relative`.
inline void expect_gradients_match(const std::function<torch::Tensor(const std::vector<torch::Tensor>&)>& f,
                                   std::vector<torch::Tensor> inputs, double tol = 1e-6,
                                   bool relative = false) {
  for (auto& t : inputs) t = t.detach().clone().requires_grad_();
  auto w = torch::randn(f(inputs).sizes(), torch::TensorOptions().dtype(torch::kFloat64));
  (f(inputs) * w).sum().backward();
  const double eps = 1e-6;
  for (size_t k = 0; k < inputs.size(); ++k) {
    ASSERT_TRUE(inputs[k].grad().defined()) << "input " << k;
    auto grad = inputs[k].grad().reshape(-1);
    for (int64_t i = 0; i < inputs[k].numel(); ++i) {
      torch::NoGradGuard ng;
      auto eval = [&](double delta) {
        std::vector<torch::Tensor> in;
        for (auto& t : inputs) in.push_back(t.detach().clone());
        in[k].view(-1)[i] += delta;
        return (f(in) * w).sum().item<double>();
      };
      const double num = (eval(eps) - eval(-eps)) / (2 * eps);
      EXPECT_NEAR(grad[i].item<double>(), num, relative ? tol * std::max(1.0, std::abs(num)) : tol)
          << "input " << k << " element " << i;
    }
  }
}

}  // namespace rt::testing
