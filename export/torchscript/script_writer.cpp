#include "export/torchscript/script_writer.h"

#include <torch/csrc/jit/frontend/resolver.h>
#include <torch/csrc/jit/frontend/sugared_value.h>

#include <algorithm>
#include <iomanip>
#include <sstream>

#include "util/error.h"

namespace rt::exporting {

ScriptContext::ScriptContext(bool streaming_, int64_t int8_min_weights_)
    : streaming(streaming_),
      int8_min_weights(int8_min_weights_),
      cu(std::make_shared<torch::jit::CompilationUnit>()) {}

torch::jit::Module ScriptContext::new_module(const std::string& kind) {
  torch::jit::Module m(c10::QualifiedName("__torch__.rt_export." + kind), cu, /*shouldMangle=*/true);
  m.register_attribute("training", c10::BoolType::get(), false);
  return m;
}

std::string num(double v) {
  std::ostringstream s;
  s << std::setprecision(17) << v;
  std::string out = s.str();
  if (out.find_first_of(".eEn") == std::string::npos) out += ".0";
  return out;
}

MethodWriter::MethodWriter(ScriptContext& ctx, torch::jit::Module& module) : ctx_(ctx), module_(module) {}

std::string MethodWriter::fresh(const std::string& hint) { return hint + std::to_string(counter_++); }

Signal MethodWriter::assign(const Signal& like, const std::string& expression) {
  Signal y = like;
  y.var = fresh("x");
  line(y.var + " = " + expression);
  return y;
}

void MethodWriter::line(const std::string& code) {
  std::istringstream in(code);
  std::string l;
  while (std::getline(in, l)) lines_.push_back(l);
}

namespace {

// LibTorch's native resolver knows only `torch.*` (aten). The int8 products call
// `quantized.linear_dynamic` (the quantized:: operators, what a saved file's `ops.quantized.*`
// resolves to when it is loaded).
struct ExportResolver : torch::jit::NativeResolver {
  std::shared_ptr<torch::jit::SugaredValue> resolveValue(const std::string& name,
                                                         torch::jit::GraphFunction& m,
                                                         const torch::jit::SourceRange& loc) override {
    if (name == "quantized") return std::make_shared<torch::jit::BuiltinModule>("quantized");
    return NativeResolver::resolveValue(name, m, loc);
  }
};

std::string attribute_name(const torch::jit::Module& m, const std::string& key) {
  std::string name = key;
  std::replace(name.begin(), name.end(), '.', '_');
  if (m.hasattr(name)) throw Error("export: internal error: '" + name + "' registered twice");
  return name;
}

}  // namespace

std::string MethodWriter::tensor(const std::string& key, const torch::Tensor& t, bool is_buffer) {
  const std::string name = attribute_name(module_, key);
  module_.register_parameter(name, t.detach().contiguous().set_requires_grad(false), is_buffer);
  return "self." + name;
}

std::string MethodWriter::packed_int8(const std::string& key, const torch::Tensor& weight,
                                      const torch::Tensor& bias) {
  const std::string name = attribute_name(module_, key);
  torch::NoGradGuard no_grad;
  const auto w = weight.detach().to(torch::kFloat).contiguous();
  const auto scales = (w.abs().amax({1}) / 127.0).clamp_min(1e-12).to(torch::kDouble);
  const auto zeros = torch::zeros({w.size(0)}, torch::kLong);
  const auto q = torch::quantize_per_channel(w, scales, zeros, 0, torch::kQInt8);
  const auto op = c10::Dispatcher::singleton().findSchemaOrThrow("quantized::linear_prepack", "");
  std::vector<c10::IValue> stack{q, bias.defined() ? c10::IValue(bias.detach().contiguous()) : c10::IValue()};
  op.callBoxed(&stack);
  module_.register_attribute(name, stack.at(0).type(), stack.at(0));
  ctx_.int8_layers += 1;
  ctx_.int8_weights += w.numel();
  return "self." + name;
}

std::string MethodWriter::state(const std::string& key, int64_t rows, int64_t channels, int64_t length) {
  const std::string name = attribute_name(module_, key);
  module_.register_buffer(name, torch::zeros({kMaxBatch * rows, channels, length}));
  return "self." + name;
}

std::string MethodWriter::cached_pad(const Signal& x, const std::string& key, int64_t n, bool crop) {
  const std::string s = state(key, x.rows, x.channels, n), y = fresh("p");
  const std::string rows = s + "[:" + x.var + ".size(0)]";
  line(y + " = torch.cat([" + rows + ", " + x.var + "], -1)");
  line(rows + ".copy_(" + y + "[:, :, -" + std::to_string(n) + ":])");
  if (crop) line(y + " = " + y + "[:, :, :-" + std::to_string(n) + "]");
  return y;
}

void MethodWriter::define(const std::string& name, const std::string& args, const std::string& ret,
                          const std::string& result) {
  std::string src = "def " + name + "(self" + (args.empty() ? "" : ", " + args) + ") -> " + ret + ":\n";
  for (const auto& l : lines_) src += "    " + l + "\n";
  src += "    return " + result + "\n";
  try {
    module_.define(src, std::make_shared<ExportResolver>());
  } catch (const std::exception& e) {  // torch::jit::ErrorReport is no c10::Error
    throw Error("export: TorchScript rejected the generated method " +
                module_.type()->name()->qualifiedName() + "." + name + ": " + e.what() + "\n" + src);
  }
  lines_.clear();
  counter_ = 0;
}

}  // namespace rt::exporting
