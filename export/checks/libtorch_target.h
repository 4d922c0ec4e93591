// Which LibTorch releases can load a TorchScript file. Two things decide it, both checked here
// against each release's own files (export/checks/releases/libtorch_releases.inc, written by
// scripts/libtorch_releases.py from the releases' wheels on PyPI):
//   - the file format version the file records against the newest the release's reader accepts
//     (caffe2/serialize/versions.h: 1.11 reads up to 9, 1.12 and later up to 10). The version
//     written is the lowest that keeps the file's meaning: 3, raised by operators whose
//     semantics changed (aten::div to 4, aten::gelu with `approximate` to 10: files from 1.12
//     calling them do not load in 1.11, nn_tilde#16);
//   - every aten operator the file's code calls, against the release's operators (its native
//     functions, ATen/RegistrationDeclarations.h, and the schemas its library registers: the
//     TorchScript builtins). A native overload must be there itself; a builtin by its name.
// Operators of other namespaces (quantized::, prim::) are not in the table and not checked;
// `export --inspect` says how many. Language features (new types, new builtins' arguments) are
// not checked either.
#pragma once

#include <torch/script.h>

#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

namespace rt::exporting {

struct LibTorchRelease {
  int major = 0, minor = 0, patch = 0;
  uint64_t reads_up_to = 0;  // newest file format version its reader accepts
  std::string name() const;  // "1.13"
};

// The releases of the table, oldest first.
const std::vector<LibTorchRelease>& libtorch_releases();

// What a TorchScript file needs from the LibTorch that loads it.
struct TorchScriptNeeds {
  uint64_t file_format_version = 0;
  std::vector<std::string> checked;    // aten operators in the table ("aten::conv1d.padding")
  std::vector<std::string> unchecked;  // the other operators the code calls (quantized::, prim::)
};

// From a module in memory (its whole compilation unit, submodules' methods included) and the
// version its bytes record.
TorchScriptNeeds torchscript_needs(const torch::jit::Module& m, uint64_t file_format_version);
// The file format version a saved TorchScript archive records.
uint64_t file_format_version_of(const std::string& bytes);

// "" when `release` loads what `needs` describes, else why not, in one sentence.
std::string why_release_cannot_load(const TorchScriptNeeds& needs, const LibTorchRelease& release);

// "1.12 … 2.15" style ranges of the releases that load it, or "none of 1.5 … 2.15".
std::string releases_that_load(const TorchScriptNeeds& needs);

// The line `export` and `export --inspect` print: "LibTorch 1.5 … 2.15 (file format version 3;
// 40 aten operators checked against each release, 4 other operators not checked)".
std::string loads_in_text(const TorchScriptNeeds& needs);

// --target_libtorch X.Y (a patch, X.Y.Z, is accepted and ignored: operators and file formats
// change with minor releases): the table's release. A release newer than the table's newest is
// checked as the newest (`*newer_than_table` set); an older or unreleased one is refused naming
// the flag, the value and the range the table has.
LibTorchRelease parse_target_libtorch(const std::string& text, bool* newer_than_table);

// The refusal line for `file` and `target` (empty when it loads): names the file, the target
// and the reason, and says which releases do load it.
std::string target_refusal(const std::string& file, const std::string& target_text,
                           const TorchScriptNeeds& needs);

}  // namespace rt::exporting
