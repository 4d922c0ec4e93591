#include "generate/generate.h"

#include <torch/script.h>
#include <unistd.h>

#include <chrono>
#include <cmath>
#include <functional>
#include <iomanip>
#include <map>
#include <memory>
#include <set>
#include <sstream>

#include "data/audio_io.h"
#include "data/preprocess.h"
#include "export/loader.h"
#include "models/rave/losses.h"
#include "trainer/output_target.h"
#include "util/atomic_file.h"
#include "util/error.h"
#include "util/error_text.h"
#include "util/interruptible.h"
#include "util/path_kind.h"
#include "util/printable.h"
#include "util/signals.h"

namespace rt::exporting {
namespace {

namespace fs = std::filesystem;

constexpr int64_t kDefaultChunk = 4096;
// RAVE's multi-scale spectral distance at its default scales (rave/core.py, v2.gin).
const std::vector<int64_t> kDistanceScales{2048, 1024, 512, 256, 128};

torch::Tensor to_tensor(const AudioData& a) {
  auto t = torch::empty({1, a.num_channels(), a.frames()});
  for (int c = 0; c < a.num_channels(); ++c) {
    const auto& ch = a.channels[static_cast<size_t>(c)];
    std::copy(ch.begin(), ch.end(), t[0][c].data_ptr<float>());
  }
  return t;
}

AudioData to_audio(const torch::Tensor& t, int sample_rate) {
  AudioData a;
  a.sample_rate = sample_rate;
  const auto x = t.squeeze(0).to(torch::kFloat).contiguous();
  for (int64_t c = 0; c < x.size(0); ++c) {
    const float* p = x[c].data_ptr<float>();
    a.channels.emplace_back(p, p + x.size(1));
  }
  return a;
}

// The model over `x` (1, C, T): one call offline; blocks of `chunk` samples in streaming, with
// `latency` samples of zeros after the input so that the output, its first `latency` samples
// dropped, is aligned with the input and as long.
torch::Tensor run_model(const ForwardCall& forward, const torch::Tensor& x, bool stream, int64_t chunk,
                        int64_t latency, int64_t ratio) {
  c10::InferenceMode guard;
  const int64_t n = x.size(-1);
  if (!stream) {
    const int64_t padded = (n + ratio - 1) / ratio * ratio;
    auto in = padded > n ? torch::constant_pad_nd(x, {0, padded - n}) : x;
    return forward(in).narrow(-1, 0, n);
  }
  const int64_t total = (n + latency + chunk - 1) / chunk * chunk;
  auto in = torch::constant_pad_nd(x, {0, total - n});
  std::vector<torch::Tensor> blocks;
  for (int64_t i = 0; i < total; i += chunk) {
    blocks.push_back(forward(in.narrow(-1, i, chunk)));
  }
  return torch::cat(blocks, -1).narrow(-1, latency, n);
}

void write_audio_atomic(const fs::path& path, const AudioData& audio, int format) {
  fs::create_directories(path.parent_path());
  const fs::path tmp =
      path.parent_path() / ("." + path.filename().string() + ".tmp." + std::to_string(::getpid()));
  try {
    write_audio_file(tmp, audio, format);
    fs::rename(tmp, path);
  } catch (...) {
    std::error_code ec;
    fs::remove(tmp, ec);
    throw;
  }
}

// Where each input's output goes: <folder>/<its path under the input folder>.<ext>, or
// <folder>/<stem>.<ext> for a file given by name (ext: the --format's, audio_io.h). A file given
// twice (by name, or also inside a given folder) is run once. Two inputs that would still write
// one output are refused, naming both: nothing is written over.
std::vector<std::pair<fs::path, fs::path>> plan_outputs(const std::vector<fs::path>& inputs,
                                                        const fs::path& folder, const std::string& ext,
                                                        std::vector<GeneratedFile>& missing) {
  std::vector<std::pair<fs::path, fs::path>> plan;
  std::set<fs::path> seen;  // inputs by absolute, normal path
  auto add = [&](const fs::path& in, const fs::path& out) {
    std::error_code ec;
    const fs::path key = fs::weakly_canonical(fs::absolute(in, ec), ec);
    if (seen.insert(key).second) plan.emplace_back(in, out);
  };
  for (const auto& in : inputs) {
    std::error_code ec;
    if (fs::is_directory(in, ec)) {
      std::vector<SkippedFile> none;
      for (const auto& f : collect_input_files({in}, none)) {
        add(f, (folder / fs::relative(f, in, ec)).replace_extension(ext));
      }
    } else if (const std::string why = not_a_regular_file(in); !why.empty()) {
      GeneratedFile g;
      g.input = in;
      g.error = "'" + in.string() + "' " + why;
      missing.push_back(g);
    } else {
      add(in, (folder / in.filename()).replace_extension(ext));
    }
  }
  // Two inputs of one name in one folder (a.wav, a.flac) keep their extension (a.flac.wav).
  std::map<fs::path, std::vector<fs::path>> by_output;
  for (const auto& [in, out] : plan) by_output[out].push_back(in.parent_path());
  for (auto& [in, out] : plan) {
    const auto& dirs = by_output[out];
    if (dirs.size() > 1 &&
        std::count(dirs.begin(), dirs.end(), dirs.front()) == static_cast<long>(dirs.size()))
      out = out.parent_path() / (in.filename().string() + ext);
  }
  std::map<fs::path, fs::path> writer;
  for (const auto& [in, out] : plan) {
    auto [it, fresh] = writer.emplace(out, in);
    if (!fresh) {
      throw Error("--input '" + it->second.string() + "' and --input '" + in.string() +
                  "' would both write '" + out.string() +
                  "': give files of one name in separate runs (--name keeps their outputs apart), or rename "
                  "one");
    }
  }
  return plan;
}

// A name is one folder name under --out_path, not a path: no separator, not "." or "..", no
// control character.
void check_name(const std::string& name) {
  if (name.empty()) return;
  bool control = false;
  for (const char c : name) control |= static_cast<unsigned char>(c) < 0x20 || c == 0x7f;
  if (name == "." || name == ".." || name.find('/') != std::string::npos || control) {
    throw Error("--name '" + name +
                "' is not accepted: one folder name under --out_path (no '/', not '.' or '..', no control "
                "characters); choose the parent folder with --out_path");
  }
}

// The generations never go into a training run's own folder or its checkpoints/: that is where
// train, export and resume read and write.
void check_folder(const fs::path& folder) {
  std::error_code ec;
  // The nearest part of the path that exists must be a folder (a file there: name the flag).
  for (fs::path d = folder; !d.empty(); d = d.parent_path()) {
    const fs::file_status st = fs::status(d, ec);
    if (fs::exists(st)) {
      if (!fs::is_directory(st)) {
        throw Error("--out_path/--name '" + folder.string() + "': '" + d.string() + "' is " +
                    file_kind_text(st) + ", not a folder: choose a folder for the generations");
      }
      break;
    }
    if (d == d.parent_path()) break;
  }
  auto is_run = [](const fs::path& dir) {
    std::error_code e;
    return fs::is_regular_file(dir / "config.toml", e) && fs::is_directory(dir / "checkpoints", e);
  };
  const fs::path abs = fs::weakly_canonical(fs::absolute(folder, ec), ec);
  for (fs::path d = abs; !d.empty(); d = d.parent_path()) {
    if (is_run(d) && (d == abs || abs.lexically_relative(d).begin()->string() == "checkpoints")) {
      throw Error("--out_path/--name '" + folder.string() + "' is " +
                  (d == abs ? std::string("a training run's own folder")
                            : "inside the checkpoints of the run '" + d.string() + "'") +
                  ": generate writes its audio and report.json elsewhere (e.g. --out_path generations)");
    }
    if (d == d.parent_path()) break;
  }
}

}  // namespace

int64_t GenerateReport::failed() const {
  int64_t n = 0;
  for (const auto& f : files) n += f.error.empty() ? 0 : 1;
  return n;
}

namespace {

// One input through the model into `out`: read as preprocess reads training audio, each
// conversion said in the file's notes, the model's call stopped by a signal at once.
void generate_file(const GenerateOptions& o, LoadedModel& m, const GenerateReport& r, const fs::path& in,
                   const fs::path& out, int format, GeneratedFile& g) {
  const AudioData raw = decode_audio_file(in);
  if (!raw.truncated.empty()) g.notes.push_back("truncated file: " + raw.truncated);
  if (raw.sample_rate != m.sampling_rate) {
    g.notes.push_back("resampled from " + std::to_string(raw.sample_rate) + " Hz to the model's " +
                      std::to_string(m.sampling_rate) + " Hz");
  }
  if (raw.num_channels() != m.channels) {
    // As preprocess maps the training audio (data/audio_io.h map_channels).
    g.notes.push_back(std::to_string(raw.num_channels()) + " channel(s) mapped to the model's " +
                      std::to_string(m.channels) +
                      (raw.num_channels() > m.channels ? " (averaged)" : " (repeated)"));
  }
  const AudioData audio =
      resample(map_channels(raw, static_cast<int>(m.channels)), static_cast<int>(m.sampling_rate));
  const auto x = to_tensor(audio);
  g.seconds = audio.seconds();
  // Each file from the same draws: its output does not depend on the files before it.
  torch::manual_seed(o.seed);
  const auto t0 = std::chrono::steady_clock::now();
  // Each file from silence: a streaming model's state does not carry from one file to the next.
  const auto y = run_interruptible(
      [&] { return run_model(m.start(), x, o.stream, r.chunk_size, m.latency, m.ratio); },
      "while generating '" + in.string() + "'; " +
          std::to_string(static_cast<int64_t>(r.files.size()) - r.failed()) +
          " file(s) written before it are complete, listed in " + (r.folder / "report.json").string());
  g.compute_seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  if (x.size(-1) >= kDistanceScales.front()) {
    // A file exported with --channels: its first channels (the first decoded copy), or the
    // input's first ones, as export's fidelity check compares them.
    const int64_t channels = std::min(x.size(1), y.size(1));
    g.distance = rave::spectral_distance(x.narrow(1, 0, channels), y.narrow(1, 0, channels).to(torch::kFloat),
                                         kDistanceScales)
                     .item<double>();
  }
  write_audio_atomic(out, to_audio(y, static_cast<int>(m.sampling_rate)), format);
}

}  // namespace

namespace {

std::string shortest(double v) {
  std::ostringstream s;
  s << v;
  return s.str();
}

// The input value the prior method turns into `temperature`: softplus(x) / ln 2 = T.
double temperature_input(double t) { return std::log(std::expm1(t * std::log(2.0))); }

// generate --prior: the prior's frames decoded by its RAVE, one call of each, as nn~ plays
// [nn~ prior] into [nn~ decode].
GenerateReport generate_from_prior(const GenerateOptions& o, int format) {
  if (!o.inputs.empty())
    throw Error("--input goes with a model to run audio through; --prior generates from none");
  if (o.stream || o.chunk_size > 0) throw Error("--stream and --chunk_size go with --input, not --prior");
  if (!(o.seconds > 0.0 && o.seconds <= 3600.0))
    throw Error("--seconds " + shortest(o.seconds) + " is not accepted: more than 0, at most 3600");
  if (!(o.temperature > 0.0 && o.temperature <= 100.0))
    throw Error("--temperature " + shortest(o.temperature) + " is not accepted: more than 0, at most 100");
  LoadRequest request{o.model, false, o.ema_weights, o.prior, /*file_mode=*/true};
  LoadedModel m = load_model(request);
  GenerateReport r;
  r.model = m.description + " with the prior " + o.prior;
  r.sampling_rate = m.sampling_rate;
  r.channels = m.channels;
  r.ratio = m.ratio;
  r.folder = o.out_path / (o.name.empty() ? m.name + "_prior" : o.name);
  check_folder(r.folder);
  GeneratedFile g;
  g.input = o.prior;
  g.temperature = o.temperature;
  g.output = r.folder / ("prior_seed" + std::to_string(o.seed) + audio_format_extension(format));
  check_output_target(g.output, {}, o.force, "generate", "--out_path");
  check_output_target(r.folder / "report.json", {}, o.force, "generate", "--out_path");
  const auto samples = static_cast<int64_t>(std::llround(o.seconds * static_cast<double>(m.sampling_rate)));
  const int64_t frames = (samples + m.ratio - 1) / m.ratio;
  torch::manual_seed(o.seed);
  auto module = m.fresh();
  const auto t0 = std::chrono::steady_clock::now();
  const auto y = run_interruptible(
      [&] {
        c10::InferenceMode guard;
        const auto z =
            module.get_method("prior")({torch::full({1, 1, frames}, temperature_input(o.temperature))});
        return module.get_method("decode")({z.toTensor()}).toTensor();
      },
      "while generating from the prior; nothing was written");
  g.compute_seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  const auto audio = y.narrow(-1, 0, std::min(samples, y.size(-1)));
  g.seconds = static_cast<double>(audio.size(-1)) / static_cast<double>(m.sampling_rate);
  g.notes.push_back(std::to_string(frames) + " latent frames of " + std::to_string(m.prior_latent_size) +
                    " dimensions at temperature " + shortest(o.temperature) + ", seed " +
                    std::to_string(o.seed));
  write_audio_atomic(g.output, to_audio(audio, static_cast<int>(m.sampling_rate)), format);
  r.files.push_back(g);
  write_file_atomic(r.folder / "report.json", r.to_json().dump(2) + "\n");
  return r;
}

}  // namespace

GenerateReport generate(const GenerateOptions& o) {
  check_name(o.name);
  int format = 0;
  try {
    format = audio_format_from_name(o.format);
  } catch (const Error& e) {
    throw Error(std::string("--format: ") + e.what());
  }
  if (!o.prior.empty()) return generate_from_prior(o, format);
  if (o.inputs.empty()) throw Error("--input: give audio files or folders to run through the model");
  if (o.chunk_size < 0 || o.chunk_size > kMaxChunkSize) {
    throw Error("--chunk_size " + std::to_string(o.chunk_size) +
                " is not accepted: samples per block, 1 to " + std::to_string(kMaxChunkSize) +
                " and a multiple of the model's ratio");
  }
  if (o.chunk_size > 0 && !o.stream)
    throw Error("--chunk_size goes with --stream (offline runs whole files)");
  LoadRequest request;
  request.model = o.model;
  request.stream = o.stream;
  request.ema_weights = o.ema_weights;
  LoadedModel m = load_model(request);
  GenerateReport r;
  r.model = m.description;
  r.sampling_rate = m.sampling_rate;
  r.channels = m.channels;
  r.ratio = m.ratio;
  r.latency = m.latency;
  r.stream = o.stream;
  r.chunk_size = o.stream ? (o.chunk_size > 0 ? o.chunk_size : kDefaultChunk) : 0;
  if (o.stream && r.chunk_size % m.ratio != 0) {
    throw Error("--chunk_size " + std::to_string(r.chunk_size) + " is not a multiple of the model's ratio (" +
                std::to_string(m.ratio) + " samples per latent frame): use e.g. " +
                std::to_string(std::max<int64_t>(1, r.chunk_size / m.ratio) * m.ratio));
  }
  r.folder = o.out_path / (o.name.empty() ? m.name : o.name);
  check_folder(r.folder);
  std::vector<GeneratedFile> missing;
  const auto plan = plan_outputs(o.inputs, r.folder, audio_format_extension(format), missing);
  // Before any model call: nothing already there is replaced without --force.
  std::vector<fs::path> inputs;
  for (const auto& [in, out] : plan) inputs.push_back(in);
  for (const auto& [in, out] : plan) check_output_target(out, inputs, o.force, "generate", "--out_path");
  check_output_target(r.folder / "report.json", inputs, o.force, "generate", "--out_path");
  for (const auto& [in, out] : plan) {
    GeneratedFile g;
    g.input = in;
    if (o.progress != nullptr) {
      *o.progress << "generate: [" << r.files.size() + 1 << "/" << plan.size() << "] "
                  << terminal_safe(in.string()) << std::endl;
    }
    try {
      generate_file(o, m, r, in, out, format, g);
      g.output = out;
    } catch (const StopRequested&) {
      // What was written so far is described, as a finished run's report would.
      r.files.insert(r.files.end(), missing.begin(), missing.end());
      fs::create_directories(r.folder);
      write_file_atomic(r.folder / "report.json", r.to_json().dump(2) + "\n");
      throw;
    } catch (const std::exception& e) {
      g.error = first_line(error_text(e));
    }
    r.files.push_back(g);
  }
  r.files.insert(r.files.end(), missing.begin(), missing.end());
  fs::create_directories(r.folder);
  write_file_atomic(r.folder / "report.json", r.to_json().dump(2) + "\n");
  return r;
}

std::string GenerateReport::text() const {
  std::ostringstream s;
  s << "generate: " << printable(model) << "\n  " << channels << " channel(s) at " << sampling_rate << " Hz, "
    << (stream ? "streaming blocks of " + std::to_string(chunk_size) + " samples (latency " +
                     std::to_string(latency) + " samples, removed from the outputs)"
        : !files.empty() && files.front().temperature >= 0.0 ? std::string("the prior's frames, decoded")
                                                             : std::string("offline, whole files"))
    << "\n";
  s << std::fixed;
  for (const auto& f : files) {
    if (!f.error.empty()) {
      s << "  skipped " << printable(f.input.string()) << ": " << terminal_safe(f.error) << "\n";
      continue;
    }
    if (f.temperature >= 0.0) {
      s << "  " << printable(f.output.string()) << ": " << std::setprecision(2) << f.seconds
        << " s generated in " << std::setprecision(3) << f.compute_seconds << " s (realtime factor "
        << f.realtime_factor() << ")\n";
      for (const auto& n : f.notes) s << "    " << printable(n) << "\n";
      continue;
    }
    s << "  " << printable(f.output.string()) << ": " << std::setprecision(2) << f.seconds << " s in "
      << std::setprecision(3) << f.compute_seconds << " s (realtime factor " << f.realtime_factor()
      << "), spectral distance " << f.distance << "\n";
    for (const auto& n : f.notes) s << "    " << printable(n) << "\n";
  }
  s << "  report: " << printable((folder / "report.json").string()) << "\n";
  return s.str();
}

Json GenerateReport::to_json() const {
  Json list = Json::array();
  for (const auto& f : files) {
    const bool from_prior = f.temperature >= 0.0;
    Json j = {{from_prior ? "prior" : "input", f.input.string()}};
    if (!f.error.empty()) {
      j["skipped"] = f.error;
    } else {
      j.update({{"output", f.output.string()},
                {"seconds", f.seconds},
                {"compute_seconds", f.compute_seconds},
                {"realtime_factor", f.realtime_factor()},
                {"notes", f.notes}});
      if (from_prior) {
        j["temperature"] = f.temperature;
      } else {
        j["spectral_distance"] = f.distance;
      }
    }
    list.push_back(j);
  }
  return Json{{"model", model},   {"sampling_rate", sampling_rate}, {"channels", channels},
              {"stream", stream}, {"chunk_size", chunk_size},       {"latency", latency},
              {"files", list}};
}

}  // namespace rt::exporting
