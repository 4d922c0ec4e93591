// export --format onnx (export/onnx/onnx_rave.h): every variant's encode, decode and forward graphs,
// written to disk and read back, compute what the C++ model computes: offline within 1e-4 of
// the model, and streaming, block by block with the state carried as a host carries it, equal
// to the offline model shifted by the reported latency. The graphs are run here by
// export/onnx/onnx_eval.h; ONNX Runtime runs the same files in onnx_runtime_test.cpp.
#include "export/export_fixtures.h"
#include "export/onnx/onnx_eval.h"
#include "export/onnx_fixtures.h"

namespace rt::exporting::testing {
namespace {

using exporting::onnx::Runner;
using exporting::onnx::StreamRunner;

constexpr double kOnnxTolerance = 1e-4;
constexpr int64_t kOnnxBlock = 2048;
constexpr int64_t kOnnxCompared = 12;  // blocks compared after the start-up transient

const std::map<std::string, torch::Tensor> kQuiet{{"noise_scale", torch::tensor(0.0f)}};

torch::Tensor run(const std::filesystem::path& file, const std::string& input, const torch::Tensor& x) {
  Runner r(file);
  auto feeds = kQuiet;
  feeds[input] = x;
  auto out = r.run(feeds);
  EXPECT_EQ(out.size(), 1u);
  return out.begin()->second;
}

torch::Tensor run_blocks(const std::filesystem::path& file, const std::string& input, const torch::Tensor& x,
                         int64_t step) {
  Runner r(file);
  StreamRunner s(r);
  std::vector<torch::Tensor> outs;
  for (int64_t t = 0; t + step <= x.size(-1); t += step)
    outs.push_back(s.step(input, x.narrow(-1, t, step), kQuiet));
  return torch::cat(outs, -1);
}

// A stream compared after its warm-up: `skip` samples (twice the latency, whole blocks, one
// more), then kOnnxCompared blocks; `blocks` in all, the latency's worth included.
struct StreamSpan {
  int64_t skip, blocks;
};
StreamSpan stream_span(int64_t latency) {
  const int64_t skip = (2 * latency + kOnnxBlock - 1) / kOnnxBlock * kOnnxBlock + kOnnxBlock;
  return {skip, skip / kOnnxBlock + kOnnxCompared + (latency + kOnnxBlock - 1) / kOnnxBlock + 1};
}

class OnnxExport : public ::testing::TestWithParam<Variant> {};

TEST_P(OnnxExport, OfflineGraphsComputeWhatTheModelComputes) {
  rt::testing::ScratchDir dir("onnx_offline");
  auto model = tiny_model(tiny_options(GetParam()), GetParam().warm);
  silence_noise(*model);
  const auto files = write_onnx(*model, false, dir.path());
  torch::manual_seed(41);
  const int64_t ratio = model->options().compression(), frames = 24;
  auto x = torch::randn({2, model->options().channels, frames * ratio}) * 0.3;
  auto z = torch::randn({2, model->options().latent_size, frames});
  const auto latent = run(files.encode, "audio_in", x);
  EXPECT_LT(max_diff(latent, reference_latent(*model, x, false)), kOnnxTolerance) << GetParam().name;
  const auto audio = run(files.decode, "latent_in", z);
  const auto expected = reference_decode(*model, z);
  EXPECT_LT(max_diff(audio, expected), kOnnxTolerance) << GetParam().name;
  EXPECT_GT(expected.abs().max().item<double>(), 1e-3);
  EXPECT_LT(max_diff(run(files.forward, "audio_in", x),
                     reference_decode(*model, reference_latent(*model, x, false))),
            kOnnxTolerance)
      << GetParam().name;
}

TEST_P(OnnxExport, StreamingForwardInBlocksEqualsOfflineShiftedByTheLatency) {
  rt::testing::ScratchDir dir("onnx_stream");
  auto model = tiny_model(tiny_options(GetParam()), GetParam().warm);
  silence_noise(*model);
  const auto files = write_onnx(*model, true, dir.path());
  const int64_t latency = files.graphs.encode_latency + files.graphs.decode_latency;
  const auto [skip, blocks] = stream_span(latency);
  torch::manual_seed(42);
  auto x = torch::randn({2, model->options().channels, blocks * kOnnxBlock}) * 0.3;
  auto stream = run_blocks(files.forward, "audio_in", x, kOnnxBlock);
  auto offline = reference_decode(*model, reference_latent(*model, x, false));
  EXPECT_LT(max_diff(stream.narrow(-1, skip + latency, kOnnxCompared * kOnnxBlock),
                     offline.narrow(-1, skip, kOnnxCompared * kOnnxBlock)),
            kOnnxTolerance)
      << GetParam().name << ", latency " << latency;
  // The decode graph alone, on a latent, likewise.
  const int64_t ratio = files.graphs.ratio, frames = blocks * kOnnxBlock / ratio;
  auto z = torch::randn({2, model->options().latent_size, frames});
  auto decoded = run_blocks(files.decode, "latent_in", z, kOnnxBlock / ratio);
  auto expected = reference_decode(*model, z);
  const int64_t d = files.graphs.decode_latency;
  EXPECT_LT(max_diff(decoded.narrow(-1, skip + d, kOnnxCompared * kOnnxBlock),
                     expected.narrow(-1, skip, kOnnxCompared * kOnnxBlock)),
            kOnnxTolerance)
      << GetParam().name;
}

std::vector<Variant> onnx_variants() {
  auto v = all_variants();
  v.push_back({"v1 warm noise", rave::RaveVersion::kV1, 1, 0, true});
  v.push_back({"v2 noise stereo", rave::RaveVersion::kV2, 2, 4, false});
  v.push_back({"v2 causal noise", rave::RaveVersion::kV2, 1, 5, false, true});
  v.push_back({"v2 raw output", rave::RaveVersion::kV2, 1, 0, false, false, true});
  v.push_back({"v3 causal stereo", rave::RaveVersion::kV3, 2, 0, false, true});
  return v;
}

INSTANTIATE_TEST_SUITE_P(AllVersions, OnnxExport, ::testing::ValuesIn(onnx_variants()), variant_name);

// export --format onnx --quantize int8: every layer that can be on int8 weights is (min weights 0
// on the tiny models), the graphs hold int8 initializers and MatMulInteger in place of those
// convolutions, and they compute the float32 model within quantization noise: offline, and
// streaming block by block against the offline model shifted by the same latency as float32's.
// ONNX Runtime computes the same int8 files as export's runner (onnx_runtime_test.cpp).
class OnnxInt8 : public ::testing::TestWithParam<Variant> {};

// Measured on these tiny random models, every layer on int8 (7-bit weights, activations 8-bit per
// call): 27–34 dB offline, 28–31 dB streaming; a wrong weight layout or scale gives about 0.
constexpr double kInt8MinSnrDb = 20.0;

TEST_P(OnnxInt8, GraphsOnInt8WeightsComputeTheModelWithinQuantizationNoise) {
  rt::testing::ScratchDir dir("onnx_int8");
  auto model = tiny_model(tiny_options(GetParam()), GetParam().warm);
  silence_noise(*model);
  const auto files = write_onnx(*model, false, dir.path(), 0, /*int8_min_weights=*/0);
  const auto& g = files.graphs;
  EXPECT_GT(g.int8_layers, 0);
  EXPECT_EQ(g.forward.int8_weight_count(), g.int8_weights);
  const auto float_files = write_onnx(*model, false, dir.path() / "f32");
  // The int8 weights moved out of float32, none kept twice: no float "<layer>.weight" beside a
  // "<layer>.weight_int8", and float32 lost the int8 weights (it gained their scales, fewer).
  const auto listed = g.forward.initializer_names();
  const std::set<std::string> names(listed.begin(), listed.end());
  int64_t int8_initializers = 0;
  for (const auto& name : names) {
    const auto at = name.rfind(".weight_int8");
    if (at == std::string::npos) continue;
    ++int8_initializers;
    EXPECT_EQ(names.count(name.substr(0, at) + ".weight"), 0u) << name << " is also kept as float32";
  }
  EXPECT_EQ(int8_initializers, g.int8_layers);
  EXPECT_LT(g.forward.weight_count(), float_files.graphs.forward.weight_count());
  torch::manual_seed(45);
  const int64_t ratio = model->options().compression(), frames = 24;
  auto x = torch::randn({2, model->options().channels, frames * ratio}) * 0.3;
  const auto offline = reference_decode(*model, reference_latent(*model, x, false));
  const auto got = run(files.forward, "audio_in", x);
  EXPECT_GT(snr_db(got, offline), kInt8MinSnrDb) << GetParam().name;
  EXPECT_GT(max_diff(got, offline), 0.0) << "int8 graph equals float32 exactly: nothing was quantized";
  auto z = torch::randn({2, model->options().latent_size, frames});
  EXPECT_GT(snr_db(run(files.decode, "latent_in", z), reference_decode(*model, z)), kInt8MinSnrDb)
      << GetParam().name;

  const auto stream_files = write_onnx(*model, true, dir.path() / "s", 0, 0);
  EXPECT_EQ(stream_files.graphs.int8_layers, g.int8_layers);
  const auto float_stream = write_onnx(*model, true, dir.path() / "fs");
  const int64_t latency = stream_files.graphs.encode_latency + stream_files.graphs.decode_latency;
  EXPECT_EQ(latency, float_stream.graphs.encode_latency + float_stream.graphs.decode_latency);
  EXPECT_EQ(stream_files.graphs.decode_states.size(), float_stream.graphs.decode_states.size());
  const auto [skip, blocks] = stream_span(latency);
  auto xs = torch::randn({2, model->options().channels, blocks * kOnnxBlock}) * 0.3;
  auto stream = run_blocks(stream_files.forward, "audio_in", xs, kOnnxBlock);
  auto expected = reference_decode(*model, reference_latent(*model, xs, false));
  EXPECT_GT(snr_db(stream.narrow(-1, skip + latency, kOnnxCompared * kOnnxBlock),
                   expected.narrow(-1, skip, kOnnxCompared * kOnnxBlock)),
            kInt8MinSnrDb)
      << GetParam().name << ", latency " << latency;
}

INSTANTIATE_TEST_SUITE_P(Versions, OnnxInt8,
                         ::testing::Values(Variant{"v1", rave::RaveVersion::kV1, 1, 0, false},
                                           Variant{"v2 noise stereo", rave::RaveVersion::kV2, 2, 4, false},
                                           Variant{"v2 causal", rave::RaveVersion::kV2, 1, 0, false, true},
                                           Variant{"v3", rave::RaveVersion::kV3, 1, 0, false}),
                         variant_name);

TEST(OnnxExportLatency, FullSizeV2EqualsTheTorchScriptStream) {
  auto o = rave::RaveOptions::preset(rave::RaveVersion::kV2);
  o.discriminator = rave::DiscriminatorKind::kNone;
  rave::RaveModel m(o);
  exporting::onnx::RaveGraphOptions g;
  g.streaming = true;
  const auto graphs = exporting::onnx::build_rave_graphs(*m, g);
  EXPECT_EQ(graphs.ratio, 2048);
  EXPECT_EQ(graphs.encode_latency, 14336);  // as tests/export/streaming_test.cpp
  EXPECT_EQ(graphs.decode_latency, 12512);
}

TEST(OnnxExportRefusals, WhatOnnxDoesNotCarryIsRefusedByName) {
  auto o = hybrid_options();
  for (const std::string& says :
       {std::string("model.input_mode = mel"), std::string("GRU (model.gru_layers)")}) {
    rave::RaveModel m(o);
    try {
      exporting::onnx::build_rave_graphs(*m, {});
      ADD_FAILURE() << "exported: " << says;
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(says), std::string::npos) << e.what();
    }
    o.input_mode = rave::InputMode::kPqmf;  // then the GRU alone: 4 bands × 2 per frame
    o.decoder_ratios = {2};
    o.dilations = {{1, 3}};
  }
}

// AdaIN is exported as the identity it is after training; a checkpoint whose AdaIN learnt
// statistics is refused by both formats, naming the layer.
TEST(OnnxExportRefusals, AdaInWithLearntStatisticsIsRefusedByBothFormats) {
  auto model = tiny_model(tiny_options({"v3", rave::RaveVersion::kV3, 1, 0, false}));
  bool found = false;
  for (auto& b : model->named_buffers()) {
    if (b.key().size() > 8 && b.key().substr(b.key().size() - 8) == ".learn_x") {
      b.value().fill_(1);
      found = true;
      break;
    }
  }
  ASSERT_TRUE(found) << "v3 has AdaIN layers";
  for (bool onnx : {false, true}) {
    try {
      if (onnx) {
        exporting::onnx::build_rave_graphs(*model, {});
      } else {
        script_rave(*model, ScriptOptions{});
      }
      ADD_FAILURE() << (onnx ? "onnx" : "torchscript") << ": learnt AdaIN statistics were exported";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("AdaIN with learnt statistics"), std::string::npos) << e.what();
    }
  }
}

