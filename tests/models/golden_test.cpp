// Golden tensors: one training step of a tiny S5 decoder, computed by the Python reference
// (tests/oracle/make_golden.py, run once; its output is committed under
// tests/assets/golden/, format in tests/assets/README.md) and recomputed here by the C++ model
// from the same weights, input and target. Weights are matched by name in both directions, so a
// renamed, added or missing parameter fails as loudly as a wrong gradient. (RAVE is checked
// against the real RAVE instead: rave_oracle_test.cpp.)
//
// Tolerances (float32 model against float64 reference values of the same float32 weights):
//   losses    relative 1e-5.  The reference's own float32 run is within 2e-7.
//   outputs   1e-5 × max|reference|: within 5e-7 in the reference's float32 run.
//   gradients per tensor, max|g − g_ref| ≤ 1e-4 × max|g_ref|. The reference's float32 run
//             deviates by up to 2e-6, recorded in the manifest as float32_vs_float64; the 50×
//             margin absorbs another LibTorch's kernels and summation order, while a wrong sign,
//             a missing term or a wrong factor moves a gradient by O(1). With LibTorch 1.13.1
//             the C++ model measures 2.0e-6.
#include "support/golden.h"

#include <gtest/gtest.h>
#include <torch/torch.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <map>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "models/ssm/decoders.h"
#include "support/test_support.h"
#include "util/atomic_file.h"
#include "util/error.h"
#include "util/json.h"

namespace {

using rt::testing::assign_weights;
using rt::testing::Golden;
using rt::testing::gradient_mismatches;
using rt::testing::join;
using rt::testing::load_golden;
using rt::testing::max_abs;

constexpr double kLossRel = 1e-5;
constexpr double kOutputRel = 1e-5;
constexpr double kS5GradRel = 1e-4;

void expect_loss(const torch::Tensor& value, const Golden& g, const std::string& name) {
  const double ref = g.manifest.at("losses").at(name).get<double>();
  EXPECT_NEAR(value.item<double>(), ref, kLossRel * std::abs(ref)) << name;
}

void expect_output(const torch::Tensor& value, const Golden& g, const std::string& name) {
  const auto& ref = g.at("output:" + name);
  ASSERT_EQ(value.sizes(), ref.sizes()) << name;
  EXPECT_LE(max_abs(value.detach() - ref), kOutputRel * max_abs(ref)) << name;
}

rt::ssm::SsmOptions ssm_options(const rt::Json& o) {
  rt::ssm::SsmOptions s;
  s.variant =
      rt::parse_enum<rt::ssm::SsmVariant>(o.at("variant").get<std::string>(), "golden options.variant");
  s.input_dim = o.at("input_dim").get<int64_t>();
  s.output_dim = o.at("output_dim").get<int64_t>();
  s.d_model = o.at("d_model").get<int64_t>();
  s.state_dim = o.at("state_dim").get<int64_t>();
  s.n_layers = o.at("n_layers").get<int64_t>();
  s.dropout = o.at("dropout").get<double>();
  return s;
}

TEST(GoldenS5, LossOutputAndGradientsMatchThePythonReferenceWithEveryScan) {
  const auto g = load_golden("s5_tiny");
  struct Variant {
    const char* name;
    rt::ssm::ScanKind scan;
    bool fused_kernels;
  };
  for (const auto& v : {Variant{"parallel", rt::ssm::ScanKind::kParallel, false},
                        Variant{"sequential", rt::ssm::ScanKind::kSequential, false},
                        Variant{"fused scan, op-by-op block", rt::ssm::ScanKind::kFused, false},
                        Variant{"fused scan and block kernels", rt::ssm::ScanKind::kFused, true}}) {
    SCOPED_TRACE(v.name);
    torch::manual_seed(0);
    rt::ssm::S5Decoder model(ssm_options(g.manifest.at("options")));
    model->set_scan(v.scan);
    model->set_fused_kernels(v.fused_kernels);
    model->train();
    const auto problems = assign_weights(*model, g);
    ASSERT_TRUE(problems.empty()) << join(problems);
    const auto pred = model->forward(g.at("input:x"));
    const auto loss = torch::mse_loss(pred, g.at("input:target"));
    expect_output(pred, g, "pred");
    expect_loss(loss, g, "loss");
    loss.backward();
    const auto bad = gradient_mismatches(*model, g, kS5GradRel);
    EXPECT_TRUE(bad.empty()) << bad.size() << " gradients differ:\n  " << join(bad);
  }
}

// The checks above can fail: a missing or extra weight is named, and a gradient with a flipped
// sign is reported.
TEST(GoldenChecks, NameMissingAndUnusedWeightsAndReportAFlippedGradient) {
  auto g = load_golden("s5_tiny");
  rt::ssm::S5Decoder model(ssm_options(g.manifest.at("options")));
  auto altered = g;
  altered.tensors.erase("weight:blocks.0.ssm.D");
  altered.tensors["weight:blocks.0.ssm.E"] = torch::zeros({8});
  const auto problems = join(assign_weights(*model, altered));
  EXPECT_NE(problems.find("without a stored weight: blocks.0.ssm.D"), std::string::npos) << problems;
  EXPECT_NE(problems.find("name no model parameter: blocks.0.ssm.E"), std::string::npos) << problems;

  ASSERT_TRUE(assign_weights(*model, g).empty());
  torch::mse_loss(model->forward(g.at("input:x")), g.at("input:target")).backward();
  EXPECT_TRUE(gradient_mismatches(*model, g, kS5GradRel).empty());
  g.tensors["grad:blocks.0.glu_w1.weight"] = -g.tensors["grad:blocks.0.glu_w1.weight"];
  const auto bad = gradient_mismatches(*model, g, kS5GradRel);
  ASSERT_EQ(bad.size(), 1u) << join(bad);
  EXPECT_EQ(bad[0].rfind("blocks.0.glu_w1.weight:", 0), 0u) << bad[0];
}

}  // namespace
