// Drives acids-ircam/nn_tilde's own backend (src/backend/backend.cpp, compiled from an nn_tilde
// checkout by scripts/check_nn_tilde.sh) on an exported file, as the Max/Pd externals do:
// Backend::load, the methods and their params, Backend::perform for 1 and 4 batches (mc.nn~) at
// the buffer sizes nn~ uses, and a get/set/get of every settable attribute. Exits 1 on the
// first thing nn~ would not accept (perform returns silently then, so the output buffers are
// pre-filled with NaN and must come back finite).
// With HOST_RATE, Backend::load is given that rate, and forward's output of a 440 Hz sine at
// that rate is reported by the frequency of its largest spectral peak above 50 Hz
// (scripts/check_nn_tilde.sh compares it with the model-rate file's at 44100 Hz).
//   nn_tilde_driver FILE.ts [HOST_RATE]
#include <algorithm>
#include <cmath>
#include <iostream>
#include <string>
#include <vector>

#include "backend.h"

namespace {

int failures = 0;

void check(bool ok, const std::string& what) {
  std::cout << (ok ? "ok   " : "FAIL ") << what << "\n";
  if (!ok) ++failures;
}

// The frequency (Hz) of the largest DFT magnitude of `x` (Hann window) between 50 Hz and rate / 2.
double peak_hz(const std::vector<float>& x, double rate) {
  const size_t n = x.size();
  double mean = 0.0;
  for (float v : x) mean += v;
  mean /= static_cast<double>(n);
  double best = 0.0, best_hz = 0.0;
  for (size_t k = static_cast<size_t>(50.0 * n / rate) + 1; k < n / 2; ++k) {
    double re = 0.0, im = 0.0;
    for (size_t t = 0; t < n; ++t) {
      const double w = 0.5 - 0.5 * std::cos(2.0 * M_PI * t / n), v = (x[t] - mean) * w;
      re += v * std::cos(2.0 * M_PI * k * t / n);
      im -= v * std::sin(2.0 * M_PI * k * t / n);
    }
    if (re * re + im * im > best) {
      best = re * re + im * im;
      best_hz = static_cast<double>(k) * rate / n;
    }
  }
  return best_hz;
}

// forward on a 440 Hz sine at `rate` through Backend::perform, 2048 samples a call; the last
// 8192 samples' peak frequency.
double forward_sine_peak(Backend& backend, double rate) {
  const int n_vec = 2048, calls = 24, keep = 8192;
  std::vector<float> in(n_vec), out(n_vec), tail;
  for (int c = 0; c < calls; ++c) {
    for (int t = 0; t < n_vec; ++t) in[t] = 0.5f * std::sin(2.0 * M_PI * 440.0 * (c * n_vec + t) / rate);
    std::vector<float*> in_ptr{in.data()}, out_ptr{out.data()};
    backend.perform(in_ptr, out_ptr, "forward", 1, 1, n_vec);
    if ((calls - c) * n_vec <= keep) tail.insert(tail.end(), out.begin(), out.end());
  }
  return peak_hz(tail, rate);
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2 && argc != 3) {
    std::cerr << "usage: nn_tilde_driver FILE.ts [HOST_RATE]\n";
    return 2;
  }
  const double host_rate = argc == 3 ? std::stod(argv[2]) : 44100.0;
  Backend backend;
  try {
    backend.load(argv[1], host_rate);
  } catch (const std::string& e) {  // nn~ throws std::string
    std::cerr << e << "\n";
    return 1;
  }
  check(backend.is_loaded(), "Backend::load at " + std::to_string(static_cast<int>(host_rate)) + " Hz");
  const auto methods = backend.get_available_methods();
  std::string listed;
  for (const auto& m : methods) listed += " " + m;
  // encode, decode, forward; and prior when the file was exported with --prior; forward alone
  // when it was exported at a rate no latent frame fits in whole host samples (export --sr).
  const bool with_prior = std::find(methods.begin(), methods.end(), "prior") != methods.end();
  const bool forward_only = methods.size() == 1 && methods.front() == "forward";
  check(forward_only || methods.size() == (with_prior ? 4u : 3u), "get_available_methods:" + listed);
  if (argc == 3) {
    std::cout << "forward of a 440 Hz sine at " << argv[2] << " Hz: output peak "
              << forward_sine_peak(backend, host_rate) << " Hz\n";
  }
  for (const auto& method : methods) {
    const auto p = backend.get_method_params(method);
    if (p.size() != 4) {
      check(false, method + ": <method>_params has 4 values");
      continue;
    }
    const int in_dim = p[0], in_ratio = p[1], out_dim = p[2], out_ratio = p[3];
    for (int n_batches : {1, 4}) {
      for (int n_vec : {2048, 4096}) {
        std::vector<std::vector<float>> in(in_dim * n_batches, std::vector<float>(n_vec));
        std::vector<std::vector<float>> out(out_dim * n_batches, std::vector<float>(n_vec, NAN));
        for (size_t c = 0; c < in.size(); ++c) {
          for (int t = 0; t < n_vec; ++t) in[c][t] = 0.3f * std::sin(0.01f * static_cast<float>((c + 1) * t));
        }
        std::vector<float*> in_ptr, out_ptr;
        for (auto& b : in) in_ptr.push_back(b.data());
        for (auto& b : out) out_ptr.push_back(b.data());
        // Two calls, as a host does block after block (streaming state carried over).
        backend.perform(in_ptr, out_ptr, method, n_batches, out_dim, n_vec);
        backend.perform(in_ptr, out_ptr, method, n_batches, out_dim, n_vec);
        bool finite = true;
        for (const auto& b : out) {
          for (float v : b) finite = finite && std::isfinite(v);
        }
        check(finite, method + " [" + std::to_string(in_dim) + ", " + std::to_string(in_ratio) + ", " +
                          std::to_string(out_dim) + ", " + std::to_string(out_ratio) + "], " +
                          std::to_string(n_batches) + " batch(es), n_vec " + std::to_string(n_vec) +
                          ": every output sample written");
      }
    }
  }
  try {
    for (const auto& attribute : backend.get_settable_attributes()) {
      const std::string before = backend.get_attribute_as_string(attribute);
      backend.set_attribute(attribute, {"0.5"}, {});
      const std::string after = backend.get_attribute_as_string(attribute);
      check(after != before && std::abs(backend.get_attribute(attribute)[0].toDouble() - 0.5) < 1e-9,
            "attribute " + attribute + ": get " + before + ", set 0.5, get " + after);
    }
  } catch (const std::string& e) {
    check(false, "attributes: " + e);
  }
  std::cout << (failures == 0 ? "nn~ backend accepts " : "nn~ backend rejects ") << argv[1] << "\n";
  return failures == 0 ? 0 : 1;
}
