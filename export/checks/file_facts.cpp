#include "export/checks/file_facts.h"

#include <caffe2/serialize/inline_container.h>
#include <torch/version.h>

#include <fstream>
#include <sstream>

#include "export/checks/libtorch_target.h"
#include "export/onnx/onnx_graph.h"
#include "onnx_model.pb.h"
#include "training/checkpoint.h"
#include "training/zip_integrity.h"
#include "util/error.h"
#include "util/path_kind.h"
#include "util/printable.h"

namespace rt::exporting {
namespace {

std::string string_attr(const torch::jit::Module& m, const std::string& name) {
  return m.hasattr(name) && m.attr(name).isString() ? m.attr(name).toStringRef() : std::string();
}

std::string int_attr_text(const torch::jit::Module& m, const std::string& name) {
  return m.hasattr(name) && m.attr(name).isInt() ? std::to_string(m.attr(name).toInt()) : std::string();
}

// The [model] section of a config's TOML, one key per line.
std::string model_section(const std::string& toml) {
  std::istringstream in(toml);
  std::string out, section;
  for (std::string line; std::getline(in, line);) {
    if (!line.empty() && line.front() == '[') {
      section = line;
      continue;
    }
    if (section == "[model]" && !line.empty()) out += "    " + printable(line) + "\n";
  }
  return out;
}

// "LibTorch <major>.<minor>.<patch>": the one this program is built with.
std::string libtorch_text() {
  return "LibTorch " + std::to_string(TORCH_VERSION_MAJOR) + "." + std::to_string(TORCH_VERSION_MINOR) + "." +
         std::to_string(TORCH_VERSION_PATCH);
}

// One "  label   value" line of --inspect, "not recorded" for an empty value.
void fact_line(std::ostream& s, const std::string& label, const std::string& value) {
  s << "  " << label << std::string(label.size() < 18 ? 18 - label.size() : 1, ' ')
    << (value.empty() ? "not recorded" : printable(value)) << "\n";
}

std::string dims_text(const onnx::ValueSpec& v) {
  std::string out = "(";
  for (const auto& d : v.dims) {
    out += out.size() == 1 ? "" : ", ";
    out +=
        std::holds_alternative<int64_t>(d) ? std::to_string(std::get<int64_t>(d)) : std::get<std::string>(d);
  }
  return out + ")";
}

// The integrity line of an ONNX file whose CRC-32 parse_model checked: the recorded value, or
// that it records none.
std::string onnx_integrity_text(const std::string& crc) {
  return crc.empty() ? "no CRC-32 recorded (not written by this exporter): not checked"
                     : "CRC-32 " + crc + " (metadata " + onnx::kMetaCrc32 + ") matches the content";
}

// --inspect on an ONNX file: its IR version and opset, the graph's inputs and outputs, and the
// metadata_props export --format onnx records (the same facts as a TorchScript file's attributes).
std::string inspect_onnx(const std::filesystem::path& file) {
  const rt_onnx::ModelProto model = onnx::parse_model(file);  // its CRC-32 checked
  const onnx::FileFacts f = onnx::facts_of(model);
  const std::string crc = onnx::recorded_crc32(model);
  auto meta = [&](const std::string& key) {
    auto it = f.metadata.find(key);
    return it == f.metadata.end() ? std::string() : it->second;
  };
  std::ostringstream s;
  s << printable(file.string()) << "\n  ONNX, IR version " << f.ir_version << ", opset " << f.opset << " ("
    << f.nodes << " nodes, " << f.initializers << " initializers)\n";
  const std::string with = meta(kFactExportedWith);
  s << "  written by  " << (with.empty() ? printable(f.producer) + " (not this exporter)" : printable(with))
    << "\n";
  for (const auto* list : {&f.inputs, &f.outputs}) {
    s << (list == &f.inputs ? "  inputs" : "  outputs");
    for (const auto& v : *list) {
      if (v.name.rfind("state.", 0) == 0) continue;  // listed by rt_state_inputs
      s << "\n    " << printable(v.name) << " " << dims_text(v) << (v.int64 ? " int64" : " float32");
    }
    s << "\n";
  }
  auto fact = [&](const std::string& label, const std::string& value) { fact_line(s, label, value); };
  fact("integrity", onnx_integrity_text(crc));
  fact("method", meta(onnx::kMetaMethod));
  fact("runtime", meta("rt_onnx_runtime"));
  fact("sampling rate", meta("sampling_rate").empty() ? "" : meta("sampling_rate") + " Hz");
  fact("channels", meta("n_channels"));
  fact("latent size",
       meta("latent_size") + (meta("full_latent_size").empty() ? "" : " of " + meta("full_latent_size")));
  fact("streaming", meta("streaming") == "true"    ? "yes (state as inputs and outputs)"
                    : meta("streaming") == "false" ? "no (offline)"
                                                   : "");
  fact("state", meta(onnx::kMetaStates));
  fact("block sizes",
       meta(kFactBlockMultiple).empty() ? "" : "multiples of " + meta(kFactBlockMultiple) + " samples");
  fact("latency", meta("forward_latency").empty()
                      ? ""
                      : "forward " + meta("forward_latency") + ", encode " + meta("encode_latency") +
                            ", decode " + meta("decode_latency") + " samples");
  fact("weights", meta(kFactQuantize));
  fact("checkpoint",
       meta(kFactCheckpoint).empty() ? "" : meta(kFactCheckpoint) + " (step " + meta(kFactStep) + ")");
  fact("fidelity check", meta(kFactCheck));
  const std::string config = meta(kFactConfig);
  if (config.empty()) {
    fact("config", "");
  } else {
    s << "  config [model] (the run's; metadata " << kFactConfig << ")\n" << model_section(config);
  }
  return s.str();
}

}  // namespace

bool starts_like_zip(const std::filesystem::path& file) {
  std::ifstream in(file, std::ios::binary);
  char magic[4] = {};
  return in.read(magic, 4) && magic[0] == 'P' && magic[1] == 'K' && magic[2] == 3 && magic[3] == 4;
}

void refuse_training_checkpoint(const torch::jit::Module& module, const std::filesystem::path& file,
                                const std::string& flag) {
  const std::optional<int64_t> step = checkpoint_step(module);
  if (!step) return;
  throw Error(flag + " '" + file.string() + "' is a training checkpoint (step " + std::to_string(*step) +
              "), not an exported file: export it first (export --ckpt " + file.string() +
              " --streaming), then use the file export writes");
}

std::string verify_export_file(const std::filesystem::path& file) {
  if (onnx::looks_like_onnx(file) || file.extension() == ".onnx") {
    return onnx_integrity_text(onnx::recorded_crc32(onnx::parse_model(file)));  // checked by parse_model
  }
  // Not a zip archive at all: no TorchScript file, which the caller's loader says in its words.
  if (!starts_like_zip(file)) return "not a zip archive: not checked";
  ZipRole role;
  role.noun = "exported file";
  role.remedy = "export it again (a copy or a download cut short or altered it)";
  const size_t entries = verify_zip_entries(file, role);
  return "each of the archive's " + std::to_string(entries) +
         " entries (code, constants, weights) matches the CRC-32 its writer recorded";
}

std::string exported_with_text() {
  return "rt export, LibTorch " + std::to_string(TORCH_VERSION_MAJOR) + "." +
         std::to_string(TORCH_VERSION_MINOR) + "." + std::to_string(TORCH_VERSION_PATCH);
}

void record_export_facts(torch::jit::Module& m, const ExportFacts& f) {
  auto str = [&](const char* name, const std::string& value) {
    m.register_attribute(name, c10::StringType::get(), value);
  };
  str(kFactExportedWith, exported_with_text());
  str(kFactCheckpoint, f.checkpoint);
  m.register_attribute(kFactStep, c10::IntType::get(), f.step);
  str(kFactConfig, f.config_toml);
  m.register_attribute(kFactBlockMultiple, c10::IntType::get(), f.block_multiple);
  str(kFactQuantize, f.quantize);
  str(kFactCheck, f.check);
  if (!f.target_libtorch.empty()) str(kFactTargetLibTorch, f.target_libtorch);
}

void set_check_fact(torch::jit::Module& m, const std::string& check) { m.setattr(kFactCheck, check); }

namespace {

// The nn~ methods a TorchScript file offers, with their channels and rates.
void methods_text(torch::jit::Module& m, std::ostringstream& s) {
  if (m.hasattr("_methods")) {
    s << "  nn~ methods";
    const c10::IValue methods = m.attr("_methods");  // kept: toListRef() views into it
    for (const auto& name : methods.toListRef()) {
      const std::string method = name.toStringRef();
      s << "\n    " << printable(method);
      if (m.hasattr(method + "_params")) {
        const auto p = m.attr(method + "_params").toTensor();
        if (p.numel() == 4) {
          auto rate = [](int64_t ratio) {
            return ratio == 1 ? std::string("sr") : "sr/" + std::to_string(ratio);
          };
          s << ": " << p[0].item<int64_t>() << " channel(s) at " << rate(p[1].item<int64_t>()) << " → "
            << p[2].item<int64_t>() << " at " << rate(p[3].item<int64_t>());
        }
      }
    }
    s << "\n";
  } else {
    s << "  nn~ methods: none (no _methods attribute): nn~ cannot load it\n";
  }
}

// The attributes nn~ and the RAVE VST read, and the facts the export recorded.
void facts_text(torch::jit::Module& m, std::ostringstream& s) {
  auto fact = [&](const std::string& label, const std::string& value) { fact_line(s, label, value); };
  // export --sr at a rational ratio: forward alone, encode and decode inside it at the model's rate.
  const bool forward_only = m.hasattr("model_sampling_rate") && !m.hasattr("encode_params");
  fact("sampling rate",
       (m.hasattr("sr") ? int_attr_text(m, "sr") + " Hz" : int_attr_text(m, "sampling_rate")) +
           (m.hasattr("model_sampling_rate")
                ? " (export --sr: the model's " + int_attr_text(m, "model_sampling_rate") + " Hz, " +
                      (forward_only ? "converted inside forward, the only method" : "resampled inside") + ")"
                : ""));
  fact("channels", int_attr_text(m, "n_channels"));
  fact("latent size",
       int_attr_text(m, "latent_size") +
           (m.hasattr("full_latent_size") ? " of " + int_attr_text(m, "full_latent_size") : ""));
  fact("streaming", m.hasattr("streaming") && m.attr("streaming").isBool()
                        ? (m.attr("streaming").toBool() ? "yes (state kept between calls)" : "no (offline)")
                        : "");
  fact("block sizes", m.hasattr(kFactBlockMultiple)
                          ? "multiples of " + int_attr_text(m, kFactBlockMultiple) + " samples"
                          : "");
  fact("latency", !m.hasattr("forward_latency") ? ""
                  : forward_only                ? "forward " + int_attr_text(m, "forward_latency") +
                                       " samples (the model's encode " + int_attr_text(m, "encode_latency") +
                                       " and decode " + int_attr_text(m, "decode_latency") + " at " +
                                       int_attr_text(m, "model_sampling_rate") + " Hz inside)"
                                 : "forward " + int_attr_text(m, "forward_latency") + ", encode " +
                                       int_attr_text(m, "encode_latency") + ", decode " +
                                       int_attr_text(m, "decode_latency") + " samples");
  fact("weights", string_attr(m, kFactQuantize));
  if (m.hasattr(kFactTargetLibTorch)) fact("checked for", "LibTorch " + string_attr(m, kFactTargetLibTorch));
  fact("checkpoint", m.hasattr(kFactCheckpoint)
                         ? string_attr(m, kFactCheckpoint) + " (step " + int_attr_text(m, kFactStep) + ")"
                         : "");
  fact("fidelity check", string_attr(m, kFactCheck));
  const std::string config = string_attr(m, kFactConfig);
  if (config.empty()) {
    fact("config", "");
  } else {
    s << "  config [model] (the run's; " << std::count(config.begin(), config.end(), '\n')
      << " lines in all, attribute " << kFactConfig << ")\n"
      << model_section(config);
  }
}

}  // namespace

std::string inspect_export(const std::filesystem::path& file, const std::string& target_libtorch,
                           std::string* refusal) {
  if (const std::string why = not_a_regular_file(file); !why.empty())
    throw Error("--inspect '" + file.string() + "' " + why);
  if (onnx::looks_like_onnx(file) || file.extension() == ".onnx") {
    if (!target_libtorch.empty()) {
      throw Error("--target_libtorch applies to TorchScript files; '" + file.string() +
                  "' is ONNX, which names its opset instead (printed by --inspect without the flag)");
    }
    return inspect_onnx(file);
  }
  const std::string integrity = verify_export_file(file);
  uint64_t version = 0;
  torch::jit::Module m;
  try {
    caffe2::serialize::PyTorchStreamReader reader(file.string());
    version = reader.version();
    m = torch::jit::load(file.string());
  } catch (const c10::Error& e) {
    throw Error("--inspect '" + file.string() + "' is not a TorchScript file this LibTorch loads (" +
                libtorch_text() + "): " + e.what_without_backtrace());
  }
  refuse_training_checkpoint(m, file, "--inspect");
  std::ostringstream s;
  s << printable(file.string()) << "\n  TorchScript, file format version " << version << " ("
    << libtorch_text() << " reads versions " << caffe2::serialize::kMinSupportedFileFormatVersion << " … "
    << caffe2::serialize::kMaxSupportedFileFormatVersion << ")\n";
  s << "  integrity         " << integrity << "\n";
  const TorchScriptNeeds needs = torchscript_needs(m, version);
  s << "  loads in          " << loads_in_text(needs) << "\n";
  if (refusal != nullptr && !target_libtorch.empty())
    *refusal = target_refusal(file.string(), target_libtorch, needs);
  const std::string with = string_attr(m, kFactExportedWith);
  s << "  written by  " << (with.empty() ? "not recorded (not written by this exporter)" : printable(with))
    << "\n";
  methods_text(m, s);
  facts_text(m, s);
  return s.str();
}

}  // namespace rt::exporting
