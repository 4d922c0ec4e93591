// RAVE's latent PCA (acids-ircam/RAVE v2.3.1 rave/model.py validation_step and
// validation_epoch_end): while the model is in phase 1, validation collects the posterior means
// of the latent, and the export crops the PCA-rotated latent to the dimensions that carry a
// chosen share of its variance (scripts/export.py, ScriptedRAVE).
//
// The fit is RAVE's sklearn PCA(L).fit(z) on the (frames × L) means, computed from the
// covariance (eigen-decomposition in double precision) so that batches can be accumulated
// without keeping every frame. Components are the rows of `components`, sorted by decreasing
// variance; each is signed so that its largest-magnitude entry is positive (sklearn's sign
// convention differs; a component's sign carries no information).
#pragma once

#include <torch/torch.h>

#include <cstdint>
#include <functional>

namespace rt::rave {

struct RaveModelImpl;

struct LatentPca {
  torch::Tensor mean;        // (L) latent mean, RAVE `latent_mean`
  torch::Tensor components;  // (L, L) rows = principal axes, RAVE `latent_pca`
  torch::Tensor fidelity;    // (L) cumulative explained-variance ratio, RAVE `fidelity`
};

// Sums of posterior means over validation batches (double precision).
class LatentPcaAccumulator {
 public:
  explicit LatentPcaAccumulator(int64_t latent_size);
  // Adds the posterior means of a batch, (B, L, T): every (b, t) is one observation.
  void add(const torch::Tensor& means);
  int64_t count() const { return count_; }
  // Replaces the sums by `all_reduce_sum` of them (one float64 tensor [n, Σz, Σzzᵀ]), so that
  // ranks that each saw a share of the validation set fit the PCA of all of it.
  void reduce(const std::function<void(torch::Tensor&)>& all_reduce_sum);
  // REQUIRES: count() >= 2. Throws rt::Error otherwise.
  LatentPca fit() const;

 private:
  int64_t latent_size_;
  int64_t count_ = 0;
  torch::Tensor sum_, outer_;  // Σz (L), Σ z zᵀ (L, L)
};

// True when `fidelity` holds a fitted curve (RAVE initialises it with zeros: no PCA ran yet).
bool has_latent_pca(const torch::Tensor& fidelity);

// The smallest power of two n whose first n PCA dimensions reach `target` (fidelity[n-1] >=
// target), capped at the full latent size. RAVE's export takes argmax(fidelity > target) — the
// 0-based index, one dimension short — before rounding up; this is the count the threshold
// names. REQUIRES: has_latent_pca(fidelity), 0 < target < 1.
int64_t latent_size_for_fidelity(const torch::Tensor& fidelity, double target);

// Copies a fit into the model's `latent_mean`, `latent_pca` and `fidelity` buffers (which the
// checkpoint carries), and reads them back.
void store_latent_pca(RaveModelImpl& model, const LatentPca& pca);
LatentPca stored_latent_pca(RaveModelImpl& model);

}  // namespace rt::rave
