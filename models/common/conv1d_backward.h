// A Conv1d and a ConvTranspose1d computed as products of our own on the CPU, forward and
// backward, where aten's convolution kernels ran below the GEMM speed at RAVE's shapes. The
// Conv1d's forward: at stride 1 over long outputs, one GEMM per example, tap and block of 1024
// output steps on row slices of the input, accumulated in place (no copy of the input: the
// padding's zeros are skipped); otherwise the input unfolded ([C_in·k, B·T_out]) and one GEMM
// with the kernel as stored. The ConvTranspose1d's: one GEMM of the kernel as stored with the
// input ([C_out·k, C_in] · [C_in, B·T]) and a fold of the taps' rows into the output (a
// temporary of k/stride outputs' size), where aten's (oneDNN in LibTorch 2.x) ran at 78 GFLOP/s.
// The Conv1d forward's products against aten's (oneDNN's) convolution: 0.88–0.91 of a RAVE v2/v3
// phase-1 step at 1 thread on a Zen 5 core, LibTorch 1.13 and 2.11 (docs/perf/rave_cpu.md).
// WNConv1d's weight norm can ride in the Conv1d node too (wn_conv1d_gemm, below): 0.98 of the
// step at 1 and 2 threads.
//
// Why: on the CPU aten hands a convolution's backward to oneDNN, whose backward kernels run well
// below its forward ones at RAVE's shapes. Measured at 1 thread, batch 4, float32 (oneDNN in
// LibTorch 1.13 and 2.11; docs/perf/rave_cpu.md): 768 channels × 32 steps, kernel 3: forward
// 4–5 ms, backward 13–24 ms, of which the weight gradient alone 7–15 ms; 96 channels × 2048
// steps at dilation 9: 5–11 ms and 11–22 ms; the encoder's strided downsampling convolutions
// 44 GFLOP/s in their backward, a third of the GEMM peak. The gradients are products, computed
// here with faster kernels:
//   - stride 1, long outputs (at least kFoldBelowSteps steps):
//     - input gradient: Σ_j W_jᵀ · G shifted by p − j·d, the forward's products with each tap
//       read transposed (with set_conv1d_forward_gemm off: aten's forward convolution of G
//       with the kernel flipped in time and its channel axes swapped);
//     - weight gradient: Σ_b G_b · col_bᵀ as [C_out, C_in·k] (the kernel's layout), col_b the
//       example's input unfolded, over chunks of 256 output steps copied into compact buffers,
//       one GEMM per example and chunk (gemm_rows: oneDNN's sgemm where the process has it or
//       can open it, else aten's mm); one GEMM per tap on the rows in place ran at 0.4 of that
//       speed at 96 channels × 2048 steps (0.93–0.95 of a v2/v3 step, docs/perf/rave_cpu.md);
//   - short outputs (where the channels are many) and every stride longer than 1: both
//     gradients as one GEMM each over every example and tap, on the unfolded input
//     [C_in·k, B·T_out] and the kernel as stored ([C_out, C_in·k]), so that the kernel is never
//     copied or transposed;
//   - transposed convolutions (the decoder's upsampling; aten's backward 75 GFLOP/s in
//     LibTorch 2.11, half the GEMM peak): the output gradient unfolded once as a strided
//     convolution reads its input, then both gradients one GEMM each;
//   - bias gradient: the sum of G over batch and time.
// Same function and gradients as aten's; only the order of the floating-point sums differs.
// A second backward (create_graph) goes through aten's differentiable convolution_backward.
#pragma once

#include <torch/torch.h>

