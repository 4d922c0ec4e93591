// Golden tensors (tests/assets/golden/<stem>.{json,bin}, format rt-golden/1: util/tensor_manifest.h
// reads it, tests/assets/README.md describes it): loading them as tensors, assigning their
// weights to a module by name, and comparing gradients and outputs. Header-only: the models and
// trainer suites both use it.
#pragma once

#include <torch/torch.h>

#include <cstdint>
#include <cstring>
#include <map>
#include <memory>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "models/common/pqmf.h"
#include "models/rave/losses.h"
#include "support/test_support.h"
#include "util/error.h"
#include "util/json.h"
#include "util/tensor_manifest.h"

namespace rt::testing {

// One golden file: the manifest and its tensors by name ("input:x", "weight:<param>",
// "grad:<param>", "output:y", ...), each in its stored dtype (pcm16 as float32 values / 32768).
struct Golden {
  rt::Json manifest;
  std::map<std::string, torch::Tensor> tensors;

  const torch::Tensor& at(const std::string& name) const {
    auto it = tensors.find(name);
    if (it == tensors.end()) throw rt::Error("golden: no tensor '" + name + "'");
    return it->second;
  }
  bool has(const std::string& name) const { return tensors.count(name) != 0; }
};

// One tensor of a rt-golden/1 file as a tensor of its dtype (pcm16: float32 values / 32768).
inline torch::Tensor golden_tensor(const rt::tensor_manifest::TensorFile& file,
                                   const rt::tensor_manifest::TensorEntry& e) {
  using rt::tensor_manifest::Dtype;
  const torch::ScalarType type = e.dtype == Dtype::kFloat64 ? torch::kFloat64
                                 : e.dtype == Dtype::kPcm16 ? torch::kInt16
                                                            : torch::kFloat32;
  auto t = torch::empty(e.shape, type);
  std::memcpy(t.data_ptr(), file.values(e), e.bytes);
  return e.dtype == Dtype::kPcm16 ? t.to(torch::kFloat32) / 32768.0 : t;
}

// Reads tests/assets/golden/<stem>.{json,bin} (rt::tensor_manifest::read_tensor_file checks
// that every byte of the .bin belongs to exactly one tensor, in manifest order).
inline Golden load_golden(const std::string& stem) {
  const auto file = rt::tensor_manifest::read_tensor_file(source_path("tests/assets/golden") / stem);
  Golden g;
  g.manifest = file.manifest;
  for (const auto& e : file.tensors) g.tensors[e.name] = golden_tensor(file, e);
  return g;
}

inline std::string join(const std::vector<std::string>& v) {
  std::string s;
  for (const auto& x : v) s += (s.empty() ? "" : ", ") + x;
  return s;
}

// Assigns every "weight:<name>" to the model's parameter <name>. Returns what prevents an
// exact one-to-one assignment (empty when there is none): trainable parameters without a stored
// weight, stored weights that name no parameter, parameters the manifest lists as "derived" that
// the model lacks, and shape mismatches. Parameters that do not require grad (the PQMF filters)
// must be listed as derived: both sides compute them instead of storing them. `prefix` is
// prepended to the module's names (a submodule of the stored model).
inline std::vector<std::string> assign_weights(torch::nn::Module& model, const Golden& g,
                                               const std::string& prefix = "") {
  const auto params = model.named_parameters(true);
  std::set<std::string> derived;
  for (const auto& d : g.manifest.at("derived")) derived.insert(d.get<std::string>());
  std::vector<std::string> problems, missing, unused, bad_shape, derived_absent;
  std::set<std::string> stored;
  for (const auto& [name, t] : g.tensors) {
    if (name.rfind("weight:" + prefix, 0) != 0) continue;
    const auto key = name.substr(7 + prefix.size());
    stored.insert(key);
    const auto* p = params.find(key);
    if (p == nullptr) {
      unused.push_back(prefix + key);
    } else if (p->sizes() != t.sizes()) {
      std::ostringstream s;
      s << prefix << key << " (model " << p->sizes() << ", stored " << t.sizes() << ")";
      bad_shape.push_back(s.str());
    }
  }
  for (const auto& p : params) {
    if (stored.count(p.key()) == 0 && !(derived.count(prefix + p.key()) && !p.value().requires_grad()))
      missing.push_back(prefix + p.key());
  }
  if (prefix.empty()) {
    for (const auto& d : derived) {
      if (params.find(d) == nullptr) derived_absent.push_back(d);
    }
  }
  if (!missing.empty()) problems.push_back("model parameters without a stored weight: " + join(missing));
  if (!unused.empty()) problems.push_back("stored weights that name no model parameter: " + join(unused));
  if (!bad_shape.empty()) problems.push_back("shape mismatches: " + join(bad_shape));
  if (!derived_absent.empty())
    problems.push_back("derived parameters the model lacks: " + join(derived_absent));
  if (!problems.empty()) return problems;
  torch::NoGradGuard no_grad;
  for (const auto& key : stored) params[key].copy_(g.at("weight:" + prefix + key));
  return problems;
}

inline double max_abs(const torch::Tensor& t) { return t.abs().max().item<double>(); }

// max|a − ref| / max|ref| (0 when both are all zeros).
inline double relative_to_max(const torch::Tensor& a, const torch::Tensor& ref) {
  const double scale = max_abs(ref), err = max_abs(a.to(ref.scalar_type()) - ref);
  return scale == 0.0 ? err : err / scale;
}

// ‖a − ref‖₂ / ‖ref‖₂ (‖a‖₂ when ref is all zeros).
inline double relative_norm(const torch::Tensor& a, const torch::Tensor& ref) {
  const double scale = ref.to(torch::kFloat64).norm().item<double>();
  const double err = (a.to(torch::kFloat64) - ref.to(torch::kFloat64)).norm().item<double>();
  return scale == 0.0 ? err : err / scale;
}

enum class GradMetric {
  kMaxRelativeToMax,  // max|g − g_ref| / max|g_ref|
  kNorm,              // ‖g − g_ref‖₂ / ‖g_ref‖₂
};

// Every trainable parameter's gradient against "<grad_prefix><name>": a list of the
// mismatches, each with its error relative to the reference tensor (`metric`). `names`, when
// given, limits the comparison to those parameters.
inline std::vector<std::string> gradient_mismatches(const torch::nn::Module& model, const Golden& g,
                                                    double rel, const std::string& grad_prefix = "grad:",
                                                    const std::set<std::string>* names = nullptr,
                                                    GradMetric metric = GradMetric::kMaxRelativeToMax,
                                                    double abs_floor = 0.0) {
  std::vector<std::string> bad;
  for (const auto& p : model.named_parameters(true)) {
    if (!p.value().requires_grad()) continue;
    if (names != nullptr && names->count(p.key()) == 0) continue;
    const auto it = g.tensors.find(grad_prefix + p.key());
    if (it == g.tensors.end()) {
      bad.push_back(p.key() + ": no stored gradient");
      continue;
    }
    const auto& grad = p.value().grad();
    if (!grad.defined()) {
      bad.push_back(p.key() + ": no gradient computed");
      continue;
    }
    const bool norm = metric == GradMetric::kNorm;
    const double err = norm ? relative_norm(grad, it->second) : relative_to_max(grad, it->second);
    // A gradient that is zero in exact arithmetic is rounding noise on both sides: within
    // abs_floor of each other (norm of the difference), it matches.
    if (abs_floor > 0.0 &&
        (grad.to(torch::kFloat64) - it->second.to(torch::kFloat64)).norm().item<double>() <= abs_floor) {
      continue;
    }
    if (!(err <= rel)) {
      std::ostringstream s;
      s << p.key() << (norm ? ": ‖g − g_ref‖ = " : ": max|g − g_ref| = ") << err
        << (norm ? " × ‖g_ref‖ (" : " × max|g_ref| (")
        << (norm ? it->second.norm().item<double>() : max_abs(it->second)) << "), limit " << rel;
      bad.push_back(s.str());
    }
  }
  return bad;
}

// RAVE's own float32 PQMF filters (rave_v2_modules: output:pqmf.h and output:pqmf.hk, from its
// float32 cos) into `pqmf`: another LibTorch's cos rounding (Debian's 2.6) out of a comparison.
// REQUIRES: the golden's n_band and attenuation (4 bands, 100 dB: the oracle's tiny v2).
inline void use_raves_pqmf(rt::models::PqmfImpl& pqmf) {
  const auto g = load_golden("rave_v2_modules");
  pqmf.set_filters(g.at("output:pqmf.h"), g.at("output:pqmf.hk"));
}

// While alive, the spectral distances apply RAVE's own float32 hann windows (rave_windows),
// whatever this LibTorch's torch::hann_window rounds: the window is then out of a comparison
// with the real RAVE, as the tape takes its noise draws out.
class RavesWindows {
 public:
  RavesWindows() {
    auto g = std::make_shared<Golden>(load_golden("rave_windows"));
    rt::rave::set_stft_window_source([g](int64_t n) {
      const std::string name = "window:" + std::to_string(n);
      return g->at(name);
    });
  }
  ~RavesWindows() { rt::rave::set_stft_window_source({}); }
  RavesWindows(const RavesWindows&) = delete;
  RavesWindows& operator=(const RavesWindows&) = delete;
};

}  // namespace rt::testing
