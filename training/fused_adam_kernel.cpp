#include "training/fused_adam_kernel.h"

#include <cmath>

#include "util/simd_clones.h"

namespace rt::detail {

namespace {

template <typename T, bool kL2, bool kDecoupled>
inline __attribute__((always_inline)) void adam_loop(T* __restrict p, const T* __restrict g, T* __restrict m,
                                                     T* __restrict v, int64_t n, const AdamConsts<T>& c) {
  for (int64_t i = 0; i < n; ++i) {
    T pi = p[i];
    T gi = g[i];
    if (kL2) gi = gi + c.l2 * pi;
    if (kDecoupled) pi = pi * c.decay;
    T mi = m[i] * c.b1;
    mi = mi + c.one_minus_b1 * gi;
    T vi = v[i] * c.b2;
    vi = vi + c.one_minus_b2 * gi * gi;
    m[i] = mi;
    v[i] = vi;
    T denom = std::sqrt(vi) / c.bc2;
    denom = denom + c.eps;
    p[i] = pi + c.neg_step * mi / denom;
  }
}

template <typename T>
inline __attribute__((always_inline)) void dispatch(T* p, const T* g, T* m, T* v, int64_t n,
                                                    const AdamConsts<T>& c, AdamMode mode) {
  switch (mode) {
    case AdamMode::kL2:
      return adam_loop<T, true, false>(p, g, m, v, n, c);
    case AdamMode::kDecoupled:
      return adam_loop<T, false, true>(p, g, m, v, n, c);
    case AdamMode::kPlain:
      return adam_loop<T, false, false>(p, g, m, v, n, c);
  }
}

}  // namespace

RT_SIMD_CLONES void adam_update(float* p, const float* g, float* m, float* v, int64_t n,
                                const AdamConsts<float>& c, AdamMode mode) {
  dispatch(p, g, m, v, n, c, mode);
}

RT_SIMD_CLONES void adam_update(double* p, const double* g, double* m, double* v, int64_t n,
                                const AdamConsts<double>& c, AdamMode mode) {
  dispatch(p, g, m, v, n, c, mode);
}

}  // namespace rt::detail