// The latents of RAVE's other scripted classes (WasserteinScriptedRAVE, SphericalScriptedRAVE,
// DiscreteScriptedRAVE): the ONNX graphs compute what the TorchScript file computes, whose
// conversions the real RAVE's goldens hold (latent_kinds_test.cpp), offline and streaming.
class OnnxLatentKinds : public ::testing::TestWithParam<rave::EncoderKind> {};

TEST_P(OnnxLatentKinds, EncodeAndDecodeEqualTheTorchScriptFile) {
  rt::testing::ScratchDir dir("onnx_kinds");
  auto model = with_trained_codebooks(tiny_model(latent_kind_options(GetParam())));
  auto ts = save_and_load(script_rave(*model, ScriptOptions{}), dir / "m.ts");
  set_noise_scale(ts, 0.0);
  const auto files = write_onnx(*model, false, dir.path());
  const int64_t ratio = model->options().compression(), frames = 12, latent = files.graphs.latent_size;
  EXPECT_EQ(latent, ts.attr("latent_size").toInt());
  torch::manual_seed(44);
  auto x = torch::randn({2, 1, frames * ratio}) * 0.3;
  const auto encoded = call(ts, "encode", x);
  EXPECT_LT(max_diff(run(files.encode, "audio_in", x), encoded), 1e-5) << enum_name(GetParam());
  // decode's input as a host gives it: angles in [−1, 1], code indices, or a latent.
  auto z = GetParam() == rave::EncoderKind::kDiscrete
               ? torch::randint(0, 8, {2, latent, frames}).to(torch::kFloat)
           : GetParam() == rave::EncoderKind::kSpherical ? torch::rand({2, latent, frames}) * 2 - 1
                                                         : torch::randn({2, latent, frames});
  const auto decoded = call(ts, "decode", z);
  EXPECT_LT(max_diff(run(files.decode, "latent_in", z), decoded), 1e-5) << enum_name(GetParam());
  EXPECT_GT(decoded.abs().max().item<double>(), 1e-3);
  // Streaming forward: the offline file's forward, shifted by the latency.
  const auto stream_files = write_onnx(*model, true, dir.path());
  const int64_t latency = stream_files.graphs.encode_latency + stream_files.graphs.decode_latency;
  const int64_t skip = (2 * latency + kOnnxBlock - 1) / kOnnxBlock * kOnnxBlock + kOnnxBlock,
                compared = 6 * kOnnxBlock;
  auto xs = torch::randn(
                {1, 1, skip + compared + (latency + kOnnxBlock - 1) / kOnnxBlock * kOnnxBlock + kOnnxBlock}) *
            0.3;
  auto stream = run_blocks(stream_files.forward, "audio_in", xs, kOnnxBlock);
  auto offline = call(ts, "forward", xs);
  EXPECT_LT(max_diff(stream.narrow(-1, skip + latency, compared), offline.narrow(-1, skip, compared)), 1e-4)
      << enum_name(GetParam());
}

