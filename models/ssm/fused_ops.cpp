#include "models/ssm/fused_ops.h"

#include <ATen/CPUGeneratorImpl.h>
#include <ATen/Parallel.h>
#include <torch/csrc/autograd/functions/utils.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstring>
#include <limits>
#include <memory>
#include <mutex>
#include <vector>

#include "distributed/sync_batch_norm.h"
#include "models/common/batch_slice.h"
#include "models/common/row_linear.h"
#include "util/simd_clones.h"
#include "util/torch_compat.h"

// The elementwise kernels below are plain loops the compiler vectorises; RT_SIMD_CLONES also
// compiles them for AVX-512 and AVX2 (picked at load time), since the default target is SSE2.
// Without -fno-trapping-math (torch's own kernels build with it) GCC will not if-convert the
// selects in exp/sigmoid, and the loops stay scalar. FP exceptions are never enabled here.
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC push_options
#pragma GCC optimize("no-trapping-math")
#endif

namespace rt::ssm::fused {

namespace {

using torch::Tensor;
using torch::autograd::AutogradContext;
using torch::autograd::tensor_list;

// ---------------------------------------------------------------------------------------------
// Counter-based dropout mask.

// Chris Wellons' "lowbias32" integer hash: a bijection on 32 bits with good avalanche.
inline uint32_t mix32(uint32_t x) {
  x ^= x >> 16;
  x *= 0x7feb352dU;
  x ^= x >> 15;
  x *= 0x846ca68bU;
  x ^= x >> 16;
  return x;
}

inline uint64_t splitmix64(uint64_t x) {
  x += 0x9e3779b97f4a7c15ULL;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}

// A 64-bit key per row (scalar, once per row); within a row, two rounds of mix32 of the column
// (32-bit arithmetic only, so the per-column loop vectorises).
struct RowKey {
  uint32_t lo, hi;
};
inline RowKey row_key(uint64_t seed, int64_t row) {
  const uint64_t k = splitmix64(seed ^ splitmix64(static_cast<uint64_t>(row)));
  return {static_cast<uint32_t>(k), static_cast<uint32_t>(k >> 32)};
}
inline uint32_t col_hash(RowKey k, uint32_t col) { return mix32(mix32(col + k.lo) ^ k.hi); }

struct DropoutSpec {
  bool active = false;  // p > 0
  uint64_t seed = 0;
  // The global index of row 0: a data-parallel rank's rows continue the global batch's, so
  // the masks do not depend on the split (models/common/batch_slice.h).
  int64_t row_base = 0;
  uint32_t threshold = 0;  // keep iff hash ≥ threshold
  double scale = 1.0;      // 1 / (1 − p)
};

DropoutSpec make_spec(double p, uint64_t seed, int64_t row_base = 0) {
  TORCH_CHECK(p >= 0 && p < 1, "fused dropout: p must be in [0, 1), got ", p);
  DropoutSpec s;
  s.active = p > 0;
  s.seed = seed;
  s.row_base = row_base;
  s.threshold = static_cast<uint32_t>(std::min(4294967295.0, std::floor(p * 4294967296.0)));
  s.scale = 1.0 / (1.0 - p);
  return s;
}

// mask[c] = keep ? scale : 0 for the H columns of one row.
template <typename scalar_t>
RT_SIMD_CLONES void fill_row_mask(scalar_t* __restrict mask, int64_t H, RowKey k, uint32_t threshold,
                                  scalar_t scale) {
  for (int64_t c = 0; c < H; ++c) {
    mask[c] = col_hash(k, static_cast<uint32_t>(c)) >= threshold ? scale : scalar_t(0);
  }
}

// Fills `mask` for `row` (all `scale` when dropout is inactive).
template <typename scalar_t>
inline void row_mask(const DropoutSpec& s, int64_t row, scalar_t* mask, int64_t H) {
  if (!s.active) {
    std::fill(mask, mask + H, static_cast<scalar_t>(1));
    return;
  }
  fill_row_mask<scalar_t>(mask, H, row_key(s.seed, s.row_base + row), s.threshold,
                          static_cast<scalar_t>(s.scale));
}

// ---------------------------------------------------------------------------------------------
// Vectorisable transcendental helpers: exp(x) for x ≤ 0, tanh, sigmoid. Float uses a Cephes-style
// polynomial exp (relative error ~1e-7, what float holds anyway); double uses libm (gradchecks).

// Plain selects, not std::abs/std::max/std::copysign: those are defined (or precompiled) before
// the optimize pragma above, and GCC does not inline across differing optimisation options.
template <typename T>
inline T abs_of(T x) {
  return x < T(0) ? -x : x;
}

inline float exp_nonpos(float x) {
  x = x < -87.0f ? -87.0f : x;
  const int n = static_cast<int>(x * 1.44269504088896341f - 0.5f);  // truncation = ceil here
  const float fn = static_cast<float>(n);
  float r = x - fn * 0.693359375f;
  r = r - fn * -2.12194440e-4f;
  float p = 1.9875691500E-4f;
  p = p * r + 1.3981999507E-3f;
  p = p * r + 8.3334519073E-3f;
  p = p * r + 4.1665795894E-2f;
  p = p * r + 1.6666665459E-1f;
  p = p * r + 5.0000001201E-1f;
  p = p * r * r + r + 1.0f;
  const int32_t bits = (n + 127) << 23;
  float scale;
  std::memcpy(&scale, &bits, sizeof scale);
  return p * scale;
}
inline double exp_nonpos(double x) { return std::exp(x); }

template <typename T>
inline T tanh_fast(T y) {
  const T e = exp_nonpos(T(-2) * abs_of(y));
  const T t = (T(1) - e) / (T(1) + e);
  return y < T(0) ? -t : t;
}
inline double tanh_fast(double y) { return std::tanh(y); }

template <typename T>
inline T sigmoid_fast(T b) {
  const T e = exp_nonpos(-abs_of(b));
  return (b >= T(0) ? T(1) : e) / (T(1) + e);
}

constexpr double kGeluK = 0.7978845608028654;  // sqrt(2/π)
constexpr double kGeluC = 0.044715;

// GELU, tanh form, through t = tanh(√(2/π)·(x + 0.044715·x³)): the value and the derivative share t.
template <typename T>
inline T gelu_tanh_t(T x) {
  return tanh_fast(static_cast<T>(kGeluK) * (x + static_cast<T>(kGeluC) * x * x * x));
}
template <typename T>
inline T gelu_from_t(T x, T t) {
  return T(0.5) * x * (T(1) + t);
}
template <typename T>
inline T gelu_derivative_from_t(T x, T t) {
  return T(0.5) * (T(1) + t) + T(0.5) * x * (T(1) - t * t) * static_cast<T>(kGeluK) *
                                   (T(1) + T(3) * static_cast<T>(kGeluC) * x * x);
}

// ---------------------------------------------------------------------------------------------
// Deterministic reductions over rows: rows are cut into fixed chunks of kChunkRows; each chunk
// accumulates into its own partial (in double), and the partials are summed in chunk order.

constexpr int64_t kChunkRows = 256;

// accumulate(r0, r1, double* acc) adds its rows' contributions to acc [width].
template <typename F>
std::vector<double> reduce_rows(int64_t N, int64_t width, const F& accumulate) {
  const int64_t chunks = std::max<int64_t>(1, (N + kChunkRows - 1) / kChunkRows);
  std::vector<double> partial(static_cast<size_t>(chunks * width), 0.0);
  at::parallel_for(0, chunks, 1, [&](int64_t c0, int64_t c1) {
    for (int64_t c = c0; c < c1; ++c) {
      accumulate(c * kChunkRows, std::min(N, (c + 1) * kChunkRows), partial.data() + c * width);
    }
  });
  std::vector<double> out(static_cast<size_t>(width), 0.0);
  for (int64_t c = 0; c < chunks; ++c) {
    for (int64_t j = 0; j < width; ++j) out[j] += partial[c * width + j];
  }
  return out;
}

// Rows per parallel_for task for elementwise passes (~16k elements).
inline int64_t row_grain(int64_t H) { return std::max<int64_t>(1, 16384 / std::max<int64_t>(1, H)); }

template <typename scalar_t>
Tensor vector_from(const std::vector<double>& v, const Tensor& like) {
  auto t = torch::empty({static_cast<int64_t>(v.size())}, like.options());
  auto* p = t.data_ptr<scalar_t>();
  for (size_t i = 0; i < v.size(); ++i) p[i] = static_cast<scalar_t>(v[i]);
  return t;
}

void check_rows(const Tensor& t, const char* what) {
  TORCH_CHECK(t.device().is_cpu(), what, ": CPU tensors only");
  TORCH_CHECK(t.dim() == 2, what, ": expected a 2-D [N, H] tensor, got ", t.sizes());
  TORCH_CHECK(t.scalar_type() == torch::kFloat || t.scalar_type() == torch::kDouble, what,
              ": float or double only, got ", t.scalar_type());
}

// ---------------------------------------------------------------------------------------------
// Dropout.

template <typename scalar_t>
RT_SIMD_CLONES void mul_row(const scalar_t* __restrict x, const scalar_t* __restrict m,
                            scalar_t* __restrict y, int64_t H) {
  for (int64_t c = 0; c < H; ++c) y[c] = x[c] * m[c];
}

template <typename scalar_t>
void dropout_apply(const DropoutSpec& s, const scalar_t* x, scalar_t* y, int64_t N, int64_t H) {
  at::parallel_for(0, N, row_grain(H), [&](int64_t r0, int64_t r1) {
    std::vector<scalar_t> mask(static_cast<size_t>(H));
    for (int64_t r = r0; r < r1; ++r) {
      row_mask(s, r, mask.data(), H);
      mul_row(x + r * H, mask.data(), y + r * H, H);
    }
  });
}

class DropoutFn : public torch::autograd::Function<DropoutFn> {
 public:
  static Tensor forward(AutogradContext* ctx, const Tensor& x, double p, int64_t seed) {
    auto xc = x.contiguous();
    const int64_t H = xc.dim() == 0 ? 1 : xc.size(-1);
    const int64_t N = H == 0 ? 0 : xc.numel() / H;
    auto y = torch::empty_like(xc);
    const auto spec = make_spec(p, static_cast<uint64_t>(seed), models::batch_row_offset(N));
    AT_DISPATCH_FLOATING_TYPES(xc.scalar_type(), "fused_dropout", [&] {
      dropout_apply<scalar_t>(spec, xc.data_ptr<scalar_t>(), y.data_ptr<scalar_t>(), N, H);
    });
    ctx->saved_data["p"] = p;
    ctx->saved_data["seed"] = seed;
    ctx->saved_data["row_base"] = spec.row_base;
    return y;
  }
  static tensor_list backward(AutogradContext* ctx, tensor_list grads) {
    auto g = grads[0].contiguous();
    const int64_t H = g.dim() == 0 ? 1 : g.size(-1);
    const int64_t N = H == 0 ? 0 : g.numel() / H;
    auto gx = torch::empty_like(g);
    const auto spec =
        make_spec(ctx->saved_data["p"].toDouble(), static_cast<uint64_t>(ctx->saved_data["seed"].toInt()),
                  ctx->saved_data["row_base"].toInt());
    AT_DISPATCH_FLOATING_TYPES(g.scalar_type(), "fused_dropout_backward", [&] {
      dropout_apply<scalar_t>(spec, g.data_ptr<scalar_t>(), gx.data_ptr<scalar_t>(), N, H);
    });
    return {gx, Tensor(), Tensor()};
  }
};

// ---------------------------------------------------------------------------------------------
// Batch norm over rows.

template <typename scalar_t>
RT_SIMD_CLONES void add_rows(const scalar_t* __restrict x, int64_t r0, int64_t r1, int64_t H,
                             double* __restrict acc) {
  for (int64_t r = r0; r < r1; ++r) {
    const scalar_t* xr = x + r * H;
    for (int64_t c = 0; c < H; ++c) acc[c] += static_cast<double>(xr[c]);
  }
}

// acc [2H]: Σ x, Σ x² (the synchronised statistics' single pass).
template <typename scalar_t>
RT_SIMD_CLONES void add_rows_and_squares(const scalar_t* __restrict x, int64_t r0, int64_t r1, int64_t H,
                                         double* __restrict acc) {
  for (int64_t r = r0; r < r1; ++r) {
    const scalar_t* xr = x + r * H;
    for (int64_t c = 0; c < H; ++c) {
      const double v = static_cast<double>(xr[c]);
      acc[c] += v;
      acc[H + c] += v * v;
    }
  }
}

// Sums `values` over the ranks of `comm` (in place), appending nothing.
void sum_over_ranks(std::vector<double>& values, dist::Communicator& comm) {
  auto t = torch::from_blob(values.data(), {static_cast<int64_t>(values.size())}, torch::kDouble);
  comm.all_reduce_sum(t);
}

// The communicator travels through saved_data as an integer (IValue holds no pointers); 0 = none.
int64_t to_handle(dist::Communicator* comm) { return static_cast<int64_t>(reinterpret_cast<intptr_t>(comm)); }
dist::Communicator* from_handle(int64_t handle) {
  return reinterpret_cast<dist::Communicator*>(static_cast<intptr_t>(handle));
}

template <typename scalar_t>
RT_SIMD_CLONES void add_sq_dev_rows(const scalar_t* __restrict x, const double* __restrict mean, int64_t r0,
                                    int64_t r1, int64_t H, double* __restrict acc) {
  for (int64_t r = r0; r < r1; ++r) {
    const scalar_t* xr = x + r * H;
    for (int64_t c = 0; c < H; ++c) {
      const double d = static_cast<double>(xr[c]) - mean[c];
      acc[c] += d * d;
    }
  }
}

template <typename scalar_t>
RT_SIMD_CLONES void normalize_row(const scalar_t* __restrict x, const scalar_t* __restrict mean,
                                  const scalar_t* __restrict invstd, scalar_t* __restrict y, int64_t H) {
  for (int64_t c = 0; c < H; ++c) y[c] = (x[c] - mean[c]) * invstd[c];
}

// acc [2H]: Σ g, Σ g·y.
template <typename scalar_t>
RT_SIMD_CLONES void add_g_gy_rows(const scalar_t* __restrict g, const scalar_t* __restrict y, int64_t r0,
                                  int64_t r1, int64_t H, double* __restrict acc) {
  for (int64_t r = r0; r < r1; ++r) {
    const scalar_t* gr = g + r * H;
    const scalar_t* yr = y + r * H;
    for (int64_t c = 0; c < H; ++c) {
      acc[c] += static_cast<double>(gr[c]);
      acc[H + c] += static_cast<double>(gr[c]) * static_cast<double>(yr[c]);
    }
  }
}

template <typename scalar_t>
RT_SIMD_CLONES void bn_backward_row(const scalar_t* __restrict g, const scalar_t* __restrict y,
                                    const scalar_t* __restrict invstd, const scalar_t* __restrict mean_g,
                                    const scalar_t* __restrict mean_gy, scalar_t* __restrict gx, int64_t H) {
  for (int64_t c = 0; c < H; ++c) gx[c] = invstd[c] * (g[c] - mean_g[c] - y[c] * mean_gy[c]);
}

// Mean and biased variance of each column of x [N, H] (double). Locally two passes (the mean,
// then squared deviations); with `comm`, one pass and one all-reduce of [Σx, Σx², n] (in
// double: the cancellation in Σx²/n − mean² stays far below float's precision). `count`: the
// local rows in, the rows over every rank out.
template <typename scalar_t>
void column_statistics(const scalar_t* xp, int64_t N, int64_t H, dist::Communicator* comm, double& count,
                       std::vector<double>& mean, std::vector<double>& var) {
  if (comm != nullptr) {
    auto sums = reduce_rows(
        N, 2 * H, [&](int64_t r0, int64_t r1, double* acc) { add_rows_and_squares(xp, r0, r1, H, acc); });
    sums.push_back(count);
    sum_over_ranks(sums, *comm);
    count = sums[2 * H];
    TORCH_CHECK(count >= 1, "fused::batch_norm_rows: no rows on any rank");
    mean.assign(sums.begin(), sums.begin() + H);
    var.resize(static_cast<size_t>(H));
    for (int64_t c = 0; c < H; ++c) {
      mean[c] /= count;
      var[c] = std::max(0.0, sums[H + c] / count - mean[c] * mean[c]);
    }
    return;
  }
  mean = reduce_rows(N, H, [&](int64_t r0, int64_t r1, double* acc) { add_rows(xp, r0, r1, H, acc); });
  for (auto& v : mean) v /= count;
  var = reduce_rows(
      N, H, [&](int64_t r0, int64_t r1, double* acc) { add_sq_dev_rows(xp, mean.data(), r0, r1, H, acc); });
  for (auto& v : var) v /= count;
}

class BatchNormRowsFn : public torch::autograd::Function<BatchNormRowsFn> {
 public:
  // Returns {y, mean, biased var}; only y is differentiable. comm_handle: 0, or the
  // communicator whose ranks' rows make the batch.
  static tensor_list forward(AutogradContext* ctx, const Tensor& x_in, double eps, int64_t comm_handle) {
    auto x = x_in.contiguous();
    const int64_t N = x.size(0), H = x.size(1);
    auto y = torch::empty_like(x);
    Tensor mean_t, var_t, invstd_t;
    dist::Communicator* comm = from_handle(comm_handle);
    double count = static_cast<double>(N);
    AT_DISPATCH_FLOATING_TYPES(x.scalar_type(), "fused_batch_norm", [&] {
      const scalar_t* xp = x.data_ptr<scalar_t>();
      std::vector<double> sum, sq;
      column_statistics(xp, N, H, comm, count, sum, sq);
      std::vector<double> invstd(static_cast<size_t>(H));
      for (int64_t c = 0; c < H; ++c) invstd[c] = 1.0 / std::sqrt(sq[c] + eps);
      mean_t = vector_from<scalar_t>(sum, x);
      var_t = vector_from<scalar_t>(sq, x);
      invstd_t = vector_from<scalar_t>(invstd, x);
      const scalar_t* m = mean_t.data_ptr<scalar_t>();
      const scalar_t* is = invstd_t.data_ptr<scalar_t>();
      scalar_t* yp = y.data_ptr<scalar_t>();
      at::parallel_for(0, N, row_grain(H), [&](int64_t r0, int64_t r1) {
        for (int64_t r = r0; r < r1; ++r) normalize_row(xp + r * H, m, is, yp + r * H, H);
      });
    });
    ctx->save_for_backward({y, invstd_t});
    ctx->saved_data["comm"] = comm_handle;
    ctx->saved_data["count"] = count;
    auto count_t = torch::full({1}, count, torch::kDouble);
    ctx->mark_non_differentiable({mean_t, var_t, count_t});
    return {y, mean_t, var_t, count_t};
  }

