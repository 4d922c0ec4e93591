#include "data/audio_dataset.h"

#include <gtest/gtest.h>

#include <cmath>
#include <numeric>
#include <string>
#include <vector>

#include "data/split.h"
#include "data_fixtures.h"
#include "support/golden.h"
#include "support/test_support.h"

namespace rt {
namespace {

AudioDatasetOptions plain(int64_t n_signal) {
  AudioDatasetOptions o;
  o.n_signal = n_signal;
  o.phase_mangle = false;
  o.dequantize = false;
  return o;
}

TEST(AudioDataset, ReadsARaveStyleDatabaseExactly) {
  testing::ScratchDir dir;
  testing::write_rave_style_db(dir / "db", 3, 2, 3000, 22050);
  AudioDataset ds(dir / "db", plain(1000));
  EXPECT_EQ(ds.size(), 3u);
  EXPECT_EQ(ds.channels(), 2);
  EXPECT_EQ(ds.sampling_rate(), 22050);
  torch::Tensor rec = ds.record(2);
  ASSERT_EQ(rec.sizes(), (std::vector<int64_t>{2, 3000}));
  EXPECT_FLOAT_EQ(rec[1][123].item<float>(), testing::fixture_sample(2, 1, 123) / 32767.0f);
  EXPECT_FLOAT_EQ(rec[0][2999].item<float>(), testing::fixture_sample(2, 0, 2999) / 32767.0f);
}

TEST(AudioDataset, WithoutMetadataTheDatabaseIsRefusedAsUnfinished) {
  // Guessing channels and rate from the first record once trained on half-written databases;
  // RAVE's own loader cannot open them either.
  testing::ScratchDir dir;
  testing::write_rave_style_db(dir / "db", 2, 2, 500, 16000, /*write_metadata=*/false);
  try {
    AudioDataset ds(dir / "db", plain(100));
    FAIL() << "opened a database without metadata.yaml";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("has no metadata.yaml: it was not finished"), std::string::npos)
        << e.what();
  }
}

TEST(AudioDataset, CropIsAWindowOfTheRecordAndDependsOnTheRng) {
  testing::ScratchDir dir;
  testing::write_rave_style_db(dir / "db", 1, 1, 5000);
  AudioDataset ds(dir / "db", plain(256));
  torch::Tensor rec = ds.record(0);
  std::set<int64_t> starts;
  for (uint64_t s = 0; s < 8; ++s) {
    std::mt19937_64 rng(s);
    torch::Tensor x = ds.get(0, rng).input;
    ASSERT_EQ(x.sizes(), (std::vector<int64_t>{1, 256}));
    int64_t found = -1;
    for (int64_t st = 0; st + 256 <= 5000 && found < 0; ++st) {
      if (torch::equal(rec.narrow(1, st, 256), x)) found = st;
    }
    ASSERT_GE(found, 0);
    starts.insert(found);
  }
  EXPECT_GT(starts.size(), 4u);
}

TEST(AudioDataset, DequantizeAddsUniformNoiseBelowOneIn65536) {
  testing::ScratchDir dir;
  testing::write_rave_style_db(dir / "db", 1, 1, 4096);
  AudioDatasetOptions o = plain(4096);  // n_signal == length: the crop is the whole record.
  o.dequantize = true;
  AudioDataset ds(dir / "db", o);
  std::mt19937_64 rng(1);
  torch::Tensor d = ds.get(0, rng).input - ds.record(0);
  EXPECT_GE(d.min().item<float>(), -1e-7f);
  EXPECT_LT(d.max().item<float>(), 1.0f / 65536 + 1e-7f);
  EXPECT_NEAR(d.mean().item<float>(), 0.5f / 65536, 0.05f / 65536);
}

TEST(AudioDataset, AllpassHasUnitMagnitudeAndChangesThePhase) {
  const int64_t n = 16384;
  torch::Tensor x = torch::zeros({1, n});
  x[0][0] = 1.0f;
  allpass_filter(x, 2 * M_PI * 300.0 / 44100, 0.99);
  torch::Tensor mag = torch::abs(torch::fft::rfft(x[0]));
  EXPECT_NEAR(mag.min().item<float>(), 1.0f, 2e-3);
  EXPECT_NEAR(mag.max().item<float>(), 1.0f, 2e-3);
  EXPECT_NEAR(x[0][0].item<float>(), 0.99f * 0.99f, 1e-6);  // b0 = r².
}

TEST(AudioDataset, PhaseMangleKeepsTheRmsAndIsDeterministicPerSeed) {
  testing::ScratchDir dir;
  testing::write_rave_style_db(dir / "db", 2, 1, 20000);
  AudioDatasetOptions o = plain(16384);
  o.phase_mangle = true;
  o.phase_mangle_p = 1.0;
  AudioDataset ds(dir / "db", o);
  AudioDataset raw(dir / "db", plain(16384));
  for (uint64_t s = 0; s < 5; ++s) {
    std::mt19937_64 r1(s), r2(s);
    torch::Tensor a = ds.get(1, r1).input, b = raw.get(1, r2).input;
    EXPECT_FALSE(torch::allclose(a, b, 1e-3, 1e-3)) << "seed " << s;
    const float ra = a.pow(2).mean().sqrt().item<float>(), rb = b.pow(2).mean().sqrt().item<float>();
    EXPECT_NEAR(ra / rb, 1.0f, 0.05f) << "seed " << s;
    std::mt19937_64 r3(s);
    EXPECT_TRUE(torch::equal(a, ds.get(1, r3).input));
  }
  AudioDatasetOptions off = o;
  off.phase_mangle_p = 0.0;
  AudioDataset never(dir / "db", off);
  std::mt19937_64 r1(9), r2(9);
  EXPECT_TRUE(torch::equal(never.get(0, r1).input, raw.get(0, r2).input));
}

TEST(AudioDataset, DefaultAugmentationsAreDeterministicPerSeed) {
  testing::ScratchDir dir;
  testing::write_rave_style_db(dir / "db", 2, 2, 3000);
  AudioDatasetOptions o;
  o.n_signal = 2048;
  AudioDataset ds(dir / "db", o);
  std::mt19937_64 a(5), b(5), c(6);
  torch::Tensor x = ds.get(0, a).input;
  EXPECT_EQ(x.sizes(), (std::vector<int64_t>{2, 2048}));
  EXPECT_EQ(x.scalar_type(), torch::kFloat32);
  EXPECT_TRUE(torch::equal(x, ds.get(0, b).input));
  EXPECT_FALSE(torch::equal(x, ds.get(0, c).input));
}

void expect_error(const std::function<void()>& fn, const std::vector<std::string>& parts) {
  try {
    fn();
    FAIL() << "no error";
  } catch (const Error& e) {
    for (const auto& p : parts) EXPECT_NE(std::string(e.what()).find(p), std::string::npos) << e.what();
  }
}

TEST(AudioDataset, ErrorsNameTheKeyLengthsAndChannels) {
  testing::ScratchDir dir;
  testing::write_rave_style_db(dir / "db", 2, 2, 1000);
  AudioDataset ds(dir / "db", plain(1500));
  std::mt19937_64 rng(0);
  expect_error([&] { ds.get(1, rng); }, {"00000001", "1000", "1500"});
  AudioDatasetOptions three = plain(100);
  three.channels = 1;
  expect_error([&] { AudioDataset bad(dir / "db", three); }, {"channels = 1", "2-channel"});
  {
    LmdbStore store(dir / "db", LmdbStore::Mode::kReadWrite);
    LmdbStore::Writer w(store);
    w.put("00000001", std::string("\x0a\x03\x0a\x01", 4));
    w.commit();
  }
  AudioDataset corrupt(dir / "db", plain(100));
  expect_error([&] { corrupt.get(1, rng); }, {"00000001"});
  expect_error([&] { AudioDataset none(dir / "nothing", plain(100)); }, {"nothing"});
}

TEST(Split, IsNinetyEightTwoCappedAndDeterministic) {
  Split s = split_indices(100);
  EXPECT_EQ(s.train.size(), 98u);
  EXPECT_EQ(s.val.size(), 2u);
  std::vector<size_t> all = s.train;
  all.insert(all.end(), s.val.begin(), s.val.end());
  std::sort(all.begin(), all.end());
  for (size_t i = 0; i < all.size(); ++i) EXPECT_EQ(all[i], i);
  Split again = split_indices(100);
  EXPECT_EQ(again.train, s.train);
  EXPECT_EQ(again.val, s.val);
  EXPECT_NE(split_indices(100, 0.02, 1000, 43).val, s.val);
  Split big = split_indices(100000);
  EXPECT_EQ(big.val.size(), 1000u);
  EXPECT_EQ(big.train.size(), 99000u);
  EXPECT_EQ(split_indices(50).train.size(), 49u);
  EXPECT_EQ(split_indices(1).train.size(), 1u);
  EXPECT_EQ(split_indices(1).val.size(), 0u);
  EXPECT_THROW(split_indices(10, 1.5), Error);
}

// The indices the real RAVE's split_dataset(dataset, 98) assigns (max_residual 1000,
// random_split seeded 42), written by tests/oracle/rave_oracle.py.
TEST(Split, IsRavesOwnSplit) {
  const auto g = testing::load_golden("rave_split");
  const auto& splits = g.manifest.at("splits");
  ASSERT_GE(splits.size(), 5u);
  for (const auto& [n, ref] : splits.items()) {
    SCOPED_TRACE("n = " + n);
    const Split s = split_indices(std::stoul(n));
    EXPECT_EQ(s.val, ref.at("val").get<std::vector<size_t>>());
    ASSERT_EQ(s.train.size(), ref.at("train_count").get<size_t>());
    const auto head = ref.at("train_head").get<std::vector<size_t>>();
    EXPECT_EQ(
        std::vector<size_t>(s.train.begin(), s.train.begin() + static_cast<std::ptrdiff_t>(head.size())),
        head);
    EXPECT_EQ(std::accumulate(s.train.begin(), s.train.end(), size_t{0}), ref.at("train_sum").get<size_t>());
  }
}

}  // namespace
}  // namespace rt
