#include "models/common/conv1d_backward.h"

#include <ATen/Parallel.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <functional>
#include <limits>
#include <tuple>
#include <vector>

#include "models/common/row_linear.h"
#include "util/simd_clones.h"
#include "util/torch_compat.h"

namespace rt::models {
namespace {

std::atomic<bool> g_enabled{true};
std::atomic<bool> g_forward_enabled{true};

int64_t output_steps(int64_t Tin, int64_t k, int64_t s, int64_t p, int64_t d) {
  return (Tin + 2 * p - d * (k - 1) - 1) / s + 1;
}

// The output steps t in [t0, t1) whose input index t·s + o (o = j·d − p, tap j) lies in [0, T_in):
// the others read padding.
inline std::pair<int64_t, int64_t> tap_range(int64_t o, int64_t s, int64_t Tin, int64_t Tout) {
  const int64_t t0 = std::min(Tout, o >= 0 ? int64_t{0} : (-o + s - 1) / s);
  const int64_t last = Tin - 1 - o;  // t·s ≤ last
  const int64_t t1 = last < 0 ? t0 : std::clamp<int64_t>(last / s + 1, t0, Tout);
  return {t0, t1};
}

// Long outputs: dW = Σ_b Σ_t G_b[:, t] · col_b[:, t]ᵀ with col_b[(i, j), t] = x_b[i, t + j·d − p]
// (0 in the padding), computed as [C_out, C_in·k], the kernel's own layout. Each example on one
// thread, its output steps in chunks of kWeightGradSteps: the chunk of G_b and of the unfolded
// input copied into compact buffers, one GEMM per chunk accumulated into the example's partial;
// then the partials summed over the examples in order, so the result does not depend on the
// thread count. Why the copies: one GEMM per example and tap on the rows in place
// ([C_out, T] · [T, C_in] with rows T floats apart) ran at 97 GFLOP/s with oneDNN's sgemm on a
// Zen 5 core at 96 channels × 2048 steps (rows 8 KiB apart share cache sets; the products' K is
// long and their M, N short), the compact chunks ([96, 256] · [256, 288]) at 240.
template <typename T>
void weight_grad_chunked(const T* x, const T* g, T* dw, int64_t B, int64_t Cin, int64_t Tin, int64_t Cout,
                         int64_t Tout, int64_t k, int64_t p, int64_t d, const torch::TensorOptions& options) {
  constexpr int64_t kWeightGradSteps = 256;
  const int64_t rows = Cin * k, plane = Cout * rows;
  torch::Tensor partial_t = torch::empty({B, plane}, options);
  T* partial = partial_t.data_ptr<T>();
  at::parallel_for(0, B, 1, [&](int64_t b0, int64_t b1) {
    std::vector<T> cols(static_cast<size_t>(rows * kWeightGradSteps));
    std::vector<T> gc(static_cast<size_t>(Cout * kWeightGradSteps));
    for (int64_t b = b0; b < b1; ++b) {
      const T* xb = x + b * Cin * Tin;
      const T* gb = g + b * Cout * Tout;
      for (int64_t c0 = 0; c0 < Tout; c0 += kWeightGradSteps) {
        const int64_t c1 = std::min(Tout, c0 + kWeightGradSteps), n = c1 - c0;
        for (int64_t i = 0; i < Cin; ++i) {
          for (int64_t j = 0; j < k; ++j) {
            const int64_t o = j * d - p;
            const auto [t0, t1] = tap_range(o, 1, Tin, Tout);
            const int64_t a = std::clamp(t0, c0, c1), e = std::clamp(t1, a, c1);
            T* dst = cols.data() + (i * k + j) * n;
            std::fill(dst, dst + (a - c0), T(0));
            std::copy(xb + i * Tin + a + o, xb + i * Tin + e + o, dst + (a - c0));
            std::fill(dst + (e - c0), dst + n, T(0));
          }
        }
        for (int64_t r = 0; r < Cout; ++r)
          std::copy(gb + r * Tout + c0, gb + r * Tout + c1, gc.data() + r * n);
        gemm_rows<T>('N', 'T', Cout, rows, n, gc.data(), n, cols.data(), n, c0 == 0 ? T(0) : T(1),
                     partial + b * plane, rows);
      }
    }
  });
  at::parallel_for(0, plane, 4096, [&](int64_t e0, int64_t e1) {
    for (int64_t e = e0; e < e1; ++e) {
      T sum = partial[e];
      for (int64_t b = 1; b < B; ++b) sum += partial[b * plane + e];
      dw[e] = sum;
    }
  });
}

// Short outputs: the batch folded into the products' inner dimension. cols [C_in·k, B·T_out]
// holds, at row (i, j) and column (b, t), x_b[i, t + j·d − p] (0 in the padding): unfold's
// matrix, small at these lengths. Then, with the kernel read as it is stored ([C_out, C_in·k]),
//   weight gradient  dW = G · colsᵀ                 ([C_out, B·T_out] · [B·T_out, C_in·k]),
//   input gradient   dcols = Wᵀ · G, folded back by adding each tap's rows at their offsets,
// one GEMM each over every example and tap at once, and no copy of the kernel.
template <typename T>
void unfold_taps(const T* x, T* cols, int64_t B, int64_t Cin, int64_t Tin, int64_t Tout, int64_t k, int64_t s,
                 int64_t p, int64_t d) {
  at::parallel_for(0, Cin, 1, [&](int64_t i0, int64_t i1) {
    for (int64_t i = i0; i < i1; ++i) {
      for (int64_t j = 0; j < k; ++j) {
        const int64_t o = j * d - p;
        const auto [t0, t1] = tap_range(o, s, Tin, Tout);
        T* row = cols + (i * k + j) * B * Tout;
        for (int64_t b = 0; b < B; ++b) {
          T* dst = row + b * Tout;
          const T* src = x + (b * Cin + i) * Tin + o;
          std::fill(dst, dst + t0, T(0));
          if (s == 1) {
            std::copy(src + t0, src + t1, dst + t0);
          } else {
            for (int64_t t = t0; t < t1; ++t) dst[t] = src[t * s];
          }
          std::fill(dst + t1, dst + Tout, T(0));
        }
      }
    }
  });
}

template <typename T>
void fold_taps(const T* cols, T* dx, int64_t B, int64_t Cin, int64_t Tin, int64_t Tout, int64_t k, int64_t s,
               int64_t p, int64_t d) {
  at::parallel_for(0, Cin, 1, [&](int64_t i0, int64_t i1) {
    for (int64_t i = i0; i < i1; ++i) {
      for (int64_t b = 0; b < B; ++b) std::fill(dx + (b * Cin + i) * Tin, dx + (b * Cin + i + 1) * Tin, T(0));
      for (int64_t j = 0; j < k; ++j) {
        const int64_t o = j * d - p;
        const auto [t0, t1] = tap_range(o, s, Tin, Tout);
        const T* row = cols + (i * k + j) * B * Tout;
        for (int64_t b = 0; b < B; ++b) {
          const T* src = row + b * Tout;
          T* dst = dx + (b * Cin + i) * Tin + o;
          for (int64_t t = t0; t < t1; ++t) dst[t * s] += src[t];
        }
      }
    }
  });
}

// The kernel [C_out, C_in, k] as k matrices [C_out, C_in], one per tap: taps[j][o][i] = w[o][i][j],
// so that each tap is an operand the GEMMs read as stored ('N' for the forward, 'T' for the
// input gradient); with row_scale, w[o] is taken times row_scale[o] (a weight norm's g/‖v‖).
template <typename T>
void split_taps(const T* __restrict w, T* __restrict taps, int64_t Cout, int64_t Cin, int64_t k,
                const T* row_scale = nullptr) {
  at::parallel_for(0, Cout, 16, [&](int64_t o0, int64_t o1) {
    for (int64_t o = o0; o < o1; ++o) {
      const T sc = row_scale ? row_scale[o] : T(1);
      for (int64_t i = 0; i < Cin; ++i) {
        const T* src = w + (o * Cin + i) * k;
        for (int64_t j = 0; j < k; ++j) taps[(j * Cout + o) * Cin + i] = row_scale ? src[j] * sc : src[j];
      }
    }
  });
}

// Long outputs at stride 1, without copies: for each example b,
//   y_b[:, t] = bias + Σ_j op(W_j) · x_b[:, t + o_j]    (t in [0, T_y); x_b is 0 outside [0, T_x)),
// one GEMM per example, tap and block of output steps, on row slices of x_b (the padding's zeros
// are skipped, not read) accumulated into y_b's block while it is in cache. The forward is
// op = 'N', o_j = j·d − p (x the input, y the output); the input gradient is op = 'T',
// o_j = p − j·d (x the output gradient, y the input's). W_j = taps[j], [C_out, C_in].
template <typename T>
void tap_products(const T* taps, char op, int64_t Cout, int64_t Cin, const T* x, int64_t Tx, T* y, int64_t Ty,
                  int64_t B, int64_t k, int64_t d, int64_t p, const T* bias) {
  constexpr int64_t kBlock = 1024;  // output steps per GEMM: a [C, 1024] block stays in L2
  const bool forward = op == 'N';
  const int64_t rows_y = forward ? Cout : Cin, rows_x = forward ? Cin : Cout;
  const int64_t blocks = (Ty + kBlock - 1) / kBlock;
  at::parallel_for(0, B * blocks, 1, [&](int64_t q0, int64_t q1) {
    for (int64_t q = q0; q < q1; ++q) {
      const int64_t b = q / blocks, c0 = (q % blocks) * kBlock, c1 = std::min(Ty, c0 + kBlock);
      const T* xb = x + b * rows_x * Tx;
      T* yb = y + b * rows_y * Ty;
      for (int64_t r = 0; r < rows_y; ++r)
        std::fill(yb + r * Ty + c0, yb + r * Ty + c1, bias ? bias[r] : T(0));
      for (int64_t j = 0; j < k; ++j) {
        const int64_t o = forward ? j * d - p : p - j * d;
        auto [t0, t1] = tap_range(o, 1, Tx, Ty);
        t0 = std::max(t0, c0);
        t1 = std::min(t1, c1);
        if (t1 <= t0) continue;
        gemm_rows<T>(op, 'N', rows_y, t1 - t0, rows_x, taps + j * Cout * Cin, Cin, xb + t0 + o, Tx, T(1),
                     yb + t0, Ty);
      }
    }
  });
}

// The forward y = conv1d(x, w, bias, s, p, d) as products. Stride 1 over long outputs:
// tap_products. Otherwise (short outputs, where the channels are many, and strides over 1): the
// input unfolded as the backward unfolds it, one GEMM over every example and tap with the kernel
// as stored ([C_out, C_in·k] · [C_in·k, B·T_out]), and the result laid out as [B, C_out, T_out]
// with the bias added in the same pass.
template <typename T>
torch::Tensor gemm_forward(const torch::Tensor& x, const torch::Tensor& w, const torch::Tensor& bias,
                           int64_t s, int64_t p, int64_t d, int64_t fold_below,
                           const T* row_scale = nullptr) {
  const int64_t B = x.size(0), Cin = x.size(1), Tin = x.size(2), Cout = w.size(0), k = w.size(2);
  const int64_t Tout = output_steps(Tin, k, s, p, d), n = B * Tout;
  const torch::Tensor wc = w.contiguous();
  const T* b = bias.numel() > 0 ? bias.data_ptr<T>() : nullptr;
  auto y = torch::empty({B, Cout, Tout}, x.options());
  if (s == 1 && Tout >= fold_below) {
    auto taps = torch::empty({k, Cout, Cin}, w.options());
    split_taps<T>(wc.data_ptr<T>(), taps.data_ptr<T>(), Cout, Cin, k, row_scale);
    tap_products<T>(taps.data_ptr<T>(), 'N', Cout, Cin, x.data_ptr<T>(), Tin, y.data_ptr<T>(), Tout, B, k, d,
                    p, b);
    return y;
  }
  auto cols = torch::empty({Cin * k, n}, x.options());
  unfold_taps<T>(x.data_ptr<T>(), cols.data_ptr<T>(), B, Cin, Tin, Tout, k, s, p, d);
  auto yf = torch::empty({Cout, n}, x.options());
  gemm_rows<T>('N', 'N', Cout, n, Cin * k, wc.data_ptr<T>(), Cin * k, cols.data_ptr<T>(), n, T(0),
               yf.data_ptr<T>(), n);
  const T* src = yf.data_ptr<T>();
  T* dst = y.data_ptr<T>();
  at::parallel_for(0, B * Cout, 16, [&](int64_t r0, int64_t r1) {
    for (int64_t r = r0; r < r1; ++r) {
      const int64_t bi = r / Cout, o = r % Cout;
      const T* from = src + o * n + bi * Tout;
      T* to = dst + r * Tout;
      const T add = b ? b[o] : T(0);
      if (row_scale) {
        const T sc = row_scale[o];
        for (int64_t t = 0; t < Tout; ++t) to[t] = from[t] * sc + add;
      } else {
        for (int64_t t = 0; t < Tout; ++t) to[t] = from[t] + add;
      }
    }
  });
  return y;
}

// What a weight-normed kernel adds to the products (WnConv1dGemm): the kernel's rows are taken
// times row_scale (g/‖v‖), and finish_rows(gw, r0, r1) turns rows [r0, r1) of the weight gradient gw,
// just written, into the weight norm's gradients.
template <typename T>
struct RowScaled {
  const T* row_scale = nullptr;
  std::function<void(const torch::Tensor& gw, int64_t r0, int64_t r1)> finish_rows;
};

// Both gradients of a short-output convolution (either may be skipped: undefined on return).
template <typename T>
void short_output_grads(const torch::Tensor& x, const torch::Tensor& w, const torch::Tensor& g, int64_t s,
                        int64_t p, int64_t d, bool need_x, bool need_w, torch::Tensor& gx, torch::Tensor& gw,
                        const RowScaled<T>& wn = {}) {
  const int64_t B = x.size(0), Cin = x.size(1), Tin = x.size(2), Cout = w.size(0), k = w.size(2);
  const int64_t Tout = g.size(2), n = B * Tout;
  const torch::Tensor gf = g.permute({1, 0, 2}).contiguous();  // [C_out, B·T_out]
  if (need_w) {
    auto cols = torch::empty({Cin * k, n}, x.options());
    unfold_taps<T>(x.data_ptr<T>(), cols.data_ptr<T>(), B, Cin, Tin, Tout, k, s, p, d);
    gw = torch::empty({Cout, Cin, k}, x.options());
    gemm_rows<T>('N', 'T', Cout, Cin * k, n, gf.data_ptr<T>(), n, cols.data_ptr<T>(), n, T(0),
                 gw.data_ptr<T>(), Cin * k);
    if (wn.finish_rows) wn.finish_rows(gw, 0, Cout);
  }
  if (need_x) {
    const torch::Tensor wc = w.contiguous();
    torch::Tensor gs = gf;  // the rows of G times row_scale: Wᵀ·G = Vᵀ·(S·G)
    if (wn.row_scale) {
      gs = torch::empty_like(gf);
      const T* src = gf.data_ptr<T>();
      T* dst = gs.data_ptr<T>();
      at::parallel_for(0, Cout, 16, [&](int64_t o0, int64_t o1) {
        for (int64_t o = o0; o < o1; ++o) {
          for (int64_t t = 0; t < n; ++t) dst[o * n + t] = src[o * n + t] * wn.row_scale[o];
        }
      });
    }
    auto dcols = torch::empty({Cin * k, n}, x.options());
    gemm_rows<T>('T', 'N', Cin * k, n, Cout, wc.data_ptr<T>(), Cin * k, gs.data_ptr<T>(), n, T(0),
                 dcols.data_ptr<T>(), n);
    gx = torch::empty_like(x);
    fold_taps<T>(dcols.data_ptr<T>(), gx.data_ptr<T>(), B, Cin, Tin, Tout, k, s, p, d);
  }
}

// A transposed convolution y = conv_transpose1d(x, w, stride s, padding p), w [C_in, C_out, k]:
// y[b, o, t·s + j − p] += Σ_i w[i, o, j] · x[b, i, t]. Its gradients read the output gradient G
// the way a strided convolution reads its input: cols [C_out·k, B·T_x] with, at row (o, j) and
// column (b, t), g_b[o, t·s + j − p] (0 outside), unfolded once; then, with the kernel read as
// stored ([C_in, C_out·k]) and X [C_in, B·T_x] (the batch folded into the columns),
//   input gradient   dX = W · cols,
//   weight gradient  dW = X · colsᵀ,
// two GEMMs where aten's backward (oneDNN in LibTorch 2.x, im2col in 1.13) ran at half of them.
template <typename T>
void transposed_grads(const torch::Tensor& x, const torch::Tensor& w, const torch::Tensor& g, int64_t s,
                      int64_t p, bool need_x, bool need_w, torch::Tensor& gx, torch::Tensor& gw) {
  const int64_t B = x.size(0), Cin = x.size(1), Tx = x.size(2), Cout = w.size(1), k = w.size(2);
  const int64_t Ty = g.size(2), n = B * Tx;
  auto cols = torch::empty({Cout * k, n}, g.options());
  unfold_taps<T>(g.data_ptr<T>(), cols.data_ptr<T>(), B, Cout, Ty, Tx, k, s, p, 1);
  if (need_x) {
    const torch::Tensor wc = w.contiguous();
    auto dxf = torch::empty({Cin, B, Tx}, x.options());
    gemm_rows<T>('N', 'N', Cin, n, Cout * k, wc.data_ptr<T>(), Cout * k, cols.data_ptr<T>(), n, T(0),
                 dxf.data_ptr<T>(), n);
    gx = dxf.permute({1, 0, 2}).contiguous();
  }
  if (need_w) {
    const torch::Tensor xf = x.permute({1, 0, 2}).contiguous();  // [C_in, B·T_x]
    gw = torch::empty({Cin, Cout, k}, x.options());
    gemm_rows<T>('N', 'T', Cin, Cout * k, n, xf.data_ptr<T>(), n, cols.data_ptr<T>(), n, T(0),
                 gw.data_ptr<T>(), Cout * k);
  }
}

// The forward of the same transposed convolution as one GEMM and a fold: the output is the
// kernel's columns times the input, cols = Wᵀ · X ([C_out·k, C_in] · [C_in, B·T_x], the
// kernel read as stored), each tap's rows then added at their offsets (fold_taps, the input
// gradient's fold of a strided convolution), the bias last.
template <typename T>
torch::Tensor transposed_forward(const torch::Tensor& x, const torch::Tensor& w, const torch::Tensor& bias,
                                 int64_t s, int64_t p) {
  const int64_t B = x.size(0), Cin = x.size(1), Tx = x.size(2), Cout = w.size(1), k = w.size(2);
  const int64_t Ty = (Tx - 1) * s - 2 * p + k, n = B * Tx;
  const torch::Tensor wc = w.contiguous();
  const torch::Tensor xf = x.permute({1, 0, 2}).contiguous();  // [C_in, B·T_x]
  auto cols = torch::empty({Cout * k, n}, x.options());
  gemm_rows<T>('T', 'N', Cout * k, n, Cin, wc.data_ptr<T>(), Cout * k, xf.data_ptr<T>(), n, T(0),
               cols.data_ptr<T>(), n);
  auto y = torch::empty({B, Cout, Ty}, x.options());
  fold_taps<T>(cols.data_ptr<T>(), y.data_ptr<T>(), B, Cout, Ty, Tx, k, s, p, 1);
  if (bias.numel() > 0) y.add_(bias.view({1, Cout, 1}));
  return y;
}

// wt [C_in, C_out, k] with wt[i][o][k−1−j] = w[o][i][j]: the input gradient's kernel. Blocked
// over (o, i) so both sides stay in cache (aten's flip + transpose + contiguous of a
// [768, 768, 3] kernel took 3.5–15 ms, as long as the convolution itself).
template <typename T>
void flipped_transpose(const T* __restrict w, T* __restrict wt, int64_t Cout, int64_t Cin, int64_t k) {
  constexpr int64_t kBlock = 32;
  at::parallel_for(0, (Cout + kBlock - 1) / kBlock, 1, [&](int64_t b0, int64_t b1) {
    for (int64_t o0 = b0 * kBlock; o0 < std::min(Cout, b1 * kBlock); o0 += kBlock) {
      const int64_t o1 = std::min(Cout, o0 + kBlock);
      for (int64_t i0 = 0; i0 < Cin; i0 += kBlock) {
        const int64_t i1 = std::min(Cin, i0 + kBlock);
        for (int64_t i = i0; i < i1; ++i) {
          for (int64_t o = o0; o < o1; ++o) {
            const T* src = w + (o * Cin + i) * k;
            T* dst = wt + (i * Cout + o) * k;
            for (int64_t j = 0; j < k; ++j) dst[k - 1 - j] = src[j];
          }
        }
      }
    }
  });
}

// Both nodes' forward and backward: the forward is gemm_forward (aten's convolution with
// set_conv1d_forward_gemm off), or transposed_forward for a transposed one (v2 at batch 4 × 32768,
// LibTorch 2.11, interleaved runs of 6 steps: 0.971–0.995 of the step with aten's at 1 thread,
// 0.95–1.02 at 2); the backward is conv1d_gemm_grads or
// conv_transpose1d_gemm_grads, and under create_graph aten's own convolution_backward, which is itself
// differentiable. No bias: an empty tensor (autograd functions take defined tensors). A transposed
// convolution has dilation 1.
torch::Tensor conv_gemm_forward(torch::autograd::AutogradContext* ctx, const torch::Tensor& x,
                                const torch::Tensor& w, const torch::Tensor& bias, int64_t stride,
                                int64_t padding, int64_t dilation, bool transposed) {
  const bool has_bias = bias.numel() > 0;
  ctx->save_for_backward({x, w});
  ctx->saved_data["stride"] = stride;
  ctx->saved_data["padding"] = padding;
  ctx->saved_data["dilation"] = dilation;
  ctx->saved_data["transposed"] = transposed;
  ctx->saved_data["bias"] = has_bias;
  if (transposed && x.size(0) > 0) {
    torch::Tensor y;  // transposed_forward reads x through its own contiguous copy
    AT_DISPATCH_FLOATING_TYPES(x.scalar_type(), "conv_transpose1d_gemm_forward",
                               [&] { y = transposed_forward<scalar_t>(x, w, bias, stride, padding); });
    return y;
  }
  if (!transposed && g_forward_enabled.load()) {
    // In float64, the precision the golden tests compare in, always the unfolded path: its one
    // GEMM over C_in·k in the unfold's order sums as aten's own im2col convolution does (the same
    // bits in RaveTrajectory's float64 steps), where the per-tap products sum the taps last and
    // Adam carries that rounding to 1e-6 of a change within 12 steps. Speed is no concern there.
    const int64_t fold_below =
        x.scalar_type() == torch::kDouble ? std::numeric_limits<int64_t>::max() : kFoldBelowSteps;
    return conv1d_gemm_output(x, w, has_bias ? bias : torch::Tensor(), stride, padding, dilation, fold_below);
  }
  return at::convolution(x, w, has_bias ? bias : torch::Tensor(), {stride}, {padding}, {dilation}, transposed,
                         {0}, 1);
}

// The gradients of x, w and bias, then one undefined one per remaining forward argument.
torch::autograd::variable_list conv_gemm_backward(torch::autograd::AutogradContext* ctx,
                                                  const torch::autograd::variable_list& grads,
                                                  size_t other_arguments) {
  const auto saved = ctx->get_saved_variables();
  const torch::Tensor &x = saved[0], &w = saved[1];
  const int64_t s = ctx->saved_data["stride"].toInt(), p = ctx->saved_data["padding"].toInt(),
                d = ctx->saved_data["dilation"].toInt();
  const bool transposed = ctx->saved_data["transposed"].toBool();
  const bool has_bias = ctx->saved_data["bias"].toBool();
  const torch::Tensor g = grads[0].contiguous();
  const bool need_x = ctx->needs_input_grad(0), need_w = ctx->needs_input_grad(1);
  const bool need_b = has_bias && ctx->needs_input_grad(2);
  torch::Tensor gx, gw, gb;
  if (torch::GradMode::is_enabled()) {
    const std::vector<int64_t> bias_sizes{w.size(transposed ? 1 : 0)};
    std::tie(gx, gw, gb) =
        at::convolution_backward(g, x, w, has_bias ? at::OptionalIntArrayRef(bias_sizes) : c10::nullopt, {s},
                                 {p}, {d}, transposed, {0}, 1, {need_x, need_w, need_b});
  } else {
    std::tie(gx, gw) = transposed ? conv_transpose1d_gemm_grads(x, w, g, s, p, need_x, need_w)
                                  : conv1d_gemm_grads(x, w, g, s, p, d, kFoldBelowSteps, need_x, need_w);
    if (need_b) gb = g.sum(at::IntArrayRef{0, 2});
  }
  torch::autograd::variable_list out{gx, gw, gb};
  out.resize(3 + other_arguments);
  return out;
}

class Conv1dGemm : public torch::autograd::Function<Conv1dGemm> {
 public:
  static torch::Tensor forward(torch::autograd::AutogradContext* ctx, const torch::Tensor& x,
                               const torch::Tensor& w, const torch::Tensor& bias, int64_t stride,
                               int64_t padding, int64_t dilation) {
    return conv_gemm_forward(ctx, x, w, bias, stride, padding, dilation, false);
  }
  static torch::autograd::variable_list backward(torch::autograd::AutogradContext* ctx,
                                                 torch::autograd::variable_list grads) {
    return conv_gemm_backward(ctx, grads, 3);  // stride, padding, dilation
  }
};

class ConvTranspose1dGemm : public torch::autograd::Function<ConvTranspose1dGemm> {
 public:
  static torch::Tensor forward(torch::autograd::AutogradContext* ctx, const torch::Tensor& x,
                               const torch::Tensor& w, const torch::Tensor& bias, int64_t stride,
                               int64_t padding) {
    return conv_gemm_forward(ctx, x, w, bias, stride, padding, 1, true);
  }
  static torch::autograd::variable_list backward(torch::autograd::AutogradContext* ctx,
                                                 torch::autograd::variable_list grads) {
    return conv_gemm_backward(ctx, grads, 2);  // stride, padding
  }
};

// What both nodes need of their operands: CPU, float or double, the same type, 1-D
// convolutions' shapes, no autocast.
bool cpu_float_conv_operands(const torch::Tensor& x, const torch::Tensor& w) {
  const auto type = x.scalar_type();
  return x.device().is_cpu() && w.device().is_cpu() && (type == torch::kFloat || type == torch::kDouble) &&
         w.scalar_type() == type && x.dim() == 3 && w.dim() == 3 &&
         !compat::autocast_enabled(c10::DeviceType::CPU);
}

// conv1d_gemm_grads on contiguous x and g, with what a weight-normed kernel adds (RowScaled).
template <typename T>
std::pair<torch::Tensor, torch::Tensor> conv_grads(const torch::Tensor& x, const torch::Tensor& w,
                                                   const torch::Tensor& g, int64_t s, int64_t p, int64_t d,
                                                   int64_t fold_below, bool need_x, bool need_w,
                                                   const RowScaled<T>& wn = {}) {
  const int64_t B = x.size(0), Cin = x.size(1), Tin = x.size(2), Cout = w.size(0), k = w.size(2);
  const int64_t Tout = g.size(2);
  TORCH_CHECK(g.size(0) == B && g.size(1) == Cout && Tout == output_steps(Tin, k, s, p, d),
              "conv1d_gemm_grads: output gradient ", g.sizes(), " does not match input ", x.sizes(),
              " and kernel ", w.sizes(), " with stride ", s, ", padding ", p, ", dilation ", d);
  torch::Tensor gx, gw;
  if (B == 0 || Tout == 0) {
    if (need_x) gx = torch::zeros_like(x);
    if (need_w) {
      gw = torch::zeros_like(w);
      if (wn.finish_rows) wn.finish_rows(gw, 0, Cout);
    }
    return {gx, gw};
  }
  if (s > 1 || Tout < fold_below) {
    short_output_grads<T>(x, w, g, s, p, d, need_x, need_w, gx, gw, wn);
    return {gx, gw};
  }
  if (need_x && (g_forward_enabled.load() || wn.row_scale)) {  // Σ_j W_jᵀ · g shifted by p − j·d
    const torch::Tensor wc = w.contiguous();
    auto taps = torch::empty({k, Cout, Cin}, w.options());
    split_taps<T>(wc.data_ptr<T>(), taps.data_ptr<T>(), Cout, Cin, k, wn.row_scale);
    gx = torch::empty_like(x);
    tap_products<T>(taps.data_ptr<T>(), 'T', Cout, Cin, g.data_ptr<T>(), Tout, gx.data_ptr<T>(), Tin, B, k, d,
                    p, nullptr);
  } else if (need_x) {  // a forward convolution of g with the flipped, transposed kernel
    const torch::Tensor wc = w.contiguous();
    torch::Tensor w_flipped = torch::empty({Cin, Cout, k}, w.options());
    flipped_transpose<T>(wc.data_ptr<T>(), w_flipped.data_ptr<T>(), Cout, Cin, k);
    gx = at::convolution(g, w_flipped, {}, {1}, {(k - 1) * d - p}, {d}, false, {0}, 1);
  }
  if (need_w) {
    gw = torch::empty({Cout, Cin, k}, x.options());
    weight_grad_chunked<T>(x.data_ptr<T>(), g.data_ptr<T>(), gw.data_ptr<T>(), B, Cin, Tin, Cout, Tout, k, p,
                           d, x.options());
    if (wn.finish_rows) wn.finish_rows(gw, 0, Cout);
  }
  return {gx, gw};
}

// A weight-normed kernel w = g · v / ‖v‖ (norms over all dims but 0, as RAVE's weight_norm).
// Row kernels, vectorised (16 partial sums, as aten's own reduction keeps vector lanes, then
// added in double): Σ a·b over a row, and out = α·gw − β·v.
constexpr int kLanes = 16;
template <typename T>
inline __attribute__((always_inline)) double row_dot(const T* __restrict a, const T* __restrict b,
                                                     int64_t n) {
  T acc[kLanes] = {};
  int64_t l = 0;
  for (; l + kLanes <= n; l += kLanes) {
    for (int q = 0; q < kLanes; ++q) acc[q] += a[l + q] * b[l + q];
  }
  double sum = 0;
  for (int q = 0; q < kLanes; ++q) sum += acc[q];
  for (; l < n; ++l) sum += static_cast<double>(a[l]) * b[l];
  return sum;
}
RT_SIMD_CLONES double wn_row_dot(const float* a, const float* b, int64_t n) { return row_dot(a, b, n); }
RT_SIMD_CLONES double wn_row_dot(const double* a, const double* b, int64_t n) { return row_dot(a, b, n); }
template <typename T>
inline __attribute__((always_inline)) void row_axpby(T* __restrict gw, const T* __restrict v, T alpha, T beta,
                                                     int64_t n) {
  for (int64_t l = 0; l < n; ++l) gw[l] = alpha * gw[l] - beta * v[l];
}
RT_SIMD_CLONES void wn_row_update(float* gw, const float* v, float alpha, float beta, int64_t n) {
  row_axpby(gw, v, alpha, beta, n);
}
RT_SIMD_CLONES void wn_row_update(double* gw, const double* v, double alpha, double beta, int64_t n) {
  row_axpby(gw, v, alpha, beta, n);
}

// n_r = ‖v_r‖ and s_r = g_r / n_r for each of the R rows of v [R, L].
template <typename T>
void wn_scales(const T* v, const T* g, T* norm, T* scale, int64_t R, int64_t L) {
  at::parallel_for(0, R, 16, [&](int64_t r0, int64_t r1) {
    for (int64_t r = r0; r < r1; ++r) {
      norm[r] = static_cast<T>(std::sqrt(wn_row_dot(v + r * L, v + r * L, L)));
      scale[r] = g[r] / norm[r];
    }
  });
}

// The weight norm's backward on rows [r0, r1), aten's formula: with gw = ∂L/∂w,
// ∂L/∂g = (gw·v)/n and ∂L/∂v = s·gw − (s·∂L/∂g / n)·v, written over gw.
template <typename T>
void wn_backward_rows(T* gw, const T* v, const T* norm, const T* scale, T* gg, int64_t r0, int64_t r1,
                      int64_t L) {
  at::parallel_for(r0, r1, 16, [&](int64_t a0, int64_t a1) {
    for (int64_t r = a0; r < a1; ++r) {
      const T grad_g = static_cast<T>(wn_row_dot(gw + r * L, v + r * L, L) / norm[r]);
      gg[r] = grad_g;
      const T a = scale[r], b = a * grad_g / norm[r];
      wn_row_update(gw + r * L, v + r * L, a, b, L);
    }
  });
}

std::atomic<bool> g_weight_norm_fused{true};

// WNConv1d's convolution with its weight norm in the node (float or double; WNConv1d sends
// float32): the kernel g·v/‖v‖ is never materialised. Forward: the rows of v taken times s = g/‖v‖
// where the products read them anyway (the long path's taps; the short path's output rows, in the
// pass that lays them out). Backward: the input gradient with the same scaled taps, or Vᵀ·(S·G);
// the weight gradient as the plain node computes it, then turned in place into ∂L/∂v and ∂L/∂g
// (wn_backward_rows) right after the GEMM wrote it (still in L3 for all but the largest kernels;
// blocking the GEMM by rows would repack its other operand once per block, as large as the
// gradient at RAVE's short-path shapes). Under create_graph, aten's differentiable
// weight norm, convolution backward and weight-norm backward.
class WnConv1dGemm : public torch::autograd::Function<WnConv1dGemm> {
 public:
  static torch::Tensor forward(torch::autograd::AutogradContext* ctx, const torch::Tensor& x_in,
                               const torch::Tensor& v_in, const torch::Tensor& g_in,
                               const torch::Tensor& bias, int64_t stride, int64_t padding, int64_t dilation) {
    const torch::Tensor x = x_in.contiguous(), v = v_in.contiguous(), g = g_in.contiguous();
    const int64_t R = v.size(0), L = v.numel() / R;
    auto norm = torch::empty({R}, v.options()), scale = torch::empty({R}, v.options());
    torch::Tensor y;
    AT_DISPATCH_FLOATING_TYPES(x.scalar_type(), "wn_conv1d_gemm_forward", [&] {
      wn_scales<scalar_t>(v.data_ptr<scalar_t>(), g.data_ptr<scalar_t>(), norm.data_ptr<scalar_t>(),
                          scale.data_ptr<scalar_t>(), R, L);
      const torch::Tensor b = bias.numel() > 0 ? bias.contiguous() : bias;
      y = x.size(0) == 0 ? torch::empty({0, R, output_steps(x.size(2), v.size(2), stride, padding, dilation)},
                                        x.options())
                         : gemm_forward<scalar_t>(x, v, b, stride, padding, dilation, kFoldBelowSteps,
                                                  scale.data_ptr<scalar_t>());
    });
    ctx->save_for_backward({x, v, g, norm, scale});
    ctx->saved_data["stride"] = stride;
    ctx->saved_data["padding"] = padding;
    ctx->saved_data["dilation"] = dilation;
    ctx->saved_data["bias"] = bias.numel() > 0;
    return y;
  }

