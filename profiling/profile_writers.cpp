#include "profiling/profile_writers.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <utility>

#include "util/atomic_file.h"
#include "util/error.h"
#include "util/profile_files.h"
#include "util/profile_schema.h"

namespace rt::prof {
namespace {

namespace schema = profile_schema;

std::string dump(const Json& value) { return value.dump(-1, ' ', false, Json::error_handler_t::replace); }

double seconds_since(std::chrono::steady_clock::time_point t) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t).count();
}

}  // namespace

// ---------------------------------------------------------------------------------------------
namespace {

namespace fs = std::filesystem;

// A list file's text from "  {…}\n" lines: "[\n" + the lines joined by ",\n" + "\n]\n" ("[\n]\n"
// when there are none).
std::string list_text(const std::string& lines) {
  std::string text = "[\n";
  size_t begin = 0;
  while (begin < lines.size()) {
    const size_t end = lines.find('\n', begin);
    text.append(lines, begin, end - begin);
    begin = end + 1;
    text += begin < lines.size() ? ",\n" : "\n";
  }
  return text + "]\n";
}

// pwrite all of `text` at `offset`; errno of the failing call, or 0.
int write_at(int fd, const std::string& text, off_t offset) {
  size_t done = 0;
  while (done < text.size()) {
    const ssize_t n = ::pwrite(fd, text.data() + done, text.size() - done, offset + static_cast<off_t>(done));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return n < 0 ? errno : EIO;
    done += static_cast<size_t>(n);
  }
  return 0;
}

std::string write_failure_text(const fs::path& path, int err) {
  const std::string why = std::strerror(err);
  if (err == ENOSPC || err == EDQUOT) return "disk full while writing '" + path.string() + "' (" + why + ")";
  if (err == EFBIG)
    return "file size limit reached while writing '" + path.string() + "' (" + why + "; see ulimit -f)";
  return "cannot write '" + path.string() + "': " + why;
}

}  // namespace

JsonListFile::JsonListFile(std::filesystem::path path, FlushPolicy policy, RotationPolicy rotation)
    : path_(std::move(path)),
      policy_(policy),
      rotation_(rotation),
      last_flush_at_(std::chrono::steady_clock::now()) {
  if (rotation_.part_bytes > 0 && rotation_.parts < 2) {
    throw Error("profiling.profile_parts must be >= 2 (the current file and one part), got " +
                std::to_string(rotation_.parts));
  }
  const auto parts = indexed_profile_parts(path_);
  if (!parts.empty()) next_part_ = parts.back().first + 1;
}

JsonListFile::~JsonListFile() {
  try {
    close();
  } catch (const std::exception& e) {
    std::fprintf(stderr, "warning: %s\n", e.what());
  }
  close_fd();
}

void JsonListFile::close_fd() {
  if (fd_ >= 0) ::close(fd_);
  fd_ = -1;
}

void JsonListFile::start_file(const std::string& entries_text, int64_t entries) {
  close_fd();
  const std::string text = list_text(entries_text);
  write_file_atomic(path_, text);
  fd_ = ::open(path_.c_str(), O_WRONLY | O_CLOEXEC);
  if (fd_ < 0) throw Error("cannot open '" + path_.string() + "': " + std::strerror(errno));
  file_entries_ = entries;
  file_bytes_ = static_cast<int64_t>(text.size());
  written_ = true;
}

int64_t JsonListFile::continue_from(int64_t first_step) {
  std::error_code ec;
  if (entries_ > 0) return 0;
  auto keeps = [first_step](const Json& e) {
    const auto step = e.is_object() ? e.find(schema::entry::kStep) : e.end();
    return step != e.end() && step->is_number_integer() && step->get<int64_t>() < first_step;
  };
  auto lines_of = [&](const Json& list, int64_t* count) {
    std::string text;
    for (const Json& e : list) {
      if (!keeps(e)) continue;
      text += "  " + dump(e) + "\n";
      ++*count;
    }
    return text;
  };
  int64_t kept = 0;
  // Parts past the checkpoint go; one that straddles it is cut there.
  for (const auto& [k, part] : indexed_profile_parts(path_)) {
    Json list;
    try {
      list = read_profile_list_file(part, nullptr);
    } catch (const std::exception& e) {
      std::fprintf(stderr, "warning: cannot continue %s (%s); it is left as it is\n", part.string().c_str(),
                   e.what());
      continue;
    }
    int64_t count = 0;
    const std::string text = lines_of(list, &count);
    if (count == 0) {
      fs::remove(part, ec);
    } else {
      if (count < static_cast<int64_t>(list.size())) write_file_atomic(part, list_text(text));
      kept += count;
    }
  }
  const auto parts = indexed_profile_parts(path_);
  next_part_ = parts.empty() ? 1 : parts.back().first + 1;
  if (!fs::exists(path_, ec)) {
    entries_ = kept;
    return kept;
  }
  Json old;
  try {
    old = read_profile_list_file(path_, nullptr);
  } catch (const std::exception& e) {
    const fs::path aside = path_.string() + ".unreadable";
    fs::rename(path_, aside, ec);
    std::fprintf(stderr, "warning: cannot continue %s (%s); it starts empty, the old file is kept as '%s'\n",
                 path_.string().c_str(), e.what(), aside.string().c_str());
    entries_ = kept;
    return kept;
  }
  int64_t count = 0;
  const std::string text = lines_of(old, &count);
  // Written now, so that the file drops the steps that will be trained again.
  start_file(text, count);
  entries_ = kept + count;
  return entries_;
}

