// What the exported files say, pinned: every configuration the export tests export (offline,
// streaming, int8, stereo, causal, raw output, the latent kinds, a cropped latent, the hybrid
// mel/GRU model) is exported from the same seeded tiny models and fingerprinted against
// tests/assets/golden/export_fingerprints.json, written once from the export as it stood before
// export/ was rebuilt around one graph description (scripts/export_fingerprints.sh). A change to
// either writer that changes a user's file fails here, naming the configuration.
//
// A fingerprint is the file's structure, exact, and its tensors, to a tolerance:
//   - TorchScript: every entry of the archive but the tensor data (the generated code,
//     data.pkl with every tensor's dtype, shape and storage key, constants, version) hashed,
//     and every parameter, buffer and packed int8 weight of the loaded module summarised;
//   - ONNX: the model with its float and int8 initializer data cleared (nodes, attributes,
//     names, inputs, outputs, initializer dtypes and shapes, integer initializers, metadata but
//     the CRC-32 of the whole, and the producer but its LibTorch version) hashed, and each
//     float/int8 initializer summarised.
// A summary is (sum, sum of |x|) in float64: the weights come out of weight-norm folding and
// quantization, whose last bits follow the host CPU's vector kernels, so they are compared
// within 1e-5 of their magnitude (int8: 1e-4 and two steps, roundings flipped) rather than by hash.
// The TorchScript code is printed by the LibTorch that compiles it: its fingerprints are kept
// per LibTorch version, and a version with none is skipped saying so.
// On one host the files themselves can be compared: RT_EXPORT_FILE_HASHES=<file> writes every
// file's hash of all its bytes there, to diff before and after a change.
#include <caffe2/serialize/inline_container.h>

#include <fstream>
#include <nlohmann/json.hpp>

#include "export/export_fixtures.h"
#include "export/onnx/onnx_graph.h"
#include "export/onnx_fixtures.h"
#include "onnx_model.pb.h"

