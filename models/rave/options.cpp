#include "models/rave/options.h"

#include <numeric>

#include "util/error.h"
#include "models/common/blocks.h"

namespace rt::rave {

RaveOptions RaveOptions::preset(const std::string& version) {
  RaveOptions o;  // defaults are v2.gin
  if (version == "v2") return o;
  if (version == "v3") {
    // v3.gin = v2 + adain.gin + snake.gin + descript_discriminator.gin
    o.version = "v3";
    o.activation = "snake";
    o.adain = true;
    o.discriminator = "descript";
    return o;
  }
  if (version == "v1") {
    o.version = "v1";
    o.capacity = 64;
    o.dilations = {{1, 1}, {3, 1}, {5, 1}};  // blocks.ResidualStack dilations_list
    o.amplitude_modulation = false;
    o.noise_bands = 5;
    o.noise_ratios = {4, 4, 4};
    o.discriminator = "period_scale";
    o.periods = {};  // v1: MultiScaleDiscriminator only
    o.discriminator_capacity = 64;
    return o;
  }
  throw rt::Error("model.version: unknown RAVE version '" + version + "' (accepted: v1, v2, v3)");
}

int64_t RaveOptions::hop() const {
  return std::accumulate(ratios.begin(), ratios.end(), int64_t{1}, std::multiplies<>());
}

namespace {

void require(bool ok, const std::string& key, const std::string& message) {
  if (!ok) throw rt::Error("model." + key + ": " + message);
}

bool all_positive(const std::vector<int64_t>& v) {
  for (auto x : v)
    if (x < 1) return false;
  return true;
}

}  // namespace

void RaveOptions::validate() const {
  require(version == "v1" || version == "v2" || version == "v3", "version",
          "'" + version + "' is not one of v1, v2, v3");
  require(sampling_rate >= 1, "sampling_rate", "must be >= 1");
  require(channels >= 1, "channels", "must be >= 1");
  require(capacity >= 1, "capacity", "must be >= 1, got " + std::to_string(capacity));
  require(latent_size >= 1, "latent_size", "must be >= 1, got " + std::to_string(latent_size));
  require(n_band >= 1 && n_band <= 64 && (n_band & (n_band - 1)) == 0, "n_band",
          "must be one of 1, 2, 4, 8, 16, 32, 64, got " + std::to_string(n_band));
  require(!ratios.empty() && all_positive(ratios), "ratios", "must be a non-empty list of ints >= 1");
  require(kernel_size >= 1 && kernel_size % 2 == 1, "kernel_size",
          "must be an odd int >= 1, got " + std::to_string(kernel_size));
  if (version == "v1") {
    require(!dilations.empty(), "dilations", "must hold at least one list (v1 residual layers)");
  } else {
    require(dilations.size() == ratios.size() || dilations.size() == 1, "dilations",
            "needs one list per ratio (" + std::to_string(ratios.size()) + ") or a single list, got " +
                std::to_string(dilations.size()));
  }
  for (const auto& d : dilations)
    require(!d.empty() && all_positive(d), "dilations", "every list must hold ints >= 1");
  models::parse_activation(activation, "model.activation");
  models::parse_padding_mode(padding, "model.padding");
  require(noise_bands >= 0, "noise_bands", "must be >= 0");
  if (noise_bands > 0)
    require(!noise_ratios.empty() && all_positive(noise_ratios), "noise_ratios",
            "must be a non-empty list of ints >= 1 when noise_bands > 0");
  require(discriminator == "none" || discriminator == "period_scale" || discriminator == "descript",
          "discriminator", "'" + discriminator + "' is not one of none, period_scale, descript");
  require(discriminator_capacity >= 1, "discriminator_capacity", "must be >= 1");
  require(discriminator_n_layers >= 1, "discriminator_n_layers", "must be >= 1");
  require(all_positive(periods), "periods", "must hold ints >= 1");
  require(n_scales >= 1, "n_scales", "must be >= 1");
  for (auto n : mrd_n_ffts)
    require(n >= 16 && n % 4 == 0, "mrd_n_ffts", "every n_fft must be a multiple of 4 and >= 16");
  if (discriminator == "descript")
    require(!periods.empty() || !mrd_n_ffts.empty(), "mrd_n_ffts",
            "the descript discriminator needs periods or mrd_n_ffts");
  require(!stft_scales.empty(), "stft_scales", "must not be empty");
  for (auto n : stft_scales)
    require(n >= 4 && n % 4 == 0, "stft_scales", "every scale must be a multiple of 4 and >= 4");
}

}  // namespace rt::rave