void JsonListFile::append(const Json& entry) {
  if (closed_) throw Error("'" + path_.string() + "' was already closed; cannot add an entry");
  pending_text_ += "  ";
  pending_text_ += dump(entry);
  pending_text_ += '\n';
  ++entries_;
  ++pending_;
  const double since = seconds_since(last_flush_at_);
  const bool due =
      policy_.flush_interval_s <= 0.0 || pending_ >= policy_.flush_every || since >= policy_.flush_interval_s;
  // Keep flushing ≤ 1% of wall time however large the file grows.
  const bool cheap_enough = policy_.flush_interval_s <= 0.0 || since >= 100.0 * last_flush_s_;
  if (due && cheap_enough) flush();
}

void JsonListFile::flush() {
  if (written_ && pending_ == 0) return;
  const auto t0 = std::chrono::steady_clock::now();
  if (!written_ || fd_ < 0) {
    start_file(pending_text_, pending_);
  } else {
    // The new lines over the closing "\n]\n", then the closing again.
    std::string chunk;
    chunk.reserve(pending_text_.size() + pending_ * 2 + 4);
    size_t begin = 0;
    bool first = file_entries_ == 0;
    while (begin < pending_text_.size()) {
      const size_t end = pending_text_.find('\n', begin);
      chunk += first ? "\n" : ",\n";
      chunk.append(pending_text_, begin, end - begin);
      first = false;
      begin = end + 1;
    }
    chunk += "\n]\n";
    // An empty list is "[\n]\n": its closing "\n]\n" starts at 1, as in any other.
    const off_t at = static_cast<off_t>(file_bytes_ - 3);
    int err = write_at(fd_, chunk, at);
    if (err == 0 && ::fdatasync(fd_) != 0) err = errno;
    if (err != 0) {
      // Put the list's end back where it was (blocks the file already holds) and drop what was
      // written past it: the file stays the complete list of the entries flushed before.
      write_at(fd_, "\n]\n", at);
      if (::ftruncate(fd_, static_cast<off_t>(file_bytes_)) != 0) {
        // The file may end in a partial line now: the readers take its complete lines.
      }
      throw Error(write_failure_text(path_, err) + "; the entries flushed before are kept");
    }
    file_bytes_ += static_cast<int64_t>(chunk.size()) - 3;
    file_entries_ += pending_;
  }
  pending_text_.clear();
  if (pending_text_.capacity() > (1u << 20)) pending_text_.shrink_to_fit();
  pending_ = 0;
  ++flushes_;
  last_flush_at_ = std::chrono::steady_clock::now();
  last_flush_s_ = std::chrono::duration<double>(last_flush_at_ - t0).count();
  if (rotation_.part_bytes > 0 && file_bytes_ >= rotation_.part_bytes) rotate();
}

void JsonListFile::rotate() {
  const fs::path part = profile_part_path(path_, next_part_++);
  close_fd();
  std::error_code ec;
  fs::rename(path_, part, ec);
  if (ec) throw Error("cannot rotate '" + path_.string() + "' to '" + part.string() + "': " + ec.message());
  ++rotations_;
  start_file("", 0);
  auto parts = indexed_profile_parts(path_);
  // The current file counts as one of the `parts` files kept.
  while (static_cast<int64_t>(parts.size()) + 1 > rotation_.parts) {
    fs::remove(parts.front().second, ec);
    if (parts_removed_++ == 0) {
      std::fprintf(
          stderr,
          "note: %s reached its bound (profiling.profile_parts = %lld files of profiling.profile_part_mb = "
          "%.0f MiB): its oldest part, %s, is removed, and each later rotation removes the next oldest\n",
          path_.string().c_str(), static_cast<long long>(rotation_.parts),
          static_cast<double>(rotation_.part_bytes) / 1048576.0, parts.front().second.filename().c_str());
    }
    parts.erase(parts.begin());
  }
}

void JsonListFile::close() {
  if (closed_) return;
  flush();
  closed_ = true;
  close_fd();
}

// ---------------------------------------------------------------------------------------------
Json to_json(const TimingEntry& e) {
  namespace key = schema::timing;
  Json j = {{key::kStep, e.step},
            {key::kBatchIdx, e.batch_idx},
            {key::kTotalBatchTime, e.total_batch_time},
            {key::kSamplesPerSecond, e.samples_per_second},
            {key::kExamplesPerSecond, e.examples_per_second},
            {key::kDataTime, e.data_time},
            {key::kForwardTime, e.forward_time},
            {key::kBackwardTime, e.backward_time},
            {key::kOptimizerTime, e.optimizer_time}};
  for (const auto& [key, value] : e.extra) j[key] = value;
  return j;
}