INSTANTIATE_TEST_SUITE_P(Kinds, OnnxLatentKinds,
                         ::testing::Values(rave::EncoderKind::kWasserstein, rave::EncoderKind::kSpherical,
                                           rave::EncoderKind::kDiscrete),
                         [](const auto& info) { return std::string(enum_name(info.param)); });

TEST(OnnxNoise, NoiseScaleOneDrawsAndZeroSilences) {
  rt::testing::ScratchDir dir("onnx_noise");
  auto model = tiny_model(tiny_options({"v2 noise", rave::RaveVersion::kV2, 1, 4, false}));
  const auto files = write_onnx(*model, false, dir.path());
  torch::manual_seed(43);
  auto z = torch::randn({1, model->options().latent_size, 16});
  Runner r(files.decode);
  auto loud = r.run({{"latent_in", z}}).begin()->second;  // noise_scale left at its default, 1
  auto again = r.run({{"latent_in", z}}).begin()->second;
  auto quiet = r.run({{"latent_in", z}, {"noise_scale", torch::tensor(0.0f)}}).begin()->second;
  EXPECT_TRUE(torch::isfinite(loud).all().item<bool>());
  EXPECT_GT(max_diff(loud, again), 1e-4) << "two calls drew the same noise";
  EXPECT_GT(max_diff(loud, quiet), 1e-4);
}

}  // namespace
}  // namespace rt::exporting::testing
