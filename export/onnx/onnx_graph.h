// Building ONNX graphs from C++ (no Python, no onnx library): the nodes, initializers and typed
// inputs and outputs of one graph, written as the ONNX protobuf (export/onnx/proto/onnx_model.proto)
// with the opset and IR version below. export/onnx/onnx_rave.h builds RAVE's encode, decode and
// forward with it; export/onnx/onnx_eval.h runs what it wrote.
#pragma once

#include <torch/torch.h>

#include <filesystem>
#include <map>
#include <set>
#include <string>
#include <utility>
#include <variant>
#include <vector>

namespace rt_onnx {
class ModelProto;  // export/onnx/proto/onnx_model.proto
}

namespace rt::exporting::onnx {

// Opset 17 of the default domain, IR version 8: what ONNX Runtime 1.13 and later run (1.17 and
// later are tested), and what onnx 1.12 and later check.
constexpr int64_t kOpset = 17;
constexpr int64_t kIrVersion = 8;

// A node attribute: int, float, ints, floats or string.
using AttrValue = std::variant<int64_t, double, std::vector<int64_t>, std::vector<float>, std::string>;
using Attrs = std::vector<std::pair<std::string, AttrValue>>;

// A graph input or output: float32 (or int64) with fixed sizes or named symbolic ones
// ("batch", "time").
struct ValueSpec {
  std::string name;
  std::vector<std::variant<int64_t, std::string>> dims;
  bool int64 = false;
  std::string doc;
};

class Graph {
 public:
  explicit Graph(std::string name) : name_(std::move(name)) {}

  // Declares a graph input; returns its name.
  std::string input(const ValueSpec& spec);
  // Declares `value` (a node output or input) as a graph output named spec.name: an Identity
  // node renames it when the names differ.
  void output(const std::string& value, const ValueSpec& spec);
  // A constant: float32 tensors as float32, int8 and uint8 as they are, other integer tensors
  // as int64. `hint` names it (made unique). Weights keep their model names, e.g.
  // "decoder.net.0.weight".
  std::string initializer(const std::string& hint, const torch::Tensor& t);
  std::string ints(const std::string& hint, const std::vector<int64_t>& v);
  // A float32 scalar, shape [].
  std::string scalar(const std::string& hint, double v);
  // A node with one output, named after `hint`; returns it.
  std::string node(const std::string& op, const std::vector<std::string>& inputs, const Attrs& attrs = {},
                   const std::string& hint = "");
  // A node with `outputs` outputs (DynamicQuantizeLinear's three), named after `hint`.
  std::vector<std::string> nodes(const std::string& op, const std::vector<std::string>& inputs,
                                 size_t outputs, const Attrs& attrs = {}, const std::string& hint = "");
  // A graph input whose initializer is its default value (a host may feed it or leave it).
  std::string input_with_default(const ValueSpec& spec, const torch::Tensor& value);

  // Shorthands.
  std::string slice(const std::string& x, int64_t axis, int64_t start, int64_t end);
  std::string reshape(const std::string& x, const std::vector<int64_t>& shape);
  std::string transpose(const std::string& x, const std::vector<int64_t>& perm);
  std::string concat(const std::vector<std::string>& xs, int64_t axis);

  const std::string& name() const { return name_; }
  int64_t weight_count() const { return weights_; }            // float32 initializer elements
  int64_t int8_weight_count() const { return int8_weights_; }  // int8 initializer elements
  std::vector<std::string> initializer_names() const;
  // The operator of the node that makes `value` ("" for an input or initializer).
  std::string op_of(const std::string& value) const;

  // The model file: this graph with opset kOpset, IR kIrVersion, and `metadata` as its
  // metadata_props. Written atomically (a temporary beside `file`, then renamed).
  void save(const std::filesystem::path& file, const std::map<std::string, std::string>& metadata,
            const std::string& doc) const;

 private:
  std::string unique(const std::string& hint);

  struct Node {
    std::string op, name;
    std::vector<std::string> inputs, outputs;
    Attrs attrs;
  };
  std::string name_;
  std::vector<Node> nodes_;
  std::vector<std::pair<std::string, torch::Tensor>> initializers_;
  std::vector<ValueSpec> inputs_, outputs_;
  std::map<std::string, int> used_;  // suffixes handed out per hint
  std::set<std::string> names_;      // every value name of the graph
  int64_t weights_ = 0, int8_weights_ = 0;
};

// What a model file holds, read back: its metadata and the names, element types and dims of its
// inputs and outputs (symbolic dims as their names), for `export --inspect` and the tests.
struct FileFacts {
  int64_t ir_version = 0, opset = 0;
  std::string producer;
  std::map<std::string, std::string> metadata;
  std::vector<ValueSpec> inputs, outputs;
  int64_t nodes = 0, initializers = 0;
};
FileFacts read_facts(const std::filesystem::path& file);
// The same from a file parsed once (parse_model: the file's bytes as onnx.ModelProto, or rt::Error
// naming the file), for a reader that needs the graph too (export/onnx/onnx_eval.h).
rt_onnx::ModelProto parse_model(const std::filesystem::path& file);
FileFacts facts_of(const rt_onnx::ModelProto& model);

// The metadata entry our files end with: the CRC-32 (8 hex digits) of the serialized model
// without that entry. parse_model checks it (a mismatch is an rt::Error naming the file and
// saying to export it again); files of other exporters have none.
inline constexpr const char* kMetaCrc32 = "rt_crc32";
// Metadata keys every file of export --format onnx carries (beside sampling_rate, n_channels,
// latent_size, full_latent_size, streaming, encode/decode/forward_latency, as the TorchScript
// attributes).
inline constexpr const char* kMetaMethod = "rt_method";        // encode | decode | forward
inline constexpr const char* kMetaStates = "rt_state_inputs";  // how a host carries the state
std::string crc32_text(const std::string& bytes);
// The CRC-32 `model` records (its last metadata entry), "" when it records none.
std::string recorded_crc32(const rt_onnx::ModelProto& model);

// Whether the file starts like an ONNX model (a protobuf whose first field is ir_version).
bool looks_like_onnx(const std::filesystem::path& file);

}  // namespace rt::exporting::onnx
