// Writes the seed corpora of the fuzz targets (tests/fuzz/corpus/<target>/) with our own
// encoders, so each seed is a valid input of today's format: small audio and neural records,
// both metadata.yaml flavours, a checkpoint holding only its meta block, the tiny configs, and
// a small exported file of each kind (an ONNX graph with its CRC-32, a TorchScript archive).
//   make_seeds REPO_ROOT
#include <torch/script.h>

#include <cstdint>
#include <filesystem>
#include <iostream>
#include <vector>

#include "data/audio_example.h"
#include "data/db_metadata.h"
#include "data/neural/neural_record.h"
#include "export/onnx/onnx_graph.h"
#include "training/checkpoint.h"
#include "util/atomic_file.h"

namespace fs = std::filesystem;

int main(int argc, char** argv) {
  if (argc != 2) {
    std::cerr << "usage: make_seeds REPO_ROOT\n";
    return 2;
  }
  const fs::path corpus = fs::path(argv[1]) / "tests" / "fuzz" / "corpus";
  auto dir = [&](const char* target) {
    fs::create_directories(corpus / target);
    return corpus / target;
  };

  std::vector<int16_t> samples(2 * 64);
  for (size_t i = 0; i < samples.size(); ++i) samples[i] = static_cast<int16_t>((i * 977) % 65536 - 32768);
  rt::write_file_atomic(dir("fuzz_audio_record") / "mono_64",
                        rt::encode_waveform(samples.data(), 1, 64, 44100));
  rt::write_file_atomic(dir("fuzz_audio_record") / "stereo_64",
                        rt::encode_waveform(samples.data(), 2, 64, 16000));

  rt::neural::NeuralRecord record;
  record.spikes = torch::arange(24, torch::kFloat32).remainder(3).reshape({8, 3});
  record.behavior = torch::linspace(-1, 1, 16).reshape({8, 2});
  record.group = "monkey_a/reach";
  record.bin_ms = 5.0;
  record.source = "seed.h5";
  record.split = "train";
  record.trial = 3;
  rt::write_file_atomic(dir("fuzz_neural_record") / "raw_counts", rt::neural::encode_neural_record(record));
  record.smoothing_sigma_ms = 40.0;
  record.bin_ms = 20.0;
  rt::write_file_atomic(dir("fuzz_neural_record") / "smoothed", rt::neural::encode_neural_record(record));

  const fs::path scratch = fs::temp_directory_path() / "rt_make_seeds";
  fs::create_directories(scratch);
  rt::write_db_metadata(scratch, rt::DbMetadata{false, 2, 12.5, 44100});
  fs::copy_file(scratch / "metadata.yaml", dir("fuzz_db_metadata") / "audio",
                fs::copy_options::overwrite_existing);
  rt::neural::write_neural_metadata(scratch, 12, 40.0,
                                    {{"monkey_a/reach", 3, 2, 12, 20.0}, {"monkey_b/reach", 5, 2, 4, 10.0}});
  fs::copy_file(scratch / "metadata.yaml", dir("fuzz_db_metadata") / "neural",
                fs::copy_options::overwrite_existing);
  fs::remove_all(scratch);

  rt::CheckpointMeta meta;
  meta.family = "rave";
  meta.signature = "model.family = rave\nmodel.capacity = 4";
  meta.config_toml = "[model]\nfamily = \"rave\"\n";
  meta.step = 20;
  meta.best = 0.25;
  meta.has_best = true;
  rt::save_checkpoint(dir("fuzz_checkpoint") / "meta_only.ckpt", meta,
                      [](torch::serialize::OutputArchive& a) { a.write("tiny", torch::ones({2})); });

  // Exported files: a one-node ONNX graph as the exporter writes it, and a TorchScript archive.
  rt::exporting::onnx::Graph g("seed");
  const std::string x = g.input({"audio_in", {1, 1, std::string("time")}});
  const std::string w = g.initializer("scale", torch::full({1}, 0.5f));
  g.output(g.node("Mul", {x, w}), {"audio_out", {1, 1, std::string("time")}});
  g.save(dir("fuzz_export_file") / "mul.onnx", {{"rt_method", "forward"}}, "seed");
  torch::jit::Module m("seed");
  m.register_parameter("scale", torch::full({4}, 0.5f), false);
  m.define("def forward(self, x):\n  return x * self.scale\n");
  m.save((dir("fuzz_export_file") / "scale.ts").string());

  for (const char* name : {"tiny_rave", "tiny_ssm", "v2"}) {
    fs::copy_file(fs::path(argv[1]) / "configs" / (std::string(name) + ".toml"), dir("fuzz_config") / name,
                  fs::copy_options::overwrite_existing);
  }
  std::cout << "seeds written under " << corpus << "\n";
  return 0;
}
