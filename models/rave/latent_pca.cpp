#include "models/rave/latent_pca.h"

#include <algorithm>
#include <string>

#include "models/rave/rave.h"
#include "util/error.h"

namespace rt::rave {

LatentPcaAccumulator::LatentPcaAccumulator(int64_t latent_size)
    : latent_size_(latent_size),
      sum_(torch::zeros({latent_size}, torch::kFloat64)),
      outer_(torch::zeros({latent_size, latent_size}, torch::kFloat64)) {}

void LatentPcaAccumulator::add(const torch::Tensor& means) {
  TORCH_CHECK(means.dim() == 3 && means.size(1) == latent_size_, "LatentPcaAccumulator: expected (B, ",
              latent_size_, ", T) means, got ", means.sizes());
  // RAVE rearranges "b c t -> (b t) c": one row per frame.
  auto z = means.detach().to(torch::kCPU, torch::kFloat64).permute({0, 2, 1}).reshape({-1, latent_size_});
  sum_ += z.sum(0);
  outer_ += z.t().mm(z);
  count_ += z.size(0);
}

void LatentPcaAccumulator::reduce(const std::function<void(torch::Tensor&)>& all_reduce_sum) {
  auto packed = torch::cat(
      {torch::full({1}, static_cast<double>(count_), torch::kFloat64), sum_, outer_.reshape({-1})});
  all_reduce_sum(packed);
  count_ = static_cast<int64_t>(packed[0].item<double>());
  sum_ = packed.narrow(0, 1, latent_size_).clone();
  outer_ = packed.narrow(0, 1 + latent_size_, latent_size_ * latent_size_)
               .reshape({latent_size_, latent_size_})
               .clone();
}

LatentPca LatentPcaAccumulator::fit() const {
  if (count_ < 2) {
    throw Error("latent PCA needs at least 2 latent frames, got " + std::to_string(count_));
  }
  const double n = static_cast<double>(count_);
  auto mean = sum_ / n;
  // Unbiased covariance, as sklearn's explained_variance_ (the ratio is the same either way).
  auto cov = (outer_ - n * mean.outer(mean)) / (n - 1.0);
  cov = (cov + cov.t()) / 2.0;
  auto [values, vectors] =
      torch::linalg_eigh(cov, "L");  // ascending (torch::linalg:: is not in torch/torch.h since 2.x)
  values = values.flip(0).clamp_min(0.0);
  auto components = vectors.flip(1).t().contiguous();  // rows, by decreasing variance
  // Sign: the largest-magnitude entry of each component positive.
  auto idx = components.abs().argmax(1, /*keepdim=*/true);
  auto sign = components.gather(1, idx).sign();
  sign = torch::where(sign == 0, torch::ones_like(sign), sign);
  components = components * sign;
  const double total = values.sum().item<double>();
  auto ratio = total > 0 ? values / total : torch::zeros_like(values);
  LatentPca pca;
  pca.mean = mean.to(torch::kFloat32);
  pca.components = components.to(torch::kFloat32);
  pca.fidelity = ratio.cumsum(0).to(torch::kFloat32);
  return pca;
}

bool has_latent_pca(const torch::Tensor& fidelity) {
  return fidelity.defined() && fidelity.numel() > 0 && fidelity.abs().max().item<double>() > 0.0;
}

int64_t latent_size_for_fidelity(const torch::Tensor& fidelity, double target) {
  TORCH_CHECK(has_latent_pca(fidelity), "latent_size_for_fidelity: no fitted fidelity curve");
  TORCH_CHECK(target > 0.0 && target < 1.0, "latent_size_for_fidelity: target must be in (0, 1)");
  auto f = fidelity.to(torch::kCPU, torch::kFloat64).contiguous();
  const int64_t full = f.numel();
  const double* v = f.data_ptr<double>();
  int64_t needed = full;
  // The curve is stored in float32: a value equal to the target up to float32 rounding (0.9f
  // is 0.899999976) reaches it.
  constexpr double kFloat32Rounding = 1e-7;
  for (int64_t i = 0; i < full; ++i) {
    if (v[i] + kFloat32Rounding >= target) {
      needed = i + 1;
      break;
    }
  }
  int64_t n = 1;
  while (n < needed) n *= 2;
  return std::min(n, full);
}

namespace {

torch::Tensor buffer(RaveModelImpl& model, const std::string& name) {
  const auto buffers = model.named_buffers(/*recurse=*/false);
  const auto* t = buffers.find(name);
  TORCH_CHECK(t != nullptr, "RAVE model has no buffer '", name, "'");
  return *t;
}

}  // namespace

void store_latent_pca(RaveModelImpl& model, const LatentPca& pca) {
  torch::NoGradGuard no_grad;
  buffer(model, "latent_mean").copy_(pca.mean);
  buffer(model, "latent_pca").copy_(pca.components);
  buffer(model, "fidelity").copy_(pca.fidelity);
}

LatentPca stored_latent_pca(RaveModelImpl& model) {
  LatentPca pca;
  pca.mean = buffer(model, "latent_mean");
  pca.components = buffer(model, "latent_pca");
  pca.fidelity = buffer(model, "fidelity");
  return pca;
}

}  // namespace rt::rave
