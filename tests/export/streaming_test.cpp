// Streaming export (cached convolutions): block-by-block processing in 2048-sample blocks, as
// nn~ calls it, equals the C++ model's offline output shifted by the reported latency, for every
// block edge; the latency found by search equals the one reported; and the full-size v2
// latencies are the ones RAVE's cached_conv streaming model measures.
#include "export/export_fixtures.h"

namespace rt::exporting::testing {
namespace {

constexpr double kStreamingTolerance = 1e-4;
constexpr int64_t kBlock = 2048;   // audio samples per call
constexpr int64_t kCompared = 24;  // blocks compared after the start-up transient

// Calls `method` on consecutive slices of `x` of `step` steps (its last dim) and concatenates.
torch::Tensor run_blocks(torch::jit::Module& m, const std::string& method, const torch::Tensor& x,
                         int64_t step) {
  std::vector<torch::Tensor> outs;
  c10::InferenceMode guard;
  for (int64_t t = 0; t + step <= x.size(-1); t += step)
    outs.push_back(call(m, method, x.narrow(-1, t, step)));
  return torch::cat(outs, -1);
}

// max |stream[skip + shift …] − offline[skip …]| over `length` steps.
double shifted_diff(const torch::Tensor& stream, const torch::Tensor& offline, int64_t shift, int64_t skip,
                    int64_t length) {
  return max_diff(stream.narrow(-1, skip + shift, length), offline.narrow(-1, skip, length));
}

// The shift in [0, max_shift] at which the stream best matches the offline output.
int64_t measured_latency(const torch::Tensor& stream, const torch::Tensor& offline, int64_t skip,
                         int64_t length, int64_t max_shift) {
  int64_t best = -1;
  double best_diff = std::numeric_limits<double>::infinity();
  for (int64_t s = 0; s <= max_shift; ++s) {
    const double d = shifted_diff(stream, offline, s, skip, length);
    if (d < best_diff) best_diff = d, best = s;
  }
  return best;
}

struct Streams {
  rave::RaveOptions options;
  rave::RaveModel model{nullptr};
  ScriptInfo info;
  torch::jit::Module ts;
  int64_t blocks = 0, skip_blocks = 0;
};

Streams make_streams(const Variant& v, const std::filesystem::path& file) {
  Streams s;
  s.options = tiny_options(v);
  s.model = tiny_model(s.options, v.warm);
  // The offline reference without its noise, as the stream runs at noise_scale 0.
  if (auto* g = dynamic_cast<rave::GeneratorV2Impl*>(s.model->decoder.get());
      g != nullptr && g->noise_module) {
    g->noise_module->noise_scale = 0.0;
  }
  ScriptOptions opts;
  opts.streaming = true;
  s.ts = save_and_load(script_rave(*s.model, opts, &s.info), file);
  set_noise_scale(s.ts, 0.0);
  // A stream starts from zero state where the offline model zero-pads every layer: outputs
  // differ until the receptive field has passed (about twice the latency), then agree.
  s.skip_blocks = (2 * s.info.forward_latency() + kBlock - 1) / kBlock + 1;
  s.blocks = s.skip_blocks + kCompared + (s.info.forward_latency() + kBlock - 1) / kBlock + 1;
  return s;
}

class Streaming : public ::testing::TestWithParam<Variant> {};

TEST_P(Streaming, DecodeInBlocksEqualsOfflineDecodeShiftedByTheLatency) {
  rt::testing::ScratchDir dir("export_stream");
  auto s = make_streams(GetParam(), dir / "m.ts");
  const int64_t ratio = s.info.ratio, frames = s.blocks * kBlock / ratio;
  torch::manual_seed(21);
  auto z = torch::randn({2, s.options.latent_size, frames});  // two batch slots, two signals
  auto stream = run_blocks(s.ts, "decode", z, kBlock / ratio);
  auto offline = reference_decode(*s.model, z);
  const int64_t latency = s.info.decode_latency, skip = s.skip_blocks * kBlock, length = kCompared * kBlock;
  EXPECT_LT(shifted_diff(stream, offline, latency, skip, length), kStreamingTolerance) << GetParam().name;
  EXPECT_EQ(measured_latency(stream, offline, skip, length, latency + ratio), latency) << GetParam().name;
  EXPECT_GT(offline.abs().max().item<double>(), 1e-3);
}

TEST_P(Streaming, EncodeInBlocksEqualsOfflineEncodeShiftedByWholeFrames) {
  rt::testing::ScratchDir dir("export_stream");
  auto s = make_streams(GetParam(), dir / "m.ts");
  const int64_t ratio = s.info.ratio;
  ASSERT_EQ(s.info.encode_latency % ratio, 0);
  torch::manual_seed(22);
  auto x = torch::randn({2, s.options.channels, s.blocks * kBlock}) * 0.3;
  auto stream = run_blocks(s.ts, "encode", x, kBlock);
  auto offline = reference_latent(*s.model, x, false);
  const int64_t shift = s.info.encode_latency / ratio, skip = s.skip_blocks * kBlock / ratio;
  const int64_t length = kCompared * kBlock / ratio;
  EXPECT_LT(shifted_diff(stream, offline, shift, skip, length), kStreamingTolerance) << GetParam().name;
  EXPECT_EQ(measured_latency(stream, offline, skip, length, shift + 4), shift) << GetParam().name;
}

TEST_P(Streaming, ForwardInBlocksEqualsOfflineForwardShiftedByTheLatency) {
  rt::testing::ScratchDir dir("export_stream");
  auto s = make_streams(GetParam(), dir / "m.ts");
  torch::manual_seed(23);
  auto x = torch::randn({2, s.options.channels, s.blocks * kBlock}) * 0.3;
  auto stream = run_blocks(s.ts, "forward", x, kBlock);
  auto offline = reference_decode(*s.model, reference_latent(*s.model, x, false));
  const int64_t latency = s.info.forward_latency(), skip = s.skip_blocks * kBlock,
                length = kCompared * kBlock;
  // Every sample is compared, those at block edges included: no click at a block boundary.
  EXPECT_LT(shifted_diff(stream, offline, latency, skip, length), kStreamingTolerance) << GetParam().name;
  EXPECT_EQ(measured_latency(stream, offline, skip, length, latency + s.info.ratio), latency)
      << GetParam().name;
  EXPECT_EQ(s.ts.attr("forward_latency").toInt(), latency);
}

// Every version, the causal models `--config causal` (and `--config causal --config noise`)
// trains, and v2_nopqmf's raw-output generator; the noise branch compared silent on both sides
// (noise_scale 0), its filters included.
std::vector<Variant> streaming_variants() {
  auto v = all_variants();
  v.push_back({"v1 causal", rave::RaveVersion::kV1, 1, 0, false, true});
  v.push_back({"v2 causal", rave::RaveVersion::kV2, 1, 0, false, true});
  v.push_back({"v2 causal noise", rave::RaveVersion::kV2, 1, 5, false, true});
  v.push_back({"v2 raw output", rave::RaveVersion::kV2, 1, 0, false, false, true});
  v.push_back({"v2 causal raw output", rave::RaveVersion::kV2, 1, 0, false, true, true});
  v.push_back({"v3 causal stereo", rave::RaveVersion::kV3, 2, 0, false, true});
  return v;
}

INSTANTIATE_TEST_SUITE_P(AllVersions, Streaming, ::testing::ValuesIn(streaming_variants()), variant_name);

// A causal model has no lookahead: streaming encode is the offline encode with no delay at all
// (the equality itself is Streaming.EncodeInBlocks…, for the causal variants).
TEST(StreamingCausal, EncoderHasZeroLookahead) {
  for (const auto& v : streaming_variants()) {
    if (!v.causal) continue;
    auto model = tiny_model(tiny_options(v));
    ScriptOptions s;
    s.streaming = true;
    ScriptInfo info;
    script_rave(*model, s, &info);
    EXPECT_EQ(info.encode_latency, 0) << v.name;
  }
}

TEST(StreamingLatency, FullSizeV2MatchesCachedConvMeasurements) {
  // acids-ircam/RAVE v2.3.1 with cached_conv 2.5.0, v2.gin, 2048-sample chunks: encoder 14208
  // samples, decoder 12512; causal.gin: encoder 0, decoder 1696 (the transposed convolutions'
  // paddings). RAVE's encoder layers get cumulative_delay 0, so its 14208 is not whole frames;
  // here each strided convolution counts the delay its input carries (cached_conv's
  // cumulative_delay), which waits 128 samples more: 14336 = 7 frames of 2048.
  auto o = rave::RaveOptions::preset(rave::RaveVersion::kV2);
  o.discriminator = rave::DiscriminatorKind::kNone;
  ScriptOptions s;
  s.streaming = true;
  ScriptInfo info;
  {
    rave::RaveModel m(o);
    script_rave(*m, s, &info);
  }
  EXPECT_EQ(info.ratio, 2048);
  EXPECT_EQ(info.encode_latency, 14336);
  EXPECT_EQ(info.decode_latency, 12512);
  o.padding = models::PaddingMode::kCausal;
  {
    rave::RaveModel m(o);
    script_rave(*m, s, &info);
  }
  EXPECT_EQ(info.encode_latency, 0);
  EXPECT_EQ(info.decode_latency, 1696);
}

TEST(StreamingState, OneSlotPerBatchRowUpToSixtyFour) {
  rt::testing::ScratchDir dir("export_stream");
  auto s = make_streams({"v2 mono", rave::RaveVersion::kV2, 1, 0, false}, dir / "m.ts");
  c10::InferenceMode guard;
  EXPECT_NO_THROW(call(s.ts, "forward", torch::zeros({64, 1, kBlock})));
  EXPECT_THROW(call(s.ts, "forward", torch::zeros({65, 1, kBlock})), std::exception);
}

}  // namespace
}  // namespace rt::exporting::testing