  static tensor_list backward(AutogradContext* ctx, tensor_list grads) {
    dist::Communicator* comm = from_handle(ctx->saved_data["comm"].toInt());
    if (!grads[0].defined() && comm == nullptr) return {Tensor(), Tensor(), Tensor()};
    auto saved = ctx->get_saved_variables();
    const auto& y = saved[0];
    const auto& invstd = saved[1];
    // Every rank joins the all-reduce, also one whose output got no gradient.
    auto g = grads[0].defined() ? grads[0].contiguous() : torch::zeros_like(y);
    const int64_t N = y.size(0), H = y.size(1);
    const double count = ctx->saved_data["count"].toDouble();
    auto gx = torch::empty_like(y);
    AT_DISPATCH_FLOATING_TYPES(y.scalar_type(), "fused_batch_norm_backward", [&] {
      const scalar_t* gp = g.data_ptr<scalar_t>();
      const scalar_t* yp = y.data_ptr<scalar_t>();
      auto sums = reduce_rows(
          N, 2 * H, [&](int64_t r0, int64_t r1, double* acc) { add_g_gy_rows(gp, yp, r0, r1, H, acc); });
      if (comm != nullptr) sum_over_ranks(sums, *comm);
      std::vector<scalar_t> mg(static_cast<size_t>(H)), mgy(static_cast<size_t>(H));
      for (int64_t c = 0; c < H; ++c) {
        mg[c] = static_cast<scalar_t>(sums[c] / count);
        mgy[c] = static_cast<scalar_t>(sums[H + c] / count);
      }
      const scalar_t* is = invstd.data_ptr<scalar_t>();
      scalar_t* gxp = gx.data_ptr<scalar_t>();
      at::parallel_for(0, N, row_grain(H), [&](int64_t r0, int64_t r1) {
        for (int64_t r = r0; r < r1; ++r)
          bn_backward_row(gp + r * H, yp + r * H, is, mg.data(), mgy.data(), gxp + r * H, H);
      });
    });
    return {gx, Tensor(), Tensor()};
  }
};

// ---------------------------------------------------------------------------------------------
// gelu_tanh(z + D ⊙ u) → dropout.

template <typename scalar_t>
RT_SIMD_CLONES void gelu_dropout_row(const scalar_t* __restrict z, const scalar_t* __restrict u,
                                     const scalar_t* __restrict D, const scalar_t* __restrict mask,
                                     scalar_t* __restrict out, int64_t H) {
  auto gelu = [](scalar_t x) { return gelu_from_t(x, gelu_tanh_t(x)); };
  if (u) {
    for (int64_t c = 0; c < H; ++c) out[c] = gelu(z[c] + D[c] * u[c]) * mask[c];
  } else {
    for (int64_t c = 0; c < H; ++c) out[c] = gelu(z[c]) * mask[c];
  }
}

// gpre = g ⊙ mask ⊙ gelu'(pre); gz = gpre; gu = gpre ⊙ D; gD += gpre ⊙ u (the D gradient, summed
// in scalar_t over one chunk's rows, then in double across chunks).
template <typename scalar_t>
RT_SIMD_CLONES void gelu_dropout_backward_row(const scalar_t* __restrict g, const scalar_t* __restrict z,
                                              const scalar_t* __restrict u, const scalar_t* __restrict D,
                                              const scalar_t* __restrict mask, scalar_t* __restrict gz,
                                              scalar_t* __restrict gu, scalar_t* __restrict gD, int64_t H) {
  auto dgelu = [](scalar_t x) { return gelu_derivative_from_t(x, gelu_tanh_t(x)); };
  if (u) {
    for (int64_t c = 0; c < H; ++c) {
      const scalar_t gp = g[c] * mask[c] * dgelu(z[c] + D[c] * u[c]);
      gz[c] = gp;
      gu[c] = gp * D[c];
      gD[c] += gp * u[c];
    }
  } else {
    for (int64_t c = 0; c < H; ++c) gz[c] = g[c] * mask[c] * dgelu(z[c]);
  }
}

class GeluDropoutFn : public torch::autograd::Function<GeluDropoutFn> {
 public:
  static Tensor forward(AutogradContext* ctx, const Tensor& z_in, const Tensor& u_in, const Tensor& D_in,
                        double p, int64_t seed) {
    auto z = z_in.contiguous();
    const bool with_u = u_in.numel() > 0;  // an empty u stands for "no u" (see gelu_dropout)
    auto u = with_u ? u_in.contiguous() : u_in;
    auto D = with_u ? D_in.contiguous() : D_in;
    const int64_t N = z.size(0), H = z.size(1);
    auto out = torch::empty_like(z);
    const auto spec = make_spec(p, static_cast<uint64_t>(seed), models::batch_row_offset(N));
    AT_DISPATCH_FLOATING_TYPES(z.scalar_type(), "fused_gelu_dropout", [&] {
      const scalar_t* zp = z.data_ptr<scalar_t>();
      const scalar_t* up = with_u ? u.data_ptr<scalar_t>() : nullptr;
      const scalar_t* Dp = with_u ? D.data_ptr<scalar_t>() : nullptr;
      scalar_t* op = out.data_ptr<scalar_t>();
      at::parallel_for(0, N, row_grain(H), [&](int64_t r0, int64_t r1) {
        std::vector<scalar_t> mask(static_cast<size_t>(H));
        for (int64_t r = r0; r < r1; ++r) {
          row_mask(spec, r, mask.data(), H);
          gelu_dropout_row(zp + r * H, up ? up + r * H : nullptr, Dp, mask.data(), op + r * H, H);
        }
      });
    });
    ctx->save_for_backward({z, u, D});
    ctx->saved_data["p"] = p;
    ctx->saved_data["seed"] = seed;
    ctx->saved_data["row_base"] = spec.row_base;
    return out;
  }

