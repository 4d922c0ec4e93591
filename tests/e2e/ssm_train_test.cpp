// SSM end to end through the real binaries: synthetic reaching HDF5 → `preprocess --kind
// neural` → `preprocess --inspect` → `train --config tiny_ssm` (validation R² ≥ 0.7), the
// foundational (multi-group) decoder on three groups, and importer errors naming file and key.
#include <gtest/gtest.h>

#include <fstream>
#include <set>

#include "data/neural/h5_file.h"
#include "support/test_support.h"
#include "tensorboard/tfevents.h"
#include "util/json.h"
#include "util/run_pointer.h"

namespace fs = std::filesystem;
using rt::testing::bin_path;
using rt::testing::run_command;
using rt::testing::ScratchDir;

namespace {

std::string q(const fs::path& p) { return "'" + p.string() + "'"; }

fs::path events_file(const fs::path& run) {
  for (const auto& e : fs::directory_iterator(run)) {
    if (e.path().filename().string().rfind("events.out.tfevents.", 0) == 0) return e.path();
  }
  return {};
}

}  // namespace

TEST(SsmE2E, TinySsmReachesR2OnSyntheticReaching) {
  ScratchDir dir("rt_ssm_e2e");
  auto gen = run_command(bin_path("preprocess") + " --generate_neural_demo " + q(dir / "h5") +
                         " --groups 1 --units 182 --trials 256 --seed 7");
  ASSERT_EQ(gen.exit_code, 0) << gen.output;
  auto imp = run_command(bin_path("preprocess") + " --kind neural --input_path " + q(dir / "h5") +
                         " --output_path " + q(dir / "db"));
  ASSERT_EQ(imp.exit_code, 0) << imp.output;
  EXPECT_NE(imp.output.find("wrote 256 trials"), std::string::npos) << imp.output;

  auto ins = run_command(bin_path("preprocess") + " --inspect " + q(dir / "db"));
  ASSERT_EQ(ins.exit_code, 0) << ins.output;
  for (const char* want :
       {"kind: neural", "entries: 256 trials", "groups: 1",
        "synthetic_reach_0: 182 units, 2 behaviour dims, 256 trials (256 train, 0 eval), 140 bins of 5 ms",
        "binned counts", "all 256 records decode"}) {
    EXPECT_NE(ins.output.find(want), std::string::npos) << "missing '" << want << "' in:\n" << ins.output;
  }

  auto tr = run_command(bin_path("train") + " --config tiny_ssm --db_path " + q(dir / "db") + " --out_path " +
                        q(dir / "runs") + " --threads 1 --seed 0");
  ASSERT_EQ(tr.exit_code, 0) << tr.output;
  const fs::path run = fs::canonical(rt::resolve_run_pointer(dir / "runs" / "latest"));
  auto summary = rt::read_json(run / "training_summary.json");
  EXPECT_EQ(summary["status"], "completed");
  ASSERT_TRUE(summary["metrics"].contains("val/r2")) << summary.dump(2);
  const double r2 = summary["metrics"]["val/r2"].get<double>();
  EXPECT_GE(r2, 0.7) << tr.output;

  std::set<std::string> tags;
  for (const auto& r : rt::read_tfevents(events_file(run))) {
    if (r.kind == rt::TbRecord::Kind::Scalar) tags.insert(r.tag);
  }
  for (const char* tag : {"train/loss", "val/r2", "val/r2_0", "val/r2_1", "val/loss"}) {
    EXPECT_TRUE(tags.count(tag)) << "TensorBoard tag " << tag << " missing";
  }
}

TEST(SsmE2E, NeuralImportErrorsNameFileAndKey) {
  ScratchDir dir("rt_ssm_e2e_bad");
  fs::create_directories(dir / "in");
  {
    // Spikes but no behaviour: the importer must name the file and the missing key.
    auto f = rt::neural::H5File::create(dir / "in" / "no_behavior.h5");
    std::vector<int32_t> spikes(2 * 10 * 4, 1);
    f.write_int32("train_spikes_heldin", {2, 10, 4}, spikes.data());
  }
  auto r = run_command(bin_path("preprocess") + " --kind neural --input_path " +
                       q(dir / "in" / "no_behavior.h5") + " --output_path " + q(dir / "db"));
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_NE(r.output.find("no_behavior.h5"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("train_behavior"), std::string::npos) << r.output;

  {
    std::ofstream junk(dir / "in" / "junk.h5");
    junk << "this is not an HDF5 file\n";
  }
  r = run_command(bin_path("preprocess") + " --kind neural --input_path " + q(dir / "in" / "junk.h5") +
                  " --output_path " + q(dir / "db2"));
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_NE(r.output.find("junk.h5"), std::string::npos) << r.output;

  // Audio-only flags are refused for neural imports rather than ignored.
  r = run_command(bin_path("preprocess") + " --kind neural --input_path " + q(dir / "in") +
                  " --output_path " + q(dir / "db3") + " --sampling_rate 16000");
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.output.find("--sampling_rate applies to --kind audio only"), std::string::npos) << r.output;
}
