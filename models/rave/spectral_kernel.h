// The element loops of RAVE's spectral distance at one STFT scale (models/rave/losses.h), on
// raw buffers, without torch headers so that they compile with -O3 -fno-math-errno (vector
// square roots) for AVX-512, AVX2 and SSE2 (util/simd_clones.h).
//
// y: the generated signal's STFT, n complex values as interleaved (re, im); sx: the target's
// magnitudes, n values; m = |y|. RAVE's two terms (rave/core.py, MultiScaleSTFT + the distance):
//   lin = Σ (sx − m)²   (divided by n and the target's energy by the caller)
//   log = Σ |log(sx + ε) − log(m + ε)|   (divided by n)
#pragma once

#include <cstdint>

namespace rt::rave::detail {

// Sums over [0, n) in fixed chunks (kSpectralChunk values, float partials inside a chunk), the
// chunks' partials added in double in chunk order: the result does not depend on how the chunks
// were spread over threads. out[0] = lin, out[1] = log; chunk c's partials go to
// partial[2c], partial[2c + 1].
inline constexpr int64_t kSpectralChunk = 4096;
void spectral_terms_chunk(const float* y, const float* sx, int64_t n, float eps, double* partial);
void spectral_terms_chunk(const double* y, const double* sx, int64_t n, double eps, double* partial);

// The gradient of a·lin + c·log with respect to y (re, im): dm · y / m (0 where m = 0), with
// dm = −2a(sx − m) + c · sign(m − sx) / (m + ε) (the log is increasing, so the sign of the log
// difference is the sign of m − sx).
void spectral_terms_backward(const float* y, const float* sx, int64_t n, float eps, float a, float c,
                             float* dy);
void spectral_terms_backward(const double* y, const double* sx, int64_t n, double eps, double a, double c,
                             double* dy);

// m[i] = |y[i]| = √(re² + im²) over n complex values (aten's complex abs calls hypot per value).
void complex_magnitudes(const float* y, int64_t n, float* m);
void complex_magnitudes(const double* y, int64_t n, double* m);

// log(x) for normal, finite x > 0 in float, to about 1 ulp of the float result (the argument's
// mantissa reduced to [√½, √2), then 2·atanh((m − 1)/(m + 1)) as an odd series to s⁹), written so
// that the compiler vectorises it. Exposed for its test.
float log_positive(float x);

}  // namespace rt::rave::detail
