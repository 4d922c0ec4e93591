// Neural data: record codec, smoothing, HDF5 import (errors, round trip), dataset, sampler.
#include <gtest/gtest.h>
#include <hdf5.h>

#include <cmath>
#include <fstream>
#include <set>

#include "data/lmdb_store.h"
#include "data/neural/h5_file.h"
#include "data/neural/hdf5_import.h"
#include "data/neural/neural_dataset.h"
#include "data/neural/neural_record.h"
#include "data/neural/synthetic_reaching.h"
#include "support/expect.h"
#include "support/test_support.h"
#include "util/atomic_file.h"

namespace rt::neural {
namespace {

using testing::error_of;

TEST(NeuralRecord, RoundTripsThroughTheAudioExampleContainer) {
  NeuralRecord r;
  r.spikes = torch::arange(12, torch::kFloat32).view({4, 3});
  r.behavior = torch::randn({4, 2});
  r.group = "monkey_j/maze";
  r.bin_ms = 5;
  r.source = "a.h5";
  r.split = "train";
  r.trial = 7;
  auto back = decode_neural_record(encode_neural_record(r), "test");
  EXPECT_TRUE(torch::equal(back.spikes, r.spikes));
  EXPECT_TRUE(torch::equal(back.behavior, r.behavior));
  EXPECT_EQ(back.group, r.group);
  EXPECT_EQ(back.bin_ms, 5.0);
  EXPECT_EQ(back.smoothing_sigma_ms, 0.0);
  EXPECT_EQ(back.trial, 7);
  EXPECT_EQ(back.split, "train");
  auto msg = error_of([] { decode_neural_record("\x0a\x03xyz", "db key 00000003"); });
  EXPECT_HAS(msg, "db key 00000003");
}

TEST(NeuralRecord, GaussianSmoothingFollowsNlbKernel) {
  // σ 10 ms at 5 ms bins → sd 2 bins, window 12 taps centred at 5.5, out[i] = Σ_k x[i+k−6] w[k].
  auto x = torch::zeros({30, 2});
  x[10][0] = 1;
  x[3][1] = 2;
  auto y = gaussian_smooth(x, 10, 5);
  std::vector<double> w(12);
  double total = 0;
  for (int k = 0; k < 12; ++k) total += (w[k] = std::exp(-std::pow(k - 5.5, 2) / 8.0));
  for (int i = 0; i < 30; ++i) {
    const int k = 16 - i;  // i + k − 6 = 10
    const double expected = (k >= 0 && k < 12) ? w[k] / total : 0.0;
    EXPECT_NEAR(y[i][0].item<double>(), expected, 1e-6) << i;
  }
  EXPECT_NEAR(y.select(1, 0).sum().item<double>(), 1.0, 1e-5);
  EXPECT_LT(y.select(1, 1).sum().item<double>(), 2.0 - 1e-3);  // mass lost at the zero-padded edge
  EXPECT_TRUE(torch::equal(gaussian_smooth(x, 0, 5), x));
}

// Writes a minimal NLB-layout file with chosen shapes.
void write_nlb(const std::filesystem::path& p, int64_t trials, int64_t T, int64_t units, int64_t beh_trials,
               bool with_behavior = true) {
  auto f = H5File::create(p);
  std::vector<int32_t> spikes(static_cast<size_t>(trials * T * units), 1);
  f.write_int32("train_spikes_heldin", {trials, T, units}, spikes.data());
  if (with_behavior) {
    std::vector<float> beh(static_cast<size_t>(beh_trials * T * 2), 0.5f);
    f.write_float("train_behavior", {beh_trials, T, 2}, beh.data());
  }
}

TEST(NeuralImport, ErrorsNameTheFileAndTheKey) {
  testing::ScratchDir dir;
  const auto missing = dir / "missing_behavior.h5";
  write_nlb(missing, 3, 10, 4, 3, /*with_behavior=*/false);
  auto run = [&](const std::filesystem::path& in, const std::string& db) {
    return error_of([&] {
      NeuralImportOptions o;
      o.inputs = {in};
      o.output = dir / db;
      o.max_db_size_bytes = 1 << 24;
      import_neural_hdf5(o);
    });
  };
  auto msg = run(missing, "db1");
  EXPECT_HAS(msg, "train_behavior");
  EXPECT_HAS(msg, missing.string());

  const auto mismatch = dir / "mismatch.h5";
  write_nlb(mismatch, 3, 10, 4, 2);
  msg = run(mismatch, "db2");
  EXPECT_HAS(msg, "train_behavior");
  EXPECT_HAS(msg, mismatch.string());
  EXPECT_HAS(msg, "[2, 10, 2]");

  const auto text = dir / "strings.h5";
  {
    auto f = H5File::create(text);
    std::vector<float> beh(3 * 10 * 2, 0.f);
    f.write_float("train_behavior", {3, 10, 2}, beh.data());
  }
  {
    // A string dataset where counts are expected.
    hid_t file = H5Fopen(text.c_str(), H5F_ACC_RDWR, H5P_DEFAULT);
    hid_t type = H5Tcopy(H5T_C_S1);
    H5Tset_size(type, 4);
    hsize_t dims[3] = {3, 10, 4};
    hid_t space = H5Screate_simple(3, dims, nullptr);
    hid_t ds = H5Dcreate2(file, "train_spikes_heldin", type, space, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
    std::vector<char> data(3 * 10 * 4 * 4, 'a');
    H5Dwrite(ds, type, H5S_ALL, H5S_ALL, H5P_DEFAULT, data.data());
    H5Dclose(ds);
    H5Sclose(space);
    H5Tclose(type);
    H5Fclose(file);
  }
  msg = run(text, "db3");
  EXPECT_HAS(msg, "train_spikes_heldin");
  EXPECT_HAS(msg, "not numeric");
  EXPECT_HAS(msg, text.string());

  const auto bogus = dir / "bogus.h5";
  write_file_atomic(bogus, "this is not hdf5");
  msg = run(bogus, "db4");
  EXPECT_HAS(msg, bogus.string());
  EXPECT_HAS(msg, "not an HDF5 file");

  msg = run(dir / "nope.h5", "db5");
  EXPECT_HAS(msg, "nope.h5");
  EXPECT_HAS(msg, "does not exist");
}

TEST(NeuralSynthetic, IsDeterministicBySeed) {
  testing::ScratchDir dir;
  SyntheticOptions o;
  o.units = {10};
  o.trials = 4;
  o.bins = 30;
  auto a = write_synthetic_reaching(dir / "a", o);
  auto b = write_synthetic_reaching(dir / "b", o);
  o.seed = 1;
  auto c = write_synthetic_reaching(dir / "c", o);
  auto read = [](const std::filesystem::path& p) {
    return H5File::open_read(p).read_float("train_spikes_heldin", 3).data;
  };
  EXPECT_EQ(read(a[0]), read(b[0]));
  EXPECT_NE(read(a[0]), read(c[0]));
  auto f = H5File::open_read(a[0]);
  EXPECT_EQ(f.read_float("train_spikes_heldin", 3).shape, (std::vector<int64_t>{4, 30, 8}));
  EXPECT_EQ(f.read_float("train_spikes_heldout", 3).shape, (std::vector<int64_t>{4, 30, 2}));
  EXPECT_EQ(f.read_float("train_behavior", 3).shape, (std::vector<int64_t>{4, 30, 2}));
  EXPECT_EQ(f.read_root_attribute("bin_size_ms").value(), 5.0);
  EXPECT_FALSE(f.has_dataset("eval_behavior"));
}

TEST(NeuralImport, SyntheticFilesRoundTripIntoTheDataset) {
  testing::ScratchDir dir;
  SyntheticOptions so;
  so.units = {12, 8};
  so.trials = 6;
  so.eval_trials = 2;
  so.bins = 40;
  so.onset_bin = 10;
  auto files = write_synthetic_reaching(dir / "h5", so);
  ASSERT_EQ(files.size(), 2u);
  NeuralImportOptions io;
  io.inputs = {dir / "h5"};  // a directory: every .h5 inside
  io.output = dir / "db";
  io.max_db_size_bytes = 1 << 24;
  auto report = import_neural_hdf5(io);
  EXPECT_EQ(report.trials_written, 16u);
  ASSERT_EQ(report.groups.size(), 2u);
  EXPECT_EQ(report.groups[0].name, "synthetic_reach_0");
  EXPECT_EQ(report.groups[1].units, 8);
  EXPECT_EQ(report.groups[1].trials, 8);
  EXPECT_TRUE(report.notes.empty());
  const auto yaml = read_file(dir / "db" / "metadata.yaml");
  EXPECT_NE(yaml.find("kind: neural"), std::string::npos) << yaml;
  EXPECT_NE(yaml.find("count: 16"), std::string::npos) << yaml;
  EXPECT_NE(yaml.find("name: \"synthetic_reach_1\""), std::string::npos) << yaml;
  EXPECT_NE(yaml.find("units: 12"), std::string::npos) << yaml;
  EXPECT_NE(yaml.find("bin_ms: 5"), std::string::npos) << yaml;

  NeuralDataset ds(dir / "db");  // σ 40 ms default, padded
  EXPECT_EQ(ds.size(), 16u);
  EXPECT_EQ(ds.group_names(), (std::vector<std::string>{"synthetic_reach_0", "synthetic_reach_1"}));
  EXPECT_EQ(ds.group_units(), (std::vector<int64_t>{12, 8}));
  EXPECT_EQ(ds.max_units(), 12);
  EXPECT_EQ(ds.behavior_dims(), 2);
  EXPECT_EQ(ds.group_of(0), 0);
  EXPECT_EQ(ds.group_of(15), 1);
  std::mt19937_64 rng(0);

  // Record 0 = group 0, train trial 0: held-in then held-out units, smoothed at load.
  auto f0 = H5File::open_read(files[0]);
  auto in = f0.read_float("train_spikes_heldin", 3), out = f0.read_float("train_spikes_heldout", 3);
  auto beh = f0.read_float("train_behavior", 3);
  auto raw = torch::cat(
      {torch::from_blob(in.data.data(), {40, 9}).clone(), torch::from_blob(out.data.data(), {40, 3}).clone()},
      1);
  auto ex0 = ds.get(0, rng);
  EXPECT_EQ(ex0.input.sizes(), torch::IntArrayRef({40, 12}));
  EXPECT_TRUE(torch::allclose(ex0.input, gaussian_smooth(raw, 40, 5), 1e-6, 1e-6));
  EXPECT_TRUE(torch::equal(ex0.target, torch::from_blob(beh.data.data(), {40, 2})));
  EXPECT_GT(ex0.input.sum().item<double>(), 0.0);

  // Group 1 (8 units) is zero-padded to 12.
  auto ex = ds.get(10, rng);
  EXPECT_EQ(ex.group, 1);
  EXPECT_EQ(ex.input.sizes(), torch::IntArrayRef({40, 12}));
  EXPECT_EQ(ex.input.narrow(1, 8, 4).abs().sum().item<double>(), 0.0);
  EXPECT_GT(ex.input.narrow(1, 0, 8).sum().item<double>(), 0.0);

  NeuralDatasetOptions unpadded;
  unpadded.pad_to_widest = false;
  unpadded.smoothing_sigma_ms = 0;
  NeuralDataset raw_ds(dir / "db", unpadded);
  EXPECT_EQ(raw_ds.get(10, rng).input.sizes(), torch::IntArrayRef({40, 8}));
  EXPECT_TRUE(torch::equal(raw_ds.get(0, rng).input, raw));
}

TEST(NeuralDatasetCache, ExamplesArePreparedOnceWithinTheBudgetAndEqualFreshOnes) {
  testing::ScratchDir dir;
  SyntheticOptions so;
  so.units = {12};
  so.trials = 6;
  so.eval_trials = 0;
  so.bins = 40;
  so.onset_bin = 10;
  write_synthetic_reaching(dir / "h5", so);
  NeuralImportOptions io;
  io.inputs = {dir / "h5"};
  io.output = dir / "db";
  io.max_db_size_bytes = 1 << 24;
  import_neural_hdf5(io);
  std::mt19937_64 rng(0);
  NeuralDatasetOptions none;
  none.example_cache_mb = 0;
  NeuralDataset fresh(dir / "db", none), cached(dir / "db");
  ASSERT_EQ(cached.size(), 6u);
  for (size_t i = 0; i < cached.size(); ++i) {
    const Example a = cached.get(i, rng), b = cached.get(i, rng), c = fresh.get(i, rng),
                  d = fresh.get(i, rng);
    EXPECT_TRUE(torch::equal(a.input, c.input)) << i;
    EXPECT_TRUE(torch::equal(a.target, c.target)) << i;
    EXPECT_EQ(a.group, c.group);
    // Cached: the second read is the first one's tensors; without the cache, a new example.
    EXPECT_EQ(a.input.data_ptr(), b.input.data_ptr()) << i;
    EXPECT_NE(c.input.data_ptr(), d.input.data_ptr()) << i;
  }
  // A budget below one example's size (200 bins x 1500 units of float32: 1.2 MB) keeps none, and
  // every read still gives the example.
  so.units = {1500};
  so.trials = 2;
  so.bins = 200;
  so.onset_bin = 50;
  write_synthetic_reaching(dir / "wide_h5", so);
  io.inputs = {dir / "wide_h5"};
  io.output = dir / "wide_db";
  import_neural_hdf5(io);
  NeuralDatasetOptions tiny;
  tiny.example_cache_mb = 1;
  NeuralDataset wide(dir / "wide_db", tiny), wide_fresh(dir / "wide_db", none);
  const Example w1 = wide.get(0, rng), w2 = wide.get(0, rng);
  EXPECT_NE(w1.input.data_ptr(), w2.input.data_ptr());
  EXPECT_TRUE(torch::equal(w1.input, wide_fresh.get(0, rng).input));
  NeuralDatasetOptions bad;
  bad.example_cache_mb = -1;
  EXPECT_NE(error_of([&] { NeuralDataset b(dir / "db", bad); }).find("data.example_cache_mb"),
            std::string::npos);
}

TEST(NeuralImport, SmoothingAtImportIsRecordedAndNotAppliedTwice) {
  testing::ScratchDir dir;
  SyntheticOptions so;
  so.units = {6};
  so.trials = 3;
  so.bins = 30;
  auto files = write_synthetic_reaching(dir.path(), so);
  NeuralImportOptions io;
  io.inputs = files;
  io.groups = {"monkey_a"};
  io.output = dir / "db";
  io.smoothing_sigma_ms = 20;
  io.max_db_size_bytes = 1 << 24;
  import_neural_hdf5(io);
  NeuralDatasetOptions same;
  same.smoothing_sigma_ms = 20;
  NeuralDataset ds(dir / "db", same);
  EXPECT_EQ(ds.group_names(), std::vector<std::string>{"monkey_a"});
  std::mt19937_64 rng(0);
  auto f = H5File::open_read(files[0]);
  auto in = f.read_float("train_spikes_heldin", 3), out = f.read_float("train_spikes_heldout", 3);
  auto raw = torch::cat({torch::from_blob(in.data.data(), {3, 30, 5}).select(0, 1),
                         torch::from_blob(out.data.data(), {3, 30, 1}).select(0, 1)},
                        1);
  EXPECT_TRUE(torch::allclose(ds.get(1, rng).input, gaussian_smooth(raw, 20, 5), 1e-6, 1e-6));
  auto msg = error_of([&] { NeuralDataset other(dir / "db"); });  // default 40 ms
  EXPECT_HAS(msg, "data.smoothing_sigma_ms");
  EXPECT_HAS(msg, (dir / "db").string());
}

TEST(NeuralImport, FullMapLeavesAConsistentDatabase) {
  testing::ScratchDir dir;
  SyntheticOptions so;
  so.units = {64};
  so.trials = 200;
  auto files = write_synthetic_reaching(dir.path(), so);
  NeuralImportOptions io;
  io.inputs = files;
  io.output = dir / "db";
  io.max_db_size_bytes = 4 << 20;  // room for one batch of 64 trials (~36 KB each), not two
  try {
    import_neural_hdf5(io);
    FAIL() << "expected MapFullError";
  } catch (const MapFullError& e) {
    EXPECT_NE(std::string(e.what()).find("max_db_size"), std::string::npos) << e.what();
  }
  NeuralDataset ds(dir / "db");
  EXPECT_EQ(ds.size(), 64u);
  EXPECT_NE(read_file(dir / "db" / "metadata.yaml").find("count: 64"), std::string::npos);
  std::mt19937_64 rng(0);
  EXPECT_EQ(ds.get(63, rng).input.size(0), 140);
}

// A source with fixed groups, to test the sampler alone.
class FakeGroups : public ExampleSource {
 public:
  explicit FakeGroups(std::vector<int64_t> g) : g_(std::move(g)) {}
  size_t size() const override { return g_.size(); }
  Example get(size_t, std::mt19937_64&) const override { return {}; }
  int64_t group_of(size_t i) const override { return g_[i]; }

 private:
  std::vector<int64_t> g_;
};

TEST(NeuralSampler, BatchesNeverMixGroupsAndCoverEveryIndexOnce) {
  std::vector<int64_t> groups;
  for (int i = 0; i < 103; ++i) groups.push_back((i * 7) % 3);
  FakeGroups src(groups);
  std::vector<size_t> indices;
  for (size_t i = 0; i < 100; ++i) indices.push_back(i);  // 100..102 held out
  auto batches = group_batches(src, indices, 8, /*epoch=*/0, /*seed=*/42);
  std::multiset<size_t> seen;
  std::set<int64_t> first_groups;
  for (const auto& b : batches) {
    ASSERT_FALSE(b.empty());
    EXPECT_LE(b.size(), 8u);
    for (auto i : b) {
      EXPECT_EQ(src.group_of(i), src.group_of(b[0]));
      seen.insert(i);
    }
  }
  EXPECT_EQ(seen.size(), 100u);
  EXPECT_EQ(std::set<size_t>(seen.begin(), seen.end()).size(), 100u);
  EXPECT_EQ(group_batches(src, indices, 8, 0, 42), batches);
  EXPECT_NE(group_batches(src, indices, 8, 1, 42), batches);
  // Batches of different groups interleave (shuffled together), not one group after another.
  std::vector<int64_t> order;
  for (const auto& b : batches) order.push_back(src.group_of(b[0]));
  EXPECT_FALSE(std::is_sorted(order.begin(), order.end()));
  for (const auto& b : group_batches(src, indices, 8, 0, 42, /*drop_last=*/true)) EXPECT_EQ(b.size(), 8u);
  EXPECT_THROW(group_batches(src, indices, 0, 0, 42), Error);
}

TEST(NeuralSampler, WorksOnTheRealDataset) {
  testing::ScratchDir dir;
  SyntheticOptions so;
  so.units = {5, 7, 9};
  so.trials = 5;
  so.bins = 20;
  so.onset_bin = 5;
  NeuralImportOptions io;
  io.inputs = write_synthetic_reaching(dir / "h5", so);
  io.output = dir / "db";
  io.max_db_size_bytes = 1 << 24;
  import_neural_hdf5(io);
  NeuralDataset ds(dir / "db");
  std::vector<size_t> all(ds.size());
  std::iota(all.begin(), all.end(), 0);
  std::mt19937_64 rng(0);
  for (const auto& b : group_batches(ds, all, 4, 3, 1)) {
    for (auto i : b) {
      EXPECT_EQ(ds.get(i, rng).group, ds.group_of(b[0]));
    }
  }
}

}  // namespace
}  // namespace rt::neural

namespace rt::neural {
namespace {

// The synthetic data must be decodable (the demo trains on it): a linear readout of the
// smoothed spikes explains most of the velocity variance.
TEST(NeuralSynthetic, VelocityIsLinearlyDecodableFromSmoothedSpikes) {
  testing::ScratchDir dir;
  SyntheticOptions so;
  so.units = {64};
  so.trials = 40;
  NeuralImportOptions io;
  io.inputs = write_synthetic_reaching(dir / "h5", so);
  io.output = dir / "db";
  io.max_db_size_bytes = 1 << 26;
  import_neural_hdf5(io);
  NeuralDataset ds(dir / "db");
  std::mt19937_64 rng(0);
  std::vector<torch::Tensor> xs, ys;
  for (size_t i = 0; i < ds.size(); ++i) {
    auto ex = ds.get(i, rng);
    xs.push_back(ex.input);
    ys.push_back(ex.target);
  }
  auto X = torch::cat(xs).to(torch::kFloat64);
  X = torch::cat({X, torch::ones({X.size(0), 1}, torch::kFloat64)}, 1);
  auto Y = torch::cat(ys).to(torch::kFloat64);
  auto W = std::get<0>(torch::linalg_lstsq(X, Y, {}, {}));
  auto res = (Y - X.matmul(W)).pow(2).sum(0);
  auto tot = (Y - Y.mean(0)).pow(2).sum(0);
  const double r2 = (1 - res / (tot + 1e-8)).mean().item<double>();
  EXPECT_GT(r2, 0.6) << r2;
  EXPECT_LT(r2, 0.999) << "too easy: the spikes should be noisy";
}

}  // namespace
}  // namespace rt::neural
