#include "models/common/row_linear.h"

#include <ATen/Parallel.h>
#include <dlfcn.h>

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "util/simd_clones.h"
#include "util/torch_compat.h"

namespace rt::models {
namespace {

// oneDNN's C API (dnnl.h): C = alpha · op(A) · op(B) + beta · C, row-major; 0 = dnnl_success.
using SgemmFn = int (*)(char transa, char transb, int64_t M, int64_t N, int64_t K, float alpha,
                        const float* A, int64_t lda, const float* B, int64_t ldb, float beta, float* C,
                        int64_t ldc);

struct DnnlVersion {  // dnnl_version_t
  int major, minor, patch;
  const char* hash;
  unsigned cpu_runtime, gpu_runtime;
};
using VersionFn = const DnnlVersion* (*)();

struct OnednnGemm {
  SgemmFn sgemm = nullptr;
  std::string where;  // "oneDNN 2.6.3 (libdnnl.so.2, opened beside LibTorch)"
};

// Where oneDNN's sgemm comes from: the LibTorch in the process, when it links oneDNN as a shared
// library (Debian's 1.13 and 2.6), else the system's libdnnl opened beside it: RTLD_LOCAL, so its
// symbols interpose on no one's, and RTLD_DEEPBIND, so that it binds its own weak template
// symbols first (without it, oneDNN 2.6's gemm_info_t::jit_init call_once thunks bound to the
// copies inside PyPI's libtorch_cpu, oneDNN 3.10, and every call failed with invalid_arguments).
// PyPI's LibTorch carries oneDNN inside itself with its symbols hidden and hands mm to MKL, which
// takes its AVX2 kernels on AMD CPUs: 78–116 GFLOP/s at RAVE's shapes on one Zen 5 core, where
// oneDNN's sgemm runs at about 250 (docs/perf/rave_cpu.md).
// The library opened shares the process's OpenMP runtime (libgomp.so.1 is already loaded).
OnednnGemm find_onednn_gemm() {
  OnednnGemm found;
  auto describe = [](void* handle, const std::string& source) {
    const auto version = reinterpret_cast<VersionFn>(dlsym(handle, "dnnl_version"));
    std::string text = "oneDNN";
    if (const DnnlVersion* v = version != nullptr ? version() : nullptr) {
      text +=
          " " + std::to_string(v->major) + "." + std::to_string(v->minor) + "." + std::to_string(v->patch);
    }
    return text + " (" + source + ")";
  };
  if (void* fn = dlsym(RTLD_DEFAULT, "dnnl_sgemm")) {
    found.sgemm = reinterpret_cast<SgemmFn>(fn);
    found.where = describe(RTLD_DEFAULT, "linked by LibTorch");
    return found;
  }
  for (const char* name : {"libdnnl.so.3", "libdnnl.so.2"}) {
    void* handle = dlopen(name, RTLD_NOW | RTLD_LOCAL | RTLD_DEEPBIND);
    if (handle == nullptr) continue;
    if (void* fn = dlsym(handle, "dnnl_sgemm")) {
      found.sgemm = reinterpret_cast<SgemmFn>(fn);
      found.where = describe(handle, std::string(name) + ", opened beside LibTorch");
      return found;  // kept open for the process's life
    }
    dlclose(handle);
  }
  return found;
}

const OnednnGemm& onednn_gemm() {
  static const OnednnGemm found = find_onednn_gemm();
  return found;
}

std::atomic<bool> g_onednn_enabled{true};

SgemmFn onednn_sgemm() {
  return g_onednn_enabled.load(std::memory_order_relaxed) ? onednn_gemm().sgemm : nullptr;
}

template <typename T>
void aten_gemm(char ta, char tb, int64_t M, int64_t N, int64_t K, const T* A, int64_t lda, const T* B,
               int64_t ldb, T beta, T* C, int64_t ldc) {
  const auto opts = torch::TensorOptions().dtype(c10::CppTypeToScalarType<T>::value);
  auto view = [&](const T* p, int64_t rows, int64_t cols, int64_t ld, bool transposed) {
    auto t = torch::from_blob(const_cast<T*>(p),
                              transposed ? at::IntArrayRef{cols, rows} : at::IntArrayRef{rows, cols}, {ld, 1},
                              opts);
    return transposed ? t.t() : t;
  };
  auto a = view(A, M, K, lda, ta == 'T');
  auto b = view(B, K, N, ldb, tb == 'T');
  auto c = torch::from_blob(C, {M, N}, {ldc, 1}, opts);
  if (beta == T(0)) {
    at::mm_out(c, a, b);
  } else {
    c.addmm_(a, b, beta, 1);
  }
}

}  // namespace

template <>
void gemm_rows<float>(char ta, char tb, int64_t M, int64_t N, int64_t K, const float* A, int64_t lda,
                      const float* B, int64_t ldb, float beta, float* C, int64_t ldc) {
  if (M == 0 || N == 0) return;
  if (onednn_sgemm() != nullptr) {
    const int status = onednn_sgemm()(ta, tb, M, N, K, 1.0f, A, lda, B, ldb, beta, C, ldc);
    TORCH_CHECK(status == 0, "dnnl_sgemm failed with status ", status, " on [", M, " x ", K, "] x [", K,
                " x ", N, "]");
    return;
  }
  aten_gemm(ta, tb, M, N, K, A, lda, B, ldb, beta, C, ldc);
}

template <>
void gemm_rows<double>(char ta, char tb, int64_t M, int64_t N, int64_t K, const double* A, int64_t lda,
                       const double* B, int64_t ldb, double beta, double* C, int64_t ldc) {
  if (M == 0 || N == 0) return;
  aten_gemm(ta, tb, M, N, K, A, lda, B, ldb, beta, C, ldc);
}

namespace {

// out[M, N] (row-major, contiguous) = beta · out + op(a) · op(b).
void sgemm(char ta, char tb, const torch::Tensor& a, const torch::Tensor& b, float beta, torch::Tensor& out) {
  const int64_t M = out.size(0), N = out.size(1);
  const int64_t K = ta == 'N' ? a.size(1) : a.size(0);
  gemm_rows<float>(ta, tb, M, N, K, a.data_ptr<float>(), a.size(1), b.data_ptr<float>(), b.size(1), beta,
                   out.data_ptr<float>(), N);
}

bool takes_onednn(const torch::Tensor& x, const torch::Tensor& w) {
  return onednn_sgemm() != nullptr && x.device().is_cpu() && w.device().is_cpu() &&
         x.scalar_type() == torch::kFloat && w.scalar_type() == torch::kFloat &&
         !compat::autocast_enabled(c10::DeviceType::CPU) && x.dim() == 2 && w.dim() == 2 && x.size(0) > 0;
}

// The bias gradient in the row layout (aten's sum(0) over [8960, 128] took 1.4x as long).
RT_SIMD_CLONES void add_rows(const float* __restrict g, int64_t r0, int64_t r1, int64_t M,
                             float* __restrict acc) {
  for (int64_t r = r0; r < r1; ++r) {
    const float* gr = g + r * M;
    for (int64_t c = 0; c < M; ++c) acc[c] += gr[c];
  }
}

// Σ over rows of g [N, M]: fixed chunks of 256 rows summed in float, the chunks' partials in
// double in chunk order, so the result does not depend on the thread count.
torch::Tensor column_sums(const torch::Tensor& g) {
  constexpr int64_t kChunk = 256;
  const int64_t N = g.size(0), M = g.size(1);
  const int64_t chunks = std::max<int64_t>(1, (N + kChunk - 1) / kChunk);
  std::vector<float> partial(static_cast<size_t>(chunks * M), 0.0f);
  const float* gp = g.data_ptr<float>();
  at::parallel_for(0, chunks, 1, [&](int64_t c0, int64_t c1) {
    for (int64_t c = c0; c < c1; ++c)
      add_rows(gp, c * kChunk, std::min(N, (c + 1) * kChunk), M, partial.data() + c * M);
  });
  std::vector<double> total(static_cast<size_t>(M), 0.0);
  for (int64_t c = 0; c < chunks; ++c) {
    for (int64_t j = 0; j < M; ++j) total[j] += partial[c * M + j];
  }
  auto out = torch::empty({M}, g.options());
  float* op = out.data_ptr<float>();
  for (int64_t j = 0; j < M; ++j) op[j] = static_cast<float>(total[j]);
  return out;
}

class RowLinear : public torch::autograd::Function<RowLinear> {
 public:
  static torch::Tensor forward(torch::autograd::AutogradContext* ctx, const torch::Tensor& x_in,
                               const torch::Tensor& w_in, const torch::Tensor& bias) {
    // No bias: an empty tensor (autograd functions take defined tensors).
    const torch::Tensor x = x_in.contiguous(), w = w_in.contiguous();
    torch::Tensor y;
    if (bias.numel() > 0) {
      y = bias.to(torch::kFloat).expand({x.size(0), w.size(0)}).contiguous();
      sgemm('N', 'T', x, w, 1.0f, y);
    } else {
      y = torch::empty({x.size(0), w.size(0)}, x.options());
      sgemm('N', 'T', x, w, 0.0f, y);
    }
    ctx->save_for_backward({x, w});
    ctx->saved_data["bias"] = bias.numel() > 0;
    return y;
  }

