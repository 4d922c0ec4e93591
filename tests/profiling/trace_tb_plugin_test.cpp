// Module spans as TensorBoard's PyTorch-profiler plugin reads torch's module events
// (torch_tb_profiler/profiler/trace.py, module_op.py): category "python_function", "Python id",
// "Python parent id" of the enclosing module span, one "Python module id" per module path.
#include <gtest/gtest.h>

#include <map>
#include <set>
#include <string>
#include <vector>

#include "profiling/annotation.h"
#include "profiling/trace/chrome_trace.h"
#include "profiling/trace/op_tracer.h"
#include "util/json.h"

namespace rt::prof {
namespace {

TEST(TraceTbPlugin, ModuleSpansAreModuleEventsLinkedToTheirEnclosingModule) {
  OpTracerOptions o;
  o.with_modules = true;
  OpTracer tracer(o);
  tracer.start();
  tracer.step_begin(0);
  for (int call = 0; call < 2; ++call) {
    ModuleScope outer("encoder");
    {
      ModuleScope inner("encoder.net.0");
      torch::relu(torch::ones({4}));
    }
    ScopedAnnotation phase("forward");  // not a module: not in the module tree
    ModuleScope inner2("encoder.net.1");
    torch::relu(torch::ones({4}));
  }
  tracer.step_end();
  Timeline t = tracer.stop();
  finalize_timeline(t);
  const Json j = Json::parse(chrome_trace_json(t, ChromeTraceOptions{}));

  std::map<int64_t, std::string> name_of_id;
  std::map<std::string, std::set<int64_t>> module_ids;
  std::map<std::string, int> calls;
  std::vector<std::pair<std::string, int64_t>> parent_links;  // (name, parent python id)
  for (const auto& e : j["traceEvents"]) {
    if (e.value("ph", "") != "X") continue;
    const std::string name = e["name"];
    if (name.rfind("encoder", 0) != 0) {
      EXPECT_NE(e["cat"], "python_function") << e.dump();
      continue;
    }
    ASSERT_EQ(e["cat"], "python_function") << e.dump();
    const Json& a = e["args"];
    ASSERT_TRUE(a["Python id"].is_number_integer()) << e.dump();
    ASSERT_TRUE(a["Python module id"].is_number_integer()) << e.dump();
    EXPECT_TRUE(name_of_id.emplace(a["Python id"].get<int64_t>(), name).second)
        << "Python id reused: " << e.dump();
    module_ids[name].insert(a["Python module id"].get<int64_t>());
    calls[name]++;
    parent_links.emplace_back(name,
                              a.contains("Python parent id") ? a["Python parent id"].get<int64_t>() : 0);
  }
  EXPECT_EQ(calls, (std::map<std::string, int>{{"encoder", 2}, {"encoder.net.0", 2}, {"encoder.net.1", 2}}));
  for (const auto& [name, ids] : module_ids) EXPECT_EQ(ids.size(), 1u) << name;  // one id per module
  EXPECT_NE(*module_ids["encoder.net.0"].begin(), *module_ids["encoder.net.1"].begin());
  for (const auto& [name, parent] : parent_links) {
    if (name == "encoder") {
      EXPECT_EQ(parent, 0) << "a root module has no parent";
    } else {
      ASSERT_TRUE(name_of_id.count(parent)) << name;
      EXPECT_EQ(name_of_id[parent], "encoder") << name;  // through the "forward" annotation too
    }
  }
}

}  // namespace
}  // namespace rt::prof
