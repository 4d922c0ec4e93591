#include "export/onnx_export.h"

#include "export/checks/file_facts.h"
#include "export/onnx/onnx_eval.h"
#include "export/onnx/onnx_rave.h"
#include "util/atomic_file.h"
#include "util/error.h"
#include "util/signals.h"

namespace rt::exporting::onnx {
namespace {

namespace fs = std::filesystem;

std::string str(int64_t v) { return std::to_string(v); }

// What a host needs to carry the streaming state, in one line.
std::string state_rule(const std::vector<StateSpec>& states) {
  if (states.empty()) return "none (offline graph: the whole signal in one call)";
  return std::to_string(states.size()) +
         " inputs 'state.*' (float32 [batch x rows, channels, samples], zeros before the first block); feed "
         "each "
         "call's output '<name>.next' back as input '<name>' on the next call";
}

// Runs a freshly written file once, as a host would: zeros of two latent frames, batch 1 and 4.
void check_written(const Runner& runner, const fs::path& file, const std::string& input, int64_t in_channels,
                   int64_t in_length, int64_t out_channels, int64_t out_length) {
  for (int64_t batch : {1, 4}) {
    StreamRunner stream(runner);
    const auto y = stream.step(input, torch::zeros({batch, in_channels, in_length}));
    if (y.sizes() != at::IntArrayRef{batch, out_channels, out_length}) {
      throw Error("export --format onnx: internal error: '" + file.string() + "' returns shape " +
                  c10::str(y.sizes()));
    }
  }
}

}  // namespace

fs::path sibling(const fs::path& forward, const std::string& method) {
  fs::path p = forward;
  const std::string ext = p.extension().string();
  return p.replace_filename(p.stem().string() + "." + method + (ext.empty() ? ".onnx" : ext));
}

namespace {

// The facts every file of the export carries as metadata_props (export --inspect, hosts).
std::map<std::string, std::string> metadata(const ExportOptions& o, const RaveCheckpoint& c,
                                            const ExportReport& r, const RaveGraphs& graphs) {
  return {
      {kFactExportedWith, exported_with_text()},
      {kFactCheckpoint, r.checkpoint.string()},
      {kFactStep, str(r.step)},
      {kFactConfig, c.meta.config_toml},
      {kFactBlockMultiple, str(graphs.ratio)},
      {kFactQuantize, std::string(enum_name(o.quantize))},
      {kFactCheck, o.check_seconds > 0.0 ? "not measured" : "not measured (--check_seconds 0)"},
      {"rt_onnx_opset", str(kOpset)},
      {"rt_onnx_ir_version", str(kIrVersion)},
      {"rt_onnx_runtime", "ONNX Runtime 1.17 or later"},
      {"sampling_rate", str(c.sampling_rate)},
      {"n_channels", str(graphs.channels)},
      {"latent_size", str(graphs.latent_size)},
      {"full_latent_size", str(graphs.full_latent_size)},
      {"ratio", str(graphs.ratio)},
      {"streaming", o.streaming ? "true" : "false"},
      {"encode_latency", str(r.script.encode_latency)},
      {"decode_latency", str(r.script.decode_latency)},
      {"forward_latency", str(r.script.forward_latency())},
  };
}

// The fidelity check of the forward graph, run block by block as a host runs it.
void check_fidelity(const ExportOptions& o, RaveCheckpoint& c, const CheckAudioFn& check_audio,
                    const Runner& forward, ExportReport& r) {
  ScriptOptions s;
  s.streaming = o.streaming;
  s.latent_size = r.latent_size;
  s.sampling_rate = c.sampling_rate;
  try {
    std::string source;
    const torch::Tensor audio =
        check_audio(fidelity_samples(r.script, c.sampling_rate, o.check_seconds, o.streaming), &source);
    StreamRunner stream(forward);
    const std::map<std::string, torch::Tensor> quiet{{"noise_scale", torch::tensor(0.0f)}};
    const ForwardFn run = [&](const torch::Tensor& x) { return stream.step("audio_in", x, quiet); };
    r.check = measure_fidelity(*c.model, run, s, r.script, audio, source);
  } catch (const StopRequested&) {
    throw;
  } catch (const Error& e) {
    r.check.not_measured = e.what();
  }
}

}  // namespace

void write_rave_onnx(const ExportOptions& o, RaveCheckpoint& c, const CheckAudioFn& check_audio,
                     ExportReport& r) {
  RaveGraphOptions go;
  go.streaming = o.streaming;
  go.latent_size = r.latent_size;
  if (o.quantize == Quantize::kInt8) go.int8_min_weights = ScriptOptions{}.int8_min_weights;
  RaveGraphs graphs = build_rave_graphs(*c.model, go);
  r.script.ratio = graphs.ratio;
  r.script.encode_latency = o.streaming ? graphs.encode_latency : 0;
  r.script.decode_latency = o.streaming ? graphs.decode_latency : 0;
  r.script.dropped = graphs.dropped;
  r.script.float_weights = graphs.forward.weight_count();
  r.script.int8_layers = graphs.int8_layers;
  r.script.int8_weights = graphs.int8_weights;
  std::vector<StateSpec> all = graphs.encode_states;
  all.insert(all.end(), graphs.decode_states.begin(), graphs.decode_states.end());
  for (const auto& s : all) r.onnx_states.push_back(s.name);
  auto meta = metadata(o, c, r, graphs);
  const std::string doc = "RAVE model exported by rt export from " + r.checkpoint.filename().string() +
                          " (step " + str(r.step) +
                          "); inputs and outputs: see metadata_props and docs/export.md";
  // Written beside the outputs first and checked from there; the outputs (or files --force
  // replaces) are written only once that passed: an error or a stop in between leaves them.
  const ScratchSibling encode_scratch(r.onnx_encode, "checking"), decode_scratch(r.onnx_decode, "checking"),
      forward_scratch(r.output, "checking");
  auto save_all = [&](bool final) {
    for (auto [graph, file, scratch, states] :
         {std::tuple{&graphs.encode, r.onnx_encode, encode_scratch.path(), &graphs.encode_states},
          std::tuple{&graphs.decode, r.onnx_decode, decode_scratch.path(), &graphs.decode_states},
          std::tuple{&graphs.forward, r.output, forward_scratch.path(), &all}}) {
      auto m = meta;
      m[kMetaMethod] = graph->name();
      m[kMetaStates] = state_rule(*states);
      graph->save(final ? file : scratch, m, doc);
    }
  };
  save_all(false);
  const int64_t ch = graphs.channels, latent = graphs.latent_size, frames = 2,
                samples = frames * graphs.ratio;
  check_written(Runner(encode_scratch.path()), r.onnx_encode, "audio_in", ch, samples, latent, frames);
  check_written(Runner(decode_scratch.path()), r.onnx_decode, "latent_in", latent, frames, ch, samples);
  const Runner forward(forward_scratch.path());  // read once: checked here, then the fidelity check runs it
  check_written(forward, r.output, "audio_in", ch, samples, ch, samples);
  if (o.check_seconds > 0.0) {
    check_fidelity(o, c, check_audio, forward, r);
    meta[kFactCheck] = format_fidelity(r.check);
    throw_if_stop_requested("while checking the exported files; nothing was written");
  }
  save_all(true);
}

}  // namespace rt::exporting::onnx
