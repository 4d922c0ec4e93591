#include "export/onnx/onnx_eval.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <functional>

#include "onnx_model.pb.h"
#include "util/error.h"

namespace rt::exporting::onnx {
// Named, not anonymous: Runner::Impl holds its Nodes.
namespace eval_detail {

using Tensors = std::vector<torch::Tensor>;

torch::Tensor to_tensor(const rt_onnx::TensorProto& p) {
  std::vector<int64_t> dims(p.dims().begin(), p.dims().end());
  torch::ScalarType type = torch::kFloat;
  switch (p.data_type()) {
    case rt_onnx::TensorProto::FLOAT:
      break;
    case rt_onnx::TensorProto::INT64:
      type = torch::kLong;
      break;
    case rt_onnx::TensorProto::INT8:
      type = torch::kChar;
      break;
    case rt_onnx::TensorProto::UINT8:
      type = torch::kByte;
      break;
    default:
      throw Error("initializer '" + p.name() + "': element type " + std::to_string(p.data_type()) +
                  " is not read");
  }
  auto t = torch::empty(dims, type);
  const size_t bytes = static_cast<size_t>(t.numel()) * t.element_size();
  if (p.has_raw_data()) {
    if (p.raw_data().size() != bytes)
      throw Error("initializer '" + p.name() + "': raw_data has the wrong size");
    std::memcpy(t.data_ptr(), p.raw_data().data(), bytes);
  } else if (type == torch::kLong) {
    if (static_cast<int64_t>(p.int64_data_size()) != t.numel())
      throw Error("initializer '" + p.name() + "': size");
    std::copy(p.int64_data().begin(), p.int64_data().end(), t.data_ptr<int64_t>());
  } else if (type == torch::kFloat) {
    if (static_cast<int64_t>(p.float_data_size()) != t.numel())
      throw Error("initializer '" + p.name() + "': size");
    std::copy(p.float_data().begin(), p.float_data().end(), t.data_ptr<float>());
  } else {
    throw Error("initializer '" + p.name() + "': 8-bit data not in raw_data is not read");
  }
  return t;
}

struct Node {
  std::string op;
  std::vector<std::string> inputs, outputs;
  std::map<std::string, rt_onnx::AttributeProto> attrs;

