#include "export/rave_export.h"

#include <torch/script.h>

#include <iomanip>
#include <sstream>

#include "config/config.h"
#include "config/run_keys.h"
#include "data/audio_io.h"
#include "export/checks/file_facts.h"
#include "export/checks/libtorch_target.h"
#include "export/graph/describe.h"
#include "export/onnx/onnx_graph.h"
#include "export/onnx_export.h"
#include "export/torchscript/script_writer.h"
#include "families/prior/prior_checkpoint.h"
#include "families/rave/rave_checkpoint.h"
#include "models/rave/resampler.h"
#include "trainer/output_target.h"
#include "trainer/run_dir.h"
#include "training/checkpoint.h"
#include "util/atomic_file.h"
#include "util/error.h"
#include "util/path_kind.h"
#include "util/run_pointer.h"
#include "util/signals.h"

namespace rt::exporting {
namespace {

// --sr's lowest rate (telephone audio); the highest is 8 × the model's (RAVE's resampler's limit).
constexpr int64_t kMinHostRate = 8000;

namespace fs = std::filesystem;

fs::path find_checkpoint(const ExportOptions& o) {
  if (!o.run.empty() && !o.checkpoint.empty()) throw Error("pass either --run or --ckpt, not both");
  if (!o.checkpoint.empty()) {
    if (const std::string why = not_a_regular_file(o.checkpoint); !why.empty())
      throw Error("--ckpt '" + o.checkpoint.string() + "' " + why);
    return o.checkpoint;
  }
  if (o.run.empty()) throw Error("nothing to export: pass --run RUN_DIR or --ckpt PATH");
  if (const std::string why = not_a_folder(o.run); !why.empty())
    throw Error("--run '" + o.run.string() + "' " + why + " (expected a run directory)");
  for (const char* name : {"best.ckpt", "last.ckpt"}) {
    const fs::path p = o.run / "checkpoints" / name;
    if (fs::is_regular_file(p)) return p;
  }
  throw Error("run '" + o.run.string() +
              "' has no checkpoint (expected checkpoints/best.ckpt or last.ckpt): train "
              "it first, or pass --ckpt PATH");
}

// A run's config.toml and the checkpoint must describe the same model.
void check_run_config(const fs::path& run, const RaveCheckpoint& c) {
  const fs::path file = run / "config.toml";
  if (!fs::is_regular_file(file)) return;
  const std::string run_signature = load_config_file(file).architecture_signature();
  if (!signatures_match(run_signature, c.meta.signature)) {
    throw Error("checkpoint '" + c.path.string() + "' was made with another config than '" + file.string() +
                "': the checkpoint holds [" + c.meta.signature + "], the run [" + run_signature + "]");
  }
}

std::vector<double> to_vector(const torch::Tensor& t) {
  auto c = t.to(torch::kCPU, torch::kFloat64).contiguous();
  return std::vector<double>(c.data_ptr<double>(), c.data_ptr<double>() + c.numel());
}

// Chooses the exported latent size and makes sure the model carries the PCA it needs.
void choose_latent(const ExportOptions& o, RaveCheckpoint& c, ExportReport& r) {
  const int64_t full = c.model->options().latent_size;
  r.full_latent_size = full;
  const auto kind = c.model->options().encoder;
  if (kind != rave::EncoderKind::kVariational) {
    // RAVE's Wasserstein/Spherical/DiscreteScriptedRAVE: no PCA, the whole latent (the
    // spherical one as its L − 1 angles, the discrete one as code indices).
    if (o.latent_size > 0) {
      throw Error("--latent_size crops the PCA-rotated latent of a variational model; model.encoder = " +
                  std::string(enum_name(kind)) + " exports its whole latent, as RAVE's export does");
    }
    const int64_t q = c.model->options().num_quantizers;
    switch (kind) {
      case rave::EncoderKind::kSpherical:
        r.latent_size = full - 1;
        r.latent_rule = "model.encoder = spherical: the latent's " + std::to_string(full - 1) + " angles";
        break;
      case rave::EncoderKind::kDiscrete:
        // RAVE's DiscreteScriptedRAVE: one code index per codebook.
        r.latent_size = q;
        r.latent_rule = "model.encoder = discrete: one code index per codebook (" + std::to_string(q) + ")";
        break;
      default:
        r.latent_size = full;
        r.latent_rule = "model.encoder = wasserstein: the whole latent";
    }
    return;
  }
  if (o.latent_size < 0 || o.latent_size > full) {
    throw Error("--latent_size " + std::to_string(o.latent_size) + " is outside 1 … " + std::to_string(full) +
                " (the model's latent size)");
  }
  if (!(o.fidelity > 0.0 && o.fidelity < 1.0)) {
    throw Error("--fidelity " + std::to_string(o.fidelity) + " must lie strictly between 0 and 1");
  }
  auto pca = rave::stored_latent_pca(*c.model);
  if (!rave::has_latent_pca(pca.fidelity) && o.latent_size != full) {
    rave::store_latent_pca(*c.model, fit_latent_pca_on_database(c));
    r.pca_fitted_now = true;
    r.warnings.push_back(
        "the checkpoint holds no latent PCA (no validation ran in phase 1): fitted now on '" +
        run_keys(c.config).db_path + "'");
  }
  if (!rave::has_latent_pca(pca.fidelity)) {
    r.warnings.push_back(
        "the checkpoint holds no latent PCA: the latent is exported as the encoder makes it");
  }
  r.fidelity = to_vector(pca.fidelity);
  if (o.latent_size > 0) {
    r.latent_size = o.latent_size;
    r.latent_rule = "--latent_size";
    return;
  }
  r.latent_size = rave::latent_size_for_fidelity(pca.fidelity, o.fidelity);
  std::ostringstream rule;
  rule << "smallest power of two reaching fidelity " << o.fidelity;
  r.latent_rule = rule.str();
  if (r.latent_size == 1) {
    std::ostringstream w;
    w << "the latent is cropped to 1 dimension: the first PCA dimension alone explains "
      << std::setprecision(3) << r.fidelity[0] << " of the variance (>= --fidelity " << o.fidelity
      << "); pass a higher --fidelity or --latent_size N to keep more";
    r.warnings.push_back(w.str());
  }
}

// What nn~ does with a freshly loaded file, on the loaded copy (the saved streaming state
// stays zero): every method on zeros of two latent frames, batch 1 and 4 (or as many streams as
// the file holds).
void check_saved_module(const fs::path& file, const ExportReport& r) {
  auto m = torch::jit::load(file.string());
  c10::InferenceMode guard;
  const int64_t frames = 2, ratio = r.script.ratio;
  // A streaming file decoding k copies per stream (--channels) holds 64 / k streams.
  const int64_t copies = graph::decoded_copies(r.channels, r.output_channels);
  for (int64_t batch : {int64_t{1}, r.streaming ? std::min<int64_t>(4, kMaxBatch / copies) : int64_t{4}}) {
    if (r.script.rational_latency >= 0) {
      // A rational --sr: forward alone, on blocks of any size (two, unlike each other).
      for (int64_t n : {int64_t{4096}, int64_t{1001}}) {
        const auto f = m.get_method("forward")({torch::zeros({batch, r.channels, n})}).toTensor();
        if (f.sizes() != at::IntArrayRef{batch, r.output_channels, n} || !f.isfinite().all().item<bool>())
          throw Error("export: internal error: '" + file.string() + "' returns unexpected shapes");
      }
      continue;
    }
    auto z = m.get_method("encode")({torch::zeros({batch, r.channels, frames * ratio})}).toTensor();
    auto y = m.get_method("decode")({torch::zeros({batch, r.latent_size, frames})}).toTensor();
    auto f = m.get_method("forward")({torch::zeros({batch, r.channels, frames * ratio})}).toTensor();
    bool ok = z.sizes() == at::IntArrayRef{batch, r.latent_size, frames} &&
              y.sizes() == at::IntArrayRef{batch, r.output_channels, frames * ratio} &&
              f.sizes() == y.sizes();
    if (!r.prior.empty()) {
      const auto p = m.get_method("prior")({torch::zeros({batch, 1, frames})}).toTensor();
      ok = ok && p.sizes() == at::IntArrayRef{batch, r.prior_latent_size, frames} &&
           p.isfinite().all().item<bool>();
    }
    if (!ok) throw Error("export: internal error: '" + file.string() + "' returns unexpected shapes");
  }
}

// A lossy file over the fidelity budget (export/checks/fidelity.h) is written, with a warning.
void warn_if_over_budget(ExportReport& r) {
  if (!r.check.measured || r.check.within_budget() || r.quantize == Quantize::kNone) return;
  std::ostringstream w;
  w << "--quantize " << enum_name(r.quantize) << " adds " << std::fixed << std::setprecision(1)
    << 100.0 * r.check.share() << "% of the model's own reconstruction distance (budget "
    << 100.0 * kFidelityBudget << "%): listen before you use it, or export without --quantize";
  r.warnings.push_back(w.str());
}

// --output, or by default the run's export/ folder (a checkpoint inside a run's checkpoints/
// folder), else an export/ folder beside the checkpoint.
fs::path default_output(const ExportOptions& o, const RaveCheckpoint& c, const fs::path& run,
                        const fs::path& ckpt) {
  if (!o.output.empty()) return o.output;
  fs::path base = run;
  if (base.empty()) {
    base = ckpt.parent_path();
    if (base.filename() == "checkpoints") base = base.parent_path();
  }
  std::string name = run_keys(c.config).name;
  if (name.empty()) name = "rave";
  return base / "export" /
         (name + (o.streaming ? "_streaming" : "") + (o.format == ExportFormat::kOnnx ? ".onnx" : ".ts"));
}

// --check_audio as [channels, samples] at the model's rate, read before anything is written: a
// file that cannot be read stops here. Undefined without --check_audio or with --check_seconds 0.
torch::Tensor read_check_audio(const ExportOptions& o, const RaveCheckpoint& c, int64_t channels) {
  torch::Tensor audio;
  if (o.check_audio.empty() || o.check_seconds <= 0.0) return audio;
  if (const std::string why = not_a_regular_file(o.check_audio); !why.empty())
    throw Error("--check_audio '" + o.check_audio.string() + "' " + why);
  const AudioData a =
      load_audio(o.check_audio, static_cast<int>(c.sampling_rate), static_cast<int>(channels));
  audio = torch::empty({a.num_channels(), a.frames()});
  for (int ch = 0; ch < a.num_channels(); ++ch) {
    std::copy(a.channels[static_cast<size_t>(ch)].begin(), a.channels[static_cast<size_t>(ch)].end(),
              audio[ch].data_ptr<float>());
  }
  return audio;
}

// The facts the TorchScript file records of itself (export --inspect), and --target_libtorch's.
ExportFacts torchscript_facts(const ExportOptions& o, const RaveCheckpoint& c, ExportReport& r) {
  ExportFacts facts;
  facts.checkpoint = r.checkpoint.string();
  facts.step = r.step;
  facts.config_toml = c.meta.config_toml;
  // A rational --sr takes any block size (its queues); otherwise a stream takes whole latent frames.
  facts.block_multiple = o.streaming && r.script.rational_latency < 0 ? r.script.ratio : 1;
  facts.quantize = enum_name(o.quantize);
  facts.check = o.check_seconds > 0.0 ? "not measured" : "not measured (--check_seconds 0)";
  bool newer_than_table = false;
  if (!o.target_libtorch.empty()) {
    const LibTorchRelease target = parse_target_libtorch(o.target_libtorch, &newer_than_table);
    facts.target_libtorch = target.name();
    if (newer_than_table) {
      r.warnings.push_back("--target_libtorch " + o.target_libtorch + " is newer than the release table (" +
                           libtorch_releases().front().name() + " … " + target.name() + "): checked as " +
                           target.name() + " (scripts/libtorch_releases.py adds newer releases)");
    }
  }
  return facts;
}

// The TorchScript file: scripted, checked against --target_libtorch, written beside the output
// first, loaded and run from there as a host would, and written at --output (or over the file
// --force replaces) only once that passed: an error or a stop signal in between leaves it as it was.
void write_torchscript(const ExportOptions& o, RaveCheckpoint& c, const CheckAudioFn& check_input,
                       ExportReport& r, rave::VariationalPriorImpl* prior) {
  ScriptOptions s;
  s.prior = prior;
  s.host_rate = o.sr;
  s.streaming = o.streaming;
  s.latent_size = r.latent_size;
  s.sampling_rate = c.sampling_rate;
  s.quantize = o.quantize;
  s.channels = o.channels;
  auto module = script_rave(*c.model, s, &r.script);
  record_export_facts(module, torchscript_facts(o, c, r));
  auto serialized = [&] {
    std::ostringstream bytes;
    module.save(bytes);
    return bytes.str();
  };
  // Which LibTorch releases load the file, checked before anything is written.
  const std::string first_bytes = serialized();
  const TorchScriptNeeds needs = torchscript_needs(module, file_format_version_of(first_bytes));
  if (!o.target_libtorch.empty()) {
    const std::string refusal = target_refusal(r.output.string(), o.target_libtorch, needs);
    if (!refusal.empty()) throw Error(refusal + "; nothing written");
  }
  r.loads_in = loads_in_text(needs);
  const ScratchSibling checking(r.output, "checking");
  write_file_atomic(checking.path(), first_bytes);
  check_saved_module(checking.path(), r);
  if (o.check_seconds > 0.0) {
    // Audio at the model's rate; with --sr the check takes it to the host's (host / model times longer).
    const int64_t samples =
        (fidelity_samples(r.script, r.sampling_rate, o.check_seconds, o.streaming) * r.model_sampling_rate +
         r.sampling_rate - 1) /
        r.sampling_rate;
    try {
      std::string source;
      const torch::Tensor audio = check_input(samples, &source);
      r.check = measure_fidelity(*c.model, checking.path(), s, r.script, audio, source);
    } catch (const StopRequested&) {
      throw;
    } catch (const Error& e) {
      r.check.not_measured = e.what();
    }
    // The file carries its own check figures (export --inspect).
    set_check_fact(module, format_fidelity(r.check));
    warn_if_over_budget(r);
  }
  throw_if_stop_requested("while checking the exported file; nothing was written");
  write_file_atomic(r.output, o.check_seconds > 0.0 ? serialized() : first_bytes);
}

// --prior: the prior checked against the RAVE exported; null without --prior.
rave::VariationalPrior load_prior(const ExportOptions& o, RaveCheckpoint& c, ExportReport& r) {
  if (o.prior.empty()) return nullptr;
  PriorCheckpoint p = load_prior_over(o.prior, "--prior", c);
  r.prior = p.path;
  r.prior_latent_size = p.prior->options().latent_size;
  return p.prior;
}

}  // namespace

ExportReport export_rave(const ExportOptions& options) {
  ExportOptions o = options;
  o.run = resolve_run_pointer(o.run);  // --run runs/latest
  ExportReport r;
  r.checkpoint = find_checkpoint(o);
  RaveCheckpoint c =
      load_rave_checkpoint(r.checkpoint, o.ema_weights ? RaveWeights::kEma : RaveWeights::kTrained);
  fs::path run = o.run.empty() ? run_dir_of_checkpoint(r.checkpoint) : o.run;
  if (!run.empty()) check_run_config(run, c);
  r.step = c.meta.step;
  r.channels = c.model->options().channels;
  r.output_channels = o.channels > 0 ? o.channels : r.channels;
  r.model_sampling_rate = c.sampling_rate;
  r.sampling_rate = o.sr > 0 ? o.sr : c.sampling_rate;
  if (o.sr != 0 && o.sr != c.sampling_rate && (o.sr < kMinHostRate || o.sr > 8 * c.sampling_rate)) {
    throw Error("--sr " + std::to_string(o.sr) + " is not accepted: " + std::to_string(kMinHostRate) +
                " Hz to 8 × the model's " + std::to_string(c.sampling_rate) + " Hz (" +
                std::to_string(8 * c.sampling_rate) + "); leave it out for the model's own rate");
  }
  r.streaming = o.streaming;
  r.output = default_output(o, c, run, r.checkpoint);
  r.format = o.format;
  if (o.format == ExportFormat::kOnnx) {
    if (!o.target_libtorch.empty())
      throw Error("--target_libtorch applies to TorchScript files; export --format onnx writes opset " +
                  std::to_string(onnx::kOpset) + " for ONNX Runtime 1.17 or later");
    if (o.channels > 0 && o.channels != r.channels) {
      throw Error(
          "--channels applies to TorchScript files (nn~, the RAVE VST), as RAVE's export's does; export "
          "--format onnx writes the model's " +
          std::to_string(r.channels) + " channel(s)");
    }
    r.onnx_encode = onnx::sibling(r.output, "encode");
    r.onnx_decode = onnx::sibling(r.output, "decode");
  }
  if (o.format == ExportFormat::kOnnx && r.sampling_rate != r.model_sampling_rate) {
    throw Error(
        "--sr applies to TorchScript files (nn~, the RAVE VST), as RAVE's does; export --format onnx runs at "
        "the model's " +
        std::to_string(r.model_sampling_rate) + " Hz (the host resamples)");
  }
  if (o.format == ExportFormat::kOnnx && !o.prior.empty()) {
    throw Error(
        "--prior writes nn~'s prior method into TorchScript files; export --format onnx has no prior "
        "(export it without --format onnx)");
  }
  choose_latent(o, c, r);
  // Before the model is scripted and anything written: what is there is never lost by mistake.
  for (const auto& target : {r.output, r.onnx_encode, r.onnx_decode}) {
    if (!target.empty()) check_output_target(target, {r.checkpoint, o.check_audio}, o.force, "export");
  }
  const torch::Tensor check_audio = read_check_audio(o, c, r.channels);
  // The audio the fidelity check compares on: --check_audio, else the run's database.
  const CheckAudioFn check_input = [&](int64_t samples, std::string* source) {
    if (check_audio.defined()) {
      *source = "'" + o.check_audio.string() + "'";
      return check_audio.narrow(1, 0, std::min(samples, check_audio.size(1)));
    }
    return database_audio(c, samples, source);
  };
  r.quantize = o.quantize;
  if (o.format == ExportFormat::kOnnx) {
    onnx::write_rave_onnx(o, c, check_input, r);
    warn_if_over_budget(r);
  } else {
    rave::VariationalPrior prior = load_prior(o, c, r);
    write_torchscript(o, c, check_input, r, prior ? prior.get() : nullptr);
  }
  return r;
}

std::string format_report(const ExportReport& r) {
  std::ostringstream s;
  const bool rational = r.script.rational_latency >= 0;
  s << "exported " << r.output.string() << "\n";
  if (r.format == ExportFormat::kOnnx) {
    s << "  ONNX (opset " << onnx::kOpset << ", IR version " << onnx::kIrVersion
      << ", for ONNX Runtime 1.17 or later): forward; encode " << r.onnx_encode.string() << ", decode "
      << r.onnx_decode.string() << "\n";
    if (r.streaming) {
      s << "  streaming state: " << r.onnx_states.size()
        << " inputs 'state.*' in forward (zeros first); feed each call's '<name>.next' outputs back\n";
    }
  }
  s << "  from " << r.checkpoint.string() << " (step " << r.step << ")\n"
    << "  " << r.channels << " channel(s)"
    << (r.output_channels != r.channels ? " in, " + std::to_string(r.output_channels) + " out (--channels)"
                                        : "")
    << " at " << r.sampling_rate << " Hz"
    << (r.sampling_rate != r.model_sampling_rate
            ? " (--sr: the model's " + std::to_string(r.model_sampling_rate) + " Hz, resampled inside)"
            : "")
    << ", " << r.script.ratio << (rational ? " model-rate" : "") << " samples per latent frame"
    << (r.format == ExportFormat::kOnnx ? " (every call's length a multiple of it)" : "") << ", "
    << (r.streaming ? "streaming" : "offline (not for realtime use)") << "\n";
  if (rational) {
    s << "  --sr " << r.sampling_rate << " is no integer multiple of " << r.model_sampling_rate
      << " Hz (or an odd one, streaming): nn~ method forward only, any block size; a latent frame would span "
         "a fractional number of host samples, so encode and decode run inside it\n";
  }
  if (!r.loads_in.empty()) {
    s << "  loads in " << r.loads_in << "\n";
  }
  if (r.quantize == Quantize::kInt8) {
    const auto& i = r.script;
    s << "  --quantize int8: " << i.int8_layers << " layer(s) on int8 weights (" << i.int8_weights << " of "
      << i.int8_weights + i.float_weights << " weights; " << (i.int8_weights + 4 * i.float_weights) / 1024
      << " KiB to read per call instead of " << 4 * (i.int8_weights + i.float_weights) / 1024 << ")\n";
  }
  s << "  latent_size " << r.latent_size << " of " << r.full_latent_size << " (" << r.latent_rule << ")\n";
  if (!r.fidelity.empty()) {
    s << "  fidelity (cumulative explained variance) by dimensions:";
    for (size_t n = 1; n <= r.fidelity.size(); n *= 2) {
      s << " " << n << ":" << std::fixed << std::setprecision(3) << r.fidelity[n - 1]
        << (static_cast<int64_t>(n) == r.latent_size ? "*" : "");
    }
    s << "\n";
  }
  if (r.streaming) {
    auto ms = [&](int64_t samples) {
      return 1000.0 * static_cast<double>(samples) / static_cast<double>(r.sampling_rate);
    };
    s << std::fixed << std::setprecision(1) << "  latency: ";
    if (rational) {
      s << "forward " << r.script.forward_latency() << " samples (" << ms(r.script.forward_latency())
        << " ms: the model's " << r.script.forward_latency_at_model_rate() << " at " << r.model_sampling_rate
        << " Hz and the queues that take any block size)";
    } else {
      s << "encode " << r.script.encode_latency << " samples (" << ms(r.script.encode_latency) << " ms, "
        << r.script.encode_latency / r.script.ratio << " latent frames), decode " << r.script.decode_latency
        << " (" << ms(r.script.decode_latency) << " ms), forward " << r.script.forward_latency() << " ("
        << ms(r.script.forward_latency()) << " ms)";
    }
    s << (r.format == ExportFormat::kOnnx ? "" : ", plus nn~'s buffering") << "\n";
  }
  if (!r.prior.empty()) {
    s << "  prior: " << r.prior.string() << " (nn~ method `prior`: a temperature signal in, "
      << r.prior_latent_size << " latent signal(s) out, one frame per " << r.script.ratio << " samples)\n";
  }
  if (r.check.measured || !r.check.not_measured.empty()) s << "  " << format_fidelity(r.check) << "\n";
  for (const auto& [why, keys] : r.script.dropped)
    s << "  not exported: " << keys.size() << " tensor(s), " << why << "\n";
  for (const auto& w : r.warnings) s << "warning: " << w << "\n";
  return terminal_safe(s.str());  // paths the user chose (--output, the run's) as they can be shown
}

}  // namespace rt::exporting
