#include "profiling/profile_writers.h"

#include <algorithm>
#include <cstdio>
#include <utility>

#include "util/atomic_file.h"
#include "util/error.h"

namespace rt::prof {
namespace {

constexpr double kGiB = 1024.0 * 1024.0 * 1024.0;
constexpr const char* kListEnd = "\n]\n";

std::string dump(const Json& value) { return value.dump(-1, ' ', false, Json::error_handler_t::replace); }

double seconds_since(std::chrono::steady_clock::time_point t) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t).count();
}

}  // namespace

// ---------------------------------------------------------------------------------------------
JsonListFile::JsonListFile(std::filesystem::path path, FlushPolicy policy)
    : path_(std::move(path)), policy_(policy), text_("["), last_flush_at_(std::chrono::steady_clock::now()) {}

JsonListFile::~JsonListFile() {
  try {
    close();
  } catch (const std::exception& e) {
    std::fprintf(stderr, "warning: %s\n", e.what());
  }
}

int64_t JsonListFile::continue_from(int64_t first_step) {
  std::error_code ec;
  if (entries_ > 0 || !std::filesystem::exists(path_, ec)) return 0;
  Json old;
  try {
    old = read_json(path_);
    if (!old.is_array()) throw Error("'" + path_.string() + "' is not a JSON list");
  } catch (const std::exception& e) {
    const std::filesystem::path aside = path_.string() + ".unreadable";
    std::filesystem::rename(path_, aside, ec);
    std::fprintf(stderr, "warning: cannot continue %s (%s); it starts empty, the old file is kept as '%s'\n",
                 path_.string().c_str(), e.what(), aside.string().c_str());
    return 0;
  }
  for (const Json& e : old) {
    const auto step = e.is_object() ? e.find("step") : e.end();
    if (step == e.end() || !step->is_number_integer() || step->get<int64_t>() >= first_step) continue;
    text_ += entries_ == 0 ? "\n  " : ",\n  ";
    text_ += dump(e);
    ++entries_;
  }
  // Written at the next flush even when no entry follows: the file then drops the steps that
  // will be trained again.
  written_ = false;
  return entries_;
}

void JsonListFile::append(const Json& entry) {
  if (closed_) throw Error("'" + path_.string() + "' was already closed; cannot add an entry");
  text_ += entries_ == 0 ? "\n  " : ",\n  ";
  text_ += dump(entry);
  ++entries_;
  ++pending_;
  const double since = seconds_since(last_flush_at_);
  const bool due = policy_.flush_interval_s <= 0.0 || pending_ >= policy_.flush_every ||
                   since >= policy_.flush_interval_s;
  // Keep flushing ≤ 1% of wall time however large the file grows.
  const bool cheap_enough = policy_.flush_interval_s <= 0.0 || since >= 100.0 * last_flush_s_;
  if (due && cheap_enough) flush();
}

void JsonListFile::flush() {
  if (written_ && pending_ == 0) return;
  const auto t0 = std::chrono::steady_clock::now();
  // Close the list in place for the write, then reopen it: no copy of the text.
  const size_t open_size = text_.size();
  text_ += entries_ == 0 ? "]\n" : kListEnd;
  try {
    write_file_atomic(path_, text_);
  } catch (...) {
    text_.resize(open_size);
    throw;
  }
  text_.resize(open_size);
  written_ = true;
  pending_ = 0;
  ++flushes_;
  last_flush_at_ = std::chrono::steady_clock::now();
  last_flush_s_ = std::chrono::duration<double>(last_flush_at_ - t0).count();
}

void JsonListFile::close() {
  if (closed_) return;
  flush();
  closed_ = true;
}

// ---------------------------------------------------------------------------------------------
Json to_json(const TimingEntry& e) {
  Json j = {{"step", e.step},
            {"batch_idx", e.batch_idx},
            {"total_batch_time", e.total_batch_time},
            {"samples_per_second", e.samples_per_second},
            {"examples_per_second", e.examples_per_second},
            {"data_time", e.data_time},
            {"forward_time", e.forward_time},
            {"backward_time", e.backward_time},
            {"optimizer_time", e.optimizer_time}};
  for (const auto& [key, value] : e.extra) j[key] = value;
  return j;
}

TimingProfileWriter::TimingProfileWriter(const std::filesystem::path& path, int64_t timing_every,
                                         FlushPolicy policy)
    : every_(timing_every), file_(path, policy) {
  if (timing_every < 1) {
    throw Error("profiling.timing_every must be >= 1, got " + std::to_string(timing_every));
  }
}

bool TimingProfileWriter::record(const TimingEntry& entry) {
  if (!wants(entry.step)) return false;
  file_.append(to_json(entry));
  return true;
}