namespace rt::exporting::testing {
namespace {

using nlohmann::json;
namespace fs = std::filesystem;

std::string fnv1a(const std::string& bytes, uint64_t h = 1469598103934665603ULL) {
  for (unsigned char c : bytes) h = (h ^ c) * 1099511628211ULL;
  char out[17];
  std::snprintf(out, sizeof(out), "%016llx", static_cast<unsigned long long>(h));
  return out;
}

json summary(const torch::Tensor& t) {
  auto v = (t.is_quantized() ? t.int_repr() : t).to(torch::kDouble);
  return json::array({v.sum().item<double>(), v.abs().sum().item<double>(),
                      t.is_quantized() || t.scalar_type() == torch::kChar});
}

// Every tensor of the module tree, packed int8 weights unpacked, in attribute order.
void collect(const torch::jit::Module& m, json& out) {
  for (const auto& a : m.named_attributes(/*recurse=*/false)) {
    if (a.value.isTensor()) {
      out.push_back(summary(a.value.toTensor()));
    } else if (a.value.isModule()) {
      collect(a.value.toModule(), out);
    } else if (a.value.isObject()) {
      auto obj = a.value.toObject();
      if (auto* getstate = obj->type()->findMethod("__getstate__")) {
        const auto state = (*getstate)({a.value});
        for (const auto& e : state.toTupleRef().elements()) {
          if (e.isTensor()) out.push_back(summary(e.toTensor()));
        }
      }
    }
  }
}

std::string file_bytes(const fs::path& file) {
  std::ifstream in(file, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

json torchscript_fingerprint(const torch::jit::Module& module, const fs::path& file) {
  module.save(file.string());
  caffe2::serialize::PyTorchStreamReader reader(file.string());
  std::string structure;
  for (const auto& name : reader.getAllRecords()) {
    if (name.rfind("data/", 0) == 0 || name == ".data/serialization_id") continue;
    auto [data, size] = reader.getRecord(name);
    structure += name + "\n" + std::string(static_cast<const char*>(data.get()), size) + "\n";
  }
  json tensors = json::array();
  collect(torch::jit::load(file.string()), tensors);
  return {{"structure", fnv1a(structure)}, {"tensors", tensors}, {"bytes", fnv1a(file_bytes(file))}};
}

json onnx_fingerprint(const fs::path& file) {
  auto model = exporting::onnx::parse_model(file);
  json tensors = json::array();
  for (auto& init : *model.mutable_graph()->mutable_initializer()) {
    const bool floats = init.data_type() == 1, int8 = init.data_type() == 3;
    if (!floats && !int8) continue;
    std::vector<int64_t> dims(init.dims().begin(), init.dims().end());
    const auto& raw = init.raw_data();
    torch::Tensor t =
        floats ? (raw.empty()
                      ? torch::tensor(std::vector<float>(init.float_data().begin(), init.float_data().end()))
                      : torch::from_blob(const_cast<char*>(raw.data()),
                                         {static_cast<int64_t>(raw.size() / 4)}, torch::kFloat)
                            .clone())
               : torch::from_blob(const_cast<char*>(raw.data()), {static_cast<int64_t>(raw.size())},
                                  torch::kChar)
                     .clone();
    tensors.push_back(summary(t));
    init.clear_raw_data();
    init.clear_float_data();
  }
  model.clear_producer_version();  // the LibTorch the exporter was built with, not the export's
  auto& meta = *model.mutable_metadata_props();
  for (int i = meta.size() - 1; i >= 0; --i) {
    if (meta.Get(i).key() == exporting::onnx::kMetaCrc32) meta.DeleteSubrange(i, 1);
  }
  std::string bytes;
  model.SerializeToString(&bytes);
  return {{"structure", fnv1a(bytes)}, {"tensors", tensors}, {"bytes", fnv1a(file_bytes(file))}};
}

// One exported configuration: a model and the flags it is exported with.
struct Config {
  std::string name;
  std::function<rave::RaveModel()> model;
  bool streaming = false;
  int64_t latent_size = 0;
  bool int8 = false;
  bool onnx = true;  // ONNX carries it (not the mel encoder, not the GRU)
};

rave::RaveModel variant_model(const Variant& v) { return tiny_model(tiny_options(v), v.warm); }

std::vector<Config> configs() {
  std::vector<Variant> variants = all_variants();
  variants.push_back({"v1 warm noise", rave::RaveVersion::kV1, 1, 0, true});
  variants.push_back({"v2 noise stereo", rave::RaveVersion::kV2, 2, 4, false});
  variants.push_back({"v2 causal noise", rave::RaveVersion::kV2, 1, 5, false, true});
  variants.push_back({"v2 raw output", rave::RaveVersion::kV2, 1, 0, false, false, true});
  variants.push_back({"v2 causal raw output", rave::RaveVersion::kV2, 1, 0, false, true, true});
  variants.push_back({"v3 causal stereo", rave::RaveVersion::kV3, 2, 0, false, true});
  std::vector<Config> out;
  for (const auto& v : variants) {
    for (bool streaming : {false, true}) {
      out.push_back(
          {v.name + (streaming ? " streaming" : " offline"), [v] { return variant_model(v); }, streaming});
    }
  }
  for (const Variant& v : {Variant{"v1", rave::RaveVersion::kV1, 1, 0, false},
                           Variant{"v2 noise stereo", rave::RaveVersion::kV2, 2, 4, false},
                           Variant{"v2 causal", rave::RaveVersion::kV2, 1, 0, false, true},
                           Variant{"v3", rave::RaveVersion::kV3, 1, 0, false}}) {
    for (bool streaming : {false, true}) {
      out.push_back({v.name + " int8" + (streaming ? " streaming" : " offline"),
                     [v] { return variant_model(v); }, streaming, 0, true});
    }
  }
  for (auto kind :
       {rave::EncoderKind::kWasserstein, rave::EncoderKind::kSpherical, rave::EncoderKind::kDiscrete}) {
    for (bool streaming : {false, true}) {
      out.push_back({std::string(enum_name(kind)) + (streaming ? " streaming" : " offline"),
                     [kind] { return with_trained_codebooks(tiny_model(latent_kind_options(kind))); },
                     streaming});
    }
  }
  out.push_back({"v2 latent 3 streaming", [] { return variant_model(all_variants()[2]); }, true, 3});
  out.push_back({"hybrid offline", [] { return tiny_model(hybrid_options()); }, false, 0, false, false});
  return out;
}

fs::path golden_path() { return fs::path(RT_SOURCE_DIR) / "tests/assets/golden/export_fingerprints.json"; }

std::string torch_version() {
  return std::to_string(TORCH_VERSION_MAJOR) + "." + std::to_string(TORCH_VERSION_MINOR) + "." +
         std::to_string(TORCH_VERSION_PATCH);
}

json fingerprints(const Config& c, const fs::path& dir) {
  json out;
  auto model = c.model();
  ScriptOptions s;
  s.streaming = c.streaming;
  s.latent_size = c.latent_size;
  if (c.int8) {
    s.quantize = Quantize::kInt8;
    s.int8_min_weights = 0;
  }
  out["torchscript"] = torchscript_fingerprint(script_rave(*model, s), dir / "m.ts");
  if (c.onnx) {
    const auto files = write_onnx(*model, c.streaming, dir, c.latent_size, c.int8 ? 0 : -1);
    for (const auto& [method, file] : {std::pair{"encode", files.encode}, std::pair{"decode", files.decode},
                                       std::pair{"forward", files.forward}})
      out["onnx"][method] = onnx_fingerprint(file);
  }
  return out;
}

// Whether the summaries agree within the tolerance (sum and sum of |x|).
std::string compare_tensors(const json& got, const json& want) {
  if (got.size() != want.size()) {
    return std::to_string(got.size()) + " tensors where " + std::to_string(want.size()) + " were";
  }
  for (size_t i = 0; i < got.size(); ++i) {
    // int8: a weight at a rounding boundary may land one step away on another CPU; two may.
    const double tol = want[i][2].get<bool>() ? 1e-4 * want[i][1].get<double>() + 2.0
                                              : 1e-5 * want[i][1].get<double>() + 1e-6;
    for (int k : {0, 1}) {
      if (std::abs(got[i][k].get<double>() - want[i][k].get<double>()) > tol) {
        return "tensor " + std::to_string(i) + ": " + got[i].dump() + " where " + want[i].dump() + " was";
      }
    }
  }
  return "";
}

void expect_same(const std::string& what, const json& got, const json& want) {
  EXPECT_EQ(got.at("structure"), want.at("structure")) << what << ": the structure changed";
  const std::string tensors = compare_tensors(got.at("tensors"), want.at("tensors"));
  EXPECT_TRUE(tensors.empty()) << what << ": " << tensors;
}

// A fingerprint without the host's exact bytes.
json without_bytes(json f) {
  if (f.contains("bytes")) f.erase("bytes");
  for (auto& [k, v] : f.items()) {
    if (v.is_object()) v.erase("bytes");
  }
  return f;
}

TEST(ExportFingerprints, EveryExportedConfigurationWritesTheFilesItWroteBefore) {
  rt::testing::ScratchDir dir("export_fingerprints");
  json all;
  for (const auto& c : configs()) all[c.name] = fingerprints(c, dir.path());
  if (const char* hashes = std::getenv("RT_EXPORT_FILE_HASHES")) {
    json bytes;
    for (auto& [name, f] : all.items()) {
      bytes[name]["torchscript"] = f["torchscript"]["bytes"];
      if (f.contains("onnx")) {
        for (const char* method : {"encode", "decode", "forward"})
          bytes[name][method] = f["onnx"][method]["bytes"];
      }
    }
    std::ofstream(hashes) << bytes.dump(1) << "\n";
  }
  if (const char* write = std::getenv("RT_WRITE_EXPORT_FINGERPRINTS")) {
    json golden;
    if (fs::exists(golden_path())) golden = json::parse(std::ifstream(golden_path()));
    for (auto& [name, f] : all.items()) {
      golden["onnx"][name] = f.contains("onnx") ? without_bytes(f["onnx"]) : json();
      golden["torchscript " + torch_version()][name] = without_bytes(f["torchscript"]);
    }
    std::ofstream out(write);
    out << "{\n";
    for (auto it = golden.begin(); it != golden.end(); ++it) {
      out << (it == golden.begin() ? "" : ",\n") << " " << json(it.key()).dump() << ": {\n";
      for (auto c = it->begin(); c != it->end(); ++c)
        out << (c == it->begin() ? "" : ",\n") << "  " << json(c.key()).dump() << ": " << c->dump();
      out << "\n }";
    }
    out << "\n}\n";
    GTEST_SKIP() << "wrote " << write;
  }
  ASSERT_TRUE(fs::exists(golden_path())) << golden_path() << " is missing (scripts/export_fingerprints.sh)";
  const json golden = json::parse(std::ifstream(golden_path()));
  const std::string ts_key = "torchscript " + torch_version();
  for (auto& [name, f] : all.items()) {
    ASSERT_TRUE(golden.at("onnx").contains(name)) << name << " has no fingerprint";
    if (f.contains("onnx")) {
      for (const char* method : {"encode", "decode", "forward"})
        expect_same(name + " (ONNX " + method + ")", f["onnx"][method], golden["onnx"][name][method]);
    }
    if (golden.contains(ts_key)) expect_same(name + " (TorchScript)", f["torchscript"], golden[ts_key][name]);
  }
  if (!golden.contains(ts_key)) {
    GTEST_SKIP() << "ONNX compared; no TorchScript fingerprints for LibTorch " << torch_version()
                 << " (its printer writes the code): scripts/export_fingerprints.sh adds them";
  }
}

}  // namespace
}  // namespace rt::exporting::testing