  int64_t i(const std::string& name, int64_t fallback) const {
    auto it = attrs.find(name);
    return it == attrs.end() ? fallback : it->second.i();
  }
  double f(const std::string& name, double fallback) const {
    auto it = attrs.find(name);
    return it == attrs.end() ? fallback : it->second.f();
  }
  std::vector<int64_t> ints(const std::string& name, std::vector<int64_t> fallback = {}) const {
    auto it = attrs.find(name);
    if (it == attrs.end()) return fallback;
    return std::vector<int64_t>(it->second.ints().begin(), it->second.ints().end());
  }
};

std::vector<int64_t> as_ints(const torch::Tensor& t) {
  auto c = t.to(torch::kLong).contiguous();
  return std::vector<int64_t>(c.data_ptr<int64_t>(), c.data_ptr<int64_t>() + c.numel());
}

int64_t wrap(int64_t axis, int64_t rank) { return axis < 0 ? axis + rank : axis; }

torch::Tensor reshape(const torch::Tensor& x, std::vector<int64_t> shape) {
  for (size_t k = 0; k < shape.size(); ++k) {
    if (shape[k] == 0) shape[k] = x.size(static_cast<int64_t>(k));  // allowzero = 0: copy the input's dim
  }
  return x.reshape(shape);
}

torch::Tensor conv(const Node& n, const Tensors& in) {
  auto pads = n.ints("pads", {0, 0});
  auto x = in[0];
  int64_t padding = pads[0];
  if (pads[0] != pads[1]) {
    x = torch::constant_pad_nd(x, {pads[0], pads[1]}, 0.0);
    padding = 0;
  }
  const torch::Tensor bias = in.size() > 2 ? in[2] : torch::Tensor();
  return torch::conv1d(x, in[1], bias, n.ints("strides", {1}), {padding}, n.ints("dilations", {1}),
                       n.i("group", 1));
}

torch::Tensor conv_transpose(const Node& n, const Tensors& in) {
  auto pads = n.ints("pads", {0, 0});
  if (pads[0] != pads[1]) throw Error("ConvTranspose with unequal pads is not run here");
  const torch::Tensor bias = in.size() > 2 ? in[2] : torch::Tensor();
  return torch::conv_transpose1d(in[0], in[1], bias, n.ints("strides", {1}), {pads[0]}, {0}, n.i("group", 1));
}

torch::Tensor slice(const Tensors& in) {
  const auto starts = as_ints(in[1]), ends = as_ints(in[2]);
  std::vector<int64_t> axes = in.size() > 3 && in[3].defined() ? as_ints(in[3]) : std::vector<int64_t>{};
  if (axes.empty()) {
    for (size_t k = 0; k < starts.size(); ++k) axes.push_back(static_cast<int64_t>(k));
  }
  const auto steps =
      in.size() > 4 && in[4].defined() ? as_ints(in[4]) : std::vector<int64_t>(starts.size(), 1);
  auto x = in[0];
  for (size_t k = 0; k < axes.size(); ++k) {
    const int64_t axis = wrap(axes[k], x.dim()), dim = x.size(axis);
    auto clamp = [&](int64_t v) { return std::clamp(v < 0 ? v + dim : v, int64_t{0}, dim); };
    if (steps[k] < 1) throw Error("Slice with steps below 1 is not run here");
    const int64_t s = clamp(starts[k]), e = std::max(s, clamp(ends[k]));
    x = steps[k] == 1 ? x.narrow(axis, s, e - s) : x.slice(axis, s, e, steps[k]);
  }
  return x;
}

torch::Tensor gather(const Node& n, const Tensors& in) {
  const auto& x = in[0];
  const int64_t axis = wrap(n.i("axis", 0), x.dim());
  auto picked = x.index_select(axis, in[1].reshape({-1}));
  std::vector<int64_t> shape(x.sizes().begin(), x.sizes().begin() + axis);
  for (auto d : in[1].sizes()) shape.push_back(d);
  for (int64_t k = axis + 1; k < x.dim(); ++k) shape.push_back(x.size(k));
  return picked.reshape(shape);
}

torch::Tensor pad(const Tensors& in) {
  const auto p = as_ints(in[1]);
  const int64_t rank = in[0].dim();
  std::vector<int64_t> torch_pads;  // last axis first, (begin, end) pairs
  for (int64_t k = rank - 1; k >= 0; --k) {
    torch_pads.push_back(p[static_cast<size_t>(k)]);
    torch_pads.push_back(p[static_cast<size_t>(k + rank)]);
  }
  const double value = in.size() > 2 && in[2].defined() ? in[2].item<double>() : 0.0;
  return torch::constant_pad_nd(in[0], torch_pads, value);
}

torch::Tensor unsqueeze(const Tensors& in) {
  auto axes = as_ints(in[1]);
  const int64_t rank = in[0].dim() + static_cast<int64_t>(axes.size());
  for (auto& a : axes) a = wrap(a, rank);
  std::sort(axes.begin(), axes.end());
  auto x = in[0];
  for (auto a : axes) x = x.unsqueeze(a);
  return x;
}

// DynamicQuantizeLinear (opset 11): x → (y uint8, scale, zero point) over the whole tensor, its
// range widened to hold 0, as ONNX defines it and ONNX Runtime computes it (scale 1 for a range
// of 0; rounding half to even).
Tensors dynamic_quantize_linear(const Tensors& in) {
  const auto x = in[0].to(torch::kFloat).contiguous();
  const float lo = std::min(x.numel() > 0 ? x.min().item<float>() : 0.0f, 0.0f);
  const float hi = std::max(x.numel() > 0 ? x.max().item<float>() : 0.0f, 0.0f);
  const float scale = hi == lo ? 1.0f : (hi - lo) / 255.0f;
  const float zp = std::nearbyint(std::clamp(0.0f - lo / scale, 0.0f, 255.0f));
  auto q = torch::clamp(torch::round(x / scale) + zp, 0, 255).to(torch::kByte);
  return {q, torch::tensor(scale), torch::tensor(static_cast<uint8_t>(zp), torch::kByte)};
}

// MatMulInteger (opset 10): (a − a_zero_point) · (b − b_zero_point) in int32; b's zero point a
// scalar or one per column. In float64 here: every product and sum of the 8-bit operands our
// graphs multiply (K below 2^16) is exact there.
torch::Tensor matmul_integer(const Tensors& in) {
  auto a = in[0].to(torch::kDouble), b = in[1].to(torch::kDouble);
  if (in.size() > 2 && in[2].defined()) a = a - in[2].to(torch::kDouble);
  if (in.size() > 3 && in[3].defined()) b = b - in[3].to(torch::kDouble);
  return torch::matmul(a, b).to(torch::kInt);
}

using OpFn = std::function<torch::Tensor(const Node&, const Tensors&)>;
using MultiOpFn = std::function<Tensors(const Node&, const Tensors&)>;

// Operators with more than one output.
const std::map<std::string, MultiOpFn>& multi_ops() {
  static const std::map<std::string, MultiOpFn> table = {
      {"DynamicQuantizeLinear", [](const Node&, const Tensors& in) { return dynamic_quantize_linear(in); }},
  };
  return table;
}

const std::map<std::string, OpFn>& ops() {
  static const std::map<std::string, OpFn> table = {
      {"Add", [](const Node&, const Tensors& in) { return in[0] + in[1]; }},
      {"Sub", [](const Node&, const Tensors& in) { return in[0] - in[1]; }},
      {"Max", [](const Node&, const Tensors& in) { return torch::maximum(in[0], in[1]); }},
      {"Mul", [](const Node&, const Tensors& in) { return in[0] * in[1]; }},
      {"Pow", [](const Node&, const Tensors& in) { return torch::pow(in[0], in[1]); }},
      {"Reciprocal", [](const Node&, const Tensors& in) { return in[0].reciprocal(); }},
      {"Sin", [](const Node&, const Tensors& in) { return in[0].sin(); }},
      {"Sigmoid", [](const Node&, const Tensors& in) { return torch::sigmoid(in[0]); }},
      {"Tanh", [](const Node&, const Tensors& in) { return torch::tanh(in[0]); }},
      {"Softplus", [](const Node&, const Tensors& in) { return torch::softplus(in[0]); }},
      {"LeakyRelu",
       [](const Node& n, const Tensors& in) { return torch::leaky_relu(in[0], n.f("alpha", 0.01)); }},
      {"Identity", [](const Node&, const Tensors& in) { return in[0]; }},
      {"MatMul", [](const Node&, const Tensors& in) { return torch::matmul(in[0], in[1]); }},
      {"MatMulInteger", [](const Node&, const Tensors& in) { return matmul_integer(in); }},
      {"Conv", conv},
      {"ConvTranspose", conv_transpose},
      {"BatchNormalization",
       [](const Node& n, const Tensors& in) {
         return torch::batch_norm(in[0], in[1], in[2], in[3], in[4], false, 0.1, n.f("epsilon", 1e-5), false);
       }},
      {"Reshape", [](const Node&, const Tensors& in) { return reshape(in[0], as_ints(in[1])); }},
      {"Transpose",
       [](const Node& n, const Tensors& in) { return in[0].permute(n.ints("perm")).contiguous(); }},
      {"Concat",
       [](const Node& n, const Tensors& in) { return torch::cat(in, wrap(n.i("axis", 0), in[0].dim())); }},
      {"Slice", [](const Node&, const Tensors& in) { return slice(in); }},
      {"Gather", gather},
      {"Pad", [](const Node&, const Tensors& in) { return pad(in); }},
      {"Unsqueeze", [](const Node&, const Tensors& in) { return unsqueeze(in); }},
      {"Shape",
       [](const Node&, const Tensors& in) { return torch::tensor(in[0].sizes().vec(), torch::kLong); }},
      {"ConstantOfShape", [](const Node&, const Tensors& in) { return torch::zeros(as_ints(in[0])); }},
      {"Div", [](const Node&, const Tensors& in) { return in[0] / in[1]; }},
      {"Sqrt", [](const Node&, const Tensors& in) { return in[0].sqrt(); }},
      {"Floor", [](const Node&, const Tensors& in) { return in[0].floor(); }},
      {"Cos", [](const Node&, const Tensors& in) { return in[0].cos(); }},
      {"Acos", [](const Node&, const Tensors& in) { return in[0].acos(); }},
      {"Greater", [](const Node&, const Tensors& in) { return in[0] > in[1]; }},
      {"GreaterOrEqual", [](const Node&, const Tensors& in) { return in[0] >= in[1]; }},
      {"Where", [](const Node&, const Tensors& in) { return torch::where(in[0], in[1], in[2]); }},
      {"Clip",
       [](const Node&, const Tensors& in) { return torch::clamp(in[0], in[1].item(), in[2].item()); }},
      {"CumSum",
       [](const Node& n, const Tensors& in) {
         const int64_t axis = wrap(in[1].item<int64_t>(), in[0].dim());
         if (n.i("exclusive", 0) != 0) throw Error("CumSum exclusive is not run here");
         return n.i("reverse", 0) != 0 ? in[0].flip({axis}).cumsum(axis).flip({axis}) : in[0].cumsum(axis);
       }},
      {"ReduceSum",
       [](const Node& n, const Tensors& in) { return in[0].sum(as_ints(in[1]), n.i("keepdims", 1) != 0); }},
      {"ArgMin",
       [](const Node& n, const Tensors& in) {
         return in[0].argmin(wrap(n.i("axis", 0), in[0].dim()), n.i("keepdims", 1) != 0);
       }},
      {"Cast",
       [](const Node& n, const Tensors& in) {
         const int64_t to = n.i("to", 1);
         if (to != 1 && to != 7)
           throw Error("Cast to element type " + std::to_string(to) + " is not run here");
         return in[0].to(to == 1 ? torch::kFloat : torch::kLong);
       }},
      {"RandomNormalLike",
       [](const Node&, const Tensors& in) { return torch::randn_like(in[0], torch::kFloat); }},
      {"RandomUniformLike",
       [](const Node& n, const Tensors& in) {
         return torch::empty_like(in[0], torch::kFloat).uniform_(n.f("low", 0.0), n.f("high", 1.0));
       }},
  };
  return table;
}

// "batch" → 1, "batch*2" → 2: the rows per stream of a state input's first dim.
int64_t rows_of(const std::variant<int64_t, std::string>& d) {
  if (std::holds_alternative<int64_t>(d)) return std::get<int64_t>(d);
  const std::string& s = std::get<std::string>(d);
  const auto star = s.find('*');
  return star == std::string::npos ? 1 : std::stoll(s.substr(star + 1));
}

}  // namespace eval_detail

using eval_detail::multi_ops;
using eval_detail::Node;
using eval_detail::ops;

struct Runner::Impl {
  FileFacts facts;
  std::map<std::string, torch::Tensor> initializers;
  std::vector<Node> nodes;
  std::vector<std::string> inputs, outputs;
};

Runner::Runner(const std::filesystem::path& file) : impl_(std::make_unique<Impl>()) {
  const rt_onnx::ModelProto model = parse_model(file);
  impl_->facts = facts_of(model);
  const auto& g = model.graph();
  for (const auto& t : g.initializer()) impl_->initializers[t.name()] = eval_detail::to_tensor(t);
  for (const auto& i : g.input()) impl_->inputs.push_back(i.name());
  for (const auto& o : g.output()) impl_->outputs.push_back(o.name());
  for (const auto& n : g.node()) {
    if (!n.domain().empty() && n.domain() != "ai.onnx")
      throw Error(file.string() + ": operator domain '" + n.domain() + "' is not run here");
    if (ops().count(n.op_type()) == 0 && multi_ops().count(n.op_type()) == 0)
      throw Error(file.string() + ": operator " + n.op_type() + " is not run here (not one export writes)");
    Node node{n.op_type(), {n.input().begin(), n.input().end()}, {n.output().begin(), n.output().end()}, {}};
    for (const auto& a : n.attribute()) node.attrs[a.name()] = a;
    impl_->nodes.push_back(std::move(node));
  }
}

Runner::~Runner() = default;
Runner::Runner(Runner&&) noexcept = default;
Runner& Runner::operator=(Runner&&) noexcept = default;

const FileFacts& Runner::facts() const { return impl_->facts; }

std::map<std::string, torch::Tensor> Runner::run(const std::map<std::string, torch::Tensor>& feeds) const {
  c10::InferenceMode guard;
  std::map<std::string, torch::Tensor> env = impl_->initializers;
  for (const auto& [name, t] : feeds) {
    if (std::find(impl_->inputs.begin(), impl_->inputs.end(), name) == impl_->inputs.end())
      throw Error("ONNX graph '" + impl_->facts.producer + "' has no input '" + name + "'");
    env[name] = t;
  }
  for (const auto& name : impl_->inputs) {
    if (env.count(name) == 0) throw Error("ONNX graph input '" + name + "' not given");
  }
  for (const auto& n : impl_->nodes) {
    eval_detail::Tensors in;
    for (const auto& name : n.inputs) {
      if (name.empty()) {
        in.emplace_back();
        continue;
      }
      auto it = env.find(name);
      if (it == env.end()) throw Error("ONNX graph: value '" + name + "' used before it is made");
      in.push_back(it->second);
    }
    if (auto multi = multi_ops().find(n.op); multi != multi_ops().end()) {
      auto outs = multi->second(n, in);
      for (size_t k = 0; k < n.outputs.size() && k < outs.size(); ++k) env[n.outputs[k]] = outs[k];
    } else {
      env[n.outputs.at(0)] = ops().at(n.op)(n, in);
    }
  }
  std::map<std::string, torch::Tensor> out;
  for (const auto& name : impl_->outputs) out[name] = env.at(name);
  return out;
}

torch::Tensor StreamRunner::step(const std::string& input, const torch::Tensor& block,
                                 const std::map<std::string, torch::Tensor>& extra) {
  const auto& facts = runner_.facts();
  std::map<std::string, torch::Tensor> feeds = extra;
  feeds[input] = block;
  for (const auto& spec : facts.inputs) {
    if (spec.name.rfind("state.", 0) != 0) continue;
    auto it = state_.find(spec.name);
    if (it == state_.end()) {
      const int64_t rows = eval_detail::rows_of(spec.dims.at(0)) * block.size(0);
      it = state_
               .emplace(spec.name, torch::zeros({rows, std::get<int64_t>(spec.dims.at(1)),
                                                 std::get<int64_t>(spec.dims.at(2))}))
               .first;
    }
    feeds[spec.name] = it->second;
  }
  auto out = runner_.run(feeds);
  torch::Tensor result;
  for (auto& [name, t] : out) {
    if (name.rfind("state.", 0) == 0) {
      state_[name.substr(0, name.size() - std::string(".next").size())] = t;
    } else {
      result = t;
    }
  }
  return result;
}

}  // namespace rt::exporting::onnx
