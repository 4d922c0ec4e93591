#include "export/torchscript/nn_tilde.h"

namespace rt::exporting {
namespace {

c10::List<std::string> labels(const std::string& prefix, int64_t n) {
  c10::List<std::string> out;
  for (int64_t i = 1; i <= n; ++i) out.push_back(prefix + " " + std::to_string(i));
  return out;
}

c10::List<std::string> strings(const std::vector<std::string>& v) {
  c10::List<std::string> out;
  for (const auto& s : v) out.push_back(s);
  return out;
}

}  // namespace

void register_nn_method(torch::jit::Module& m, const NnMethod& method) {
  m.register_buffer(method.name + "_params", torch::tensor({method.in_channels, method.in_ratio,
                                                            method.out_channels, method.out_ratio},
                                                           torch::kLong));
  m.register_attribute(method.name + "_input_labels", c10::ListType::ofStrings(),
                       labels(method.input_label, method.in_channels));
  m.register_attribute(method.name + "_output_labels", c10::ListType::ofStrings(),
                       labels(method.output_label, method.out_channels));
}

void register_nn_float_attribute(torch::jit::Module& m, const std::string& name, double value) {
  m.register_attribute(name, c10::TupleType::create({c10::FloatType::get()}),
                       c10::ivalue::Tuple::create({value}));
  m.register_buffer(name + "_params", torch::tensor({int64_t{2}}, torch::kLong));
  m.define("def get_" + name + "(self) -> Tuple[float]:\n    return self." + name + "\n");
  m.define("def set_" + name + "(self, value: float) -> int:\n    self." + name +
           " = (value,)\n    return 0\n");
}

void register_nn_lists(torch::jit::Module& m, const std::vector<std::string>& methods,
                       const std::vector<std::string>& attributes) {
  m.register_attribute("_methods", c10::ListType::ofStrings(), strings(methods));
  m.register_attribute("_attributes", c10::ListType::ofStrings(), strings(attributes));
  m.define("def get_methods(self) -> List[str]:\n    return self._methods\n");
  m.define("def get_attributes(self) -> List[str]:\n    return self._attributes\n");
}

}  // namespace rt::exporting
