#include "data/augment.h"

#include <sox.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <mutex>
#include <numeric>

#include "util/error.h"

namespace rt {
namespace {

constexpr const char* kNames[] = {"mute", "compress", "gain", "normalize_ambient"};

std::mutex& sox_mutex() {
  static std::mutex m;
  return m;
}

void init_sox() {
  static std::once_flag once;
  std::call_once(once, [] {
    if (sox_init() != SOX_SUCCESS) throw Error("libsox could not be initialised (sox_init)");
    sox_get_globals()->verbosity = 0;
  });
}

// The tensor fed to the chain, interleaved int32 samples, and what comes out.
struct InputPriv {
  const std::vector<sox_sample_t>* samples;
  size_t index;
};
struct OutputPriv {
  std::vector<sox_sample_t>* samples;
};

int input_drain(sox_effect_t* effp, sox_sample_t* obuf, size_t* osamp) {
  auto* p = static_cast<InputPriv*>(effp->priv);
  const size_t channels = effp->out_signal.channels;
  size_t n = std::min(*osamp, p->samples->size() - p->index);
  n -= n % channels;
  std::copy(p->samples->begin() + static_cast<std::ptrdiff_t>(p->index),
            p->samples->begin() + static_cast<std::ptrdiff_t>(p->index + n), obuf);
  p->index += n;
  *osamp = n;
  return p->index == p->samples->size() ? SOX_EOF : SOX_SUCCESS;
}

int output_flow(sox_effect_t* effp, const sox_sample_t* ibuf, sox_sample_t* /*obuf*/, size_t* isamp,
                size_t* osamp) {
  auto* p = static_cast<OutputPriv*>(effp->priv);
  p->samples->insert(p->samples->end(), ibuf, ibuf + *isamp);
  *osamp = 0;
  return SOX_SUCCESS;
}

sox_effect_handler_t* input_handler() {
  static sox_effect_handler_t h{"rt_input", nullptr,     SOX_EFF_MCHAN, nullptr, nullptr,
                                nullptr,    input_drain, nullptr,       nullptr, sizeof(InputPriv)};
  return &h;
}
sox_effect_handler_t* output_handler() {
  static sox_effect_handler_t h{"rt_output", nullptr, SOX_EFF_MCHAN, nullptr, nullptr,
                                output_flow, nullptr, nullptr,       nullptr, sizeof(OutputPriv)};
  return &h;
}

std::string joined(const std::vector<std::string>& v) {
  std::string s;
  for (const auto& x : v) s += (s.empty() ? "" : " ") + x;
  return s;
}

// RAVE's RandomCompress's transfer function, with the amplitude printed as Python prints a float.
std::string compress_points(double threshold, double amp) {
  char buf[96];
  std::snprintf(buf, sizeof buf, "6:-80,%g,%.17g", threshold, amp);
  return buf;
}

}  // namespace

const char* augmentation_name(Augmentation a) { return kNames[static_cast<int>(a)]; }

std::vector<Augmentation> parse_augmentations(const std::string& text, const std::string& key) {
  std::vector<Augmentation> out;
  size_t start = 0;
  while (start <= text.size()) {
    size_t end = text.find(',', start);
    if (end == std::string::npos) end = text.size();
    std::string name = text.substr(start, end - start);
    name.erase(0, name.find_first_not_of(" \t"));
    name.erase(name.find_last_not_of(" \t") + 1);
    if (!name.empty()) {
      bool found = false;
      for (int i = 0; i < 4; ++i) {
        if (name == kNames[i]) {
          out.push_back(static_cast<Augmentation>(i));
          found = true;
        }
      }
      if (!found) {
        throw Error(key + ": unknown augmentation '" + name +
                    "' (accepted: mute, compress, gain — RAVE's --augment files — and normalize_ambient)");
      }
    }
    start = end + 1;
  }
  return out;
}

torch::Tensor sox_compand(const torch::Tensor& x, int sampling_rate, const std::vector<std::string>& args) {
  TORCH_CHECK(x.dim() == 2 && x.scalar_type() == torch::kFloat32, "sox_compand: [channels, length] float32");
  const int64_t channels = x.size(0), length = x.size(1);
  // Interleaved, as torchaudio: float → ×2^31 in double, clamped, truncated to int32.
  const torch::Tensor xt = x.t().contiguous();
  const float* src = xt.data_ptr<float>();
  std::vector<sox_sample_t> in(static_cast<size_t>(channels * length)), out;
  for (size_t i = 0; i < in.size(); ++i) {
    const double v = std::clamp(static_cast<double>(src[i]) * 2147483648.0, -2147483648.0, 2147483647.0);
    in[i] = static_cast<sox_sample_t>(v);
  }
  out.reserve(in.size());
  {
    std::lock_guard<std::mutex> lock(sox_mutex());
    init_sox();
    sox_signalinfo_t signal{static_cast<sox_rate_t>(sampling_rate), static_cast<unsigned>(channels), 32,
                            static_cast<sox_uint64_t>(in.size()), nullptr};
    sox_encodinginfo_t encoding{SOX_ENCODING_SIGN2, 32,       0, sox_option_default, sox_option_default,
                                sox_option_default, sox_false};
    sox_effects_chain_t* chain = sox_create_effects_chain(&encoding, &encoding);
    if (chain == nullptr) throw Error("libsox: could not create an effects chain");
    sox_signalinfo_t interm = signal;
    std::string failure;
    auto add = [&](sox_effect_t* e, const char* what) {
      if (failure.empty() && sox_add_effect(chain, e, &interm, &signal) != SOX_SUCCESS) failure = what;
      free(e);
    };
    sox_effect_t* e = sox_create_effect(input_handler());
    *static_cast<InputPriv*>(e->priv) = InputPriv{&in, 0};
    add(e, "the input");
    const sox_effect_handler_t* compand = sox_find_effect("compand");
    if (compand == nullptr) {
      sox_delete_effects_chain(chain);
      throw Error("libsox has no compand effect");
    }
    e = sox_create_effect(compand);
    std::vector<std::string> copy = args;
    std::vector<char*> argv;
    for (auto& a : copy) argv.push_back(a.data());
    if (sox_effect_options(e, static_cast<int>(argv.size()), argv.data()) != SOX_SUCCESS) {
      free(e);
      sox_delete_effects_chain(chain);
      throw Error("sox compand refused its arguments '" + joined(args) + "'");
    }
    add(e, "compand");
    e = sox_create_effect(output_handler());
    *static_cast<OutputPriv*>(e->priv) = OutputPriv{&out};
    add(e, "the output");
    if (failure.empty() && sox_flow_effects(chain, nullptr, nullptr) != SOX_SUCCESS &&
        out.size() != in.size()) {
      failure = "the flow";
    }
    sox_delete_effects_chain(chain);
    if (!failure.empty()) throw Error("sox compand " + joined(args) + ": " + failure + " failed");
  }
  if (out.size() != in.size()) {
    throw Error("sox compand returned " + std::to_string(out.size()) + " samples for " +
                std::to_string(in.size()));
  }
  torch::Tensor y = torch::empty({length, channels}, torch::kFloat32);
  float* dst = y.data_ptr<float>();
  for (size_t i = 0; i < out.size(); ++i) dst[i] = static_cast<float>(out[i]) / 2147483648.0f;
  return y.t().contiguous();
}

namespace {

// Modified Bessel function of the first kind, order 0 (series; exact to double rounding for the
// arguments a Kaiser window with beta 5 takes).
double bessel_i0(double x) {
  double sum = 1.0, term = 1.0;
  const double q = x * x / 4.0;
  for (int k = 1; k < 200; ++k) {
    term *= q / (static_cast<double>(k) * k);
    sum += term;
    if (term < sum * 1e-17) break;
  }
  return sum;
}

// scipy.signal.firwin(numtaps, cutoff, window=('kaiser', 5.0)): lowpass, scaled to unit DC gain.
std::vector<double> firwin_kaiser(int64_t numtaps, double cutoff, double beta) {
  std::vector<double> h(static_cast<size_t>(numtaps));
  const double alpha = 0.5 * static_cast<double>(numtaps - 1);
  double sum = 0.0;
  for (int64_t n = 0; n < numtaps; ++n) {
    const double m = static_cast<double>(n) - alpha;
    const double arg = cutoff * m;
    const double sinc = arg == 0.0 ? 1.0 : std::sin(M_PI * arg) / (M_PI * arg);
    const double r = (static_cast<double>(n) - alpha) / alpha;
    const double w = bessel_i0(beta * std::sqrt(std::max(0.0, 1.0 - r * r))) / bessel_i0(beta);
    h[static_cast<size_t>(n)] = cutoff * sinc * w;
    sum += h[static_cast<size_t>(n)];
  }
  for (auto& v : h) v /= sum;
  return h;
}

}  // namespace

torch::Tensor resample_poly(const torch::Tensor& x, int64_t up, int64_t down) {
  TORCH_CHECK(x.dim() == 2 && x.scalar_type() == torch::kFloat32, "resample_poly: [rows, length] float32");
  const int64_t g = std::gcd(up, down);
  up /= g;
  down /= g;
  if (up == 1 && down == 1) return x.clone();
  const int64_t n_in = x.size(1), rows = x.size(0);
  const int64_t n_out = (n_in * up) / down + ((n_in * up) % down != 0 ? 1 : 0);
  const int64_t max_rate = std::max(up, down);
  const int64_t half_len = 10 * max_rate;
  std::vector<double> h = firwin_kaiser(2 * half_len + 1, 1.0 / static_cast<double>(max_rate), 5.0);
  for (auto& v : h)
    v = static_cast<double>(static_cast<float>(v)) * static_cast<double>(up);  // h.astype(x.dtype) * up
  const int64_t n_pre_pad = down - half_len % down;
  const int64_t n_pre_remove = (half_len + n_pre_pad) / down;
  // The padded filter: n_pre_pad zeros first (the zeros after it change nothing kept).
  const auto taps = static_cast<int64_t>(h.size());
  const torch::Tensor xc = x.contiguous();
  torch::Tensor y = torch::empty({rows, n_out}, torch::kFloat32);
  for (int64_t r = 0; r < rows; ++r) {
    const float* in = xc.data_ptr<float>() + r * n_in;
    double mean = 0.0;
    for (int64_t i = 0; i < n_in; ++i) mean += in[i];
    mean = static_cast<double>(static_cast<float>(mean / static_cast<double>(n_in)));
    float* out = y.data_ptr<float>() + r * n_out;
    for (int64_t k = 0; k < n_out; ++k) {
      // upfirdn: output sample (k + n_pre_remove)·down of the upsampled signal filtered by the
      // padded h; input i sits at position i·up, tap j of h at offset n_pre_pad + j.
      const int64_t pos = (k + n_pre_remove) * down - n_pre_pad;
      double acc = 0.0;
      // j ≡ pos (mod up), 0 ≤ j < taps, 0 ≤ (pos − j)/up < n_in
      int64_t j = ((pos % up) + up) % up;
      for (; j < taps; j += up) {
        const int64_t i = (pos - j) / up;
        if (i < 0) break;
        if (i < n_in) acc += h[static_cast<size_t>(j)] * (static_cast<double>(in[i]) - mean);
      }
      out[k] = static_cast<float>(acc + mean);
    }
  }
  return y;
}

RandomPitch::RandomPitch(double lo, double hi, int64_t n_signal) : lo_(lo), hi_(hi), n_signal_(n_signal) {
  if (!(lo > 0 && hi >= lo)) {
    throw Error("data.rand_pitch = [" + std::to_string(lo) + ", " + std::to_string(hi) +
                "]: expected two factors 0 < LO <= HI (RAVE's --rand_pitch 0.7,1.3)");
  }
  for (int64_t a = 1; a < 20; ++a) {
    for (int64_t b = 1; b < 20; ++b) {
      if (a == b) continue;
      const double f = static_cast<double>(a) / static_cast<double>(b);
      if (f > hi || f < lo) continue;
      // bisect.insort-left, as RAVE builds the lists
      const auto at = std::lower_bound(factors_.begin(), factors_.end(), f) - factors_.begin();
      factors_.insert(factors_.begin() + at, f);
      ratios_.insert(ratios_.begin() + at, {a, b});
    }
  }
  if (factors_.empty()) {
    throw Error("data.rand_pitch = [" + std::to_string(lo) + ", " + std::to_string(hi) +
                "] holds no ratio x/y of integers 1…19 (x != y)");
  }
}

std::pair<int64_t, int64_t> RandomPitch::ratio_for(double factor) const {
  auto at = std::lower_bound(factors_.begin(), factors_.end(), factor) - factors_.begin();
  if (at == static_cast<std::ptrdiff_t>(factors_.size())) --at;
  return ratios_[static_cast<size_t>(at)];
}

torch::Tensor RandomPitch::operator()(const torch::Tensor& record, std::mt19937_64& rng) const {
  std::uniform_real_distribution<double> u(0.0, 1.0);
  if (u(rng) >= 0.5) return record;
  const double hi = std::min(hi_, static_cast<double>(record.size(-1)) / static_cast<double>(n_signal_));
  const double factor = u(rng) * (hi - lo_) + lo_;
  const auto [up, down] = ratio_for(factor);
  return resample_poly(record, up, down);
}

void normalize_peak(torch::Tensor& x, double max_gain_db) {
  const double peak = x.abs().max().item<double>();
  if (peak == 0.0) return;
  const double gain_db = std::min(max_gain_db, -20.0 * std::log10(peak));
  x.mul_(std::pow(10.0, gain_db / 20.0));
}

void take_derivative(torch::Tensor& x) {
  const int64_t rows = x.size(0), n = x.size(1);
  float* d = x.data_ptr<float>();
  for (int64_t r = 0; r < rows; ++r) {
    float* row = d + r * n;
    double prev = 0.0;
    for (int64_t t = 0; t < n; ++t) {
      const double cur = row[t];
      row[t] = static_cast<float>(0.5 * cur - 0.5 * prev);
      prev = cur;
    }
  }
}

void integrate_derivative(torch::Tensor& x, int sampling_rate) {
  const double alpha = 1.0 / (1.0 + 1.0 / sampling_rate * 2.0 * M_PI * 10.0);
  const double b0 = alpha * alpha, b1 = -alpha * alpha, a1 = -2.0 * alpha, a2 = alpha * alpha;
  const int64_t rows = x.size(0), n = x.size(1);
  float* d = x.data_ptr<float>();
  for (int64_t r = 0; r < rows; ++r) {
    float* row = d + r * n;
    double z1 = 0.0, z2 = 0.0;  // direct form II transposed, as scipy.signal.lfilter
    for (int64_t t = 0; t < n; ++t) {
      const double in = row[t];
      const double y = b0 * in + z1;
      z1 = b1 * in - a1 * y + z2;
      z2 = -a2 * y;
      row[t] = static_cast<float>(y);
    }
  }
}

void apply_augmentation(Augmentation a, torch::Tensor& x, int sampling_rate, std::mt19937_64& rng) {
  std::uniform_real_distribution<double> u(0.0, 1.0);
  switch (a) {
    case Augmentation::kMute:
      if (u(rng) < 0.1) x.zero_();
      return;
    case Augmentation::kCompress:
      if (u(rng) < 0.8) {
        const double amp = -60.0 + 60.0 * static_cast<double>(static_cast<float>(u(rng)));
        x = sox_compand(x, sampling_rate, {"0.1,0.1", compress_points(-40, amp)});
      }
      return;
    case Augmentation::kGain:
      if (u(rng) < 0.5) {
        const double gain_db = -6.0 + 9.0 * u(rng);
        x.mul_(std::pow(10.0, gain_db / 20.0));
        const double peak = x.abs().max().item<double>();
        if (peak > 1.0) x.div_(peak);
      }
      return;
    case Augmentation::kNormalizeAmbient:
      x = sox_compand(x, sampling_rate, {"0.01,0.01", "6:-30,-15,-10,-8,0,-5", "0"});
      return;
  }
}

}  // namespace rt
