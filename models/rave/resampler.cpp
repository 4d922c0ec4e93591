#include "models/rave/resampler.h"

#include <cmath>
#include <string>
#include <vector>

#include "models/common/pqmf.h"
#include "util/error.h"

namespace rt::rave {
namespace {

namespace F = torch::nn::functional;

// cached_conv.get_padding(kernel) in its centred mode: (kernel − 1) // 2 left, kernel // 2 right.
std::pair<int64_t, int64_t> centred_padding(int64_t kernel) {
  if (kernel == 1) return {0, 0};
  return {(kernel - 1) / 2, kernel / 2};
}

// The ratio host_rate / model_rate; throws rt::Error naming the rates where integer_resampling
// is false.
int64_t check_resampling(int64_t host_rate, int64_t model_rate, bool streaming) {
  if (model_rate <= 0 || host_rate <= model_rate || host_rate % model_rate != 0) {
    throw Error("--sr " + std::to_string(host_rate) +
                ": RAVE's resampler takes a rate that is a multiple (2× or more) of the model's " +
                std::to_string(model_rate) + " Hz (accepted: " + std::to_string(2 * model_rate) + ", " +
                std::to_string(3 * model_rate) +
                ", …); export --sr takes other rates through the rational converter "
                "(models/rave/rational_resampler.h)");
  }
  const int64_t ratio = host_rate / model_rate;
  if (streaming && ratio % 2 != 0) {
    throw Error("--sr " + std::to_string(host_rate) + " with --streaming: the ratio to the model's rate, " +
                std::to_string(ratio) + ", must be even (streaming convolutions stride by it)");
  }
  return ratio;
}

}  // namespace

bool integer_resampling(int64_t host_rate, int64_t model_rate, bool streaming) {
  return model_rate > 0 && host_rate > model_rate && host_rate % model_rate == 0 &&
         (!streaming || (host_rate / model_rate) % 2 == 0);
}

ResamplerImpl::ResamplerImpl(int64_t host_rate, int64_t model_rate, bool streaming)
    : ratio(check_resampling(host_rate, model_rate, streaming)) {
  const auto taps = models::kaiser_filter(M_PI / static_cast<double>(ratio), 140.0);
  auto filt =
      torch::tensor(std::vector<double>(taps.begin(), taps.end()), torch::kFloat64).to(torch::kFloat32);
  const int64_t k = filt.size(0);
  down_filter = register_buffer("down_filter", filt.reshape({1, 1, k}).clone());
  std::tie(down_left, down_right) = centred_padding(k);
  // Polyphase: the filter left-padded to whole frames of `ratio` taps, phase p = taps p, p + ratio, …
  // RAVE pads by k mod ratio, which makes whole frames at ratios 2 and 3 only (its 39 and 57
  // taps); at 4, 5, 6, 8 its reshape fails. The padding to the next whole frame is the same
  // where RAVE's works.
  const int64_t frame_pad = (ratio - k % ratio) % ratio;
  auto poly = F::pad(filt, F::PadFuncOptions({frame_pad, 0})).reshape({-1, ratio}).permute({1, 0});
  poly = F::pad(poly, F::PadFuncOptions({(poly.size(-1) + 1) % 2, 0}));
  up_filter = register_buffer("up_filter", poly.unsqueeze(1).contiguous());
  std::tie(up_left, up_right) = centred_padding(up_filter.size(-1));
}

torch::Tensor ResamplerImpl::to_model_rate(const torch::Tensor& x) {
  auto y = F::pad(x.reshape({-1, 1, x.size(-1)}), F::PadFuncOptions({down_left, down_right}));
  y = F::conv1d(y, down_filter.to(x.dtype()), F::Conv1dFuncOptions().stride(ratio));
  return y.reshape({x.size(0), x.size(1), -1});
}

torch::Tensor ResamplerImpl::from_model_rate(const torch::Tensor& x) {
  auto y = F::pad(x.reshape({-1, 1, x.size(-1)}), F::PadFuncOptions({up_left, up_right}));
  y = F::conv1d(y, up_filter.to(x.dtype()));  // (N, ratio, T): one output phase per channel
  y = y.permute({0, 2, 1}).reshape({y.size(0), -1});
  return y.reshape({x.size(0), x.size(1), -1});
}

}  // namespace rt::rave
