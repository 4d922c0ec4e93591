#include "export/onnx/onnx_graph.h"

#include <zlib.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <fstream>

#include "onnx_model.pb.h"
#include "util/atomic_file.h"
#include "util/error.h"

namespace rt::exporting::onnx {
namespace {

void fill_type(rt_onnx::ValueInfoProto* info, const ValueSpec& spec) {
  info->set_name(spec.name);
  if (!spec.doc.empty()) info->set_doc_string(spec.doc);
  auto* t = info->mutable_type()->mutable_tensor_type();
  t->set_elem_type(spec.int64 ? rt_onnx::TensorProto::INT64 : rt_onnx::TensorProto::FLOAT);
  auto* shape = t->mutable_shape();
  for (const auto& d : spec.dims) {
    auto* dim = shape->add_dim();
    if (std::holds_alternative<int64_t>(d)) {
      dim->set_dim_value(std::get<int64_t>(d));
    } else {
      dim->set_dim_param(std::get<std::string>(d));
    }
  }
}

void fill_tensor(rt_onnx::TensorProto* p, const std::string& name, const torch::Tensor& value) {
  p->set_name(name);
  // int8 / uint8 as they are (quantized weights, zero points), other integers as int64.
  const auto type = value.scalar_type();
  const bool bytes = type == torch::kChar || type == torch::kByte;
  const bool integral = !bytes && !torch::isFloatingType(type);
  const auto t = value.detach()
                     .to(torch::kCPU, bytes      ? type
                                      : integral ? torch::kLong
                                                 : torch::kFloat)
                     .contiguous();
  for (auto d : t.sizes()) p->add_dims(d);
  p->set_data_type(type == torch::kChar   ? rt_onnx::TensorProto::INT8
                   : type == torch::kByte ? rt_onnx::TensorProto::UINT8
                   : integral             ? rt_onnx::TensorProto::INT64
                                          : rt_onnx::TensorProto::FLOAT);
  // raw_data is little-endian, as this machine's memory.
  p->set_raw_data(std::string(static_cast<const char*>(t.data_ptr()), t.numel() * t.element_size()));
}

void fill_attr(rt_onnx::AttributeProto* a, const std::string& name, const AttrValue& v) {
  a->set_name(name);
  if (const auto* i = std::get_if<int64_t>(&v)) {
    a->set_type(rt_onnx::AttributeProto::INT);
    a->set_i(*i);
  } else if (const auto* f = std::get_if<double>(&v)) {
    a->set_type(rt_onnx::AttributeProto::FLOAT);
    a->set_f(static_cast<float>(*f));
  } else if (const auto* is = std::get_if<std::vector<int64_t>>(&v)) {
    a->set_type(rt_onnx::AttributeProto::INTS);
    for (auto x : *is) a->add_ints(x);
  } else if (const auto* fs = std::get_if<std::vector<float>>(&v)) {
    a->set_type(rt_onnx::AttributeProto::FLOATS);
    for (auto x : *fs) a->add_floats(x);
  } else {
    a->set_type(rt_onnx::AttributeProto::STRING);
    a->set_s(std::get<std::string>(v));
  }
}

ValueSpec read_spec(const rt_onnx::ValueInfoProto& info) {
  ValueSpec spec;
  spec.name = info.name();
  spec.doc = info.doc_string();
  const auto& t = info.type().tensor_type();
  spec.int64 = t.elem_type() == rt_onnx::TensorProto::INT64;
  for (const auto& d : t.shape().dim()) {
    if (d.has_dim_value()) {
      spec.dims.emplace_back(d.dim_value());
    } else {
      spec.dims.emplace_back(d.dim_param());
    }
  }
  return spec;
}

}  // namespace

std::string Graph::unique(const std::string& hint) {
  const std::string base = hint.empty() ? "t" : hint;
  std::string name = base;
  while (!names_.insert(name).second) name = base + "_" + std::to_string(++used_[base]);
  return name;
}

std::string Graph::input(const ValueSpec& spec) {
  if (!names_.insert(spec.name).second)
    throw Error("onnx export: internal error: input '" + spec.name + "' twice");
  inputs_.push_back(spec);
  return spec.name;
}

std::string Graph::input_with_default(const ValueSpec& spec, const torch::Tensor& value) {
  input(spec);
  initializers_.emplace_back(spec.name, value);
  return spec.name;
}

void Graph::output(const std::string& value, const ValueSpec& spec) {
  if (value != spec.name) {
    if (!names_.insert(spec.name).second)
      throw Error("onnx export: internal error: output name '" + spec.name + "' taken");
    nodes_.push_back(Node{"Identity", spec.name, {value}, {spec.name}, {}});
  }
  outputs_.push_back(spec);
}

std::string Graph::initializer(const std::string& hint, const torch::Tensor& t) {
  const std::string name = unique(hint);
  if (torch::isFloatingType(t.scalar_type())) weights_ += t.numel();
  if (t.scalar_type() == torch::kChar) int8_weights_ += t.numel();
  initializers_.emplace_back(name, t);
  return name;
}

std::vector<std::string> Graph::initializer_names() const {
  std::vector<std::string> names;
  for (const auto& [name, t] : initializers_) names.push_back(name);
  return names;
}

std::string Graph::op_of(const std::string& value) const {
  for (auto n = nodes_.rbegin(); n != nodes_.rend(); ++n) {
    if (std::find(n->outputs.begin(), n->outputs.end(), value) != n->outputs.end()) return n->op;
  }
  return "";
}

std::string Graph::ints(const std::string& hint, const std::vector<int64_t>& v) {
  return initializer(hint, torch::tensor(v, torch::kLong));
}

std::string Graph::scalar(const std::string& hint, double v) {
  return initializer(hint, torch::tensor(static_cast<float>(v)));
}

std::string Graph::node(const std::string& op, const std::vector<std::string>& inputs, const Attrs& attrs,
                        const std::string& hint) {
  const std::string out = unique(hint.empty() ? op : hint);
  nodes_.push_back(Node{op, out, inputs, {out}, attrs});
  return out;
}

std::vector<std::string> Graph::nodes(const std::string& op, const std::vector<std::string>& inputs,
                                      size_t outputs, const Attrs& attrs, const std::string& hint) {
  std::vector<std::string> out;
  for (size_t k = 0; k < outputs; ++k)
    out.push_back(unique((hint.empty() ? op : hint) + "_" + std::to_string(k)));
  nodes_.push_back(Node{op, out.front(), inputs, out, attrs});
  return out;
}

std::string Graph::slice(const std::string& x, int64_t axis, int64_t start, int64_t end) {
  return node("Slice", {x, ints("start", {start}), ints("end", {end}), ints("axis", {axis})}, {},
              x + "_slice");
}

std::string Graph::reshape(const std::string& x, const std::vector<int64_t>& shape) {
  return node("Reshape", {x, ints("shape", shape)}, {}, x + "_reshaped");
}

std::string Graph::transpose(const std::string& x, const std::vector<int64_t>& perm) {
  return node("Transpose", {x}, {{"perm", perm}}, x + "_t");
}

std::string Graph::concat(const std::vector<std::string>& xs, int64_t axis) {
  return node("Concat", xs, {{"axis", axis}}, "cat");
}

void Graph::save(const std::filesystem::path& file, const std::map<std::string, std::string>& metadata,
                 const std::string& doc) const {
  rt_onnx::ModelProto model;
  model.set_ir_version(kIrVersion);
  auto* opset = model.add_opset_import();
  opset->set_domain("");
  opset->set_version(kOpset);
  model.set_producer_name("rt export");
  model.set_producer_version(TORCH_VERSION);
  model.set_doc_string(doc);
  for (const auto& [k, v] : metadata) {
    auto* p = model.add_metadata_props();
    p->set_key(k);
    p->set_value(v);
  }
  auto* g = model.mutable_graph();
  g->set_name(name_);
  for (const auto& spec : inputs_) fill_type(g->add_input(), spec);
  for (const auto& spec : outputs_) fill_type(g->add_output(), spec);
  for (const auto& [name, t] : initializers_) fill_tensor(g->add_initializer(), name, t);
  for (const auto& n : nodes_) {
    auto* p = g->add_node();
    p->set_op_type(n.op);
    p->set_name(n.name);
    for (const auto& i : n.inputs) p->add_input(i);
    for (const auto& o : n.outputs) p->add_output(o);
    for (const auto& [k, v] : n.attrs) fill_attr(p->add_attribute(), k, v);
  }
  std::string bytes;
  if (!model.SerializeToString(&bytes)) throw Error(file.string() + ": cannot serialise the ONNX model");
  // The model's CRC-32 as its last metadata entry, over the model without that entry.
  auto* digest = model.add_metadata_props();
  digest->set_key(kMetaCrc32);
  digest->set_value(crc32_text(bytes));
  if (!model.SerializeToString(&bytes)) throw Error(file.string() + ": cannot serialise the ONNX model");
  write_file_atomic(file, bytes);
}

std::string crc32_text(const std::string& bytes) {
  uLong crc = ::crc32(0L, Z_NULL, 0);
  for (size_t at = 0; at < bytes.size();) {
    const size_t n = std::min<size_t>(bytes.size() - at, size_t{1} << 30);
    crc = ::crc32(crc, reinterpret_cast<const Bytef*>(bytes.data() + at), static_cast<uInt>(n));
    at += n;
  }
  char text[16];
  std::snprintf(text, sizeof(text), "%08lx", static_cast<unsigned long>(crc));
  return text;
}

std::string recorded_crc32(const rt_onnx::ModelProto& model) {
  const int n = model.metadata_props_size();
  return n > 0 && model.metadata_props(n - 1).key() == kMetaCrc32 ? model.metadata_props(n - 1).value() : "";
}

namespace {

// Throws rt::Error naming `file` when `model` records a CRC-32 its content does not match.
void verify_crc32(const rt_onnx::ModelProto& model, const std::filesystem::path& file) {
  const std::string recorded = recorded_crc32(model);
  if (recorded.empty()) return;
  rt_onnx::ModelProto without = model;
  without.mutable_metadata_props()->RemoveLast();
  std::string bytes;
  if (!without.SerializeToString(&bytes)) throw Error(file.string() + ": cannot serialise the ONNX model");
  const std::string now = crc32_text(bytes);
  if (recorded != now) {
    throw Error(
        "'" + file.string() + "' is damaged: its content's CRC-32 is " + now + ", the exporter recorded " +
        recorded + " (metadata " + kMetaCrc32 +
        "); a byte changed since it was written (a copy or a download cut short or altered): export it "
        "again");
  }
}

}  // namespace

rt_onnx::ModelProto parse_model(const std::filesystem::path& file) {
  rt_onnx::ModelProto model;
  if (!model.ParseFromString(read_file(file)) || !model.has_graph())
    throw Error(
        "'" + file.string() +
        "' is not an ONNX model (its bytes do not parse as onnx.ModelProto with a graph): damaged, cut "
        "short, or another kind of file");
  verify_crc32(model, file);
  return model;
}

FileFacts facts_of(const rt_onnx::ModelProto& model) {
  FileFacts f;
  f.ir_version = model.ir_version();
  for (const auto& o : model.opset_import()) {
    if (o.domain().empty() || o.domain() == "ai.onnx") f.opset = o.version();
  }
  f.producer =
      model.producer_name() + (model.producer_version().empty() ? "" : " " + model.producer_version());
  for (const auto& p : model.metadata_props()) f.metadata[p.key()] = p.value();
  for (const auto& i : model.graph().input()) f.inputs.push_back(read_spec(i));
  for (const auto& o : model.graph().output()) f.outputs.push_back(read_spec(o));
  f.nodes = model.graph().node_size();
  f.initializers = model.graph().initializer_size();
  return f;
}

FileFacts read_facts(const std::filesystem::path& file) { return facts_of(parse_model(file)); }

bool looks_like_onnx(const std::filesystem::path& file) {
  std::ifstream in(file, std::ios::binary);
  char first = 0;
  // Field 1 (ir_version), wire type 0 (varint): the tag byte 0x08, as every ONNX writer emits first.
  return in.get(first) && first == 0x08;
}

}  // namespace rt::exporting::onnx
