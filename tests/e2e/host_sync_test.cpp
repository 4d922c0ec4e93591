// The training loop makes no host synchronisation between log steps, for both families.
//
// A RecordFunction callback counts aten::item and aten::_local_scalar_dense (what every
// tensor-to-host read of a scalar goes through) on every thread while rt::run_training runs in
// this process. Runs of N and 2N steps with logging and validation only at the end differ by the
// reads of N plain steps: that difference must be 0. With train.log_every dividing N the loop
// flushes its logged 0-d tensors with one host copy per flush, not with item(), so that pair
// differs by 0 too. (On a GPU a stray item() is a stall of the whole queue; on the CPU it costs
// nothing, which is why only a count can guard it.)
#include <ATen/record_function.h>
#include <gtest/gtest.h>

#include <atomic>
#include <string>
#include <string_view>

#include "config/config.h"
#include "config/config_lookup.h"
#include "e2e_fixtures.h"
#include "models/common/onednn_check.h"
#include "trainer/trainer.h"

namespace rt::e2e {
namespace {

std::atomic<int64_t> g_host_reads{0};

std::unique_ptr<at::ObserverContext> count_host_read(const at::RecordFunction& fn) {
  const std::string_view name = fn.name();
  if (name == "aten::item" || name == "aten::_local_scalar_dense") g_host_reads.fetch_add(1);
  return nullptr;
}

// Host reads over one in-process training run of `steps` steps, logging every `log_every`.
int64_t host_reads(const std::string& config, const fs::path& db, const fs::path& out, int64_t steps,
                   int64_t log_every) {
  Config c = load_config_file(find_config_file(config));
  const std::string name = "syncs_" + std::to_string(steps) + "_" + std::to_string(log_every);
  c.set("data.db_path", db.string(), "test");
  c.set("train.out_path", out.string(), "test");
  c.set("train.name", name, "test");
  c.set("train.max_steps", std::to_string(steps), "test");
  c.set("train.log_every", std::to_string(log_every), "test");
  c.set("train.val_every", "1000000000", "test");  // validation once, at the end
  c.set("train.save_every", "1000000000", "test");
  c.set("train.threads", "1", "test");
  c.finalize();
  g_host_reads = 0;
  auto handle =
      at::addGlobalCallback(at::RecordFunctionCallback(&count_host_read)
                                .scopes({at::RecordScope::FUNCTION, at::RecordScope::BACKWARD_FUNCTION,
                                         at::RecordScope::USER_SCOPE}));
  const int code = run_training(c);
  at::removeCallback(handle);
  EXPECT_EQ(code, 0) << config << ", " << steps << " steps";
  return g_host_reads.load();
}

class HostSyncs : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = new ScratchDir("e2e_host_syncs");
    audio_db_ = make_demo_db(dir_->path() / "audio");
    neural_db_ = make_neural_db(dir_->path() / "neural", "--groups 1 --units 182 --trials 48 --seed 7");
    // Once per process, before counting: the oneDNN check reads its verdict with item().
    models::ensure_correct_cpu_convolutions();
  }
  static void TearDownTestSuite() {
    delete dir_;
    dir_ = nullptr;
  }
  void SetUp() override {
    ASSERT_TRUE(fs::exists(audio_db_ / "data.mdb")) << "the demo audio database was not made";
    ASSERT_TRUE(fs::exists(neural_db_ / "data.mdb")) << "the synthetic neural database was not made";
  }
  // The reads of n plain steps, then those of n steps holding n / 5 log flushes.
  static std::pair<int64_t, int64_t> reads_in_n_steps(const std::string& config, const fs::path& db,
                                                      int64_t n) {
    const fs::path out = dir_->path() / ("runs_" + config);
    const int64_t never = 1000000000;
    const int64_t plain = host_reads(config, db, out, 2 * n, never) - host_reads(config, db, out, n, never);
    const int64_t logged = host_reads(config, db, out, 2 * n, 5) - host_reads(config, db, out, n, 5);
    return {plain, logged};
  }
  static ScratchDir* dir_;
  static fs::path audio_db_, neural_db_;
};
ScratchDir* HostSyncs::dir_ = nullptr;
fs::path HostSyncs::audio_db_, HostSyncs::neural_db_;

TEST_F(HostSyncs, RaveStepsReadNothingBackBetweenLogSteps) {
  const auto [plain, logged] = reads_in_n_steps("tiny_rave", audio_db_, 10);
  EXPECT_EQ(plain, 0) << "host reads (item) in 10 tiny_rave steps without logging";
  EXPECT_EQ(logged, 0) << "host reads (item) in 10 tiny_rave steps with 2 log flushes";
}

TEST_F(HostSyncs, SsmStepsReadNothingBackBetweenLogSteps) {
  const auto [plain, logged] = reads_in_n_steps("tiny_ssm", neural_db_, 10);
  EXPECT_EQ(plain, 0) << "host reads (item) in 10 tiny_ssm steps without logging";
  EXPECT_EQ(logged, 0) << "host reads (item) in 10 tiny_ssm steps with 2 log flushes";
}

}  // namespace
}  // namespace rt::e2e
