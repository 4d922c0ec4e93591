// ONNX Runtime, the runtime ONNX hosts embed, runs every exported configuration
// (tests/export/check_onnx.py, in the venv scripts/setup.sh makes from
// tests/export/onnx_requirements.txt): the ONNX checker's full check passes on every file; the
// offline graphs equal the C++ model; the streaming graphs, called block by block with their
// state fed back, equal the offline model shifted by the latency; noise_scale 1 draws noise.
// Files on int8 weights (--quantize int8) equal what export's own runner computes from them.
// Skipped when the venv is missing, except under CI, where it must be there.
#include <cstdlib>
#include <fstream>
#include <functional>

#include "export/export_fixtures.h"
#include "export/onnx/onnx_eval.h"
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

// int8 files against export's runner, as a share of the output's largest magnitude: the integer
// products are exact on both sides; what may differ is an activation that lands within float
// rounding of a quantization step after the float32 operators before it (one step of 255 in
// one input of one product), carried on through the layers after it. Measured: 2e-7 to 1.6e-3
// (v3 causal, streaming forward); the quantization itself costs about 3 % (onnx_export_test.cpp).
constexpr double kInt8Tolerance = 1e-2;

// One case: the files of `model` offline and streaming, the inputs, and what the model computes
// (`reference`: method, input → output at noise_scale 0).
using Reference = std::function<torch::Tensor(const std::string& method, const torch::Tensor& x)>;

// int8_min_weights >= 0: the files on int8 weights (export --quantize int8), whose references are
// what export's own runner (export/onnx/onnx_eval.h) computes from the same files, streaming block
// by block included: ONNX Runtime must compute the same integer products.
void write_files(rave::RaveModelImpl& model, const fs::path& dir, bool noise, Reference reference,
                 int64_t int8_min_weights = -1) {
  fs::create_directories(dir);
  // The files keep the model's noise (checked at noise_scale 1); the reference runs without it.
  const auto offline = write_onnx(model, false, dir, 0, int8_min_weights);
  fs::rename(offline.encode, dir / "offline.encode.onnx");
  fs::rename(offline.decode, dir / "offline.decode.onnx");
  fs::rename(offline.forward, dir / "offline.forward.onnx");
  const auto streaming = write_onnx(model, true, dir, 0, int8_min_weights);
  fs::rename(streaming.encode, dir / "streaming.encode.onnx");
  fs::rename(streaming.decode, dir / "streaming.decode.onnx");
  fs::rename(streaming.forward, dir / "streaming.forward.onnx");
  const bool int8 = int8_min_weights >= 0;
  const std::map<std::string, torch::Tensor> quiet{{"noise_scale", torch::tensor(0.0f)}};
  auto input_of = [](const std::string& method) { return method == "decode" ? "latent_in" : "audio_in"; };
  if (int8) {
    reference = [&](const std::string& method, const torch::Tensor& x) {
      auto feeds = quiet;
      feeds[input_of(method)] = x;
      return exporting::onnx::Runner(dir / ("offline." + method + ".onnx")).run(feeds).begin()->second;
    };
  }
  // Streaming: the model's offline output (shifted by the latency when compared), or for int8 the
  // runner's own block-by-block output of the streaming file.
  auto streamed = [&](const std::string& method, const torch::Tensor& x, int64_t step) {
    if (!int8) return reference(method, x);
    const exporting::onnx::Runner runner(dir / ("streaming." + method + ".onnx"));
    exporting::onnx::StreamRunner stream(runner);
    std::vector<torch::Tensor> outs;
    for (int64_t t = 0; t + step <= x.size(-1); t += step)
      outs.push_back(stream.step(input_of(method), x.narrow(-1, t, step), quiet));
    return torch::cat(outs, -1);
  };
  const auto& o = model.options();
  const int64_t ratio = offline.graphs.ratio, block = 2048, latent = offline.graphs.latent_size;
  torch::manual_seed(51);
  // decode's input as a host gives it: code indices for a discrete latent, angles in [−1, 1]
  // for a spherical one, a latent otherwise.
  auto latent_input = [&](int64_t frames) {
    if (o.encoder == rave::EncoderKind::kDiscrete)
      return torch::randint(0, o.codebook_size, {2, latent, frames}).to(torch::kFloat);
    if (o.encoder == rave::EncoderKind::kSpherical) return torch::rand({2, latent, frames}) * 2 - 1;
    return torch::randn({2, latent, frames});
  };
  auto x = torch::randn({2, o.channels, 16 * ratio}) * 0.3;
  auto z = latent_input(16);
  write_npy(dir / "x.npy", x);
  write_npy(dir / "z.npy", z);
  write_npy(dir / "encode.npy", reference("encode", x));
  write_npy(dir / "decode.npy", reference("decode", z));
  write_npy(dir / "forward.npy", reference("forward", x));
  const int64_t latency = streaming.graphs.encode_latency + streaming.graphs.decode_latency;
  const int64_t skip = (2 * latency + block - 1) / block * block + block, compared = 8 * block;
  const int64_t samples = skip + compared + (latency + block - 1) / block * block + block;
  auto xs = torch::randn({2, o.channels, samples}) * 0.3;
  auto zs = latent_input(samples / ratio);
  write_npy(dir / "x_stream.npy", xs);
  write_npy(dir / "z_stream.npy", zs);
  write_npy(dir / "forward_stream.npy", streamed("forward", xs, block));
  write_npy(dir / "decode_stream.npy", streamed("decode", zs, block / ratio));
  Json m{{"variant", dir.filename().string()},
         {"tolerance", int8 ? kInt8Tolerance : 1e-4},
         {"streamed_references", int8},
         {"relative_tolerance", int8},
         {"noise", noise},
         {"ratio", ratio},
         {"block", block},
         {"skip", skip},
         {"compared", compared},
         {"forward_latency", latency},
         {"decode_latency", streaming.graphs.decode_latency}};
  std::ofstream(dir / "manifest.json") << m.dump(2);
}

