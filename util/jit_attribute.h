// An integer attribute of a TorchScript module (a checkpoint's archive, an exported file), or a
// fallback where it is absent or not an integer: files from older writers and other exporters
// lack some of them.
#pragma once

#include <torch/script.h>

#include <cstdint>
#include <string>

namespace rt {

inline int64_t int_attribute(const torch::jit::Module& m, const std::string& name, int64_t fallback) {
  return m.hasattr(name) && m.attr(name).isInt() ? m.attr(name).toInt() : fallback;
}

}  // namespace rt
