// What an exported file says about itself, for hosts and for `export --inspect`: the exporter
// records, as TorchScript attributes beside nn~'s (sr, n_channels, latent sizes, streaming,
// latencies), the LibTorch it was written with, the checkpoint and its training step, the
// run's config, the block sizes a host may use, the weight storage and the fidelity check's
// figures. `inspect_export` reads them back from any TorchScript file, ours or RAVE's own
// (which records fewer: what is absent is said to be).
#pragma once

#include <torch/script.h>

#include <cstdint>
#include <filesystem>
#include <string>

namespace rt::exporting {

// Attribute names (strings unless said).
inline constexpr const char* kFactExportedWith = "rt_exported_with";    // "rt export, LibTorch 1.13.1"
inline constexpr const char* kFactCheckpoint = "rt_checkpoint";         // the checkpoint's path
inline constexpr const char* kFactStep = "rt_checkpoint_step";          // int
inline constexpr const char* kFactConfig = "rt_config";                 // the run's config (TOML)
inline constexpr const char* kFactBlockMultiple = "rt_block_multiple";  // int: block sizes are its multiples
inline constexpr const char* kFactQuantize = "rt_quantize";             // none | int8
inline constexpr const char* kFactCheck = "rt_fidelity_check";          // the check's line, or why none
inline constexpr const char* kFactTargetLibTorch =
    "rt_target_libtorch";  // --target_libtorch it was checked for

struct ExportFacts {
  std::string checkpoint, config_toml, quantize, check;
  std::string target_libtorch;  // empty: no --target_libtorch given
  int64_t step = 0, block_multiple = 1;
};

// "rt export, LibTorch <major>.<minor>.<patch>" for the LibTorch this program is built with.
std::string exported_with_text();

// Registers the facts on `m` (before it is saved); `set_check` updates the check's line of a
// module that has them.
void record_export_facts(torch::jit::Module& m, const ExportFacts& facts);
void set_check_fact(torch::jit::Module& m, const std::string& check);

// Whether an exported file is whole, before anything loads it (`export --inspect`, `generate`,
// `export --benchmark`): a TorchScript file is torch's zip archive, whose writer records each
// entry's CRC-32 (code, constants and every weight tensor) and whose reader never compares them,
// so every entry is checked here (training/zip_integrity.h); an ONNX file of ours records its own
// CRC-32 (export/onnx/onnx_graph.h kMetaCrc32). Returns the line --inspect prints; throws rt::Error
// naming the file, and saying to export it again, when a byte changed. A file that is no zip
// archive and no ONNX model is not checked here: the loader that reads it next says what it is.
std::string verify_export_file(const std::filesystem::path& file);
// Whether the file starts as a zip archive does (torch's checkpoints and TorchScript files).
bool starts_like_zip(const std::filesystem::path& file);
// Throws rt::Error naming `flag`, `file` and the step when `module` (`file`, loaded) is a training
// checkpoint (export --inspect and --benchmark read exported files; a checkpoint is exported
// first).
void refuse_training_checkpoint(const torch::jit::Module& module, const std::filesystem::path& file,
                                const std::string& flag);

// `export --inspect FILE`: the file's TorchScript format version and the LibTorch releases that
// load it (export/checks/libtorch_target.h), its nn~ methods with their channels and ratios, and every
// recorded fact. With `target_libtorch` ("1.13"), `*refusal` receives the line refusing the file
// when that release cannot load it (empty when it can). Throws rt::Error naming the file when it is no
// TorchScript file this LibTorch loads.
std::string inspect_export(const std::filesystem::path& file, const std::string& target_libtorch = "",
                           std::string* refusal = nullptr);

}  // namespace rt::exporting
