#include "models/common/row_linear.h"

#include <dlfcn.h>

#include <cstdint>

#include "util/torch_compat.h"

namespace rt::models {
namespace {

// oneDNN's C API (dnnl.h): C = alpha · op(A) · op(B) + beta · C, row-major; 0 = dnnl_success.
using SgemmFn = int (*)(char transa, char transb, int64_t M, int64_t N, int64_t K, float alpha,
                        const float* A, int64_t lda, const float* B, int64_t ldb, float beta, float* C,
                        int64_t ldc);

SgemmFn onednn_sgemm() {
  static const SgemmFn fn = reinterpret_cast<SgemmFn>(dlsym(RTLD_DEFAULT, "dnnl_sgemm"));
  return fn;
}

// out[M, N] (row-major, contiguous) = beta · out + op(a) · op(b).
void sgemm(char ta, char tb, const torch::Tensor& a, const torch::Tensor& b, float beta, torch::Tensor& out) {
  const int64_t M = out.size(0), N = out.size(1);
  const int64_t K = ta == 'N' ? a.size(1) : a.size(0);
  const int status = onednn_sgemm()(ta, tb, M, N, K, 1.0f, a.data_ptr<float>(), a.size(1),
                                    b.data_ptr<float>(), b.size(1), beta, out.data_ptr<float>(), N);
  TORCH_CHECK(status == 0, "dnnl_sgemm failed with status ", status, " on [", M, " x ", K, "] x [", K, " x ",
              N, "]");
}

bool takes_onednn(const torch::Tensor& x, const torch::Tensor& w) {
  return onednn_sgemm() != nullptr && x.device().is_cpu() && w.device().is_cpu() &&
         x.scalar_type() == torch::kFloat && w.scalar_type() == torch::kFloat &&
         !compat::autocast_enabled(c10::DeviceType::CPU) && x.dim() == 2 && w.dim() == 2 && x.size(0) > 0;
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
    if (ctx->saved_data["bias"].toBool() && ctx->needs_input_grad(2)) gb = g.sum(0);
    return {gx, gw, gb};
  }
};

}  // namespace

bool row_linear_uses_onednn() { return onednn_sgemm() != nullptr; }

torch::Tensor row_linear(const torch::Tensor& x, const torch::Tensor& weight, const torch::Tensor& bias) {
  if (!takes_onednn(x, weight) ||
      (bias.defined() && (bias.scalar_type() != torch::kFloat || !bias.device().is_cpu())))
    return bias.defined() ? torch::addmm(bias, x, weight.t()) : torch::mm(x, weight.t());
  return compat::apply_function<RowLinear>(x, weight, bias.defined() ? bias : torch::empty({0}, x.options()));
}

}  // namespace rt::models
