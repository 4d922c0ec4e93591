// Module paths for per-module profiler spans (with profiling.with_modules,
// each module's forward is a span named by its path, written as a python_function module event, e.g.
// "encoder.encoder.net.3"). LibTorch modules do not know their path, so modules that open
// spans derive from TracedModule and receive it once the tree is built; the span names are
// then precomputed strings and a disabled span costs one atomic load (op_tracer.h
// rt::prof::module_spans_enabled).
#pragma once

#include <torch/torch.h>

#include <string>

namespace rt::models {

class TracedModule {
 public:
  virtual ~TracedModule() = default;
  // The path as named_modules() spells it from the root given to assign_module_paths;
  // "" until assigned.
  const std::string& module_path() const { return module_path_; }
  // Overridden by modules that derive span names for their children.
  virtual void set_module_path(std::string path) { module_path_ = std::move(path); }

 private:
  std::string module_path_;
};

// Gives every TracedModule strictly below `root` its path ("<prefix>.<name>…", or the bare
// named_modules() key when prefix is empty). Call at the end of the root's constructor
// (named_modules without the root itself works before a shared_ptr owns it) and again if
// submodules are replaced.
void assign_module_paths(torch::nn::Module& root, const std::string& prefix = "");

}  // namespace rt::models
