// export --format onnx: the run's model as three ONNX files (forward at --output, encode and
// decode beside it), each with the export's facts as metadata_props, read back and run once
// (export/onnx/onnx_eval.h) and put through the same fidelity check as the TorchScript file.
#pragma once

#include <filesystem>
#include <functional>
#include <string>

#include "export/rave_export.h"
#include "families/rave/rave_checkpoint.h"

namespace rt::exporting {

// (samples, &source) → [channels, samples] audio at the model's rate for the fidelity check.
using CheckAudioFn = std::function<torch::Tensor(int64_t samples, std::string* source)>;

namespace onnx {

// "dir/name.onnx" → "dir/name.<method>.onnx".
std::filesystem::path sibling(const std::filesystem::path& forward, const std::string& method);

// Writes the three files of `report` (output, onnx_encode, onnx_decode), fills the report.
void write_rave_onnx(const ExportOptions& options, RaveCheckpoint& checkpoint,
                     const CheckAudioFn& check_audio, ExportReport& report);

}  // namespace onnx
}  // namespace rt::exporting