  static tensor_list backward(AutogradContext* ctx, tensor_list grads) {
    auto saved = ctx->get_saved_variables();
    const auto &z = saved[0], &u = saved[1], &D = saved[2];
    const bool with_u = u.numel() > 0;
    auto g = grads[0].contiguous();
    const int64_t N = z.size(0), H = z.size(1);
    const auto spec =
        make_spec(ctx->saved_data["p"].toDouble(), static_cast<uint64_t>(ctx->saved_data["seed"].toInt()),
                  ctx->saved_data["row_base"].toInt());
    auto gz = torch::empty_like(z);
    Tensor gu, gD;
    if (with_u) gu = torch::empty_like(u);
    AT_DISPATCH_FLOATING_TYPES(z.scalar_type(), "fused_gelu_dropout_backward", [&] {
      const scalar_t* gp = g.data_ptr<scalar_t>();
      const scalar_t* zp = z.data_ptr<scalar_t>();
      const scalar_t* up = with_u ? u.data_ptr<scalar_t>() : nullptr;
      const scalar_t* Dp = with_u ? D.data_ptr<scalar_t>() : nullptr;
      scalar_t* gzp = gz.data_ptr<scalar_t>();
      scalar_t* gup = with_u ? gu.data_ptr<scalar_t>() : nullptr;
      auto sums = reduce_rows(N, H, [&](int64_t r0, int64_t r1, double* acc) {
        std::vector<scalar_t> mask(static_cast<size_t>(H)), gD_chunk(static_cast<size_t>(H), scalar_t(0));
        for (int64_t r = r0; r < r1; ++r) {
          row_mask(spec, r, mask.data(), H);
          gelu_dropout_backward_row(gp + r * H, zp + r * H, up ? up + r * H : nullptr, Dp, mask.data(),
                                    gzp + r * H, gup ? gup + r * H : nullptr, gD_chunk.data(), H);
        }
        for (int64_t c = 0; c < H; ++c) acc[c] += static_cast<double>(gD_chunk[c]);
      });
      if (with_u) gD = vector_from<scalar_t>(sums, z);
    });
    return {gz, gu, gD, Tensor(), Tensor()};
  }
};

// ---------------------------------------------------------------------------------------------
// residual + dropout(a ⊙ σ(b)).

template <typename scalar_t>
RT_SIMD_CLONES void glu_row(const scalar_t* __restrict ab, const scalar_t* __restrict res,
                            const scalar_t* __restrict mask, scalar_t* __restrict out, int64_t H) {
  const scalar_t* a = ab;
  const scalar_t* b = ab + H;
  for (int64_t c = 0; c < H; ++c) out[c] = res[c] + a[c] * sigmoid_fast(b[c]) * mask[c];
}

template <typename scalar_t>
RT_SIMD_CLONES void glu_backward_row(const scalar_t* __restrict g, const scalar_t* __restrict ab,
                                     const scalar_t* __restrict mask, scalar_t* __restrict gab, int64_t H) {
  const scalar_t* a = ab;
  const scalar_t* b = ab + H;
  for (int64_t c = 0; c < H; ++c) {
    const scalar_t s = sigmoid_fast(b[c]);
    const scalar_t gm = g[c] * mask[c];
    gab[c] = gm * s;
    gab[H + c] = gm * a[c] * s * (scalar_t(1) - s);
  }
}

class GluDropoutResidualFn : public torch::autograd::Function<GluDropoutResidualFn> {
 public:
  static Tensor forward(AutogradContext* ctx, const Tensor& ab_in, const Tensor& res_in, double p,
                        int64_t seed) {
    auto ab = ab_in.contiguous();
    auto res = res_in.contiguous();
    const int64_t N = res.size(0), H = res.size(1);
    auto out = torch::empty_like(res);
    const auto spec = make_spec(p, static_cast<uint64_t>(seed), models::batch_row_offset(N));
    AT_DISPATCH_FLOATING_TYPES(ab.scalar_type(), "fused_glu_dropout_residual", [&] {
      const scalar_t* abp = ab.data_ptr<scalar_t>();
      const scalar_t* rp = res.data_ptr<scalar_t>();
      scalar_t* op = out.data_ptr<scalar_t>();
      at::parallel_for(0, N, row_grain(H), [&](int64_t r0, int64_t r1) {
        std::vector<scalar_t> mask(static_cast<size_t>(H));
        for (int64_t r = r0; r < r1; ++r) {
          row_mask(spec, r, mask.data(), H);
          glu_row(abp + r * 2 * H, rp + r * H, mask.data(), op + r * H, H);
        }
      });
    });
    ctx->save_for_backward({ab});
    ctx->saved_data["p"] = p;
    ctx->saved_data["seed"] = seed;
    ctx->saved_data["row_base"] = spec.row_base;
    return out;
  }

