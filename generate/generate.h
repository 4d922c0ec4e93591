// generate: audio files through a trained RAVE model, as RAVE's `rave generate` does
// (acids-ircam/RAVE scripts/generate.py): offline (the whole file in one call) or in streaming
// blocks (--stream, --chunk_size), from a run, a checkpoint or an exported TorchScript file (ours
// or RAVE's own). A run or checkpoint is scripted in memory exactly as `export` writes it, so
// what is heard is what nn~ would play. Each output is written beside a short report: duration,
// the time it took and the realtime factor, and the model's multi-scale spectral distance
// between input and output.
#pragma once

#include <cstdint>
#include <filesystem>
#include <ostream>
#include <string>
#include <vector>

#include "util/json.h"

namespace rt::exporting {

// --chunk_size's largest value: 2^20 samples (about 22 s at 48 kHz), far above any host's block.
inline constexpr int64_t kMaxChunkSize = int64_t{1} << 20;

struct GenerateOptions {
  std::string model;  // a run directory, a checkpoint, a `latest` pointer, an exported .ts or .onnx file
  std::vector<std::filesystem::path> inputs;  // audio files or folders (searched recursively)
  std::filesystem::path out_path = "generations";
  std::string name;                  // sub-folder of out_path; "" = the run's name or the file's stem
  bool stream = false;               // block by block through the streaming caches
  int64_t chunk_size = 0;            // samples per block with --stream; 0 = 4096
  bool ema_weights = false;          // a run trained with --ema: its moving averages
  bool force = false;                // replace existing outputs
  uint64_t seed = 0;                 // the model's random draws (posterior sample, noise synthesis)
  std::string format = "wavf32";     // data/audio_io.h audio_format_from_name
  std::ostream* progress = nullptr;  // "generate: [k/n] <input>" as each file starts (apps: stderr)
};

struct GeneratedFile {
  std::filesystem::path input, output;
  double seconds = 0.0;            // the input's duration at the model's rate
  double compute_seconds = 0.0;    // the model's calls
  double distance = 0.0;           // multi-scale spectral distance, input → output
  std::vector<std::string> notes;  // "resampled 48000 → 44100 Hz"
  std::string error;               // non-empty: skipped, and why
  double realtime_factor() const { return seconds > 0.0 ? compute_seconds / seconds : 0.0; }
};

struct GenerateReport {
  std::string model;  // what was loaded, in words
  std::filesystem::path folder;
  int64_t sampling_rate = 0, channels = 0, ratio = 0, latency = 0, chunk_size = 0;
  bool stream = false;
  std::vector<GeneratedFile> files;
  int64_t failed() const;
  std::string text() const;
  Json to_json() const;
};

// Throws rt::Error (nothing written) when the model cannot be loaded, the options are out of
// range (a chunk size that is not a multiple of the model's ratio), no input is given, or an
// output (or report.json) already exists without `force`. Inputs are read as preprocess reads
// training audio: resampled to the model's rate, channels mapped (averaged or repeated), each
// said in the file's notes. A file that cannot be used (not audio, missing) is skipped with its
// reason in the report; the others are written. Outputs and the report are written atomically.
// Ctrl-C or SIGTERM during a model call throws StopRequested at once, after writing report.json
// for the files done, while the call goes on on its own thread: the caller ends the process
// (std::_Exit) rather than return through destructors under it.
GenerateReport generate(const GenerateOptions& options);

}  // namespace rt::exporting
