#include "models/rave/spectral_kernel.h"

#include <cmath>
#include <cstring>

#include "util/simd_clones.h"

namespace rt::rave::detail {

namespace {

inline __attribute__((always_inline)) float log_positive_inline(float x) {
  uint32_t bits;
  std::memcpy(&bits, &x, sizeof bits);
  int32_t e = static_cast<int32_t>(bits >> 23) - 127;
  const uint32_t mantissa_bits = (bits & 0x007fffffu) | 0x3f800000u;
  float m;
  std::memcpy(&m, &mantissa_bits, sizeof m);  // [1, 2)
  const bool high = m > 1.41421356f;
  m = high ? m * 0.5f : m;  // [√½, √2)
  e = high ? e + 1 : e;
  const float s = (m - 1.0f) / (m + 1.0f);
  const float s2 = s * s;
  const float series = s2 * (1.0f / 3 + s2 * (1.0f / 5 + s2 * (1.0f / 7 + s2 * (1.0f / 9))));
  // ln 2 in two parts, so that e · ln2 keeps float accuracy for large |e|.
  const float fe = static_cast<float>(e);
  return fe * 0.693145752f + (2.0f * s + (2.0f * s * series + fe * 1.42860677e-06f));
}

inline __attribute__((always_inline)) double log_positive_inline(double x) { return std::log(x); }

template <typename T>
inline __attribute__((always_inline)) void term(const T* __restrict y, const T* __restrict sx, int64_t i,
                                                T eps, T& lin, T& log_sum) {
  const T re = y[2 * i], im = y[2 * i + 1];
  const T m = std::sqrt(re * re + im * im);
  const T d = sx[i] - m;
  lin += d * d;
  log_sum += std::fabs(log_positive_inline(sx[i] + eps) - log_positive_inline(m + eps));
}

// 16 running sums per term (the loop over lanes vectorises without reassociating anything), then
// the lanes and the tail added in a fixed order: the same sums on every instruction set.
template <typename T>
inline __attribute__((always_inline)) void chunk_loop(const T* __restrict y, const T* __restrict sx,
                                                      int64_t n, T eps, double* partial) {
  constexpr int64_t kLanes = 16;
  T lin[kLanes] = {}, log_sum[kLanes] = {};
  int64_t i0 = 0;
  for (; i0 + kLanes <= n; i0 += kLanes) {
    for (int64_t l = 0; l < kLanes; ++l) term(y, sx, i0 + l, eps, lin[l], log_sum[l]);
  }
  for (int64_t l = 0; i0 + l < n; ++l) term(y, sx, i0 + l, eps, lin[l], log_sum[l]);
  double lin_total = 0, log_total = 0;
  for (int64_t l = 0; l < kLanes; ++l) {
    lin_total += static_cast<double>(lin[l]);
    log_total += static_cast<double>(log_sum[l]);
  }
  partial[0] = lin_total;
  partial[1] = log_total;
}

template <typename T>
inline __attribute__((always_inline)) void backward_loop(const T* __restrict y, const T* __restrict sx,
                                                         int64_t n, T eps, T a, T c, T* __restrict dy) {
  for (int64_t i = 0; i < n; ++i) {
    const T re = y[2 * i], im = y[2 * i + 1];
    const T m = std::sqrt(re * re + im * im);
    const T diff = m - sx[i];
    const T sign = diff > T(0) ? T(1) : (diff < T(0) ? T(-1) : T(0));
    const T dm = T(2) * a * diff + c * sign / (m + eps);
    const T scale = m > T(0) ? dm / m : T(0);
    dy[2 * i] = scale * re;
    dy[2 * i + 1] = scale * im;
  }
}

template <typename T>
inline __attribute__((always_inline)) void magnitude_loop(const T* __restrict y, int64_t n, T* __restrict m) {
  for (int64_t i = 0; i < n; ++i) m[i] = std::sqrt(y[2 * i] * y[2 * i] + y[2 * i + 1] * y[2 * i + 1]);
}

RT_SIMD_CLONES void magnitudes_float(const float* y, int64_t n, float* m) { magnitude_loop<float>(y, n, m); }

RT_SIMD_CLONES void chunk_float(const float* y, const float* sx, int64_t n, float eps, double* partial) {
  chunk_loop<float>(y, sx, n, eps, partial);
}
RT_SIMD_CLONES void backward_float(const float* y, const float* sx, int64_t n, float eps, float a, float c,
                                   float* dy) {
  backward_loop<float>(y, sx, n, eps, a, c, dy);
}

}  // namespace

float log_positive(float x) { return log_positive_inline(x); }

void complex_magnitudes(const float* y, int64_t n, float* m) { magnitudes_float(y, n, m); }
void complex_magnitudes(const double* y, int64_t n, double* m) { magnitude_loop<double>(y, n, m); }

void spectral_terms_chunk(const float* y, const float* sx, int64_t n, float eps, double* partial) {
  chunk_float(y, sx, n, eps, partial);
}
void spectral_terms_chunk(const double* y, const double* sx, int64_t n, double eps, double* partial) {
  chunk_loop<double>(y, sx, n, eps, partial);
}
void spectral_terms_backward(const float* y, const float* sx, int64_t n, float eps, float a, float c,
                             float* dy) {
  backward_float(y, sx, n, eps, a, c, dy);
}
void spectral_terms_backward(const double* y, const double* sx, int64_t n, double eps, double a, double c,
                             double* dy) {
  backward_loop<double>(y, sx, n, eps, a, c, dy);
}

}  // namespace rt::rave::detail
