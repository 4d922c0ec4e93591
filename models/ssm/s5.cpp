#include "models/ssm/s5.h"

#include <cmath>

#include "models/common/row_linear.h"
#include "models/ssm/fused_ops.h"
#include "util/error.h"
#include "util/torch_compat.h"

namespace rt::ssm {

HippoDiagonal make_dplr_hippo(int64_t n) {
  TORCH_CHECK(n >= 1, "make_dplr_hippo: n must be >= 1, got ", n);
  auto opts = torch::TensorOptions().dtype(torch::kFloat64);
  auto k = torch::arange(n, opts);
  // HiPPO-LegS: A_nk = −sqrt(2n+1)·sqrt(2k+1) for n > k, −(n+1) on the diagonal, 0 above.
  auto q = torch::sqrt(1 + 2 * k);
  auto A = -(torch::tril(q.unsqueeze(1) * q.unsqueeze(0)) - torch::diag(k));
  // Adding the rank-1 term p pᵀ (p_k = sqrt(k + 1/2)) makes it normal (S4's NPLR form).
  auto p = torch::sqrt(k + 0.5);
  auto S = A + p.unsqueeze(1) * p.unsqueeze(0);
  auto diag = torch::diagonal(S);
  auto lambda_real = diag.mean().item<double>();  // −1/2 for every n
  auto skew = S - torch::diag(diag);
  auto hermitian = torch::complex(torch::zeros_like(skew), -skew);  // −i·skew
  auto [omega, V] = torch::linalg_eigh(hermitian, "L");
  auto lambda = torch::complex(torch::full_like(omega, lambda_real), omega);
  return {lambda, V};
}

torch::Tensor scan_sequential(const torch::Tensor& a, const torch::Tensor& b) {
  TORCH_CHECK(b.dim() == 3, "scan_sequential: b must be [B, T, P], got ", b.sizes());
  TORCH_CHECK(a.dim() == 2 || a.dim() == 3, "scan_sequential: a must be [T, P] or [B, T, P]");
  const int64_t T = b.size(1);
  const int64_t a_time = a.dim() - 2;
  std::vector<torch::Tensor> xs;
  xs.reserve(T);
  torch::Tensor x = b.select(1, 0);
  xs.push_back(x);
  for (int64_t t = 1; t < T; ++t) {
    x = a.select(a_time, t) * x + b.select(1, t);
    xs.push_back(x);
  }
  return torch::stack(xs, 1);
}

torch::Tensor scan_parallel(const torch::Tensor& a, const torch::Tensor& b) {
  TORCH_CHECK(b.dim() == 3, "scan_parallel: b must be [B, T, P], got ", b.sizes());
  TORCH_CHECK(a.dim() == 2 || a.dim() == 3, "scan_parallel: a must be [T, P] or [B, T, P]");
  const int64_t T = b.size(1);
  const int64_t a_time = a.dim() - 2;
  torch::Tensor A = a;
  torch::Tensor X = b;
  // Hillis–Steele: after the step with offset d, element t holds the composition of the
  // min(t+1, 2d) elements ending at t. Element t (later, j) absorbs t−d (earlier, i).
  for (int64_t d = 1; d < T; d *= 2) {
    auto a_late = A.narrow(a_time, d, T - d);
    auto x_early = X.narrow(1, 0, T - d);
    auto x_late = X.narrow(1, d, T - d);
    X = torch::cat({X.narrow(1, 0, d), a_late * x_early + x_late}, 1);
    if (2 * d < T) {
      A = torch::cat({A.narrow(a_time, 0, d), a_late * A.narrow(a_time, 0, T - d)}, a_time);
    }
  }
  return X;
}

namespace {

class ComplexRecurrence : public torch::autograd::Function<ComplexRecurrence> {
 public:
  static torch::Tensor forward(torch::autograd::AutogradContext* ctx, const torch::Tensor& a_re,
                               const torch::Tensor& a_im, const torch::Tensor& bu) {
    auto ar = a_re.contiguous(), ai = a_im.contiguous(), b = bu.contiguous();
    auto x = torch::empty_like(b);
    const int64_t B = b.size(0), T = b.size(1), P = b.size(2) / 2;
    AT_DISPATCH_FLOATING_TYPES(b.scalar_type(), "complex_recurrence_forward", [&] {
      fused::recurrence_forward<scalar_t>(ar.data_ptr<scalar_t>(), ai.data_ptr<scalar_t>(),
                                          b.data_ptr<scalar_t>(), x.data_ptr<scalar_t>(), B, T, P);
    });
    ctx->save_for_backward({ar, ai, x});
    return x;
  }

