// The S5 layer (Smith, Warrington & Linderman, "Simplified State Space Layers for Sequence
// Modeling", 2023), as used by Melina-Jingting/foundational_ssm (models/s5.py, itself after
// lindermanlab/S5 s5/ssm_init.py and s5/ssm.py).
//
// A diagonal, complex, linear time-invariant system per layer:
//   x_t = Λ̄ ⊙ x_{t−1} + B̄ u_t,   y_t = 2·Re(C̃ x_t) + D ⊙ u_t   (conjugate symmetry)
// with Λ the eigenvalues of the normal part of HiPPO-LegS (optionally repeated in `ssm_blocks`
// diagonal blocks), B̃ = V⁻¹B, C̃ = CV, and a learnable step Δ = exp(log_step) per state.
//
// Complex parameters are stored as real tensors (Λ as Lambda_re/Lambda_im; B̃ and C̃ with a
// trailing real/imag axis of size 2, the reference's layout), so optimizers, weight decay
// groups and checkpoints only ever see real parameters. Complex arithmetic happens inside
// forward() with LibTorch complex tensors, which autograd differentiates.
#pragma once

#include <torch/torch.h>

#include <cstdint>
#include <optional>
#include <string>

#include "util/enum_names.h"

namespace rt::ssm {

// model.discretization.
enum class Discretization { kZoh, kBilinear, kMaxValue = kBilinear };
constexpr EnumNames<Discretization> enum_names(Discretization) { return {{"zoh", "bilinear"}}; }
// kFused: the recurrence as one hand-written CPU kernel in real arithmetic (sequential in time,
// parallel over batch × state, analytic backward; see complex_recurrence), with the input and
// output projections as single real matmuls — no complex tensors on the [B, T, ·] path. It is
// the CPU-fast choice (docs/perf/ssm_step.md); on other devices it runs the parallel scan.
// model.scan: an implementation choice (the same function of the same parameters), so it is no
// part of a checkpoint's architecture signature.
enum class ScanKind { kParallel, kSequential, kFused, kMaxValue = kFused };
constexpr EnumNames<ScanKind> enum_names(ScanKind) { return {{"parallel", "sequential", "fused"}}; }

// Diagonalised normal part of HiPPO-LegS of size n (S5's make_DPLR_HiPPO): S = A + p pᵀ with
// A the LegS matrix and p_k = sqrt(k + 1/2). S = −½·I + (skew-symmetric), so its eigenvalues
// are −½ + iω with ±ω pairs; ω and V come from eigh of the Hermitian matrix −i·(S − diag S).
// Returns Λ [n] (complex128, ω ascending: the first n/2 are the conjugates of the last n/2)
// and V [n, n] (complex128, unitary, S = V diag(Λ) Vᴴ).
struct HippoDiagonal {
  torch::Tensor lambda;
  torch::Tensor V;
};
HippoDiagonal make_dplr_hippo(int64_t n);

// Linear recurrence x_t = a_t ⊙ x_{t−1} + b_t with x_{−1} = 0, over dim 1 (time) of
// b [B, T, P]; `a` is [T, P] (shared by the batch) or [B, T, P]. Any dtype, complex included;
// both are differentiable and return [B, T, P].
//   scan_sequential: a loop over time (T small ops).
//   scan_parallel:   Hillis–Steele inclusive scan with S5's associative operator
//                    (a_i, b_i) • (a_j, b_j) = (a_j·a_i, a_j·b_i + b_j): ⌈log2 T⌉ steps.
torch::Tensor scan_sequential(const torch::Tensor& a, const torch::Tensor& b);
torch::Tensor scan_parallel(const torch::Tensor& a, const torch::Tensor& b);

// The same complex recurrence x_t = a ⊙ x_{t−1} + b_t (x_{−1} = 0) in real arithmetic, as one
// autograd node: a = a_re + i·a_im is [P] (shared by batch and time), `bu` is [B, T, 2P] real
// holding Re b in [..., :P] and Im b in [..., P:]; returns x in the same layout. Float/double.
// On CPU a fused kernel (parallel over batch) computes forward and backward (reverse-time
// adjoint recurrence; gradients for a_re, a_im and bu); elsewhere it falls back to
// scan_parallel on complex tensors.
torch::Tensor complex_recurrence(const torch::Tensor& a_re, const torch::Tensor& a_im,
                                 const torch::Tensor& bu);

// model.ssm: the kind of diagonal SSM in each block (models/ssm/diagonal_ssm.h has S4D and LRU).
enum class SsmKind { kS5, kS4d, kLru, kMaxValue = kLru };
constexpr EnumNames<SsmKind> enum_names(SsmKind) { return {{"s5", "s4d", "lru"}}; }

struct S5LayerOptions {
  SsmKind kind = SsmKind::kS5;  // make_ssm_layer builds this kind; S5LayerImpl is kS5
  int64_t d_model = 64;         // H: input/output features.
  int64_t state_dim = 64;       // P: complex states before conjugate symmetry halves them.
  int64_t ssm_blocks = 1;       // HiPPO init repeated on this many diagonal blocks.
  bool conj_sym = true;
  Discretization discretization = Discretization::kZoh;
  ScanKind scan = ScanKind::kParallel;
  double dt_min = 1e-3;
  double dt_max = 1e-1;
  // Throws rt::Error naming the offending model.* key when the combination is impossible
  // (state_dim not divisible by ssm_blocks, odd block under conj_sym, dt_min ≥ dt_max, ...).
  void validate() const;
};

// What a block needs of its SSM layer, whatever its kind (model.ssm): input and output
// [B, T, d_model] (real, the module's dtype); y = SSM(u) + D ⊙ u.
class SsmLayerBase : public torch::nn::Module {
 public:
  virtual torch::Tensor forward(const torch::Tensor& u) = 0;
  // The layer in row layout with the fused recurrence (complex_recurrence), without the
  // feed-through: u2 [B·T, H] (rows batch-major) → SSM(u) [B·T, H] (no D ⊙ u, which the block
  // folds into its next kernel), whatever options().scan says. REQUIRES: u2.size(0) divisible by
  // batch.
  // The default is the recurrence of recurrence_weights(); layers without one override it.
  virtual torch::Tensor forward_fused_rows(const torch::Tensor& u2, int64_t batch);
  // Layers whose fused form is one diagonal recurrence (S5, LRU): forward_fused_rows(u) =
  // row_linear(complex_recurrence(a_re, a_im, row_linear(u, w_in)), w_out), with w_in [2P, H]
  // (the input matrix's real part over its imaginary part), a_re, a_im [P] (the discretised
  // diagonal) and w_out [H, 2P] (Re of the readout). nullopt where the layer computes otherwise
  // (S4D's convolution).
  struct RecurrenceWeights {
    torch::Tensor w_in, a_re, a_im, w_out;
  };
  virtual std::optional<RecurrenceWeights> recurrence_weights() const { return std::nullopt; }
  // D [H], the feed-through.
  virtual const torch::Tensor& feedthrough() const = 0;
  const S5LayerOptions& options() const { return options_; }
  void set_scan(ScanKind scan) { options_.scan = scan; }

