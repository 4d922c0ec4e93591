// export --sr (RAVE's --sr): the file runs at the host's rate, an integer multiple of the model's.
// Its encode is the model-rate file's encode of the audio brought down by RAVE's Resampler
// (models/rave/resampler.h, held to RAVE's own by the Resampler tests), its decode the model-rate
// decode brought back up; streamed block by block it equals its offline output delayed by the
// latency it reports; a sine keeps its frequency through the rate change; nn~'s params and the
// attributes say the host's rate.
#include <cmath>

#include "export/checks/fidelity.h"
#include "export/export_fixtures.h"
#include "export/graph/describe.h"
#include "models/rave/rational_resampler.h"
#include "models/rave/resampler.h"
#include "util/error.h"

namespace rt::exporting::testing {
namespace {

constexpr int64_t kModelRate = 44100;

rave::RaveModel model_at_44k() {
  auto o = tiny_options({"v2", rave::RaveVersion::kV2, 1, 0, false});
  o.sampling_rate = kModelRate;
  return tiny_model(o);
}

torch::jit::Module exported(rave::RaveModelImpl& model, bool streaming, int64_t host_rate,
                            const std::string& name, ScriptInfo* info = nullptr) {
  ScriptOptions s;
  s.streaming = streaming;
  s.sampling_rate = kModelRate;
  s.host_rate = host_rate;
  rt::testing::ScratchDir dir("export_sr");
  auto m = save_and_load(script_rave(model, s, info), dir / (name + ".ts"));
  set_noise_scale(m, 0.0);
  return m;
}

// The frequency (Hz) of the largest magnitude of x's spectrum at `rate`.
double peak_hz(const torch::Tensor& x, int64_t rate) {
  const auto spectrum = torch::fft::rfft(x.flatten().to(torch::kDouble)).abs();
  const auto bin = spectrum.argmax().item<int64_t>();
  return static_cast<double>(bin) * static_cast<double>(rate) / static_cast<double>(x.numel());
}

TEST(ExportSr, EncodeAndDecodeAreTheModelRateFilesBetweenRavesResampler) {
  auto model = model_at_44k();
  auto plain = exported(*model, false, 0, "plain");
  ScriptInfo info;
  auto twice = exported(*model, false, 2 * kModelRate, "twice", &info);
  rave::Resampler rs(2 * kModelRate, kModelRate);
  EXPECT_EQ(info.ratio, 2 * 64);
  EXPECT_EQ(twice.attr("sr").toInt(), 2 * kModelRate);
  EXPECT_EQ(twice.attr("sampling_rate").toInt(), 2 * kModelRate);
  EXPECT_EQ(twice.attr("model_sampling_rate").toInt(), kModelRate);
  const int64_t l = twice.attr("latent_size").toInt();
  EXPECT_TRUE(torch::equal(twice.attr("encode_params").toTensor(),
                           torch::tensor({int64_t{1}, int64_t{1}, l, int64_t{128}})));
  EXPECT_TRUE(torch::equal(twice.attr("decode_params").toTensor(),
                           torch::tensor({l, int64_t{128}, int64_t{1}, int64_t{1}})));

  torch::manual_seed(4);
  const auto x = torch::randn({2, 1, 32 * 128}) * 0.3;
  const auto z = call(twice, "encode", x);
  const auto z_ref = call(plain, "encode", rs->to_model_rate(x));
  EXPECT_LT(max_diff(z, z_ref), 1e-5);
  const auto y = call(twice, "decode", z);
  const auto y_ref = rs->from_model_rate(call(plain, "decode", z));
  EXPECT_LT(max_diff(y, y_ref), 1e-5);
  EXPECT_EQ(y.size(-1), x.size(-1));
  EXPECT_LT(max_diff(call(twice, "forward", x), y), 1e-5);
}

TEST(ExportSr, AModelRateSineComesOutAtItsFrequency) {
  auto model = model_at_44k();
  auto twice = exported(*model, false, 2 * kModelRate, "sine");
  // 1 kHz at the model's rate: the file's upsampling (decode's last stage) keeps it at 1 kHz at
  // the host's. RAVE's polyphase upsampler leaves the image at 44.1 kHz − 1 kHz 23 dB down (its
  // own Resampler gives the same spectrum: docs/rave_fidelity.md); more would be a change.
  const int64_t n = 8192;
  const auto t = torch::arange(n, torch::kDouble) / static_cast<double>(kModelRate);
  const auto sine = torch::sin(2.0 * M_PI * 1000.0 * t).to(torch::kFloat).reshape({1, 1, n});
  const auto up = twice.get_method("from_model_rate")({sine}).toTensor();
  ASSERT_EQ(up.size(-1), 2 * n);
  EXPECT_NEAR(peak_hz(up.narrow(-1, 1024, 8192), 2 * kModelRate), 1000.0, 2.0 * kModelRate / 8192.0);
  const auto spectrum = torch::fft::rfft(up.narrow(-1, 1024, 8192).flatten().to(torch::kDouble)).abs();
  const int64_t image =
      static_cast<int64_t>(std::lround((kModelRate - 1000.0) * 8192.0 / (2.0 * kModelRate)));
  EXPECT_LT(spectrum.slice(0, image - 3, image + 4).max().item<double>(),
            0.08 * spectrum.max().item<double>());
}

TEST(ExportSr, StreamingEqualsOfflineDelayedByTheReportedLatency) {
  auto model = model_at_44k();
  ScriptInfo info;
  auto stream = exported(*model, true, 2 * kModelRate, "stream", &info);
  auto offline = exported(*model, false, 2 * kModelRate, "offline");
  const int64_t block = 4 * info.ratio, blocks = 24, latency = info.forward_latency();
  ASSERT_GT(latency, 0);
  torch::manual_seed(5);
  const auto x = torch::randn({1, 1, blocks * block}) * 0.3;
  std::vector<torch::Tensor> out;
  for (int64_t i = 0; i < blocks; ++i) out.push_back(call(stream, "forward", x.narrow(-1, i * block, block)));
  const auto streamed = torch::cat(out, -1);
  const auto whole = call(offline, "forward", x);
  // After the caches fill (a few blocks), the stream is the offline output `latency` samples late.
  const int64_t skip = 8 * block, length = blocks * block - skip - latency;
  const auto a = streamed.narrow(-1, skip + latency, length), b = whole.narrow(-1, skip, length);
  EXPECT_GT(b.abs().max().item<double>(), 0.0);
  EXPECT_LT(max_diff(a, b), 1e-3 * b.abs().max().item<double>());
  // encode alone: whole latent frames late.
  std::vector<torch::Tensor> zs;
  for (int64_t i = 0; i < blocks; ++i) zs.push_back(call(stream, "encode", x.narrow(-1, i * block, block)));
  const auto z_stream = torch::cat(zs, -1), z = call(offline, "encode", x);
  const int64_t frames = info.encode_latency / info.ratio, first = skip / info.ratio, n = 40;
  EXPECT_LT(max_diff(z_stream.narrow(-1, first + frames, n), z.narrow(-1, first, n)), 1e-5);
}

// export's fidelity check runs a --sr file at the host's rate against the model between the same
// resampler: the audio (at the model's rate) goes up first, offline and streaming.
TEST(ExportSr, TheFidelityCheckComparesAtTheHostsRate) {
  auto model = model_at_44k();
  torch::manual_seed(6);
  const auto audio = torch::randn({1, 44100}) * 0.3;
  for (const auto& [streaming, host] : {std::pair<bool, int64_t>{false, 2 * kModelRate},
                                        {true, 2 * kModelRate},
                                        {false, 48000},
                                        {true, 48000}}) {
    ScriptOptions s;
    s.streaming = streaming;
    s.sampling_rate = kModelRate;
    s.host_rate = host;
    ScriptInfo info;
    rt::testing::ScratchDir dir("export_sr_fidelity");
    script_rave(*model, s, &info).save((dir / "m.ts").string());
    const FidelityFigures f = measure_fidelity(*model, dir / "m.ts", s, info, audio, "noise");
    ASSERT_TRUE(f.measured) << f.not_measured;
    EXPECT_GT(f.snr_db, 80.0) << "streaming " << streaming << ", " << host << " Hz";
    EXPECT_NEAR(f.seconds, streaming ? f.seconds : 1.0, 0.05);
    EXPECT_LE(f.seconds, 1.0);
  }
}

// A rational --sr (48000 for a 44.1 kHz model: 160/147): nn~'s forward alone at the host's rate,
// the model-rate file's forward between the rational converter (models/rave/rational_resampler.h,
// held to closed-form sines by the RationalResampler tests); get_sample_rate (nn_tilde's Module
// API) says the host's rate.
TEST(ExportSr, FortyEightKilohertzRunsForwardAtTheHostsRate) {
  auto model = model_at_44k();
  auto plain = exported(*model, false, 0, "plain48");
  ScriptInfo info;
  auto file = exported(*model, false, 48000, "offline48", &info);
  EXPECT_EQ(file.attr("sr").toInt(), 48000);
  EXPECT_EQ(file.attr("sampling_rate").toInt(), 48000);
  EXPECT_EQ(file.attr("model_sampling_rate").toInt(), kModelRate);
  EXPECT_TRUE(torch::equal(file.attr("forward_params").toTensor(),
                           torch::tensor({int64_t{1}, int64_t{1}, int64_t{1}, int64_t{1}})));
  EXPECT_FALSE(file.hasattr("encode_params"));
  EXPECT_FALSE(file.hasattr("decode_params"));
  EXPECT_EQ(file.get_method("get_sample_rate")({}).toInt(), 48000);
  EXPECT_FALSE(file.find_method("set_sample_rate").has_value());
  // forward = the model-rate file between the converters (the model on whole latent frames).
  const auto down = rave::design_rational_resampling(48000, kModelRate, "--sr"),
             up = rave::design_rational_resampling(kModelRate, 48000, "--sr");
  torch::manual_seed(7);
  const auto x = torch::randn({2, 1, 7000}) * 0.3;
  auto m = rave::resample_rational(down, x);
  const int64_t t = m.size(-1), frames = (t + 63) / 64;
  m = torch::nn::functional::pad(m, torch::nn::functional::PadFuncOptions({0, frames * 64 - t}));
  const auto ref =
      rave::resample_rational(up, call(plain, "forward", m).narrow(-1, 0, t)).narrow(-1, 0, 7000);
  const auto y = call(file, "forward", x);
  ASSERT_EQ(y.sizes(), x.sizes());
  EXPECT_LT(max_diff(y, ref), 1e-5);
}

TEST(ExportSr, AFortyEightKilohertzSineComesOutAtItsFrequency) {
  auto model = model_at_44k();
  auto plain = exported(*model, false, 0, "plain_sine48");
  auto file = exported(*model, false, 48000, "sine48");
  auto tone = [](double hz, int64_t rate, int64_t n) {
    const auto t = torch::arange(n, torch::kDouble) / static_cast<double>(rate);
    return (0.5 * torch::sin(2.0 * M_PI * hz * t)).to(torch::kFloat).reshape({1, 1, n});
  };
  // The file's converters: a 1 kHz sine sampled at 48 kHz is a 1 kHz sine at 44.1 kHz inside.
  const auto inside = file.get_method("to_model_rate")({tone(1000.0, 48000, 48000)}).toTensor();
  ASSERT_EQ(inside.size(-1), kModelRate);
  EXPECT_LT(
      max_diff(inside.narrow(-1, 2000, 40000), tone(1000.0, kModelRate, kModelRate).narrow(-1, 2000, 40000)),
      1e-4);
  // Through the model: the 48 kHz file's output of a 48 kHz sine has its energy where the model's
  // own output of that sine at 44.1 kHz has it, in Hz. A file that ran the model at the host's
  // rate unconverted (RAVE's export at 48000: ratio 1) would put it 48000 / 44100 higher.
  for (double hz : {440.0, 3000.0}) {
    const auto at_host = call(file, "forward", tone(hz, 48000, 3 * 16384)).narrow(-1, 16384, 2 * 16384);
    const auto at_model =
        call(plain, "forward", tone(hz, kModelRate, 3 * 16384)).narrow(-1, 16384, 2 * 16384);
    const double resolution = 48000.0 / (2 * 16384);
    EXPECT_NEAR(peak_hz(at_host, 48000), peak_hz(at_model, kModelRate), 2.0 * resolution) << hz << " Hz";
    const auto unconverted = call(plain, "forward", tone(hz, 48000, 3 * 16384)).narrow(-1, 16384, 2 * 16384);
    EXPECT_GT(std::abs(peak_hz(unconverted, 48000) - peak_hz(at_model, kModelRate)), 0.05 * hz)
        << hz << " Hz";
  }
}

TEST(ExportSr, ARationalStreamTakesBlocksOfAnySize) {
  auto model = model_at_44k();
  ScriptInfo info;
  auto uneven = exported(*model, true, 48000, "stream48a", &info);
  auto even = exported(*model, true, 48000, "stream48b");
  ASSERT_GT(info.forward_latency(), 0);
  torch::manual_seed(8);
  const int64_t n = 60000;
  const auto x = torch::randn({1, 1, n}) * 0.3;
  std::vector<torch::Tensor> a, b;
  int64_t at = 0;
  const std::vector<int64_t> blocks = {1, 7, 2048, 333, 4096, 1001, 64, 160, 147, 5000};
  for (size_t i = 0; at < n; ++i) {
    const int64_t len = std::min(blocks[i % blocks.size()], n - at);
    a.push_back(call(uneven, "forward", x.narrow(-1, at, len)));
    ASSERT_EQ(a.back().size(-1), len);
    at += len;
  }
  for (int64_t i = 0; i < n; i += 2000)
    b.push_back(call(even, "forward", x.narrow(-1, i, std::min<int64_t>(2000, n - i))));
  const auto sa = torch::cat(a, -1), sb = torch::cat(b, -1);
  ASSERT_EQ(sa.size(-1), n);
  EXPECT_GT(sb.abs().max().item<double>(), 0.0);
  EXPECT_LT(max_diff(sa, sb), 1e-4 * sb.abs().max().item<double>());
  // The stream against the model itself (delays included, graph.h RationalRate) is
  // TheFidelityCheckComparesAtTheHostsRate's.
  // Another batch size starts the queues again.
  EXPECT_EQ(call(uneven, "forward", torch::zeros({3, 1, 500})).sizes(), (std::vector<int64_t>{3, 1, 500}));
}

TEST(ExportSr, RationalRatesHaveNoPriorAndNoMelFrontEnd) {
  auto model = model_at_44k();
  graph::Rave r = graph::describe_rave(*model, {false, 0, 0, 48000});
  ASSERT_TRUE(r.rational.has_value());
  ASSERT_EQ(r.methods.size(), 1u);
  EXPECT_EQ(r.methods[0].name, "forward");
  auto prior = rave::VariationalPrior(rave::PriorOptions{});
  try {
    graph::add_prior(r, *prior);
    ADD_FAILURE() << "a prior at 48 kHz";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("--prior with --sr 48000"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace rt::exporting::testing