  static torch::autograd::tensor_list backward(torch::autograd::AutogradContext* ctx,
                                               torch::autograd::tensor_list grads) {
    auto saved = ctx->get_saved_variables();
    const auto &ar = saved[0], &ai = saved[1], &x = saved[2];
    auto g = grads[0].contiguous();
    const int64_t B = x.size(0), T = x.size(1), P = x.size(2) / 2;
    auto h = torch::empty_like(x);
    auto ga_rows = torch::empty({B, 2 * P}, x.options());
    AT_DISPATCH_FLOATING_TYPES(x.scalar_type(), "complex_recurrence_backward", [&] {
      fused::recurrence_backward<scalar_t>(ar.data_ptr<scalar_t>(), ai.data_ptr<scalar_t>(),
                                           x.data_ptr<scalar_t>(), g.data_ptr<scalar_t>(),
                                           h.data_ptr<scalar_t>(), ga_rows.data_ptr<scalar_t>(), B, T, P);
    });
    auto ga = ga_rows.sum(0);
    return {ga.narrow(0, 0, P), ga.narrow(0, P, P), h};
  }
};

}  // namespace

torch::Tensor complex_recurrence(const torch::Tensor& a_re, const torch::Tensor& a_im,
                                 const torch::Tensor& bu) {
  TORCH_CHECK(bu.dim() == 3 && bu.size(2) % 2 == 0, "complex_recurrence: bu must be [B, T, 2P], got ",
              bu.sizes());
  const int64_t P = bu.size(2) / 2;
  TORCH_CHECK(a_re.dim() == 1 && a_re.size(0) == P && a_im.sizes() == a_re.sizes(),
              "complex_recurrence: a_re and a_im must be [", P, "], got ", a_re.sizes(), " and ",
              a_im.sizes());
  TORCH_CHECK(a_re.scalar_type() == bu.scalar_type() && a_im.scalar_type() == bu.scalar_type(),
              "complex_recurrence: a and bu must share a dtype");
  if (!bu.device().is_cpu()) {
    auto b = torch::complex(bu.narrow(2, 0, P), bu.narrow(2, P, P));
    auto a = torch::complex(a_re, a_im).unsqueeze(0).expand({bu.size(1), P});
    auto x = scan_parallel(a, b);
    return torch::cat({torch::real(x), torch::imag(x)}, 2);
  }
  return compat::apply_function<ComplexRecurrence>(a_re, a_im, bu);
}

void S5LayerOptions::validate() const {
  auto fail = [](const std::string& msg) { throw Error(msg); };
  if (d_model < 1) fail("model.d_model = " + std::to_string(d_model) + ": must be >= 1");
  if (state_dim < 1) fail("model.state_dim = " + std::to_string(state_dim) + ": must be >= 1");
  if (ssm_blocks < 1) fail("model.ssm_blocks = " + std::to_string(ssm_blocks) + ": must be >= 1");
  if (state_dim % ssm_blocks != 0) {
    fail("model.state_dim = " + std::to_string(state_dim) + " is not divisible by model.ssm_blocks = " +
         std::to_string(ssm_blocks) + ": each HiPPO block needs state_dim / ssm_blocks states");
  }
  if (conj_sym && (state_dim / ssm_blocks) % 2 != 0) {
    fail("model.state_dim / model.ssm_blocks = " + std::to_string(state_dim / ssm_blocks) +
         " is odd: with model.conj_sym = true each block must hold conjugate pairs (an even size)");
  }
  if (!(dt_min > 0)) fail("model.dt_min = " + std::to_string(dt_min) + ": must be > 0");
  if (!(dt_max > dt_min)) {
    fail("model.dt_max = " + std::to_string(dt_max) + ": must be > model.dt_min = " + std::to_string(dt_min));
  }
}

namespace {

// jax.nn.initializers.lecun_normal(): truncated normal on [−2, 2] scaled to variance 1/fan_in.
torch::Tensor lecun_truncated_normal(at::IntArrayRef shape, int64_t fan_in) {
  auto x = torch::randn(shape, torch::kFloat64);
  for (auto out = x.abs() > 2; out.any().item<bool>(); out = x.abs() > 2) {
    x = torch::where(out, torch::randn(shape, torch::kFloat64), x);
  }
  // 0.8796... is the standard deviation of a unit normal truncated to [−2, 2].
  return x * (std::sqrt(1.0 / static_cast<double>(fan_in)) / 0.87962566103423978);
}

torch::Tensor block_diag_repeat(const torch::Tensor& block, int64_t n) {
  std::vector<torch::Tensor> blocks(static_cast<size_t>(n), block);
  return torch::block_diag(blocks);
}

}  // namespace

S5LayerImpl::S5LayerImpl(const S5LayerOptions& options) : SsmLayerBase(options) {
  options_.validate();
  const int64_t H = options_.d_model;
  const int64_t N = options_.state_dim;
  const int64_t block_n = N / options_.ssm_blocks;
  auto hippo = make_dplr_hippo(block_n);
  const int64_t block_kept = options_.conj_sym ? block_n / 2 : block_n;
  stored_states_ = block_kept * options_.ssm_blocks;

  // Under conjugate symmetry keep one eigenvalue of each pair (eigh sorts ω ascending).
  auto lambda_block = hippo.lambda.narrow(0, 0, block_kept);
  auto V_block = hippo.V.narrow(1, 0, block_kept);                         // [block_n, block_kept]
  auto lambda = lambda_block.repeat({options_.ssm_blocks});                // [P']
  auto V = block_diag_repeat(V_block, options_.ssm_blocks);                // [N, P']
  auto Vinv = block_diag_repeat(V_block.conj().t(), options_.ssm_blocks);  // [P', N]

  auto B_real = lecun_truncated_normal({N, H}, N);
  auto B_tilde = torch::matmul(Vinv, B_real.to(torch::kComplexDouble));  // [P', H]
  auto C_parts = lecun_truncated_normal({H, N, 2}, N);
  auto C_full = torch::complex(C_parts.select(2, 0), C_parts.select(2, 1));
  auto C_tilde = torch::matmul(C_full, V);  // [H, P']

  const auto dtype = torch::get_default_dtype();
  auto as_param = [&](const torch::Tensor& t) { return t.to(dtype).contiguous(); };
  Lambda_re = register_parameter("Lambda_re", as_param(torch::real(lambda)));
  Lambda_im = register_parameter("Lambda_im", as_param(torch::imag(lambda)));
  B = register_parameter("B", as_param(torch::view_as_real(B_tilde.resolve_conj())));
  C = register_parameter("C", as_param(torch::view_as_real(C_tilde.resolve_conj())));
  D = register_parameter("D", as_param(torch::randn({H}, torch::kFloat64)));
  const double lo = std::log(options_.dt_min), hi = std::log(options_.dt_max);
  log_step = register_parameter("log_step",
                                as_param(torch::rand({stored_states_}, torch::kFloat64) * (hi - lo) + lo));
}

torch::Tensor S5LayerImpl::lambda() const {
  // Re λ ≤ −1e-4 keeps |Λ̄| < 1, i.e. the recurrence stable (S5 clip_eigs).
  return torch::complex(Lambda_re.clamp_max(-1e-4), Lambda_im);
}

std::pair<torch::Tensor, torch::Tensor> S5LayerImpl::discretize() const {
  auto lam = lambda();
  auto B_tilde = torch::view_as_complex(B);
  auto step = torch::exp(log_step);
  torch::Tensor lambda_bar, B_bar;
  if (options_.discretization == Discretization::kZoh) {
    lambda_bar = torch::exp(lam * step);
    B_bar = ((lambda_bar - 1.0) / lam).unsqueeze(1) * B_tilde;
  } else {
    auto bl = 1.0 / (1.0 - (step / 2.0) * lam);
    lambda_bar = bl * (1.0 + (step / 2.0) * lam);
    B_bar = (bl * step).unsqueeze(1) * B_tilde;
  }
  return {lambda_bar, B_bar};
}

torch::Tensor S5LayerImpl::forward(const torch::Tensor& u) {
  TORCH_CHECK(u.dim() == 3 && u.size(2) == options_.d_model, "S5Layer: expected input [B, T, ",
              options_.d_model, "], got ", u.sizes());
  // B = batch, T = time, H = features, P = stored complex states.
  const int64_t T = u.size(1);
  if (options_.scan == ScanKind::kFused) {
    // Row layout [B·T, H]: plain 2-D matmuls (no folding or bmm), D ⊙ u fused into one addcmul.
    auto u2 = u.reshape({u.size(0) * T, options_.d_model});
    return torch::addcmul(forward_fused_rows(u2, u.size(0)), u2, D).view({u.size(0), T, options_.d_model});
  }
  auto [lambda_bar, B_bar] = discretize();
  // Under autocast (train.precision bf16/fp16) the matmuls come out in the low precision; the
  // recurrence runs in the parameters' precision, as autocast runs ops off its list (and there
  // is no complex bfloat16).
  const auto state_dtype = torch::real(B_bar).scalar_type();
  auto Bu = torch::complex(torch::matmul(u, torch::real(B_bar).t()).to(state_dtype),
                           torch::matmul(u, torch::imag(B_bar).t()).to(state_dtype));  // [B, T, P]
  auto a = lambda_bar.unsqueeze(0).expand({T, stored_states_});                        // [T, P]
  auto x = options_.scan == ScanKind::kParallel ? scan_parallel(a, Bu) : scan_sequential(a, Bu);
  auto C_tilde = torch::view_as_complex(C);             // [H, P]
  auto y = torch::real(torch::matmul(x, C_tilde.t()));  // [B, T, H]
  if (options_.conj_sym) y = 2.0 * y;
  return y + D * u;
}

std::optional<SsmLayerBase::RecurrenceWeights> S5LayerImpl::recurrence_weights() const {
  auto [lambda_bar, B_bar] = discretize();
  // Real layout [re | im] along the state axis. Re(C̃x) = C_re·x_re − C_im·x_im.
  auto w_out = torch::cat({C.select(2, 0), -C.select(2, 1)}, 1);  // [H, 2P]
  if (options_.conj_sym) w_out = 2.0 * w_out;
  return RecurrenceWeights{torch::cat({torch::real(B_bar), torch::imag(B_bar)}, 0),  // [2P, H]
                           torch::real(lambda_bar), torch::imag(lambda_bar), w_out};
}

torch::Tensor SsmLayerBase::forward_fused_rows(const torch::Tensor& u2, int64_t batch) {
  TORCH_CHECK(u2.dim() == 2 && u2.size(1) == options_.d_model && batch >= 1 && u2.size(0) % batch == 0,
              "forward_fused_rows: expected u [B*T, ", options_.d_model, "] with B = ", batch, ", got ",
              u2.sizes());
  auto w = recurrence_weights();
  TORCH_CHECK(w.has_value(), "forward_fused_rows: this SSM layer has no recurrence form");
  const int64_t N = u2.size(0), P2 = w->w_in.size(0);
  // Autocast: the recurrence in the parameters' precision (see S5LayerImpl::forward).
  const auto dtype = w->w_in.scalar_type();
  auto bu = models::row_linear(u2.to(dtype), w->w_in).to(dtype).view({batch, N / batch, P2});
  auto x = complex_recurrence(w->a_re.contiguous(), w->a_im.contiguous(), bu).view({N, P2});
  return models::row_linear(x, w->w_out);
}

bool is_ssm_parameter_name(const std::string& name) {
  auto ends_with = [&](const std::string& suffix) {
    return name.size() >= suffix.size() &&
           name.compare(name.size() - suffix.size(), suffix.size(), suffix) == 0 &&
           (name.size() == suffix.size() || name[name.size() - suffix.size() - 1] == '.');
  };
  // S5's Λ and step; S4D's A (log_A_real, A_imag) and step (log_dt); LRU's λ (nu_log, theta_log).
  return ends_with("Lambda_re") || ends_with("Lambda_im") || ends_with("log_step") ||
         ends_with("log_A_real") || ends_with("A_imag") || ends_with("log_dt") || ends_with("nu_log") ||
         ends_with("theta_log");
}

}  // namespace rt::ssm