// ---------------------------------------------------------------------------------------------
Json memory_entry_json(int64_t step, int64_t batch_idx, const MemorySample& s) {
  const double gpu_alloc_gb = s.cuda.available ? static_cast<double>(s.cuda.allocated_bytes) / kGiB : 0.0;
  const double gpu_reserved_gb = s.cuda.available ? static_cast<double>(s.cuda.reserved_bytes) / kGiB : 0.0;
  Json memory = Json::object();
  if (s.cpu_tracked) {
    memory["cpu"] = {{"bytes_in_use", s.cpu_bytes_in_use}, {"peak_bytes_in_use", s.cpu_peak_bytes_in_use}};
  }
  if (s.cuda.available) {
    memory["cuda:" + std::to_string(s.cuda.device)] = {{"bytes_in_use", s.cuda.allocated_bytes},
                                                       {"peak_bytes_in_use", s.cuda.peak_allocated_bytes},
                                                       {"reserved_bytes", s.cuda.reserved_bytes},
                                                       {"peak_reserved_bytes", s.cuda.peak_reserved_bytes}};
  }
  return Json{{"step", step},
              {"batch_idx", batch_idx},
              {"cpu_memory_percent", s.system.used_percent},
              {"gpu_memory_allocated_gb", gpu_alloc_gb},
              {"gpu_memory_reserved_gb", gpu_reserved_gb},
              {"memory", std::move(memory)},
              {"rss_bytes", s.process.rss_bytes},
              {"peak_rss_bytes", s.process.peak_rss_bytes},
              {"rss_anon_bytes", s.process.rss_anon_bytes},
              {"rss_file_bytes", s.process.rss_file_bytes},
              {"system_memory_total_bytes", s.system.total_bytes},
              {"system_memory_available_bytes", s.system.available_bytes},
              {"timestamp", s.timestamp}};
}

Json category_bytes_json(const CategoryBytes& bytes) {
  Json j = Json::object();
  for (int c = 1; c < kMemoryCategoryCount; ++c)
    j[memory_category_name(static_cast<MemoryCategory>(c))] = bytes.bytes[c];
  j[memory_category_name(MemoryCategory::kOther)] = bytes[MemoryCategory::kOther];
  return j;
}

MemoryProfileWriter::MemoryProfileWriter(const std::filesystem::path& path, int64_t memory_every,
                                         FlushPolicy policy)
    : every_(memory_every), file_(path, policy) {
  if (memory_every < 1) {
    throw Error("profiling.memory_every must be >= 1, got " + std::to_string(memory_every));
  }
}

bool MemoryProfileWriter::record(int64_t step, int64_t batch_idx, const MemorySample& sample,
                                 const Json& extra) {
  if (!wants(step)) return false;
  Json entry = memory_entry_json(step, batch_idx, sample);
  if (extra.is_object()) {
    for (auto it = extra.begin(); it != extra.end(); ++it) entry[it.key()] = it.value();
  }
  file_.append(entry);
  return true;
}

// ---------------------------------------------------------------------------------------------
void TrainingSummary::start() {
  started_ = true;
  start_unix_ = unix_time_seconds();
  start_mono_ = std::chrono::steady_clock::now();
}

void TrainingSummary::record_step(int64_t step, double loss, int64_t samples) {
  if (!has_loss_) first_loss_ = loss;
  has_loss_ = true;
  last_loss_ = loss;
  last_step_ = step;
  ++total_steps_;
  total_samples_ += samples;
}

void TrainingSummary::set_metric(const std::string& name, double value) { metrics_[name] = value; }

void TrainingSummary::set_info(const std::string& key, Json value) { info_[key] = std::move(value); }

Json TrainingSummary::to_json(const std::string& status) const {
  const double end_unix = unix_time_seconds();
  const double total = started_ ? seconds_since(start_mono_) : 0.0;
  const auto steps = static_cast<double>(total_steps_);
  Json j = {{"total_training_time_seconds", total},
            {"total_steps", total_steps_},
            {"average_time_per_step", total_steps_ > 0 ? total / steps : 0.0},
            {"steps_per_second", total > 0.0 ? steps / total : 0.0},
            {"training_start_time", started_ ? start_unix_ : end_unix},
            {"training_end_time", end_unix},
            {"status", status},
            {"metrics", Json(metrics_)},
            {"first_step_loss", has_loss_ ? Json(first_loss_) : Json(nullptr)},
            {"last_step_loss", has_loss_ ? Json(last_loss_) : Json(nullptr)},
            {"last_step", last_step_ >= 0 ? Json(last_step_) : Json(nullptr)},
            {"total_samples", total_samples_},
            {"samples_per_second", total > 0.0 ? static_cast<double>(total_samples_) / total : 0.0},
            {"peak_rss_bytes", read_process_memory().peak_rss_bytes}};
  for (auto it = info_.begin(); it != info_.end(); ++it) {
    if (!j.contains(it.key())) j[it.key()] = it.value();
  }
  return j;
}

void TrainingSummary::write(const std::filesystem::path& path, const std::string& status) const {
  write_json_atomic(path, to_json(status));
}

}  // namespace rt::prof
