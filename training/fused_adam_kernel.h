// The element loop of rt::FusedAdam / rt::FusedAdamW (training/fused_adam.h), kept free of
// LibTorch so that it can be compiled with -O3 -fno-math-errno -ffp-contract=off (see
// trainer/CMakeLists.txt): vectorised square roots and divisions, no FMA contraction. On
// x86-64 an AVX2 clone is picked at load time when the CPU has it.
#pragma once

#include <cstdint>

namespace rt::detail {

template <typename T>
struct AdamConsts {
  T b1, one_minus_b1, b2, one_minus_b2, eps, bc2, neg_step, l2, decay;
};

enum class AdamMode { kPlain, kL2, kDecoupled };

// Elements [0, n) of one parameter, in the order of LibTorch 1.13's adam.cpp / adamw.cpp:
//   [kDecoupled] p = p·decay            [kL2] g = g + l2·p
//   m = m·β1 + (1 − β1)·g
//   v = v·β2 + (1 − β2)·g·g
//   p = p + neg_step·m / (√v / bc2 + eps)
// Only correctly rounded IEEE operations, so the result of an element does not depend on
// whether it falls in the vector loop or its scalar remainder (thread-count independence).
void adam_update(float* p, const float* g, float* m, float* v, int64_t n, const AdamConsts<float>& c,
                 AdamMode mode);
void adam_update(double* p, const double* g, double* m, double* v, int64_t n, const AdamConsts<double>& c,
                 AdamMode mode);

}  // namespace rt::detail