  static torch::autograd::variable_list backward(torch::autograd::AutogradContext* ctx,
                                                 torch::autograd::variable_list grads) {
    const auto saved = ctx->get_saved_variables();
    const torch::Tensor &x = saved[0], &w = saved[1];
    const torch::Tensor g = grads[0].contiguous();
    torch::Tensor gx, gw, gb;
    if (ctx->needs_input_grad(0)) {
      gx = torch::empty_like(x);
      sgemm('N', 'N', g, w, 0.0f, gx);  // [N, M] · [M, K]
    }
    if (ctx->needs_input_grad(1)) {
      gw = torch::empty_like(w);
      sgemm('T', 'N', g, x, 0.0f, gw);  // [N, M]ᵀ · [N, K]
    }
    if (ctx->saved_data["bias"].toBool() && ctx->needs_input_grad(2)) gb = column_sums(g);
    return {gx, gw, gb};
  }
};

}  // namespace

bool row_linear_uses_onednn() { return onednn_sgemm() != nullptr; }

void set_onednn_gemm(bool enabled) { g_onednn_enabled.store(enabled); }

std::string gemm_library() {
  if (onednn_sgemm() != nullptr) return onednn_gemm().where;
  return "aten's mm (the BLAS LibTorch links)";
}

torch::Tensor row_linear(const torch::Tensor& x, const torch::Tensor& weight, const torch::Tensor& bias) {
  if (!takes_onednn(x, weight) ||
      (bias.defined() && (bias.scalar_type() != torch::kFloat || !bias.device().is_cpu())))
    return bias.defined() ? torch::addmm(bias, x, weight.t()) : torch::mm(x, weight.t());
  return compat::apply_function<RowLinear>(x, weight, bias.defined() ? bias : torch::empty({0}, x.options()));
}

}  // namespace rt::models