// A variational model: the references are the C++ model's own (its noise silenced).
void write_case(const Variant& v, const fs::path& dir) {
  auto model = tiny_model(tiny_options(v), v.warm);
  auto silent = tiny_model(tiny_options(v), v.warm);
  silence_noise(*silent);
  write_files(*model, dir, v.noise_bands > 0 || v.warm,
              [&](const std::string& method, const torch::Tensor& x) {
                if (method == "encode") return reference_latent(*silent, x, false);
                if (method == "decode") return reference_decode(*silent, x);
                return reference_decode(*silent, reference_latent(*silent, x, false));
              });
}

// Another latent kind: the references are the TorchScript file's (noise_scale 0), whose latent
// conversions the real RAVE's goldens hold (latent_kinds_test.cpp).
void write_kind_case(rave::EncoderKind kind, const fs::path& dir) {
  auto model = with_trained_codebooks(tiny_model(latent_kind_options(kind)));
  fs::create_directories(dir);
  auto ts = save_and_load(script_rave(*model, ScriptOptions{}), dir / "reference.ts");
  set_noise_scale(ts, 0.0);
  write_files(*model, dir, model->options().noise_augmentation > 0,
              [&](const std::string& method, const torch::Tensor& x) { return call(ts, method, x); });
  fs::remove(dir / "reference.ts");
}

TEST(OnnxRuntime, RunsEveryExportOfflineAndStreamingAsTheModelComputes) {
  // requirements.txt is written last by scripts/onnx_venv.sh: a venv whose install failed has
  // python but not it.
  const fs::path venv = fs::path(RT_SOURCE_DIR) / ".venv-onnx", python = venv / "bin" / "python";
  if (!fs::exists(venv / "requirements.txt")) {
    const char* ci = std::getenv("CI");
    if (ci != nullptr && std::string(ci) == "true")
      FAIL() << venv << " is missing or incomplete: scripts/setup.sh makes it";
    GTEST_SKIP() << venv << " is missing or incomplete (scripts/setup.sh makes it from "
                 << "tests/export/onnx_requirements.txt)";
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
  for (auto kind :
       {rave::EncoderKind::kWasserstein, rave::EncoderKind::kSpherical, rave::EncoderKind::kDiscrete})
    write_kind_case(kind, dir.path() / ("latent_" + std::string(enum_name(kind))));
  const std::vector<Variant> int8_variants{{"int8 v1", rave::RaveVersion::kV1, 1, 0, false},
                                           {"int8 v2 noise", rave::RaveVersion::kV2, 1, 4, false},
                                           {"int8 v3 causal", rave::RaveVersion::kV3, 1, 0, false, true}};
  for (const auto& v : int8_variants) {
    auto model = tiny_model(tiny_options(v), v.warm);
    std::string name = v.name;
    for (auto& ch : name) ch = std::isalnum(static_cast<unsigned char>(ch)) ? ch : '_';
    write_files(*model, dir.path() / name, v.noise_bands > 0, Reference(), /*int8_min_weights=*/0);
  }
  const auto r = rt::testing::run_command(python.string() + " " +
                                          rt::testing::source_path("tests/export/check_onnx.py").string() +
                                          " " + dir.path().string() + " 2>&1");
  EXPECT_EQ(r.exit_code, 0) << r.output;
  size_t passed = 0;
  for (size_t at = r.output.find(": ok ("); at != std::string::npos; at = r.output.find(": ok (", at + 1))
    ++passed;
  EXPECT_EQ(passed, variants.size() + 3 + int8_variants.size()) << r.output;
}

}  // namespace
}  // namespace rt::exporting::testing