namespace rt::models {

// Whether conv1d_gemm can take (x, w): CPU, float or double, no autocast, groups 1, at least one
// output step; at stride 1 0 ≤ padding ≤ (k−1)·dilation (1×1 kernels included: aten hands them
// to oneDNN at 2 threads, whose backward ran at half the GEMMs' speed); at longer strides any kernel and
// padding ≥ 0 (those always take the short-output path).
bool conv1d_gemm_applies(const torch::Tensor& x, const torch::Tensor& w, int64_t stride, int64_t padding,
                         int64_t dilation);

// y = conv1d(x, w, bias, stride, padding (both sides), dilation) with the backward above.
// x [B, C_in, T], w [C_out, C_in, k], bias [C_out] or undefined. Callers check
// conv1d_gemm_applies first (WNConv1d does).
torch::Tensor conv1d_gemm(const torch::Tensor& x, const torch::Tensor& w, const torch::Tensor& bias,
                          int64_t stride, int64_t padding, int64_t dilation);

// The same for a transposed convolution (WNConvTranspose1d: groups 1, dilation 1, no output
// padding): y = conv_transpose1d(x, w, bias, stride, padding), x [B, C_in, T], w [C_in, C_out, k];
// the forward is a GEMM and a fold (above), both gradients are GEMMs over the output gradient
// unfolded once (a strided convolution's view of it). Applies: CPU, float or double, no autocast, at least
// one input and one output step.
bool conv_transpose1d_gemm_applies(const torch::Tensor& x, const torch::Tensor& w, int64_t stride,
                                   int64_t padding);
torch::Tensor conv_transpose1d_gemm(const torch::Tensor& x, const torch::Tensor& w, const torch::Tensor& bias,
                                    int64_t stride, int64_t padding);

// WNConv1d's weight-normed convolution, w = g · v / ‖v‖ (norms over all dims but 0), as one node
// whose products read v and scale its rows by g/‖v‖ where they pass anyway, so that the kernel
// is never materialised, and whose backward turns the weight gradient into ∂L/∂v and ∂L/∂g in
// place (aten's formulas). v [C_out, C_in, k], g with C_out elements ([C_out, 1, 1] as
// WNConv1d stores it). WNConv1d takes it for float32 training when wn_conv1d_gemm_applies
// (float64, the golden tests' precision, keeps aten's weight norm and the plain node).
bool wn_conv1d_gemm_applies(const torch::Tensor& x, const torch::Tensor& v, const torch::Tensor& g,
                            int64_t stride, int64_t padding, int64_t dilation);
torch::Tensor wn_conv1d_gemm(const torch::Tensor& x, const torch::Tensor& v, const torch::Tensor& g,
                             const torch::Tensor& bias, int64_t stride, int64_t padding, int64_t dilation);
// Process-wide switch (default on) for it (`rave_bench step --ab weight_norm`).
void set_conv1d_weight_norm_fused(bool enabled);
bool conv1d_weight_norm_fused();

// Process-wide switch (default on), read by WNConv1d and WNConvTranspose1d: off sends every
// convolution to aten's convolution and its backward (`rave_bench step --conv_backward aten`, for A/B runs).
void set_conv1d_backward_gemm(bool enabled);
bool conv1d_backward_gemm();
// The same for the Conv1d node's forward and, at stride 1 over long outputs, its input gradient:
// products of our own (default on) or aten's convolution (`rave_bench step --conv_forward aten`).
void set_conv1d_forward_gemm(bool enabled);
bool conv1d_forward_gemm();

// Both gradients of y = conv1d(x, w, stride, padding, dilation) given g = ∂L/∂y, as the node
// computes them: the short-output path when the stride is longer than 1 or T_out < fold_below,
// else the long one (exposed so that tests reach both; at stride 1, 0 never folds and a large
// value always does). Undefined where not needed.
inline constexpr int64_t kFoldBelowSteps = 256;
std::pair<torch::Tensor, torch::Tensor> conv1d_gemm_grads(const torch::Tensor& x, const torch::Tensor& w,
                                                          const torch::Tensor& g, int64_t stride,
                                                          int64_t padding, int64_t dilation,
                                                          int64_t fold_below = kFoldBelowSteps,
                                                          bool need_x = true, bool need_w = true);
// The Conv1d node's forward value, as it computes it (set_conv1d_forward_gemm on): at stride 1
// and at least fold_below output steps, one GEMM per example, tap and block of output steps on
// row slices of the input (no copy); otherwise the input unfolded ([C_in·k, B·T_out]) and one
// GEMM with the kernel as stored. Exposed so that tests reach both paths.
torch::Tensor conv1d_gemm_output(const torch::Tensor& x, const torch::Tensor& w, const torch::Tensor& bias,
                                 int64_t stride, int64_t padding, int64_t dilation,
                                 int64_t fold_below = kFoldBelowSteps);
// The transposed convolution's two gradients, as its node computes them.
std::pair<torch::Tensor, torch::Tensor> conv_transpose1d_gemm_grads(const torch::Tensor& x,
                                                                    const torch::Tensor& w,
                                                                    const torch::Tensor& g, int64_t stride,
                                                                    int64_t padding, bool need_x = true,
                                                                    bool need_w = true);

}  // namespace rt::models
