// Writing TorchScript modules from C++ (no Python): LibTorch's torch::jit::Module with
// parameters, buffers and attributes registered one by one, and methods compiled from source
// with Module::define. The source is generated, one small writer per op kind of the description
// (export/torchscript/section_writer.h, rave_script.cpp); this file holds what they share.
//
// Things LibTorch's C++ frontend needs that Python's torch.jit.script does by itself:
//   - every module gets a `training` attribute (false), else eval() is a no-op and
//     is_training() answers true;
//   - submodules are called as `self.sub.forward(x)` (there is no Python resolver for
//     `self.sub(x)`);
//   - only torch.* / aten builtins and tensor methods resolve; constants are written into the
//     source (there is no `math`).
// All modules share one compilation unit; each gets its own (mangled) class type, because
// `define` adds methods to the type.
#pragma once

#include <torch/script.h>

#include <memory>
#include <string>
#include <vector>

namespace rt::exporting {

// Streaming state rows per batch slot: cached_conv's MAX_BATCH_SIZE, which bounds the batch
// nn~ / mc.nn~ may pass.
constexpr int64_t kMaxBatch = 64;

struct ScriptContext {
  explicit ScriptContext(bool streaming, int64_t int8_min_weights = -1);
  // A new module with its own class type `__torch__.rt_export.<kind>` (mangled when taken).
  torch::jit::Module new_module(const std::string& kind);

  bool streaming;
  // export --quantize int8: matrix products with at least this many weights run on int8
  // weights; -1: none.
  int64_t int8_min_weights;
  int64_t int8_layers = 0, int8_weights = 0;  // what packed_int8 packed
  std::shared_ptr<torch::jit::CompilationUnit> cu;
};

// A signal in the generated code: the variable holding it and its flow (export/graph/graph.h).
struct Signal {
  std::string var;
  int64_t channels = 0;
  int64_t hop = 1;    // audio samples per time step
  int64_t rows = 1;   // tensor batch rows per batch slot (the PQMF folds channels into the batch)
  int64_t delay = 0;  // streaming only: delay behind the offline computation, in audio samples
};

// A float literal that TorchScript reads back to the same double.
std::string num(double v);
// An integer literal.
inline std::string str(int64_t v) { return std::to_string(v); }

// Writes one method of `module`: statements, then define().
class MethodWriter {
 public:
  MethodWriter(ScriptContext& ctx, torch::jit::Module& module);

  ScriptContext& ctx() { return ctx_; }
  bool streaming() const { return ctx_.streaming; }
  // Whether a matrix product with this many weights runs on int8 weights (export --quantize).
  bool int8_for(int64_t weights) const {
    return ctx_.int8_min_weights >= 0 && weights >= ctx_.int8_min_weights;
  }
  torch::jit::Module& module() { return module_; }

  // A fresh variable name.
  std::string fresh(const std::string& hint);
  // A new variable set to `expression`, described like `like`.
  Signal assign(const Signal& like, const std::string& expression);
  // Appends a statement (one line, or several separated by '\n', at the method's indentation).
  void line(const std::string& code);
  // Registers `t` on the module under `key` with dots made underscores, as a parameter without
  // gradient (weights) or a buffer (statistics); returns "self.<name>".
  std::string tensor(const std::string& key, const torch::Tensor& t, bool is_buffer = false);
  // Registers quantized::linear_prepack of `weight` [out, in] (int8, one scale per output row,
  // symmetric) and `bias` (may be undefined) under `key`; returns "self.<name>". The packed
  // object serialises as its int8 weight and is packed again, for the host's engine (fbgemm/x86,
  // oneDNN, QNNPACK on ARM), when the file is loaded.
  std::string packed_int8(const std::string& key, const torch::Tensor& weight, const torch::Tensor& bias);
  // A zero streaming-state buffer [kMaxBatch·rows, channels, length] named after `key`.
  std::string state(const std::string& key, int64_t rows, int64_t channels, int64_t length);
  // cached_conv CachedPadding1d: prepends the last n samples of the previous call (per batch
  // row, zeros at first) to x, keeps x's last n samples for the next call, and with `crop`
  // cuts them off, which delays x by n samples at the same length. Returns the new variable.
  std::string cached_pad(const Signal& x, const std::string& key, int64_t n, bool crop);
  // Compiles "def <name>(self, <args>) -> <ret>:" with the statements written, then
  // "return <result>". Throws rt::Error with the source when TorchScript rejects it.
  void define(const std::string& name, const std::string& args, const std::string& ret,
              const std::string& result);

 private:
  ScriptContext& ctx_;
  torch::jit::Module& module_;
  std::vector<std::string> lines_;
  int counter_ = 0;
};

}  // namespace rt::exporting
