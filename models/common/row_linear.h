// Linear layers applied to rows [N, K] (the SSM decoders' [B·T, H] layout): x · weightᵀ + bias,
// as one autograd node whose forward and backward products go to oneDNN's row-major sgemm
// (dnnl_sgemm) when the LibTorch in the process links oneDNN as a shared library (Debian's
// does), and to aten's addmm / mm otherwise. oneDNN's JIT kernels are chosen for the CPU at run
// time and keep narrow products (64 to 256 columns, as the decoders' are) near the core's peak,
// where a general BLAS spends its time packing. Same function and gradients; only the order of
// the float32 sums differs.
#pragma once

#include <torch/torch.h>

namespace rt::models {

// x [N, K], weight [M, K], bias [M] or undefined → [N, M]. Float32 CPU tensors go to oneDNN
// (contiguous copies are made where needed); anything else (double, CUDA, autocast's low
// precision) takes aten's ops.
torch::Tensor row_linear(const torch::Tensor& x, const torch::Tensor& weight, const torch::Tensor& bias = {});

// C [M, N] (row-major, row stride ldc) = beta·C + op(A)·op(B) on row-major buffers, op = 'N' or
// 'T' (A is [M, K] or [K, M] with row stride lda; B likewise): oneDNN's sgemm for float where
// the process has it, aten's mm / addmm otherwise (and for double). For kernels that work on
// tiles of rows (fused::ssm_block in models/ssm/fused_ops.h); callable inside at::parallel_for.
template <typename T>
void gemm_rows(char ta, char tb, int64_t M, int64_t N, int64_t K, const T* A, int64_t lda, const T* B,
               int64_t ldb, T beta, T* C, int64_t ldc);

// Whether row_linear can use oneDNN's sgemm in this process: the one of the LibTorch in the
// process when it links oneDNN as a shared library (Debian's), else the system's libdnnl
// (libdnnl.so.3 or .so.2) opened beside it, as PyPI's LibTorch keeps its own oneDNN's symbols
// hidden.
bool row_linear_uses_onednn();

// Process-wide switch (default on): off sends every float product to aten's mm
// (`rave_bench step --gemm aten`, for A/B runs).
void set_onednn_gemm(bool enabled);

// The library that gemm_rows<float> calls, for logs and benchmark records:
// "oneDNN 2.6.3 (libdnnl.so.2, opened beside LibTorch)", or aten's mm.
std::string gemm_library();

}  // namespace rt::models
