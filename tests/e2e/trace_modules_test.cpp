// Per-module spans (profiling.with_modules): the SSM decoders' blocks and RAVE's sequences are
// spans named by module path while a with_modules window is open, and absent otherwise.
#include <gtest/gtest.h>

#include <map>
#include <string>

#include "models/common/blocks.h"
#include "models/ssm/decoders.h"
#include "profiling/trace/op_tracer.h"

namespace rt {
namespace {

std::map<std::string, int> module_spans(const prof::Timeline& t) {
  std::map<std::string, int> m;
  for (const auto& a : t.activities) {
    if (a.kind == prof::ActivityKind::kPythonFunction) m[a.name]++;
  }
  return m;
}

ssm::SsmOptions tiny_ssm() {
  ssm::SsmOptions o;
  o.input_dim = 6;
  o.output_dim = 2;
  o.d_model = 8;
  o.state_dim = 4;
  o.n_layers = 2;
  return o;
}

TEST(TraceModulesTest, SsmBlocksAreSpansNamedByPath) {
  torch::manual_seed(0);
  ssm::S5Decoder model(tiny_ssm());
  auto x = torch::randn({2, 5, 6});
  prof::OpTracerOptions o;
  o.with_modules = true;
  prof::OpTracer tracer(o);
  tracer.start();
  EXPECT_TRUE(prof::module_spans_enabled());
  model->forward(x, 0).sum().backward();
  auto t = tracer.stop();
  EXPECT_FALSE(prof::module_spans_enabled());
  const auto spans = module_spans(t);
  for (const char* name : {"encoder", "blocks.0", "blocks.0.ssm", "blocks.1", "blocks.1.ssm", "decoder"}) {
    EXPECT_EQ(spans.count(name) ? spans.at(name) : 0, 1) << name;
  }
  // blocks.0.ssm lies inside blocks.0.
  prof::finalize_timeline(t);
  for (const auto& a : t.activities) {
    if (a.name == "blocks.0.ssm") {
      ASSERT_GE(a.parent, 0);
      EXPECT_EQ(t.activities[static_cast<size_t>(a.parent)].name, "blocks.0");
    }
  }
}

TEST(TraceModulesTest, NoModuleSpansWithoutWithModules) {
  torch::manual_seed(0);
  ssm::S5Decoder model(tiny_ssm());
  prof::OpTracer tracer;  // with_modules off
  tracer.start();
  EXPECT_FALSE(prof::module_spans_enabled());
  model->forward(torch::randn({2, 5, 6}), 0);
  const auto t = tracer.stop();
  EXPECT_TRUE(module_spans(t).empty());
  size_t ops = 0;
  for (const auto& a : t.activities) ops += a.kind == prof::ActivityKind::kCpuOp;
  EXPECT_GT(ops, 10u);  // operators are still traced
}

// A Seq nested in a module: each child is a span "<path>.<i>" once paths are assigned.
struct Holder : torch::nn::Module {
  Holder() {
    net = register_module("net", models::Seq(torch::nn::Linear(3, 4), torch::nn::Functional(torch::relu),
                                             torch::nn::Linear(4, 2)));
    models::assign_module_paths(*this, "model");
  }
  models::Seq net{nullptr};
};

TEST(TraceModulesTest, SeqChildrenAreSpansNamedByPath) {
  Holder h;
  prof::OpTracerOptions o;
  o.with_modules = true;
  prof::OpTracer tracer(o);
  tracer.start();
  auto y = h.net->forward(torch::randn({2, 3}));
  const auto spans = module_spans(tracer.stop());
  EXPECT_EQ(y.sizes(), (std::vector<int64_t>{2, 2}));
  EXPECT_EQ(spans.size(), 3u);
  for (const char* name : {"model.net.0", "model.net.1", "model.net.2"})
    EXPECT_EQ(spans.count(name), 1u) << name;
}

}  // namespace
}  // namespace rt