TimingProfileWriter::TimingProfileWriter(const std::filesystem::path& path, int64_t timing_every,
                                         FlushPolicy policy, RotationPolicy rotation)
    : every_(timing_every), file_(path, policy, rotation) {
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
  namespace key = schema::memory;
  const double per_gb = schema::kBytesPerGb;
  const double gpu_alloc_gb = s.cuda.available ? static_cast<double>(s.cuda.allocated_bytes) / per_gb : 0.0;
  const double gpu_reserved_gb = s.cuda.available ? static_cast<double>(s.cuda.reserved_bytes) / per_gb : 0.0;
  Json memory = Json::object();
  if (s.cpu_tracked) {
    memory[key::kDeviceCpu] = {{key::kBytesInUse, s.cpu_bytes_in_use},
                               {key::kPeakBytesInUse, s.cpu_peak_bytes_in_use}};
  }
  if (s.cuda.available) {
    memory[key::kDeviceCudaPrefix + std::to_string(s.cuda.device)] = {
        {key::kBytesInUse, s.cuda.allocated_bytes},
        {key::kPeakBytesInUse, s.cuda.peak_allocated_bytes},
        {key::kReservedBytes, s.cuda.reserved_bytes},
        {key::kPeakReservedBytes, s.cuda.peak_reserved_bytes}};
  }
  return Json{{key::kStep, step},
              {key::kBatchIdx, batch_idx},
              {key::kCpuMemoryPercent, s.system.used_percent},
              {key::kGpuMemoryAllocatedGb, gpu_alloc_gb},
              {key::kGpuMemoryReservedGb, gpu_reserved_gb},
              {key::kMemory, std::move(memory)},
              {key::kRssBytes, s.process.rss_bytes},
              {key::kPeakRssBytes, s.process.peak_rss_bytes},
              {key::kRssAnonBytes, s.process.rss_anon_bytes},
              {key::kRssFileBytes, s.process.rss_file_bytes},
              {key::kSystemMemoryTotalBytes, s.system.total_bytes},
              {key::kSystemMemoryAvailableBytes, s.system.available_bytes},
              {key::kTimestamp, s.timestamp}};
}

Json memory_category_fields(const MemoryMeasurement& m) {
  namespace key = schema::memory;
  Json j = Json::object();
  if (!m.split) return j;
  j[key::kCategories] = category_bytes_json(m.split->bytes);
  j[key::kCategoriesUntrackedBytes] = m.split->untracked_bytes;
  if (m.interval_peak) {
    j[key::kIntervalPeak] = {{key::kBytesInUse, m.interval_peak->bytes_in_use},
                             {key::kCategories, category_bytes_json(m.interval_peak->categories)}};
  }
  return j;
}

Json category_bytes_json(const CategoryBytes& bytes) {
  Json j = Json::object();
  for (int c = 1; c < kMemoryCategoryCount; ++c)
    j[memory_category_name(static_cast<MemoryCategory>(c))] = bytes.bytes[c];
  j[memory_category_name(MemoryCategory::kOther)] = bytes[MemoryCategory::kOther];
  return j;
}

MemoryProfileWriter::MemoryProfileWriter(const std::filesystem::path& path, int64_t memory_every,
                                         FlushPolicy policy, RotationPolicy rotation)
    : every_(memory_every), file_(path, policy, rotation) {
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

bool MemoryProfileWriter::record(int64_t step, int64_t batch_idx, const MemoryMeasurement& m) {
  return record(step, batch_idx, m.sample, memory_category_fields(m));
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
  namespace key = schema::summary;
  Json j = {{key::kTotalTrainingTimeSeconds, total},
            {key::kTotalSteps, total_steps_},
            {key::kAverageTimePerStep, total_steps_ > 0 ? total / steps : 0.0},
            {key::kStepsPerSecond, total > 0.0 ? steps / total : 0.0},
            {key::kTrainingStartTime, started_ ? start_unix_ : end_unix},
            {key::kTrainingEndTime, end_unix},
            {key::kStatus, status},
            {key::kMetrics, Json(metrics_)},
            {key::kFirstStepLoss, has_loss_ ? Json(first_loss_) : Json(nullptr)},
            {key::kLastStepLoss, has_loss_ ? Json(last_loss_) : Json(nullptr)},
            {key::kLastStep, last_step_ >= 0 ? Json(last_step_) : Json(nullptr)},
            {key::kTotalSamples, total_samples_},
            {key::kSamplesPerSecond, total > 0.0 ? static_cast<double>(total_samples_) / total : 0.0},
            {key::kPeakRssBytes, read_process_memory().peak_rss_bytes}};
  for (auto it = info_.begin(); it != info_.end(); ++it) {
    if (!j.contains(it.key())) j[it.key()] = it.value();
  }
  return j;
}

void TrainingSummary::write(const std::filesystem::path& path, const std::string& status) const {
  write_json_atomic(path, to_json(status));
}

}  // namespace rt::prof