  static tensor_list backward(AutogradContext* ctx, tensor_list grads) {
    auto ab = ctx->get_saved_variables()[0];
    auto g = grads[0].contiguous();
    const int64_t N = g.size(0), H = g.size(1);
    const auto spec =
        make_spec(ctx->saved_data["p"].toDouble(), static_cast<uint64_t>(ctx->saved_data["seed"].toInt()),
                  ctx->saved_data["row_base"].toInt());
    auto gab = torch::empty_like(ab);
    AT_DISPATCH_FLOATING_TYPES(ab.scalar_type(), "fused_glu_dropout_residual_backward", [&] {
      const scalar_t* gp = g.data_ptr<scalar_t>();
      const scalar_t* abp = ab.data_ptr<scalar_t>();
      scalar_t* gabp = gab.data_ptr<scalar_t>();
      at::parallel_for(0, N, row_grain(H), [&](int64_t r0, int64_t r1) {
        std::vector<scalar_t> mask(static_cast<size_t>(H));
        for (int64_t r = r0; r < r1; ++r) {
          row_mask(spec, r, mask.data(), H);
          glu_backward_row(gp + r * H, abp + r * 2 * H, mask.data(), gabp + r * 2 * H, H);
        }
      });
    });
    return {gab, g, Tensor(), Tensor()};
  }
};

// ---------------------------------------------------------------------------------------------
// The whole block, tile by tile (ssm_block in fused_ops.h).

// One sequence of the recurrence x_t = a ⊙ x_{t−1} + b_t, [T, 2P] real (re | im).
template <typename scalar_t>
RT_SIMD_CLONES void scan_sequence(const scalar_t* __restrict ar, const scalar_t* __restrict ai,
                                  const scalar_t* __restrict b, scalar_t* __restrict x, int64_t T,
                                  int64_t P) {
  for (int64_t p = 0; p < 2 * P; ++p) x[p] = b[p];
  for (int64_t t = 1; t < T; ++t) {
    const scalar_t* prev = x + (t - 1) * 2 * P;
    const scalar_t* bt = b + t * 2 * P;
    scalar_t* xt = x + t * 2 * P;
    for (int64_t p = 0; p < P; ++p) {
      const scalar_t pr = prev[p], pi = prev[P + p];
      xt[p] = ar[p] * pr - ai[p] * pi + bt[p];
      xt[P + p] = ar[p] * pi + ai[p] * pr + bt[P + p];
    }
  }
}

// Its adjoint: h_t = g_t + conj(a) ⊙ h_{t+1}; ga += Σ_{t≥1} h_t ⊙ conj(x_{t−1}) as [re P | im P].
template <typename scalar_t>
RT_SIMD_CLONES void scan_sequence_backward(const scalar_t* __restrict ar, const scalar_t* __restrict ai,
                                           const scalar_t* __restrict x, const scalar_t* __restrict g,
                                           scalar_t* __restrict h, scalar_t* __restrict ga, int64_t T,
                                           int64_t P) {
  const int64_t last = (T - 1) * 2 * P;
  for (int64_t p = 0; p < 2 * P; ++p) h[last + p] = g[last + p];
  for (int64_t t = T - 1; t >= 1; --t) {
    const scalar_t* ht = h + t * 2 * P;
    const scalar_t* xp = x + (t - 1) * 2 * P;
    const scalar_t* gp = g + (t - 1) * 2 * P;
    scalar_t* hp = h + (t - 1) * 2 * P;
    for (int64_t p = 0; p < P; ++p) {
      const scalar_t hr = ht[p], hi = ht[P + p], xr = xp[p], xi = xp[P + p];
      ga[p] += hr * xr + hi * xi;
      ga[P + p] += hi * xr - hr * xi;
      hp[p] = gp[p] + ar[p] * hr + ai[p] * hi;
      hp[P + p] = gp[P + p] - ai[p] * hr + ar[p] * hi;
    }
  }
}

// out = res + a' ⊙ σ(b') ⊙ mask with [a' | b'] = ab + bias (the GLU's bias added here, not in its
// product). With keep, ab is overwritten by what the backward needs, the two factors of the
// output's derivative: [mask ⊙ σ(b') | mask ⊙ a' ⊙ σ(b') ⊙ (1 − σ(b'))] (same memory, no sigmoid
// and no mask in the backward).
template <typename scalar_t>
RT_SIMD_CLONES void glu_bias_row(scalar_t* __restrict ab, const scalar_t* __restrict bias,
                                 const scalar_t* __restrict res, const scalar_t* __restrict mask,
                                 scalar_t* __restrict out, int64_t H, bool keep) {
  for (int64_t c = 0; c < H; ++c) {
    const scalar_t a = ab[c] + bias[c];
    const scalar_t sg = sigmoid_fast(ab[H + c] + bias[H + c]), sm = sg * mask[c];
    out[c] = res[c] + a * sm;
    if (keep) {
      ab[c] = sm;
      ab[H + c] = a * sm * (scalar_t(1) - sg);
    }
  }
}

// gab = g ⊙ the kept factors (glu_bias_row); gb += gab (the bias gradient of this row).
template <typename scalar_t>
RT_SIMD_CLONES void glu_bias_backward_row(const scalar_t* __restrict g, const scalar_t* __restrict kept,
                                          scalar_t* __restrict gab, scalar_t* __restrict gb, int64_t H) {
  for (int64_t c = 0; c < H; ++c) {
    const scalar_t ga = g[c] * kept[c], gbv = g[c] * kept[H + c];
    gab[c] = ga;
    gab[H + c] = gbv;
    gb[c] += ga;
    gb[H + c] += gbv;
  }
}

// gx = g + invstd ⊙ (gu − mean_g − y ⊙ mean_gy): the residual's gradient and the norm's in one pass.
template <typename scalar_t>
RT_SIMD_CLONES void bn_residual_backward_row(const scalar_t* __restrict g, const scalar_t* __restrict gu,
                                             const scalar_t* __restrict y, const scalar_t* __restrict invstd,
                                             const scalar_t* __restrict mean_g,
                                             const scalar_t* __restrict mean_gy, scalar_t* __restrict gx,
                                             int64_t H) {
  for (int64_t c = 0; c < H; ++c) gx[c] = g[c] + invstd[c] * (gu[c] - mean_g[c] - y[c] * mean_gy[c]);
}

// gelu_tanh(z + D ⊙ u) ⊙ mask into h, and with dh its derivative ⊙ mask (what the backward
// multiplies the incoming gradient by: no tanh and no mask there).
template <typename scalar_t>
RT_SIMD_CLONES void gelu_keep_row(const scalar_t* __restrict z, const scalar_t* __restrict u,
                                  const scalar_t* __restrict D, const scalar_t* __restrict mask,
                                  scalar_t* __restrict h, scalar_t* __restrict dh, int64_t H) {
  for (int64_t c = 0; c < H; ++c) {
    const scalar_t x = z[c] + D[c] * u[c];
    const scalar_t t = gelu_tanh_t(x);
    h[c] = gelu_from_t(x, t) * mask[c];
    if (dh) dh[c] = gelu_derivative_from_t(x, t) * mask[c];
  }
}

// gz = g ⊙ dh (gelu_keep_row's), gu = gz ⊙ D, gD += gz ⊙ u.
template <typename scalar_t>
RT_SIMD_CLONES void gelu_kept_backward_row(const scalar_t* __restrict g, const scalar_t* __restrict dh,
                                           const scalar_t* __restrict u, const scalar_t* __restrict D,
                                           scalar_t* __restrict gz, scalar_t* __restrict gu,
                                           scalar_t* __restrict gD, int64_t H) {
  for (int64_t c = 0; c < H; ++c) {
    const scalar_t gp = g[c] * dh[c];
    gz[c] = gp;
    gu[c] = gp * D[c];
    gD[c] += gp * u[c];
  }
}

// Sequences per tile: about kTileRows rows (3 sequences of 140 bins). At one thread the size
// hardly matters; at two, tiles of 280 to 2240 rows were within 10 % of each other and one
// tile of the whole batch 50 % slower (s5_maze shape, timed in one process, interleaved).
constexpr int64_t kTileRows = 512;

// An uninitialised buffer of n elements.
template <typename T>
struct Scratch {
  explicit Scratch(int64_t n) : p(new T[static_cast<size_t>(n)]) {}
  T* data() { return p.get(); }
  T& operator[](int64_t i) { return p[static_cast<size_t>(i)]; }
  std::unique_ptr<T[]> p;
};

struct BlockShape {
  int64_t N, H, P2, batch, T, per_tile, tiles;
  BlockShape(int64_t n, int64_t h, int64_t p2, int64_t b) : N(n), H(h), P2(p2), batch(b), T(n / b) {
    per_tile = std::max<int64_t>(1, kTileRows / std::max<int64_t>(1, T));
    tiles = (batch + per_tile - 1) / per_tile;
  }
  int64_t first_row(int64_t tile) const { return std::min(batch, tile * per_tile) * T; }
  int64_t rows(int64_t tile) const { return first_row(tile + 1) - first_row(tile); }
};

// Runs body(scratch, tile) for every tile, the tiles handed out one at a time from a shared
// counter rather than split in fixed shares: on a shared machine a thread whose core is slowed
// takes fewer tiles instead of holding the others up. make_scratch() runs once per thread. The
// results do not depend on which thread ran a tile (every tile writes its own rows and partials).
template <typename MakeScratch, typename Body>
void for_each_tile(int64_t tiles, const MakeScratch& make_scratch, const Body& body) {
  std::atomic<int64_t> next{0};
  const int64_t workers = std::max<int64_t>(1, std::min<int64_t>(at::get_num_threads(), tiles));
  at::parallel_for(0, workers, 1, [&](int64_t, int64_t) {
    auto scratch = make_scratch();
    for (int64_t tile = next.fetch_add(1); tile < tiles; tile = next.fetch_add(1)) body(scratch, tile);
  });
}

class SsmBlockFn : public torch::autograd::Function<SsmBlockFn> {
 public:
  // x [N, H]; w_in [2P, H]; a_re, a_im [P]; w_out [H, 2P]; D [H]; w_glu [2H, H]; b_glu [2H];
  // mean, invstd [H] (no gradient: the backward differentiates through batch statistics itself
  // when batch_stats). With keep (a backward will follow) it saves u (normalised), the states,
  // the GELU's output h (the GLU's input) and its derivative ⊙ mask, and the GLU's two derivative
  // factors (glu_bias_row): the backward then evaluates no tanh, sigmoid or dropout mask.
  static Tensor forward(AutogradContext* ctx, const Tensor& x_in, const Tensor& w_in, const Tensor& a_re,
                        const Tensor& a_im, const Tensor& w_out, const Tensor& D, const Tensor& w_glu,
                        const Tensor& b_glu, const Tensor& mean, const Tensor& invstd, int64_t batch,
                        double p, int64_t seed_gelu, int64_t seed_glu, int64_t comm_handle, double count,
                        bool batch_stats, bool keep) {
    auto x = x_in.contiguous();
    const BlockShape s(x.size(0), x.size(1), w_in.size(0), batch);
    const int64_t H = s.H, P2 = s.P2, P = P2 / 2;
    auto u = torch::empty_like(x), out = torch::empty_like(x);
    auto states = torch::empty({s.N, P2}, x.options());
    const int64_t kept_rows = keep ? s.N : 0;
    auto h = torch::empty({kept_rows, H}, x.options()), dh = torch::empty({kept_rows, H}, x.options());
    auto kept = torch::empty({kept_rows, 2 * H}, x.options());
    const int64_t row_base = models::batch_row_offset(s.N);
    const auto spec1 = make_spec(p, static_cast<uint64_t>(seed_gelu), row_base);
    const auto spec2 = make_spec(p, static_cast<uint64_t>(seed_glu), row_base);
    AT_DISPATCH_FLOATING_TYPES(x.scalar_type(), "fused_ssm_block", [&] {
      const scalar_t *xp = x.data_ptr<scalar_t>(), *win = w_in.data_ptr<scalar_t>(),
                     *ar = a_re.data_ptr<scalar_t>(), *ai = a_im.data_ptr<scalar_t>(),
                     *wout = w_out.data_ptr<scalar_t>(), *Dp = D.data_ptr<scalar_t>(),
                     *wg = w_glu.data_ptr<scalar_t>(), *bg = b_glu.data_ptr<scalar_t>(),
                     *m = mean.data_ptr<scalar_t>(), *is = invstd.data_ptr<scalar_t>();
      scalar_t *up = u.data_ptr<scalar_t>(), *op = out.data_ptr<scalar_t>(),
               *sp = states.data_ptr<scalar_t>(), *hp = h.data_ptr<scalar_t>(),
               *dhp = dh.data_ptr<scalar_t>(), *kp = kept.data_ptr<scalar_t>();
      struct Buffers {
        Scratch<scalar_t> bu, zt, ht, abt;
        std::vector<scalar_t> mask;
      };
      const int64_t most = s.per_tile * s.T;
      // Without keep, h and the GLU's product live only in the tile.
      auto buffers = [&] {
        return Buffers{Scratch<scalar_t>(most * P2), Scratch<scalar_t>(most * H),
                       Scratch<scalar_t>(keep ? 0 : most * H), Scratch<scalar_t>(keep ? 0 : most * 2 * H),
                       std::vector<scalar_t>(static_cast<size_t>(H))};
      };
      for_each_tile(s.tiles, buffers, [&](Buffers& b, int64_t tile) {
        auto &bu = b.bu, &zt = b.zt, &ht = b.ht, &abt = b.abt;
        auto& mask = b.mask;
        const int64_t r0 = s.first_row(tile), R = s.rows(tile);
        scalar_t* hr = keep ? hp + r0 * H : ht.data();
        scalar_t* abr = keep ? kp + r0 * 2 * H : abt.data();
        for (int64_t r = r0; r < r0 + R; ++r) normalize_row(xp + r * H, m, is, up + r * H, H);
        models::gemm_rows<scalar_t>('N', 'T', R, P2, H, up + r0 * H, H, win, H, 0, bu.data(), P2);
        for (int64_t q = 0; q < R / s.T; ++q) {
          scan_sequence(ar, ai, bu.data() + q * s.T * P2, sp + (r0 + q * s.T) * P2, s.T, P);
        }
        models::gemm_rows<scalar_t>('N', 'T', R, H, P2, sp + r0 * P2, P2, wout, P2, 0, zt.data(), H);
        for (int64_t r = 0; r < R; ++r) {
          row_mask(spec1, r0 + r, mask.data(), H);
          gelu_keep_row(zt.data() + r * H, up + (r0 + r) * H, Dp, mask.data(), hr + r * H,
                        keep ? dhp + (r0 + r) * H : nullptr, H);
        }
        models::gemm_rows<scalar_t>('N', 'T', R, 2 * H, H, hr, H, wg, H, 0, abr, 2 * H);
        for (int64_t r = 0; r < R; ++r) {
          row_mask(spec2, r0 + r, mask.data(), H);
          glu_bias_row(abr + r * 2 * H, bg, xp + (r0 + r) * H, mask.data(), op + (r0 + r) * H, H, keep);
        }
      });
    });
    ctx->save_for_backward({w_in, a_re, a_im, w_out, D, w_glu, invstd, u, states, h, dh, kept});
    ctx->saved_data["batch"] = batch;
    ctx->saved_data["comm"] = comm_handle;
    ctx->saved_data["count"] = count;
    ctx->saved_data["batch_stats"] = batch_stats;
    return out;
  }