 protected:
  explicit SsmLayerBase(const S5LayerOptions& options) : options_(options) {}
  S5LayerOptions options_;
};

class S5LayerImpl : public SsmLayerBase {
 public:
  explicit S5LayerImpl(const S5LayerOptions& options);
  torch::Tensor forward(const torch::Tensor& u) override;
  // 2·Re(C̃x) under conjugate symmetry.
  std::optional<RecurrenceWeights> recurrence_weights() const override;
  const torch::Tensor& feedthrough() const override { return D; }

  // Number of complex states actually stored (state_dim/2 under conjugate symmetry).
  int64_t stored_states() const { return stored_states_; }
  void set_discretization(Discretization d) { options_.discretization = d; }

  // Continuous eigenvalues with Re λ clipped to ≤ −1e-4 (what forward() uses), complex [P'].
  torch::Tensor lambda() const;
  // Discretised (Λ̄ [P'], B̄ [P', H]) under the current options.
  std::pair<torch::Tensor, torch::Tensor> discretize() const;

  torch::Tensor Lambda_re, Lambda_im;  // [P']        eigenvalues (real, imaginary part)
  torch::Tensor B;                     // [P', H, 2]  B̃ = V⁻¹B
  torch::Tensor C;                     // [H, P', 2]  C̃ = CV
  torch::Tensor D;                     // [H]         feed-through
  torch::Tensor log_step;              // [P']        log Δ

 private:
  int64_t stored_states_ = 0;
};
TORCH_MODULE(S5Layer);

// True for parameter names (as named_parameters() reports them) of an SSM layer's A and step,
// which train without weight decay (S5 / foundational_ssm optimizer setup) and which
// train.transfer_mode = freeze_a freezes: S5's Λ (Lambda_re, Lambda_im) and log_step, S4D's
// log_A_real, A_imag and log_dt, LRU's nu_log and theta_log.
bool is_ssm_parameter_name(const std::string& name);

}  // namespace rt::ssm
