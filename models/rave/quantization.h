// Residual vector quantisation of RAVE's discrete configurations (acids-ircam/RAVE 2.3.1
// rave/quantization.py, after SoundStream, arXiv:2107.03312, Algorithm 1). Keys mirror RAVE's:
//   layers.<i>._codebook.inited        1 once k-means has initialised the codebook (float [1])
//   layers.<i>._codebook.cluster_size  exponential moving count of frames per code (K)
//   layers.<i>._codebook.embed         the codes (K, D)
//   layers.<i>._codebook.embed_avg     exponential moving sum of the frames per code (K, D)
// RAVE's VectorQuantization has no projection here (codebook_dim = dim: project_in/out are
// identities without parameters).
//
// Training (module in train mode), per layer on the residual r (B, D, T):
//   the first call initialises the codebook by k-means (50 iterations) over r's frames;
//   each frame's code is the nearest (Euclidean); codes used by fewer than 2 frames on average
//   (cluster_size < 2) are replaced by frames of the batch; the counts and sums move by EMA
//   (decay 0.99) and the codes become sum / Laplace-smoothed count (ε = 1e-5);
//   the output is r + (code − r).detach() (straight-through), and the commitment loss is
//   mse(output.detach(), r).
// In eval mode the codes are looked up and the loss is 0: nothing changes.
#pragma once

#include <torch/torch.h>

#include <functional>
#include <tuple>

namespace rt::rave {

// The frames sample_vectors picks: `count` indices into `n` frames — torch.randperm(n)[:count]
// when n ≥ count, else torch.randint(0, n, (count,)), as RAVE draws them. Replaceable so that a
// test can replay the real RAVE's draws.
using IndexSource = std::function<torch::Tensor(int64_t n, int64_t count)>;
torch::Tensor rave_sample_indices(int64_t n, int64_t count);

struct EuclideanCodebookImpl : torch::nn::Module {
  EuclideanCodebookImpl(int64_t dim, int64_t codebook_size);
  // x (B, T, D) → (codes (B, T, D), indices (B, T)); trains the codebook in train mode.
  std::tuple<torch::Tensor, torch::Tensor> forward(const torch::Tensor& x);
  torch::Tensor encode(const torch::Tensor& x) const;        // (B, T, D) → indices (B, T)
  torch::Tensor decode(const torch::Tensor& indices) const;  // (B, T) → codes (B, T, D)

  int64_t dim, codebook_size;
  int64_t kmeans_iters = 50;
  double decay = 0.99, epsilon = 1e-5;
  int64_t threshold_ema_dead_code = 2;
  IndexSource sample_indices;  // unset: rave_sample_indices
  torch::Tensor inited, cluster_size, embed, embed_avg;

 private:
  torch::Tensor sample_vectors(const torch::Tensor& samples, int64_t count) const;
  torch::Tensor nearest(const torch::Tensor& flat) const;  // (N, D) → (N,)
  void kmeans_init(const torch::Tensor& flat);
  void expire_codes(const torch::Tensor& flat);
};
TORCH_MODULE(EuclideanCodebook);

struct ResidualVectorQuantizationImpl : torch::nn::Module {
  ResidualVectorQuantizationImpl(int64_t num_quantizers, int64_t dim, int64_t codebook_size);
  // z (B, D, T) → (quantised z (B, D, T), summed commitment loss (scalar), indices (B, Q, T)).
  std::tuple<torch::Tensor, torch::Tensor, torch::Tensor> forward(const torch::Tensor& z);
  torch::Tensor encode(const torch::Tensor& z) const;        // (B, D, T) → indices (B, Q, T)
  torch::Tensor decode(const torch::Tensor& indices) const;  // (B, Q, T) → (B, D, T)
  void set_sample_indices(const IndexSource& source);
  torch::nn::ModuleList layers;  // each holds its `_codebook` (RAVE's VectorQuantization)
  std::vector<EuclideanCodebook> codebooks;
};
TORCH_MODULE(ResidualVectorQuantization);

}  // namespace rt::rave
