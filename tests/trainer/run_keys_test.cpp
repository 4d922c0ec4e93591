// The common keys' tables (config/run_keys.h): each field holds its key's value as the config
// has it, at the defaults and after a file, the command line and finalize() changed them.
#include "config/run_keys.h"

#include <gtest/gtest.h>

#include "config/config.h"
#include "config/config_value.h"
#include "support/test_support.h"
#include "util/atomic_file.h"
#include "util/error.h"

namespace rt {
namespace {

// Every binding of `table` reads back, in `o`, the config's value of its key.
template <typename Options>
void expect_fields_hold_the_config(const OptionsTable<Options>& table, const Options& o, const Config& c) {
  for (const auto& b : table.bindings()) {
    const auto value = b.value(o);
    ASSERT_TRUE(value.has_value()) << b.key();
    EXPECT_EQ(value_text(*value), c.text(b.key())) << b.key();
  }
}

void expect_all(const Config& c) {
  expect_fields_hold_the_config(run_keys_table(), run_keys(c), c);
  expect_fields_hold_the_config(profiling_keys_table(), profiling_keys(c), c);
  expect_fields_hold_the_config(distributed_keys_table(), distributed_keys(c), c);
}

TEST(RunKeys, EveryFieldHoldsItsKeysValue) {
  expect_all(Config{});
  Config c;
  c.merge_toml_string(R"(
[train]
name = "x"
batch = 3
max_steps = 77
smoke_test = true
smoke_test_memory_gib = 1.5
precision = "bf16"
[train.distributed]
backend = "gloo"
bucket_mb = 4.5
[data]
workers = 0
db_path = "some/db"
[profiling]
enabled = true
profile_steps = 5
sort_by = "cpu_time_total"
)",
                      "test.toml");
  c.set("profiling.memory_snapshot_step", "12", "--override");
  c.finalize();
  expect_all(c);
  const RunKeys k = run_keys(c);
  EXPECT_EQ(k.batch, 3);
  EXPECT_EQ(k.max_steps, 77);
  EXPECT_EQ(k.db_path, "some/db");
  const ProfilingKeys p = profiling_keys(c);
  EXPECT_EQ(p.active, 5);  // --profile_steps, written into the schedule by finalize()
  EXPECT_TRUE(p.enabled);
  EXPECT_FALSE(p.tracks_memory());
  EXPECT_EQ(distributed_keys(c).backend, "gloo");
}

TEST(RunKeys, AKeyHoldsItsDefaultWhoeverSetIt) {
  Config c;
  EXPECT_TRUE(c.holds_default("data.n_signal"));
  c.set("data.n_signal", "131072", "config.toml");  // a stored config holds the default
  EXPECT_TRUE(c.was_set("data.n_signal"));
  EXPECT_TRUE(c.holds_default("data.n_signal"));
  c.set("data.n_signal", "4096", "--n_signal");
  EXPECT_FALSE(c.holds_default("data.n_signal"));
  c.set("data.phase_mangle_p", "0.8", "x");
  EXPECT_TRUE(c.holds_default("data.phase_mangle_p"));
  EXPECT_TRUE(c.holds_default("profiling.wait_steps"));  // a Rename alias names its target
  EXPECT_THROW(c.holds_default("data.no_such_key"), Error);
}

// A run's stored config.toml, as profile-report reads it: the settings its advice names, as
// their TOML text; a key the file lacks is absent; a file that does not parse says why.
TEST(RunKeys, AStoredConfigGivesItsSettingsAsText) {
  testing::ScratchDir dir("stored_settings");
  write_file_atomic(dir / "config.toml",
                    "[model]\nversion = \"v3\"\n[data]\nworkers = 3\nslowdown_ms = 2.5\n"
                    "[profiling]\noutput_dir = \"some/where\"\n[train]\nbatch = 16\n");
  const StoredSettings s = read_stored_settings(dir / "config.toml");
  EXPECT_TRUE(s.error.empty()) << s.error;
  EXPECT_EQ(s.text.at("model.version"), "v3");
  EXPECT_EQ(s.text.at("data.workers"), "3");
  EXPECT_EQ(s.text.at("data.slowdown_ms"), "2.5");
  EXPECT_EQ(s.text.at("train.batch"), "16");
  EXPECT_EQ(s.output_dir(), "some/where");
  EXPECT_EQ(s.text.count("data.prefetch"), 0u);
  write_file_atomic(dir / "broken.toml", "[data\nworkers = 3\n");
  const StoredSettings b = read_stored_settings(dir / "broken.toml");
  EXPECT_FALSE(b.error.empty());
  EXPECT_TRUE(b.text.empty());
  EXPECT_EQ(b.output_dir(), "");
}

}  // namespace
}  // namespace rt
