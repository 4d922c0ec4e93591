// ONNX Runtime, the runtime ONNX hosts embed, runs every exported configuration
// (tests/export/check_onnx.py, in the venv scripts/setup.sh makes from
// tests/export/onnx_requirements.txt): the ONNX checker's full check passes on every file; the
// offline graphs equal the C++ model; the streaming graphs, called block by block with their
// state fed back, equal the offline model shifted by the latency; noise_scale 1 draws noise.
// Skipped when the venv is missing, except under CI, where it must be there.
#include <cstdlib>
#include <fstream>

#include "export/export_fixtures.h"
#include "export/onnx_fixtures.h"
#include "util/json.h"

namespace rt::exporting::testing {
namespace {

namespace fs = std::filesystem;

// A float32 C-order .npy file (format version 1.0), what numpy.load reads.
void write_npy(const fs::path& file, const torch::Tensor& t) {
  const auto c = t.detach().to(torch::kFloat).contiguous();
  std::string shape = "(";
  for (auto d : c.sizes()) shape += std::to_string(d) + ", ";
  shape += ")";
  std::string header = "{'descr': '<f4', 'fortran_order': False, 'shape': " + shape + ", }";
  const size_t unpadded = 10 + header.size() + 1;
  header += std::string((64 - unpadded % 64) % 64, ' ') + "\n";
  std::ofstream out(file, std::ios::binary);
  out.write("\x93NUMPY\x01\x00", 8);
  const uint16_t len = static_cast<uint16_t>(header.size());
  out.write(reinterpret_cast<const char*>(&len), 2);
  out << header;
  out.write(static_cast<const char*>(c.data_ptr()), static_cast<std::streamsize>(c.numel() * 4));
}

void write_case(const Variant& v, const fs::path& dir) {
  fs::create_directories(dir);
  auto model = tiny_model(tiny_options(v), v.warm);
  const bool noise = v.noise_bands > 0 || v.warm;
  // The files keep the model's noise (checked at noise_scale 1); the reference runs without it.
  const auto offline = write_onnx(*model, false, dir);
  fs::rename(offline.encode, dir / "offline.encode.onnx");
  fs::rename(offline.decode, dir / "offline.decode.onnx");
  fs::rename(offline.forward, dir / "offline.forward.onnx");
  const auto streaming = write_onnx(*model, true, dir);
  fs::rename(streaming.encode, dir / "streaming.encode.onnx");
  fs::rename(streaming.decode, dir / "streaming.decode.onnx");
  fs::rename(streaming.forward, dir / "streaming.forward.onnx");
  silence_noise(*model);
  const auto& o = model->options();
  const int64_t ratio = offline.graphs.ratio, block = 2048;
  torch::manual_seed(51);
  auto x = torch::randn({2, o.channels, 16 * ratio}) * 0.3;
  auto z = torch::randn({2, o.latent_size, 16});
  write_npy(dir / "x.npy", x);
  write_npy(dir / "z.npy", z);
  write_npy(dir / "encode.npy", reference_latent(*model, x, false));
  write_npy(dir / "decode.npy", reference_decode(*model, z));
  write_npy(dir / "forward.npy", reference_decode(*model, reference_latent(*model, x, false)));
  const int64_t latency = streaming.graphs.encode_latency + streaming.graphs.decode_latency;
  const int64_t skip = (2 * latency + block - 1) / block * block + block, compared = 8 * block;
  const int64_t samples = skip + compared + (latency + block - 1) / block * block + block;
  auto xs = torch::randn({2, o.channels, samples}) * 0.3;
  auto zs = torch::randn({2, o.latent_size, samples / ratio});
  write_npy(dir / "x_stream.npy", xs);
  write_npy(dir / "z_stream.npy", zs);
  write_npy(dir / "forward_stream.npy", reference_decode(*model, reference_latent(*model, xs, false)));
  write_npy(dir / "decode_stream.npy", reference_decode(*model, zs));
  Json m{{"variant", v.name},
         {"tolerance", 1e-4},
         {"noise", noise},
         {"ratio", ratio},
         {"block", block},
         {"skip", skip},
         {"compared", compared},
         {"forward_latency", latency},
         {"decode_latency", streaming.graphs.decode_latency}};
  std::ofstream(dir / "manifest.json") << m.dump(2);
}

TEST(OnnxRuntime, RunsEveryExportOfflineAndStreamingAsTheModelComputes) {
  const fs::path python = fs::path(RT_SOURCE_DIR) / ".venv-onnx" / "bin" / "python";
  if (!fs::exists(python)) {
    const char* ci = std::getenv("CI");
    if (ci != nullptr && std::string(ci) == "true")
      FAIL() << python << " is missing: scripts/setup.sh makes it";
    GTEST_SKIP() << python
                 << " is missing (scripts/setup.sh makes it from tests/export/onnx_requirements.txt)";
  }
  rt::testing::ScratchDir dir("onnx_runtime");
  std::vector<Variant> variants = all_variants();
  variants.push_back({"v1 warm noise", rave::RaveVersion::kV1, 1, 0, true});
  variants.push_back({"v2 noise stereo", rave::RaveVersion::kV2, 2, 4, false});
  variants.push_back({"v2 causal noise", rave::RaveVersion::kV2, 1, 5, false, true});
  variants.push_back({"v2 raw output", rave::RaveVersion::kV2, 1, 0, false, false, true});
  variants.push_back({"v3 causal stereo", rave::RaveVersion::kV3, 2, 0, false, true});
  for (const auto& v : variants) {
    std::string name = v.name;
    for (auto& ch : name) ch = std::isalnum(static_cast<unsigned char>(ch)) ? ch : '_';
    write_case(v, dir.path() / name);
  }
  const auto r = rt::testing::run_command(python.string() + " " +
                                          rt::testing::source_path("tests/export/check_onnx.py").string() +
                                          " " + dir.path().string() + " 2>&1");
  std::cout << r.output;
  EXPECT_EQ(r.exit_code, 0) << r.output;
  size_t passed = 0;
  for (size_t at = r.output.find(": ok ("); at != std::string::npos; at = r.output.find(": ok (", at + 1))
    ++passed;
  EXPECT_EQ(passed, variants.size()) << r.output;
}

}  // namespace
}  // namespace rt::exporting::testing
