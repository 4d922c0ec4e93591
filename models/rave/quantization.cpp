#include "models/rave/quantization.h"

#include <string>

namespace rt::rave {

namespace F = torch::nn::functional;

torch::Tensor rave_sample_indices(int64_t n, int64_t count) {
  if (n >= count) return torch::randperm(n, torch::kLong).narrow(0, 0, count);
  return torch::randint(0, n, {count}, torch::kLong);
}

namespace {

// RAVE's ema_inplace: moving = moving · decay + new · (1 − decay), in that order of operations.
void ema_inplace(torch::Tensor& moving, const torch::Tensor& value, double decay) {
  moving.mul_(decay).add_(value, 1.0 - decay);
}

// RAVE's VectorQuantization: the codebook under its name `_codebook`.
struct VectorQuantizationImpl : torch::nn::Module {
  VectorQuantizationImpl(int64_t dim, int64_t codebook_size)
      : codebook(register_module("_codebook", EuclideanCodebook(dim, codebook_size))) {}
  EuclideanCodebook codebook;
};
TORCH_MODULE(VectorQuantization);

}  // namespace

EuclideanCodebookImpl::EuclideanCodebookImpl(int64_t dim_, int64_t codebook_size_)
    : dim(dim_), codebook_size(codebook_size_) {
  // kmeans_init = True (VectorQuantization's default): zeros until the first training batch.
  inited = register_buffer("inited", torch::zeros({1}));
  cluster_size = register_buffer("cluster_size", torch::zeros({codebook_size}));
  embed = register_buffer("embed", torch::zeros({codebook_size, dim}));
  embed_avg = register_buffer("embed_avg", torch::zeros({codebook_size, dim}));
}

torch::Tensor EuclideanCodebookImpl::sample_vectors(const torch::Tensor& samples, int64_t count) const {
  auto indices = (sample_indices ? sample_indices : rave_sample_indices)(samples.size(0), count);
  TORCH_CHECK(indices.dim() == 1 && indices.size(0) == count, "sample_vectors: ", count,
              " indices expected, got ", indices.sizes());
  return samples.index_select(0, indices.to(samples.device(), torch::kLong));
}

torch::Tensor EuclideanCodebookImpl::nearest(const torch::Tensor& flat) const {
  // RAVE's quantize: the largest −‖x − e‖², expanded as −(‖x‖² − 2 x·e + ‖e‖²).
  const auto e = embed.t();
  const auto dist =
      -(flat.pow(2).sum(1, /*keepdim=*/true) - 2 * flat.matmul(e) + e.pow(2).sum(0, /*keepdim=*/true));
  return std::get<1>(dist.max(-1));
}

void EuclideanCodebookImpl::kmeans_init(const torch::Tensor& flat) {
  auto means = sample_vectors(flat, codebook_size);
  torch::Tensor bins;
  const auto index = flat.new_empty({0}, torch::kLong);
  for (int64_t it = 0; it < kmeans_iters; ++it) {
    const auto diffs = flat.unsqueeze(1) - means.unsqueeze(0);
    const auto dists = -(diffs.pow(2)).sum(-1);
    const auto buckets = std::get<1>(dists.max(-1));
    bins = torch::bincount(buckets, /*weights=*/{}, codebook_size);
    const auto zero_mask = bins.eq(0);
    const auto clamped = bins.masked_fill(zero_mask, 1);
    auto new_means = torch::zeros({codebook_size, dim}, flat.options());
    new_means.scatter_add_(0, buckets.unsqueeze(1).expand({-1, dim}), flat);
    new_means = new_means / clamped.unsqueeze(-1);
    means = torch::where(zero_mask.unsqueeze(-1), means, new_means);
  }
  embed.copy_(means);
  embed_avg.copy_(means);
  cluster_size.copy_(bins);
  inited.fill_(1);
}

void EuclideanCodebookImpl::expire_codes(const torch::Tensor& flat) {
  if (threshold_ema_dead_code == 0) return;
  const auto expired = cluster_size.lt(static_cast<double>(threshold_ema_dead_code));
  if (!expired.any().item<bool>()) return;
  embed.copy_(torch::where(expired.unsqueeze(-1), sample_vectors(flat, codebook_size), embed));
}

std::tuple<torch::Tensor, torch::Tensor> EuclideanCodebookImpl::forward(const torch::Tensor& x) {
  TORCH_CHECK(x.dim() == 3 && x.size(2) == dim, "codebook: expected (batch, frames, ", dim, "), got ",
              x.sizes());
  const auto flat = x.reshape({-1, dim});
  torch::Tensor indices;
  {
    torch::NoGradGuard no_grad;
    const auto data = flat.detach();
    if (inited.item<double>() == 0.0) kmeans_init(data);
    indices = nearest(data);
  }
  const auto quantized = decode(indices.view({x.size(0), x.size(1)}));
  if (is_training()) {
    // After the lookup, as RAVE: the codes change for the next call only.
    torch::NoGradGuard no_grad;
    const auto data = flat.detach();
    expire_codes(data);
    const auto onehot = F::one_hot(indices, codebook_size).to(data.dtype());
    ema_inplace(cluster_size, onehot.sum(0), decay);
    ema_inplace(embed_avg, data.t().matmul(onehot).t(), decay);
    const auto smoothed = (cluster_size + epsilon) /
                          (cluster_size.sum() + static_cast<double>(codebook_size) * epsilon) *
                          cluster_size.sum();
    embed.copy_(embed_avg / smoothed.unsqueeze(1));
  }
  return {quantized, indices.view({x.size(0), x.size(1)})};
}

torch::Tensor EuclideanCodebookImpl::encode(const torch::Tensor& x) const {
  return nearest(x.reshape({-1, dim})).view({x.size(0), x.size(1)});
}

torch::Tensor EuclideanCodebookImpl::decode(const torch::Tensor& indices) const {
  return F::embedding(indices, embed);
}

ResidualVectorQuantizationImpl::ResidualVectorQuantizationImpl(int64_t num_quantizers, int64_t dim,
                                                               int64_t codebook_size) {
  for (int64_t i = 0; i < num_quantizers; ++i) {
    VectorQuantization layer(dim, codebook_size);
    codebooks.push_back(layer->codebook);
    layers->push_back(layer);
  }
  register_module("layers", layers);
}

void ResidualVectorQuantizationImpl::set_sample_indices(const IndexSource& source) {
  for (auto& c : codebooks) c->sample_indices = source;
}

std::tuple<torch::Tensor, torch::Tensor, torch::Tensor> ResidualVectorQuantizationImpl::forward(
    const torch::Tensor& z) {
  TORCH_CHECK(z.dim() == 3, "residual vector quantisation: expected (batch, dim, frames), got ", z.sizes());
  torch::Tensor out, residual = z;
  std::vector<torch::Tensor> losses, indices;
  for (auto& codebook : codebooks) {
    // RAVE's VectorQuantization.forward on the residual, frames last → first.
    const auto x = residual.permute({0, 2, 1});
    auto [q, ind] = codebook->forward(x);
    // RAVE's torch.tensor([0.0]): float32 whatever the model's dtype, and as a 1-d tensor it
    // keeps the sum float32 (type promotion) — RAVE's float64 runs round the loss to float32.
    torch::Tensor loss = torch::zeros({1}, torch::TensorOptions().device(z.device()).dtype(torch::kFloat32));
    if (is_training()) {
      q = x + (q - x).detach();                        // straight-through
      loss = loss + F::mse_loss(q.detach(), x) * 1.0;  // commitment_weight 1
    }
    const auto quantized = q.permute({0, 2, 1});
    residual = residual - quantized;
    out = out.defined() ? out + quantized : quantized;
    losses.push_back(loss);
    indices.push_back(ind);
  }
  return {out, torch::stack(losses, 0).sum(), torch::stack(indices, 1)};
}

torch::Tensor ResidualVectorQuantizationImpl::encode(const torch::Tensor& z) const {
  torch::Tensor residual = z;
  std::vector<torch::Tensor> indices;
  for (const auto& codebook : codebooks) {
    const auto ind = codebook->encode(residual.permute({0, 2, 1}));
    residual = residual - codebook->decode(ind).permute({0, 2, 1});
    indices.push_back(ind);
  }
  return torch::stack(indices, 1);
}

torch::Tensor ResidualVectorQuantizationImpl::decode(const torch::Tensor& indices) const {
  TORCH_CHECK(indices.dim() == 3 && indices.size(1) == static_cast<int64_t>(codebooks.size()),
              "residual vector quantisation: expected indices (batch, ", codebooks.size(), ", frames), got ",
              indices.sizes());
  torch::Tensor out;
  for (size_t i = 0; i < codebooks.size(); ++i) {
    const auto q = codebooks[i]->decode(indices.select(1, static_cast<int64_t>(i))).permute({0, 2, 1});
    out = out.defined() ? out + q : q;
  }
  return out;
}

}  // namespace rt::rave