  static torch::autograd::variable_list backward(torch::autograd::AutogradContext* ctx,
                                                 torch::autograd::variable_list grads) {
    const auto saved = ctx->get_saved_variables();
    const torch::Tensor &x = saved[0], &v = saved[1], &g = saved[2], &norm = saved[3], &scale = saved[4];
    const int64_t s = ctx->saved_data["stride"].toInt(), p = ctx->saved_data["padding"].toInt(),
                  d = ctx->saved_data["dilation"].toInt();
    const bool has_bias = ctx->saved_data["bias"].toBool();
    const torch::Tensor go = grads[0].contiguous();
    const bool need_x = ctx->needs_input_grad(0),
               need_vg = ctx->needs_input_grad(1) || ctx->needs_input_grad(2);
    const bool need_b = has_bias && ctx->needs_input_grad(3);
    torch::Tensor gx, gv, gg, gb;
    if (torch::GradMode::is_enabled()) {  // create_graph: every piece differentiable
      const torch::Tensor w = at::_weight_norm(v, g, 0);
      const std::vector<int64_t> bias_sizes{v.size(0)};
      std::tie(gx, gv, gb) =
          at::convolution_backward(go, x, w, has_bias ? at::OptionalIntArrayRef(bias_sizes) : c10::nullopt,
                                   {s}, {p}, {d}, false, {0}, 1, {need_x, need_vg, need_b});
      if (need_vg)
        std::tie(gv, gg) =
            at::_weight_norm_differentiable_backward(gv, v, g, at::norm_except_dim(v, 2, 0), 0);
    } else {
      const int64_t R = v.size(0), L = v.numel() / R;
      gg = torch::empty_like(g);
      AT_DISPATCH_FLOATING_TYPES(x.scalar_type(), "wn_conv1d_gemm_backward", [&] {
        RowScaled<scalar_t> wn;
        wn.row_scale = scale.data_ptr<scalar_t>();
        wn.finish_rows = [&](const torch::Tensor& gw, int64_t r0, int64_t r1) {
          wn_backward_rows<scalar_t>(gw.data_ptr<scalar_t>(), v.data_ptr<scalar_t>(),
                                     norm.data_ptr<scalar_t>(), scale.data_ptr<scalar_t>(),
                                     gg.data_ptr<scalar_t>(), r0, r1, L);
        };
        std::tie(gx, gv) = conv_grads<scalar_t>(x, v, go, s, p, d, kFoldBelowSteps, need_x, need_vg, wn);
      });
      if (need_b) gb = go.sum(at::IntArrayRef{0, 2});
    }
    return {gx, gv, gg, gb, {}, {}, {}};
  }
};

}  // namespace

bool conv1d_gemm_applies(const torch::Tensor& x, const torch::Tensor& w, int64_t stride, int64_t padding,
                         int64_t dilation) {
  if (!(cpu_float_conv_operands(x, w) && x.size(1) == w.size(1) && stride >= 1 && dilation >= 1 &&
        padding >= 0)) {
    return false;
  }
  const int64_t k = w.size(2);
  if (output_steps(x.size(2), k, stride, padding, dilation) < 1) return false;
  // Stride 1: padding the input gradient's convolution can mirror. Longer strides: any kernel
  // and padding (the short-output path takes them all).
  return stride > 1 || padding <= (k - 1) * dilation;
}

torch::Tensor conv1d_gemm(const torch::Tensor& x, const torch::Tensor& w, const torch::Tensor& bias,
                          int64_t stride, int64_t padding, int64_t dilation) {
  TORCH_CHECK(conv1d_gemm_applies(x, w, stride, padding, dilation), "conv1d_gemm: input ", x.sizes(), " ",
              x.scalar_type(), ", weight ", w.sizes(), ", stride ", stride, ", padding ", padding,
              ", dilation ", dilation, " is not a case it takes (conv1d_gemm_applies)");
  return Conv1dGemm::apply(x, w, bias.defined() ? bias : torch::empty({0}, w.options()), stride, padding,
                           dilation);
}

torch::Tensor conv1d_gemm_output(const torch::Tensor& x_in, const torch::Tensor& w, const torch::Tensor& bias,
                                 int64_t stride, int64_t padding, int64_t dilation, int64_t fold_below) {
  TORCH_CHECK(conv1d_gemm_applies(x_in, w, stride, padding, dilation), "conv1d_gemm_output: input ",
              x_in.sizes(), " ", x_in.scalar_type(), ", weight ", w.sizes(), ", stride ", stride,
              ", padding ", padding, ", dilation ", dilation,
              " is not a case it takes (conv1d_gemm_applies)");
  const torch::Tensor x = x_in.contiguous();
  const torch::Tensor b = bias.defined() ? bias.contiguous() : torch::empty({0}, w.options());
  if (x.size(0) == 0) {
    return torch::empty({0, w.size(0), output_steps(x.size(2), w.size(2), stride, padding, dilation)},
                        x.options());
  }
  torch::Tensor y;
  AT_DISPATCH_FLOATING_TYPES(x.scalar_type(), "conv1d_gemm_output", [&] {
    y = gemm_forward<scalar_t>(x, w, b, stride, padding, dilation, fold_below);
  });
  return y;
}

bool conv_transpose1d_gemm_applies(const torch::Tensor& x, const torch::Tensor& w, int64_t stride,
                                   int64_t padding) {
  if (!(cpu_float_conv_operands(x, w) && x.size(1) == w.size(0) && stride >= 1 && padding >= 0 &&
        x.size(2) >= 1)) {
    return false;
  }
  return (x.size(2) - 1) * stride - 2 * padding + w.size(2) >= 1;  // at least one output step
}

torch::Tensor conv_transpose1d_gemm(const torch::Tensor& x, const torch::Tensor& w, const torch::Tensor& bias,
                                    int64_t stride, int64_t padding) {
  TORCH_CHECK(conv_transpose1d_gemm_applies(x, w, stride, padding), "conv_transpose1d_gemm: input ",
              x.sizes(), " ", x.scalar_type(), ", weight ", w.sizes(), ", stride ", stride, ", padding ",
              padding, " is not a case it takes (conv_transpose1d_gemm_applies)");
  return ConvTranspose1dGemm::apply(x, w, bias.defined() ? bias : torch::empty({0}, w.options()), stride,
                                    padding);
}

std::pair<torch::Tensor, torch::Tensor> conv_transpose1d_gemm_grads(const torch::Tensor& x_in,
                                                                    const torch::Tensor& w,
                                                                    const torch::Tensor& g_in, int64_t s,
                                                                    int64_t p, bool need_x, bool need_w) {
  const torch::Tensor x = x_in.contiguous(), g = g_in.contiguous();
  const int64_t B = x.size(0), Tx = x.size(2), Cout = w.size(1), k = w.size(2);
  TORCH_CHECK(g.size(0) == B && g.size(1) == Cout && g.size(2) == (Tx - 1) * s - 2 * p + k,
              "conv_transpose1d_gemm_grads: output gradient ", g.sizes(), " does not match input ", x.sizes(),
              " and kernel ", w.sizes(), " with stride ", s, ", padding ", p);
  torch::Tensor gx, gw;
  if (B == 0) {
    if (need_x) gx = torch::zeros_like(x);
    if (need_w) gw = torch::zeros_like(w);
    return {gx, gw};
  }
  AT_DISPATCH_FLOATING_TYPES(x.scalar_type(), "conv_transpose1d_gemm_grads",
                             [&] { transposed_grads<scalar_t>(x, w, g, s, p, need_x, need_w, gx, gw); });
  return {gx, gw};
}

bool wn_conv1d_gemm_applies(const torch::Tensor& x, const torch::Tensor& v, const torch::Tensor& g,
                            int64_t stride, int64_t padding, int64_t dilation) {
  return g_weight_norm_fused.load() && g_enabled.load() && g_forward_enabled.load() &&
         x.scalar_type() == torch::kFloat && conv1d_gemm_applies(x, v, stride, padding, dilation) &&
         g.device().is_cpu() && g.scalar_type() == v.scalar_type() && g.numel() == v.size(0);
}

torch::Tensor wn_conv1d_gemm(const torch::Tensor& x, const torch::Tensor& v, const torch::Tensor& g,
                             const torch::Tensor& bias, int64_t stride, int64_t padding, int64_t dilation) {
  TORCH_CHECK(conv1d_gemm_applies(x, v, stride, padding, dilation) && g.scalar_type() == v.scalar_type() &&
                  g.numel() == v.size(0),
              "wn_conv1d_gemm: input ", x.sizes(), " ", x.scalar_type(), ", v ", v.sizes(), ", g ", g.sizes(),
              ", stride ", stride, ", padding ", padding, ", dilation ", dilation, " is not a case it takes");
  return WnConv1dGemm::apply(x, v, g, bias.defined() ? bias : torch::empty({0}, v.options()), stride, padding,
                             dilation);
}

void set_conv1d_weight_norm_fused(bool enabled) { g_weight_norm_fused.store(enabled); }
bool conv1d_weight_norm_fused() { return g_weight_norm_fused.load(); }

void set_conv1d_backward_gemm(bool enabled) { g_enabled.store(enabled); }
void set_conv1d_forward_gemm(bool enabled) { g_forward_enabled.store(enabled); }
bool conv1d_forward_gemm() { return g_forward_enabled.load(); }
bool conv1d_backward_gemm() { return g_enabled.load(); }

std::pair<torch::Tensor, torch::Tensor> conv1d_gemm_grads(const torch::Tensor& x_in, const torch::Tensor& w,
                                                          const torch::Tensor& g_in, int64_t s, int64_t p,
                                                          int64_t d, int64_t fold_below, bool need_x,
                                                          bool need_w) {
  const torch::Tensor x = x_in.contiguous(), g = g_in.contiguous();
  torch::Tensor gx, gw;
  AT_DISPATCH_FLOATING_TYPES(x.scalar_type(), "conv1d_gemm_grads", [&] {
    std::tie(gx, gw) = conv_grads<scalar_t>(x, w, g, s, p, d, fold_below, need_x, need_w);
  });
  return {gx, gw};
}

}  // namespace rt::models
