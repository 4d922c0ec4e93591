// An exported file as `generate`, `export --inspect` and `export --benchmark` check it before
// loading (export/checks/file_facts.h verify_export_file): the bytes as an ONNX model (our protobuf
// subset, then the CRC-32 our exporter records) and as torch's zip archive (every entry against
// its CRC-32). Either is accepted or refused with rt::Error naming the file.
#include <cstdint>

#include "export/onnx/onnx_graph.h"
#include "fuzz_support.h"
#include "onnx_model.pb.h"
#include "training/zip_integrity.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const auto onnx = rt::fuzz::scratch_file("fuzz.onnx", data, size);
  rt::fuzz::expect_accepted_or_refused([&] { (void)rt::exporting::onnx::parse_model(onnx); });
  const auto ts = rt::fuzz::scratch_file("fuzz.ts", data, size);
  rt::ZipRole role;
  role.noun = "exported file";
  rt::fuzz::expect_accepted_or_refused([&] { (void)rt::verify_zip_entries(ts, role); });
  return 0;
}
