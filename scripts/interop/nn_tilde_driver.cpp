// Drives acids-ircam/nn_tilde's own backend (src/backend/backend.cpp, compiled from an nn_tilde
// checkout by scripts/check_nn_tilde.sh) on an exported file, as the Max/Pd externals do:
// Backend::load, the methods and their params, Backend::perform for 1 and 4 batches (mc.nn~) at
// the buffer sizes nn~ uses, and a get/set/get of every settable attribute. Exits 1 on the
// first thing nn~ would not accept (perform returns silently then, so the output buffers are
// pre-filled with NaN and must come back finite).
//   nn_tilde_driver FILE.ts
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

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    std::cerr << "usage: nn_tilde_driver FILE.ts\n";
    return 2;
  }
  Backend backend;
  try {
    backend.load(argv[1], 44100.0);
  } catch (const std::string& e) {  // nn~ throws std::string
    std::cerr << e << "\n";
    return 1;
  }
  check(backend.is_loaded(), "Backend::load");
  const auto methods = backend.get_available_methods();
  std::string listed;
  for (const auto& m : methods) listed += " " + m;
  // encode, decode, forward; and prior when the file was exported with --prior.
  const bool with_prior = std::find(methods.begin(), methods.end(), "prior") != methods.end();
  check(methods.size() == (with_prior ? 4u : 3u), "get_available_methods:" + listed);
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
