// Fused CPU kernels for the S5 block (models/ssm/decoders.h S5Block) on the "fused" scan path.
//
// Each is one autograd node with a hand-written backward, computing in one pass over memory
// what the unfused block does with several LibTorch ops (and, for dropout, with a per-element
// Bernoulli draw). Float and double, CPU, contiguous 2-D [N, H] (rows = batch × time).
// Kernels run under at::parallel_for over rows; reductions over rows use a fixed chunking, so
// every result is bitwise independent of the thread count.
//
// Dropout masks come from a counter-based hash of (seed, row, column) instead of a stored
// Bernoulli tensor: the seed is one 64-bit draw from torch's default CPU generator per call
// (draw_dropout_seed), so torch::manual_seed and a restored generator state reproduce the masks,
// and the backward regenerates the mask instead of saving it.
//
// ssm_block runs the whole block (norm, recurrence, gelu, GLU, residual) as one node over tiles
// of whole sequences, with the same functions and masks; the single kernels serve the blocks
// whose SSM has no recurrence form (S4D) and autocast.
#pragma once

#include <torch/torch.h>

#include <cstdint>

#include "distributed/communicator.h"

namespace rt::ssm::fused {

// One 64-bit draw from at::detail::getDefaultCPUGenerator() (under its mutex).
uint64_t draw_dropout_seed();

// The mask of a dropout with drop probability p (0 ≤ p < 1): element (row, col) is kept iff
// hash(seed, row, col) ≥ p·2³², so P(keep) = 1 − p up to 2⁻³². Exposed for tests.
bool dropout_keeps(uint64_t seed, int64_t row, int64_t col, double p);

// x ⊙ mask / (1 − p) over x viewed as [numel / last, last]; p == 0 returns x itself.
torch::Tensor dropout(const torch::Tensor& x, double p, uint64_t seed);

// Batch normalisation of each column of x [N, H] with the batch's own statistics (no affine):
// y = (x − mean) / sqrt(var + eps), var biased. Differentiable in x. When `mean`/`var` are
// non-null they receive the batch mean and the biased variance ([H], x's dtype, no grad).
// With `sync` (data-parallel, distributed/sync_batch_norm.h semantics) the batch is every
// rank's rows: the forward's column sums [Σx, Σx², n] and the backward's [Σdy, Σdy·y] are
// summed over ranks (one all-reduce each), and `count`, when non-null, receives the rows
// over all ranks. REQUIRES: N ≥ 1 without sync.
torch::Tensor batch_norm_rows(const torch::Tensor& x, double eps, torch::Tensor* mean = nullptr,
                              torch::Tensor* var = nullptr, dist::Communicator* sync = nullptr,
                              double* count = nullptr);

// torch::nn::BatchNorm1d `norm` (affine = false) applied to x [N, H] as if x were [N, H]
// BatchNorm1d input, i.e. statistics over all rows per column, with the module's semantics:
// batch statistics when training or when it tracks no running statistics; in training with
// running statistics, running_mean/var (unbiased batch variance) and num_batches_tracked are
// updated exactly as torch does (momentum, or a cumulative average when momentum is unset);
// otherwise (eval) the running statistics normalise. With `sync` of more than one rank, training
// uses every rank's rows (SyncBatchNorm; evaluation stays local, as in torch). Throws
// c10::Error when norm is affine or when training on a single row.
torch::Tensor batch_norm_module(const torch::Tensor& x, torch::nn::BatchNorm1dImpl& norm,
                                dist::Communicator* sync = nullptr);

// dropout_p(gelu_tanh(z + D ⊙ u)) for z, u [N, H] and D [H]; u and D may both be undefined
// (then gelu of z). Gradients for z, u and D.
torch::Tensor gelu_dropout(const torch::Tensor& z, const torch::Tensor& u, const torch::Tensor& D, double p,
                           uint64_t seed);

// residual + dropout_p(a ⊙ σ(b)) where ab = [a | b] is [N, 2H] and residual [N, H].
// Gradients for ab and residual.
torch::Tensor glu_dropout_residual(const torch::Tensor& ab, const torch::Tensor& residual, double p,
                                   uint64_t seed);

// complex_recurrence's kernels (models/ssm/s5.h): x_t = a ⊙ x_{t−1} + b_t over b [B, T, 2P]
// real ([re | im] along the last axis), and its adjoint h_t = g_t + conj(a) ⊙ h_{t+1} with
// ga_rows [B, 2P] = Σ_{t≥1} h_t ⊙ conj(x_{t−1}) per sequence ([re | im]). One sequence per task.
template <typename scalar_t>
void recurrence_forward(const scalar_t* a_re, const scalar_t* a_im, const scalar_t* b, scalar_t* x, int64_t B,
                        int64_t T, int64_t P);
template <typename scalar_t>
void recurrence_backward(const scalar_t* a_re, const scalar_t* a_im, const scalar_t* x, const scalar_t* g,
                         scalar_t* h, scalar_t* ga_rows, int64_t B, int64_t T, int64_t P);

// The parameters of one S5 block's body, in the row layout of forward_fused: the recurrence's
// input and output products (w_in [2P, H]: B̄ as [re; im]; w_out [H, 2P]: Re(C̃x), conjugate
// symmetry's factor 2 included), its discretised diagonal a_re, a_im [P], the feed-through D [H]
// and the GLU's two halves stacked, w_glu [2H, H], b_glu [2H].
struct BlockWeights {
  torch::Tensor w_in, a_re, a_im, w_out, D, w_glu, b_glu;
};

// x + dropout(glu(dropout(gelu(C̃·scan(B̄·u) + D ⊙ u)))) with u = norm(x), for x [B·T, H] (rows
// batch-major, `batch` sequences), as one autograd node: the same function, masks and norm
// semantics as batch_norm_module → the recurrence → gelu_dropout → glu_dropout_residual, but
// computed a few whole sequences at a time (the tiles are what threads share out; a tile's
// intermediates live in per-thread buffers), and with the residual's and the norm's gradients, the
// feed-through's and the recurrence's, summed in the passes that make them (no separate accumulation by
// autograd). Weight gradients are summed per tile, then over tiles in order: bitwise the same at any thread
// count. Float or double, CPU. The norm's running statistics are updated as batch_norm_module does.
torch::Tensor ssm_block(const torch::Tensor& x2, int64_t batch, torch::nn::BatchNorm1dImpl& norm,
                        dist::Communicator* sync, const BlockWeights& w, double p, uint64_t seed_gelu,
                        uint64_t seed_glu);

}  // namespace rt::ssm::fused