  static tensor_list backward(AutogradContext* ctx, tensor_list grads) {
    dist::Communicator* comm = from_handle(ctx->saved_data["comm"].toInt());
    const bool batch_stats = ctx->saved_data["batch_stats"].toBool();
    auto sv = ctx->get_saved_variables();
    const auto &w_in = sv[0], &a_re = sv[1], &a_im = sv[2], &w_out = sv[3], &D = sv[4], &w_glu = sv[5],
               &invstd = sv[6], &u = sv[7], &states = sv[8], &h = sv[9], &dh = sv[10], &kept = sv[11];
    TORCH_CHECK(h.size(0) == u.size(0), "fused::ssm_block: backward of a forward run without gradients");
    // Every rank joins the all-reduce, also one whose output got no gradient.
    auto g = grads[0].defined() ? grads[0].contiguous() : torch::zeros_like(u);
    const BlockShape s(u.size(0), u.size(1), w_in.size(0), ctx->saved_data["batch"].toInt());
    const int64_t H = s.H, P2 = s.P2, P = P2 / 2;
    auto gu = torch::empty_like(u), gx = torch::empty_like(u);
    // Per-tile partial sums, added in tile order below: bitwise the same at any thread count.
    const int64_t n_glu = 2 * H * H, n_out = H * P2, n_in = P2 * H;
    const int64_t width = n_glu + n_out + n_in + P2 + H + 2 * H;  // w_glu, w_out, w_in, a, D, b_glu
    std::vector<double> bn_partial(static_cast<size_t>(s.tiles * 2 * H), 0.0);
    Tensor gw_in, ga_re, ga_im, gw_out, gD, gw_glu, gb_glu;
    AT_DISPATCH_FLOATING_TYPES(u.scalar_type(), "fused_ssm_block_backward", [&] {
      Scratch<scalar_t> partial(s.tiles * width);
      const scalar_t *gp = g.data_ptr<scalar_t>(), *win = w_in.data_ptr<scalar_t>(),
                     *ar = a_re.data_ptr<scalar_t>(), *ai = a_im.data_ptr<scalar_t>(),
                     *wout = w_out.data_ptr<scalar_t>(), *Dp = D.data_ptr<scalar_t>(),
                     *wg = w_glu.data_ptr<scalar_t>(), *up = u.data_ptr<scalar_t>(),
                     *sp = states.data_ptr<scalar_t>(), *hp = h.data_ptr<scalar_t>(),
                     *dhp = dh.data_ptr<scalar_t>(), *kp = kept.data_ptr<scalar_t>();
      scalar_t* gup = gu.data_ptr<scalar_t>();
      struct Buffers {
        Scratch<scalar_t> gab, gh, gzb, gst, adj;
      };
      const int64_t most = s.per_tile * s.T;
      auto buffers = [&] {
        return Buffers{Scratch<scalar_t>(most * 2 * H), Scratch<scalar_t>(most * H),
                       Scratch<scalar_t>(most * H), Scratch<scalar_t>(most * P2),
                       Scratch<scalar_t>(most * P2)};
      };
      for_each_tile(s.tiles, buffers, [&](Buffers& b, int64_t tile) {
        auto &gab = b.gab, &gh = b.gh, &gzb = b.gzb, &gst = b.gst, &adj = b.adj;
        const int64_t r0 = s.first_row(tile), R = s.rows(tile);
        scalar_t* part = partial.data() + tile * width;
        scalar_t *pw_glu = part, *pw_out = pw_glu + n_glu, *pw_in = pw_out + n_out, *pa = pw_in + n_in,
                 *pD = pa + P2, *pb = pD + H;
        std::fill(pa, pb + 2 * H, scalar_t(0));  // the sums (the products' parts are written whole)
        // GLU ⊕ dropout ⊕ residual, and its bias.
        for (int64_t r = 0; r < R; ++r) {
          glu_bias_backward_row(gp + (r0 + r) * H, kp + (r0 + r) * 2 * H, gab.data() + r * 2 * H, pb, H);
        }
        models::gemm_rows<scalar_t>('N', 'N', R, H, 2 * H, gab.data(), 2 * H, wg, H, 0, gh.data(), H);
        // gelu ⊕ D·u ⊕ dropout: gz, the D·u path's gradient into gu, and D's.
        for (int64_t r = 0; r < R; ++r) {
          gelu_kept_backward_row(gh.data() + r * H, dhp + (r0 + r) * H, up + (r0 + r) * H, Dp,
                                 gzb.data() + r * H, gup + (r0 + r) * H, pD, H);
        }
        models::gemm_rows<scalar_t>('T', 'N', 2 * H, H, R, gab.data(), 2 * H, hp + r0 * H, H, 0, pw_glu, H);
        const scalar_t* gz = gzb.data();
        models::gemm_rows<scalar_t>('T', 'N', H, P2, R, gz, H, sp + r0 * P2, P2, 0, pw_out, P2);
        models::gemm_rows<scalar_t>('N', 'N', R, P2, H, gz, H, wout, P2, 0, gst.data(), P2);
        for (int64_t q = 0; q < R / s.T; ++q) {
          const int64_t o = q * s.T * P2;
          scan_sequence_backward(ar, ai, sp + r0 * P2 + o, gst.data() + o, adj.data() + o, pa, s.T, P);
        }
        models::gemm_rows<scalar_t>('T', 'N', P2, H, R, adj.data(), P2, up + r0 * H, H, 0, pw_in, H);
        models::gemm_rows<scalar_t>('N', 'N', R, H, P2, adj.data(), P2, win, H, 1, gup + r0 * H, H);
        if (batch_stats) add_g_gy_rows(gup, up, r0, r0 + R, H, bn_partial.data() + tile * 2 * H);
      });
      std::vector<double> total(static_cast<size_t>(width), 0.0), bn(static_cast<size_t>(2 * H), 0.0);
      // Tile order, vectorised (a plain loop here ran on SSE2: 1 % of the s5_maze step).
      add_rows(partial.data(), 0, s.tiles, width, total.data());
      for (int64_t tile = 0; tile < s.tiles; ++tile) {
        for (int64_t j = 0; j < 2 * H; ++j) bn[j] += bn_partial[tile * 2 * H + j];
      }
      auto from = [&](int64_t offset, at::IntArrayRef shape) {
        auto t = torch::empty(shape, u.options());
        auto* q = t.data_ptr<scalar_t>();
        for (int64_t j = 0; j < t.numel(); ++j) q[j] = static_cast<scalar_t>(total[offset + j]);
        return t;
      };
      gw_glu = from(0, {2 * H, H});
      gw_out = from(n_glu, {H, P2});
      gw_in = from(n_glu + n_out, {P2, H});
      ga_re = from(n_glu + n_out + n_in, {P});
      ga_im = from(n_glu + n_out + n_in + P, {P});
      gD = from(n_glu + n_out + n_in + P2, {H});
      gb_glu = from(n_glu + n_out + n_in + P2 + H, {2 * H});
      // The norm's backward with the residual's gradient: mean_g, mean_gy are 0 without batch
      // statistics (running statistics are constants).
      if (comm != nullptr) sum_over_ranks(bn, *comm);
      const double count = ctx->saved_data["count"].toDouble();
      std::vector<scalar_t> mg(static_cast<size_t>(H), 0), mgy(static_cast<size_t>(H), 0);
      if (batch_stats) {
        for (int64_t c = 0; c < H; ++c) {
          mg[c] = static_cast<scalar_t>(bn[c] / count);
          mgy[c] = static_cast<scalar_t>(bn[H + c] / count);
        }
      }
      const scalar_t* isp = invstd.data_ptr<scalar_t>();
      scalar_t* gxp = gx.data_ptr<scalar_t>();
      at::parallel_for(0, s.N, row_grain(H), [&](int64_t r0, int64_t r1) {
        for (int64_t r = r0; r < r1; ++r)
          bn_residual_backward_row(gp + r * H, gup + r * H, up + r * H, isp, mg.data(), mgy.data(),
                                   gxp + r * H, H);
      });
    });
    return {gx,       gw_in,    ga_re,    ga_im,    gw_out,   gD,       gw_glu,   gb_glu,   Tensor(),
            Tensor(), Tensor(), Tensor(), Tensor(), Tensor(), Tensor(), Tensor(), Tensor(), Tensor()};
  }
};

int64_t seed_arg(uint64_t seed) { return static_cast<int64_t>(seed); }  // IValue holds int64

}  // namespace

template <typename scalar_t>
void recurrence_forward(const scalar_t* a_re, const scalar_t* a_im, const scalar_t* b, scalar_t* x, int64_t B,
                        int64_t T, int64_t P) {
  at::parallel_for(0, B, 1, [&](int64_t n0, int64_t n1) {
    for (int64_t n = n0; n < n1; ++n) scan_sequence(a_re, a_im, b + n * T * 2 * P, x + n * T * 2 * P, T, P);
  });
}

template <typename scalar_t>
void recurrence_backward(const scalar_t* a_re, const scalar_t* a_im, const scalar_t* x, const scalar_t* g,
                         scalar_t* h, scalar_t* ga_rows, int64_t B, int64_t T, int64_t P) {
  at::parallel_for(0, B, 1, [&](int64_t n0, int64_t n1) {
    for (int64_t n = n0; n < n1; ++n) {
      scalar_t* ga = ga_rows + n * 2 * P;
      std::fill(ga, ga + 2 * P, scalar_t(0));
      const int64_t o = n * T * 2 * P;
      scan_sequence_backward(a_re, a_im, x + o, g + o, h + o, ga, T, P);
    }
  });
}

template void recurrence_forward<float>(const float*, const float*, const float*, float*, int64_t, int64_t,
                                        int64_t);
template void recurrence_forward<double>(const double*, const double*, const double*, double*, int64_t,
                                         int64_t, int64_t);
template void recurrence_backward<float>(const float*, const float*, const float*, const float*, float*,
                                         float*, int64_t, int64_t, int64_t);
template void recurrence_backward<double>(const double*, const double*, const double*, const double*, double*,
                                          double*, int64_t, int64_t, int64_t);

uint64_t draw_dropout_seed() {
  auto gen = at::detail::getDefaultCPUGenerator();
  std::lock_guard<std::mutex> lock(gen.mutex());
  return gen.get<at::CPUGeneratorImpl>()->random64();
}

bool dropout_keeps(uint64_t seed, int64_t row, int64_t col, double p) {
  const auto s = make_spec(p, seed);
  return !s.active || col_hash(row_key(seed, row), static_cast<uint32_t>(col)) >= s.threshold;
}

Tensor dropout(const Tensor& x, double p, uint64_t seed) {
  TORCH_CHECK(x.device().is_cpu(), "fused::dropout: CPU tensors only");
  make_spec(p, seed);  // validates p
  if (p == 0) return x;
  return DropoutFn::apply(x, p, seed_arg(seed));
}

Tensor batch_norm_rows(const Tensor& x, double eps, Tensor* mean, Tensor* var, dist::Communicator* sync,
                       double* count) {
  check_rows(x, "fused::batch_norm_rows");
  TORCH_CHECK(sync != nullptr || x.size(0) >= 1, "fused::batch_norm_rows: no rows");
  auto outs = rt::compat::apply_function<BatchNormRowsFn>(x, eps, to_handle(sync));
  if (mean) *mean = outs[1];
  if (var) *var = outs[2];
  // One process: the count is the row count, known on the host (no item() per step). With a
  // communicator it is the all-reduced count over every rank's rows.
  if (count) *count = sync != nullptr ? outs[3].item<double>() : static_cast<double>(x.size(0));
  return outs[0];
}

namespace {

// torch's BatchNorm semantics for `norm`: batch statistics in training and wherever it tracks no
// running statistics; only training synchronises (with `sync` of more than one rank).
struct NormMode {
  bool batch_stats;
  dist::Communicator* comm;
};
NormMode norm_mode(const torch::nn::BatchNorm1dImpl& norm, dist::Communicator* sync) {
  return {norm.is_training() || !norm.options.track_running_stats(),
          norm.is_training() && sync != nullptr && sync->world_size() > 1 ? sync : nullptr};
}

// After batch statistics over `count` rows of input `sizes`: torch's check that training saw more
// than one value per channel, then the running statistics' update.
void after_batch_statistics(torch::nn::BatchNorm1dImpl& norm, at::IntArrayRef sizes, const Tensor& mean,
                            const Tensor& var, double count, const NormMode& mode) {
  TORCH_CHECK(!norm.is_training() || count > 1,
              "BatchNorm: expected more than 1 value per channel when training, got input ", sizes,
              mode.comm ? " (rows over all ranks: " + std::to_string(count) + ")" : std::string());
  if (norm.is_training() && norm.options.track_running_stats())
    dist::update_running_stats(norm, mean, var, count);
}

}  // namespace

Tensor batch_norm_module(const Tensor& x, torch::nn::BatchNorm1dImpl& norm, dist::Communicator* sync) {
  const auto& o = norm.options;
  TORCH_CHECK(!o.affine(), "fused::batch_norm_module: only affine = false is supported");
  const NormMode mode = norm_mode(norm, sync);
  if (mode.batch_stats) {
    Tensor mean, var;
    double count = 0;
    auto y = batch_norm_rows(x, o.eps(), &mean, &var, mode.comm, &count);
    after_batch_statistics(norm, x.sizes(), mean, var, count, mode);
    return y;
  }
  return (x - norm.running_mean) * torch::rsqrt(norm.running_var + o.eps());
}

Tensor ssm_block(const Tensor& x2, int64_t batch, torch::nn::BatchNorm1dImpl& norm, dist::Communicator* sync,
                 const BlockWeights& w, double p, uint64_t seed_gelu, uint64_t seed_glu) {
  check_rows(x2, "fused::ssm_block");
  const int64_t N = x2.size(0), H = x2.size(1);
  TORCH_CHECK(batch >= 1 && N % batch == 0, "fused::ssm_block: ", N, " rows are not ", batch, " sequences");
  const int64_t P2 = w.w_in.size(0);
  auto same = [&](const Tensor& t, at::IntArrayRef shape, const char* what) {
    TORCH_CHECK(t.sizes() == shape && t.scalar_type() == x2.scalar_type() && t.device().is_cpu(),
                "fused::ssm_block: ", what, " must be ", shape, " ", x2.scalar_type(), " on the CPU, got ",
                t.sizes(), " ", t.scalar_type());
    return t.contiguous();
  };
  const auto& o = norm.options;
  TORCH_CHECK(!o.affine(), "fused::ssm_block: only a norm without affine parameters is supported");
  make_spec(p, seed_gelu);
  const NormMode mode = norm_mode(norm, sync);
  dist::Communicator* comm = mode.comm;
  auto x = x2.contiguous();
  Tensor mean, invstd;
  double count = static_cast<double>(N);
  if (mode.batch_stats) {
    TORCH_CHECK(comm != nullptr || N >= 1, "fused::ssm_block: no rows");
    Tensor var;
    AT_DISPATCH_FLOATING_TYPES(x.scalar_type(), "fused_ssm_block_statistics", [&] {
      std::vector<double> m, v;
      column_statistics(x.data_ptr<scalar_t>(), N, H, comm, count, m, v);
      std::vector<double> is(static_cast<size_t>(H));
      for (int64_t c = 0; c < H; ++c) is[c] = 1.0 / std::sqrt(v[c] + o.eps());
      mean = vector_from<scalar_t>(m, x);
      var = vector_from<scalar_t>(v, x);
      invstd = vector_from<scalar_t>(is, x);
    });
    after_batch_statistics(norm, x2.sizes(), mean, var, count, mode);
  } else {
    mean = norm.running_mean.to(x.scalar_type()).contiguous();
    invstd = torch::rsqrt(norm.running_var.to(x.scalar_type()) + o.eps()).contiguous();
  }
  // What the backward needs is kept only when there will be one: the rule by which apply() records
  // the node.
  const bool keep =
      torch::autograd::compute_requires_grad(x, w.w_in, w.a_re, w.a_im, w.w_out, w.D, w.w_glu, w.b_glu);
  return SsmBlockFn::apply(x, same(w.w_in, {P2, H}, "w_in"), same(w.a_re, {P2 / 2}, "a_re"),
                           same(w.a_im, {P2 / 2}, "a_im"), same(w.w_out, {H, P2}, "w_out"),
                           same(w.D, {H}, "D"), same(w.w_glu, {2 * H, H}, "w_glu"),
                           same(w.b_glu, {2 * H}, "b_glu"), mean, invstd, batch, p, seed_arg(seed_gelu),
                           seed_arg(seed_glu), to_handle(comm), count, mode.batch_stats, keep);
}

Tensor gelu_dropout(const Tensor& z, const Tensor& u, const Tensor& D, double p, uint64_t seed) {
  check_rows(z, "fused::gelu_dropout");
  TORCH_CHECK(u.defined() == D.defined(),
              "fused::gelu_dropout: u and D must both be given or both be undefined");
  if (u.defined()) {
    TORCH_CHECK(u.sizes() == z.sizes(), "fused::gelu_dropout: u must be ", z.sizes(), ", got ", u.sizes());
    TORCH_CHECK(D.dim() == 1 && D.size(0) == z.size(1), "fused::gelu_dropout: D must be [", z.size(1),
                "], got ", D.sizes());
    TORCH_CHECK(u.scalar_type() == z.scalar_type() && D.scalar_type() == z.scalar_type(),
                "fused::gelu_dropout: z, u and D must share a dtype");
  }
  make_spec(p, seed);
  if (!u.defined()) {
    // LibTorch 1.13's custom-function apply() cannot take undefined tensors (VariableInfo reads
    // their device): empty placeholders instead.
    auto none = torch::empty({0}, z.options());
    return GeluDropoutFn::apply(z, none, none, p, seed_arg(seed));
  }
  return GeluDropoutFn::apply(z, u, D, p, seed_arg(seed));
}

Tensor glu_dropout_residual(const Tensor& ab, const Tensor& residual, double p, uint64_t seed) {
  check_rows(residual, "fused::glu_dropout_residual");
  TORCH_CHECK(ab.dim() == 2 && ab.size(0) == residual.size(0) && ab.size(1) == 2 * residual.size(1),
              "fused::glu_dropout_residual: ab must be [", residual.size(0), ", ", 2 * residual.size(1),
              "], got ", ab.sizes());
  TORCH_CHECK(ab.scalar_type() == residual.scalar_type(),
              "fused::glu_dropout_residual: ab and residual must share a dtype");
  make_spec(p, seed);
  return GluDropoutResidualFn::apply(ab, residual, p, seed_arg(seed));
}

}  // namespace rt::ssm::fused

#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC pop_options
#endif
