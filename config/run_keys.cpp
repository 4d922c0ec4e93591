#include "config/run_keys.h"

#include <toml++/toml.h>

#include <sstream>

#include "config/config.h"

namespace rt {

const OptionsTable<RunKeys>& run_keys_table() {
  using R = RunKeys;
  static const OptionsTable<R> table = {
      {&R::family, "model.family"},
      {&R::name, "train.name"},
      {&R::out_path, "train.out_path"},
      {&R::ckpt, "train.ckpt"},
      {&R::max_steps, "train.max_steps"},
      {&R::batch, "train.batch"},
      {&R::val_every, "train.val_every"},
      {&R::save_every, "train.save_every"},
      {&R::log_every, "train.log_every"},
      {&R::progress, "train.progress"},
      {&R::smoke_test, "train.smoke_test"},
      {&R::smoke_test_memory_gib, "train.smoke_test_memory_gib"},
      {&R::device, "train.device"},
      {&R::precision, "train.precision"},
      {&R::tf32, "train.tf32"},
      {&R::cudnn_benchmark, "train.cudnn_benchmark"},
      {&R::threads, "train.threads"},
      {&R::retain_freed_memory, "train.retain_freed_memory"},
      {&R::seed, "train.seed"},
      {&R::db_path, "data.db_path"},
      {&R::workers, "data.workers"},
      {&R::prefetch, "data.prefetch"},
  };
  return table;
}

const OptionsTable<ProfilingKeys>& profiling_keys_table() {
  using P = ProfilingKeys;
  static const OptionsTable<P> table = {
      {&P::timing, "profiling.timing"},
      {&P::memory, "profiling.memory"},
      {&P::enabled, "profiling.enabled"},
      {&P::output_dir, "profiling.output_dir"},
      {&P::log_every, "profiling.log_every"},
      {&P::timing_every, "profiling.timing_every"},
      {&P::memory_every, "profiling.memory_every"},
      {&P::profile_part_mb, "profiling.profile_part_mb"},
      {&P::profile_parts, "profiling.profile_parts"},
      {&P::wait, "profiling.wait"},
      {&P::warmup, "profiling.warmup"},
      {&P::active, "profiling.active"},
      {&P::repeat, "profiling.repeat"},
      {&P::skip_first, "profiling.skip_first"},
      {&P::record_shapes, "profiling.record_shapes"},
      {&P::profile_memory, "profiling.profile_memory"},
      {&P::with_stack, "profiling.with_stack"},
      {&P::with_modules, "profiling.with_modules"},
      {&P::sort_by, "profiling.sort_by"},
      {&P::row_limit, "profiling.row_limit"},
      {&P::gzip, "profiling.gzip"},
      {&P::whole_us_timestamps, "profiling.whole_us_timestamps"},
      {&P::memory_snapshot_step, "profiling.memory_snapshot_step"},
      {&P::memory_snapshot_on_oom, "profiling.memory_snapshot_on_oom"},
      {&P::memory_snapshot_entries, "profiling.memory_snapshot_entries"},
  };
  return table;
}

const OptionsTable<DistributedKeys>& distributed_keys_table() {
  using D = DistributedKeys;
  static const OptionsTable<D> table = {
      {&D::backend, "train.distributed.backend"},
      {&D::wait, "train.distributed.wait"},
      {&D::gloo_loop, "train.distributed.gloo_loop"},
      {&D::timeout_s, "train.distributed.timeout_s"},
      {&D::small_all_reduce_kib, "train.distributed.small_all_reduce_kib"},
      {&D::bucket_mb, "train.distributed.bucket_mb"},
      {&D::first_bucket_mb, "train.distributed.first_bucket_mb"},
  };
  return table;
}

RunKeys run_keys(const Config& config) { return run_keys_table().from(config); }
ProfilingKeys profiling_keys(const Config& config) { return profiling_keys_table().from(config); }
DistributedKeys distributed_keys(const Config& config) { return distributed_keys_table().from(config); }

const std::vector<std::string>& stored_setting_keys() {
  static const std::vector<std::string> keys = {
      "data.workers",           "data.prefetch",   "data.slowdown_ms",       "train.batch",
      "train.max_steps",        "train.log_every", "profiling.memory_every", "profiling.output_dir",
      "profiling.timing_every", "model.version",   "data.n_signal"};
  return keys;
}

std::string StoredSettings::output_dir() const {
  const auto it = text.find("profiling.output_dir");
  return it == text.end() ? std::string() : it->second;
}

StoredSettings read_stored_settings(const std::filesystem::path& config_toml) {
  StoredSettings out;
  toml::table config;
  try {
    config = toml::parse_file(config_toml.string());
  } catch (const toml::parse_error& e) {
    out.error = std::string(e.description());
    return out;
  }
  for (const auto& key : stored_setting_keys()) {
    const toml::node* node = config.at_path(key).node();
    if (node == nullptr) continue;
    if (const auto* s = node->as_string()) {
      out.text[key] = s->get();
    } else {
      std::ostringstream text;
      node->visit([&](const auto& v) {
        if constexpr (toml::is_value<decltype(v)>) text << v.get();
      });
      out.text[key] = text.str();
    }
  }
  return out;
}

}  // namespace rt
