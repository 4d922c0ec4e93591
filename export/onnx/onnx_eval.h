// Runs the ONNX files export --format onnx writes, with LibTorch's operators: the export's
// fidelity check and shape check read the file back from disk and run it here, as the
// TorchScript export loads its file with torch::jit::load. It knows the operators our graphs
// use (opset 17 semantics) and refuses any other; ONNX Runtime is the reference the tests hold
// both to (tests/export/check_onnx.py).
#pragma once

#include <torch/torch.h>

#include <filesystem>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "export/onnx/onnx_graph.h"

namespace rt::exporting::onnx {

class Runner {
 public:
  // Throws rt::Error when the file does not parse, or uses an operator this runner lacks.
  explicit Runner(const std::filesystem::path& file);
  ~Runner();
  Runner(Runner&&) noexcept;
  Runner& operator=(Runner&&) noexcept;

  // Runs the graph. Inputs with a default (an initializer of the same name) may be left out;
  // any other missing input throws rt::Error naming it. Returns every graph output by name.
  std::map<std::string, torch::Tensor> run(const std::map<std::string, torch::Tensor>& feeds) const;

  const FileFacts& facts() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// A streaming graph called block by block: keeps every state output for the next call
// (zeros at the first, sized for the first block's batch), as a host does.
class StreamRunner {
 public:
  explicit StreamRunner(const Runner& runner) : runner_(runner) {}
  // `input` is the graph's one non-state input (audio_in or latent_in); `extra` other feeds
  // (noise_scale). Returns the graph's one non-state output.
  torch::Tensor step(const std::string& input, const torch::Tensor& block,
                     const std::map<std::string, torch::Tensor>& extra = {});

 private:
  const Runner& runner_;
  std::map<std::string, torch::Tensor> state_;
};

}  // namespace rt::exporting::onnx
