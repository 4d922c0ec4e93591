#include "export/loader.h"

#include <sstream>

#include "config/run_keys.h"
#include "export/checks/file_facts.h"
#include "export/onnx/onnx_eval.h"
#include "export/onnx/onnx_graph.h"
#include "export/torchscript/rave_script.h"
#include "families/prior/prior_checkpoint.h"
#include "families/rave/rave_checkpoint.h"
#include "trainer/run_dir.h"
#include "training/checkpoint.h"
#include "util/atomic_file.h"
#include "util/error.h"
#include "util/jit_attribute.h"
#include "util/run_pointer.h"

namespace rt::exporting {
namespace {

namespace fs = std::filesystem;

// export --format onnx's forward graph: its metadata says the rate, channels, ratio and latency.
void load_onnx(const LoadRequest& o, const fs::path& given, LoadedModel& m) {
  m.onnx_forward = std::make_shared<onnx::Runner>(given);
  const auto& meta = m.onnx_forward->facts().metadata;
  auto number = [&](const std::string& key) -> int64_t {
    auto it = meta.find(key);
    if (it == meta.end())
      throw Error("--model '" + given.string() + "' does not record " + key +
                  " (not written by export --format onnx)");
    return std::stoll(it->second);
  };
  if (meta.count(onnx::kMetaMethod) == 0 || meta.at(onnx::kMetaMethod) != "forward") {
    throw Error("--model '" + given.string() +
                "' is not an ONNX forward graph: pass the file export --format onnx writes at --output (its "
                ".encode.onnx and .decode.onnx siblings hold one half each)");
  }
  m.sampling_rate = number("sampling_rate");
  m.channels = number("n_channels");
  m.ratio = number("ratio");
  m.latency = number("forward_latency");
  const bool streaming = meta.count("streaming") != 0 && meta.at("streaming") == "true";
  if (o.stream != streaming) {
    throw Error(
        o.stream
            ? "--stream: '" + given.string() +
                  "' was exported offline (no state inputs); export it with --streaming, or drop --stream"
            : "'" + given.string() +
                  "' is a streaming export: it keeps state between calls, so run it "
                  "with --stream");
  }
  m.description = "ONNX file " + given.string();
  m.name = given.stem().string();
}

bool has_torchscript_extension(const fs::path& path) {
  const auto ext = path.extension();
  return ext == ".ts" || ext == ".pt" || ext == ".torchscript";
}

// An exported TorchScript file (ours or RAVE's own), already loaded into `m`: its nn~
// attributes, checked against the mode asked for.
void describe_torchscript(const LoadRequest& o, const fs::path& given, LoadedModel& m) {
  if (!m.module.find_method("forward") || !m.module.hasattr("forward_params")) {
    throw Error("--model '" + given.string() +
                "' has no nn~ forward method (forward and forward_params): export a RAVE model with export, "
                "or RAVE's own export");
  }
  // nn~'s <method>_params: [in_channels, in_ratio, out_channels, out_ratio]; encode's
  // out_ratio is the audio samples per latent frame.
  m.channels = m.module.attr("forward_params").toTensor()[0].item<int64_t>();
  m.ratio =
      m.module.hasattr("encode_params") ? m.module.attr("encode_params").toTensor()[3].item<int64_t>() : 1;
  m.sampling_rate = int_attribute(m.module, "sr", int_attribute(m.module, "sampling_rate", 0));
  m.latency = int_attribute(m.module, "forward_latency", 0);
  const bool streaming = m.module.hasattr("streaming") && m.module.attr("streaming").toBool();
  if (m.sampling_rate <= 0)
    throw Error("--model '" + given.string() + "' does not say its sampling rate (sr)");
  if (o.file_mode) {
    m.latency = streaming ? m.latency : 0;
  } else if (o.stream && m.module.hasattr("streaming") && !streaming) {
    throw Error("--stream: '" + given.string() +
                "' was exported offline (no streaming caches); export it with --streaming, or drop --stream");
  } else if (!o.stream && streaming) {
    throw Error("'" + given.string() +
                "' is a streaming export: it keeps state between calls, so run it with --stream");
  }
  m.description = "TorchScript file " + given.string();
  m.name = given.stem().string();
}

// A training checkpoint, scripted in memory exactly as `export` writes it.
void load_checkpoint_model(const LoadRequest& o, const fs::path& ckpt, LoadedModel& m) {
  RaveCheckpoint c = load_rave_checkpoint(ckpt, o.ema_weights ? RaveWeights::kEma : RaveWeights::kTrained,
                                          "generate --model");
  ScriptOptions s;
  s.streaming = o.stream;
  s.sampling_rate = c.sampling_rate;
  rave::VariationalPrior prior{nullptr};
  if (!o.prior.empty()) {
    prior = load_prior_over(o.prior, "--prior", c).prior;
    s.prior = prior.get();
    m.prior_latent_size = prior->options().latent_size;
  }
  ScriptInfo info;
  std::ostringstream bytes;
  script_rave(*c.model, s, &info).save(bytes);
  m.bytes = bytes.str();
  m.module = m.fresh();  // as the exported file would be loaded
  m.channels = c.model->options().channels;
  m.sampling_rate = c.sampling_rate;
  m.ratio = info.ratio;
  m.latency = o.stream ? info.forward_latency() : 0;
  m.description = "checkpoint " + ckpt.string() + " (step " + std::to_string(c.meta.step) + ")";
  m.name = run_keys(c.config).name;
  if (m.name.empty()) m.name = "rave";
}

}  // namespace

LoadedModel load_model(const LoadRequest& request) {
  LoadRequest o = request;
  std::error_code ec;
  if (!o.prior.empty() && fs::is_regular_file(o.prior, ec) && has_torchscript_extension(o.prior)) {
    // An export made with --prior: the file holds the RAVE and its prior method.
    if (!o.model.empty()) {
      throw Error("--prior '" + o.prior + "' is an exported file, which holds its RAVE: drop --model '" +
                  o.model + "'");
    }
    o.model = o.prior;
    o.prior.clear();
    LoadedModel m = load_model(o);
    if (!m.module.find_method("prior") || !m.module.hasattr("prior_params")) {
      throw Error("--prior '" + request.prior +
                  "' has no prior method: export it with export --prior PRIOR_RUN, or name the prior's run");
    }
    m.prior_latent_size = m.module.attr("prior_params").toTensor()[2].item<int64_t>();
    return m;
  }
  if (!o.prior.empty() && o.model.empty()) o.model = prior_rave(o.prior, "--prior");
  LoadedModel m;
  const fs::path given = o.model;
  const bool file = fs::is_regular_file(given, ec);
  if (file && (onnx::looks_like_onnx(given) || given.extension() == ".onnx")) {
    if (!o.prior.empty())
      throw Error("--prior: the ONNX export has no prior; name the RAVE's run as --model");
    load_onnx(o, given, m);  // its parse checks the CRC-32 the file records
  } else if (file && dangling_run_pointer(given).empty() && !starts_like_zip(given)) {
    throw Error("--model '" + given.string() +
                "' is not a model: expected a run directory, a `latest` pointer, a checkpoint (.ckpt), a "
                "TorchScript export (.ts) or an ONNX export (.onnx); audio to run through the model goes to "
                "--input");
  } else if (file && has_torchscript_extension(given)) {
    verify_export_file(given);  // every entry against its CRC-32: a damaged file is refused
    try {
      m.bytes = read_file(given);
      m.module = m.fresh();
    } catch (const c10::Error& e) {
      throw Error("--model '" + given.string() +
                  "' is not a TorchScript file this LibTorch loads: " + e.what_without_backtrace());
    }
    if (checkpoint_step(m.module)) {
      m = LoadedModel();  // a training checkpoint named like an export
      load_checkpoint_model(o, given, m);
    } else if (!o.prior.empty()) {
      throw Error("--prior '" + o.prior + "' goes with a RAVE run or checkpoint, not the exported file '" +
                  given.string() + "': export it with --prior, then pass that file as --prior");
    } else {
      describe_torchscript(o, given, m);
    }
  } else {
    load_checkpoint_model(o, resolve_run_or_checkpoint(o.model, "--model"), m);
  }
  return m;
}

torch::jit::Module LoadedModel::fresh() const {
  std::istringstream in(bytes);
  auto loaded = torch::jit::load(in);
  loaded.eval();
  return loaded;
}

ForwardCall LoadedModel::start() {
  if (onnx_forward) {
    auto stream = std::make_shared<onnx::StreamRunner>(*onnx_forward);
    return [stream](const torch::Tensor& x) { return stream->step("audio_in", x); };
  }
  auto m = std::make_shared<torch::jit::Module>(fresh());
  return [m](const torch::Tensor& x) { return m->forward({x}).toTensor(); };
}

}  // namespace rt::exporting
