// A data-parallel rank's place in the global batch, for what a model computes during its step
// that must not depend on how the batch is split over ranks: random draws and the
// denominators of ratio losses.
//
// N ranks × B examples must train exactly as one process with N·B examples (the same
// parameters after every step, up to float reduction order). The data loader already gives
// every example the same randomness whatever the split (data/loader.h); the noise a model
// draws during its step (RAVE's reparametrisation and noise generator, dropout masks) must
// follow too. Every rank seeds the global generator identically and draws the noise of the
// whole global batch, then keeps its own rows: rank r's rows are exactly rows
// [offset, offset + B) of what one process with the global batch draws. The generator advances
// identically on every rank, so the ranks stay in step for the next draw.
//
// The trainer opens a BatchSliceScope around each training step of a data-parallel job; with
// none open (one process, validation, tests) the helpers are plain rand_like / randn_like.
// Dim 0 of every tensor passed here is the batch.
#pragma once

#include <torch/torch.h>

#include <cstdint>
#include <memory>

namespace rt::dist {
class Communicator;
}

namespace rt::models {

// This thread's rows of the global batch: examples [offset, offset + local) of `global`.
struct BatchSlice {
  int64_t offset = 0;
  int64_t local = 0;
  int64_t global = 0;  // 0: no slice open
  // The job's ranks (null: one process). batch_global_mean sums over it.
  dist::Communicator* comm = nullptr;
};

// Opens `slice` on this thread until destroyed (scopes nest; the innermost wins).
// REQUIRES: 0 <= offset, local >= 0, offset + local <= global.
class BatchSliceScope {
 public:
  explicit BatchSliceScope(BatchSlice slice);
  ~BatchSliceScope();
  BatchSliceScope(const BatchSliceScope&) = delete;
  BatchSliceScope& operator=(const BatchSliceScope&) = delete;

 private:
  BatchSlice previous_;
};

// The slice open on this thread (global == 0 when none).
BatchSlice current_batch_slice();

// Uniform [0, 1) / standard normal noise shaped like `like` (dim 0 = this rank's examples).
// Inside a slice whose `local` equals like.size(0), the noise is drawn for the global batch and
// this rank's rows are returned; otherwise this is torch::rand_like / torch::randn_like.
torch::Tensor batch_rand_like(const torch::Tensor& like);
torch::Tensor batch_randn_like(const torch::Tensor& like);

// Inverted dropout with a mask that follows the same rule (torch::dropout semantics: zero with
// probability p, scale the rest by 1/(1−p); identity when !training or p == 0).
torch::Tensor batch_dropout(const torch::Tensor& x, double p, bool training);

// The mean of `t`'s elements over the global batch, for the data-only denominators of ratio
// losses (RAVE's spectral convergence Σ|X−Y|²/Σ|X|² and relative feature matching): a ratio of
// per-rank means is not the ratio of global means, so each rank divides its own numerator by
// the global denominator, and the gradient mean over ranks is the global loss's gradient.
// REQUIRES: every rank's `t` has as many elements per example; the denominator carries no
// gradient to the parameters that step (it is the real audio's, or the real audio's
// discriminator features, constant for the generator). Inside a slice with a communicator of
// several ranks: one all-reduce, result detached; otherwise t.mean().
torch::Tensor batch_global_mean(const torch::Tensor& t);

// The global batch's means of per-rank means (`local_means` [K], each over this rank's
// examples, every example contributing as many elements): one all-reduce for K denominators.
// Outside a slice with a communicator of several ranks: local_means itself.
torch::Tensor batch_global_means(const torch::Tensor& local_means);

// batch_global_means started now and read later, so that its all-reduce runs behind work that
// does not need it (RAVE starts its spectral denominators, which depend on the input audio
// alone, right after the PQMF analysis: the autoencoder's forward hides them). get() waits for
// the all-reduce the first time it is called and returns the global means; copies share the
// result. Outside a slice with a communicator of several ranks it holds local_means.
// REQUIRES: every rank starts the same sequence of collectives (the communicator runs them in
// call order).
class PendingGlobalMeans {
 public:
  PendingGlobalMeans() = default;
  bool started() const { return state_ != nullptr; }
  torch::Tensor get() const;

 private:
  friend PendingGlobalMeans batch_global_means_async(const torch::Tensor& local_means);
  struct State;
  std::shared_ptr<State> state_;
};
PendingGlobalMeans batch_global_means_async(const torch::Tensor& local_means);

// True inside a slice with a communicator of several ranks (batch_global_mean all-reduces).
bool batch_slice_distributed();

// For kernels that index their randomness by row of a [rows, ...] tensor whose rows are this
// rank's examples flattened with another dim (B·T rows): the global index of row 0, i.e.
// offset · rows/local. 0 outside a slice or when rows is not a multiple of local.
int64_t batch_row_offset(int64_t rows);

}  // namespace rt::models
