// The run directory's JSON profiles (field names from the RAVE v3 and JAX profiling guides;
// docs/cli.md "Run directory"): timing_profile.json, memory_profile.json and training_summary.json.
// Their keys, for writers and readers alike: util/profile_schema.h.
//
// Streaming, bounded. A profile is a JSON list with one entry per line ("[", "  {…},", …, "]"),
// kept on disk, not in memory: the writer holds only the entries recorded since its last
// flush, and a flush writes them over the list's closing "\n]\n" in place (one pwrite, then
// fdatasync), so its cost is O(new entries) however long the run. After every flush the file
// is a complete JSON list; a process killed in the middle of a flush's write can leave its last
// line incomplete, and every reader here (read_profile_entries: profile-report, a resume) then
// takes each complete line as an entry — the format is valid line by line. Flushes happen at
// most every `flush_interval_s` seconds or every `flush_every` entries, and on
// flush()/close()/destruction; the interval also grows to at least 100x the last flush's
// duration (≤ 1% of wall time spent flushing).
//
// Rotation bounds the files: when the current file reaches `part_bytes`, it is renamed to
// <stem>.part<K>.json (K = 1, 2, …) and a new current file starts; at most `parts` files are
// kept (the current one included), the oldest part deleted first, so a profile takes at most
// parts × part_bytes (plus one flush) on disk however long the run (profiling.profile_part_mb,
// profiling.profile_parts). read_profile_entries() reads the parts and the current file as one
// list, in step order.
//
// Thread-safety: one thread per writer (the trainer's). Errors: write failures throw rt::Error
// naming the path from record()/flush()/close(); the destructor reports them on stderr. A flush
// that fails (a full disk) leaves the file as it was and keeps its entries for the next one.
#pragma once

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <map>
#include <string>
#include <vector>

#include "profiling/memory.h"
#include "profiling/memory_metrics.h"
#include "util/json.h"

namespace rt::prof {

struct FlushPolicy {
  double flush_interval_s = 2.0;  // 0: flush after every entry
  int64_t flush_every = 1000;     // entries; also flushes when this many are pending
};

struct RotationPolicy {
  int64_t part_bytes = 64ll << 20;  // 0: one file, unbounded
  int64_t parts = 8;                // files kept, the current one included (>= 2)
};

// The readers of these files (parts and a file cut short included): util/profile_files.h.

// A JSON list file written as described above.
class JsonListFile {
 public:
  JsonListFile(std::filesystem::path path, FlushPolicy policy = {}, RotationPolicy rotation = {});
  ~JsonListFile();
  JsonListFile(const JsonListFile&) = delete;
  JsonListFile& operator=(const JsonListFile&) = delete;

  // Resuming a run: takes over the entries of the file already at path() whose "step" is below
  // `first_step` (later ones were recorded past the checkpoint the run resumes from, and are
  // recorded again), so that the file keeps the run's earlier steps. A file that cannot be read
  // as a JSON list is renamed to "<path>.unreadable" with a warning on stderr. Call before the
  // first append; returns the number of entries kept.
  int64_t continue_from(int64_t first_step);
  // Appends one entry (serialised now); flushes when the policy says so.
  void append(const Json& entry);
  // Writes the file now if anything changed since the last write (or it was never written).
  void flush();
  // Final flush; later appends throw.
  void close();

  const std::filesystem::path& path() const { return path_; }
  int64_t size() const { return entries_; }
  int64_t flush_count() const { return flushes_; }
  double last_flush_seconds() const { return last_flush_s_; }
  // Bytes held in memory for entries not flushed yet: bounded by the flush policy, not the run.
  size_t pending_bytes() const { return pending_text_.capacity(); }
  int64_t rotations() const { return rotations_; }
  int64_t parts_removed() const { return parts_removed_; }

 private:
  void start_file(const std::string& entries_text, int64_t entries);  // writes path_ anew, opens fd_
  void rotate();
  void close_fd();

  std::filesystem::path path_;
  FlushPolicy policy_;
  RotationPolicy rotation_;
  std::string pending_text_;  // "  {...}" lines of the entries not flushed yet, each ending "\n"
  int64_t entries_ = 0;       // every entry of the profile: kept by continue_from, then appended
  int64_t pending_ = 0;
  int64_t file_entries_ = 0;  // entries in the current file on disk
  int64_t file_bytes_ = 0;    // its size: it ends with "\n]\n"
  int fd_ = -1;
  bool written_ = false;
  bool closed_ = false;
  int64_t next_part_ = 1;
  int64_t rotations_ = 0, parts_removed_ = 0;
  int64_t flushes_ = 0;
  double last_flush_s_ = 0.0;
  std::chrono::steady_clock::time_point last_flush_at_;
};

// One timing_profile.json entry. Times in seconds; samples_per_second counts the model's natural
// unit (audio samples for RAVE: batch × n_signal; time bins for SSM: batch × T),
// examples_per_second counts batch elements.
struct TimingEntry {
  int64_t step = 0;
  int64_t batch_idx = 0;
  double total_batch_time = 0.0;
  double samples_per_second = 0.0;
  double examples_per_second = 0.0;
  double data_time = 0.0;
  double forward_time = 0.0;
  double backward_time = 0.0;
  double optimizer_time = 0.0;
  std::map<std::string, double> extra;  // more phases, e.g. "loss_fn_computation_time"
};
Json to_json(const TimingEntry& entry);

// timing_profile.json; keeps steps with step % timing_every == 0.
class TimingProfileWriter {
 public:
  // REQUIRES: timing_every >= 1 (rt::Error otherwise, naming profiling.timing_every).
  TimingProfileWriter(const std::filesystem::path& path, int64_t timing_every = 1, FlushPolicy policy = {},
                      RotationPolicy rotation = {});
  bool wants(int64_t step) const { return step % every_ == 0; }
  // Records `entry` when wants(entry.step); returns whether it did.
  bool record(const TimingEntry& entry);
  void flush() { file_.flush(); }
  void close() { file_.close(); }
  int64_t continue_from(int64_t first_step) { return file_.continue_from(first_step); }
  const JsonListFile& file() const { return file_; }

 private:
  int64_t every_;
  JsonListFile file_;
};

// memory_profile.json; keeps steps with step % memory_every == 0. GB fields are GiB (2^30 bytes,
// as torch.cuda.memory_allocated() / 1024**3); 0 on CPU runs.
class MemoryProfileWriter {
 public:
  // REQUIRES: memory_every >= 1 (rt::Error otherwise, naming profiling.memory_every).
  MemoryProfileWriter(const std::filesystem::path& path, int64_t memory_every = 1, FlushPolicy policy = {},
                      RotationPolicy rotation = {});
  bool wants(int64_t step) const { return step % every_ == 0; }
  // `extra` (an object) is merged into the entry, e.g. memory categories. Returns whether the
  // step was recorded.
  bool record(int64_t step, int64_t batch_idx, const MemorySample& sample, const Json& extra = Json());
  // The trainer's measurement: its sample, with its categories (memory_category_fields) when
  // it has a split.
  bool record(int64_t step, int64_t batch_idx, const MemoryMeasurement& m);
  void flush() { file_.flush(); }
  void close() { file_.close(); }
  int64_t continue_from(int64_t first_step) { return file_.continue_from(first_step); }
  const JsonListFile& file() const { return file_; }

 private:
  int64_t every_;
  JsonListFile file_;
};
Json memory_entry_json(int64_t step, int64_t batch_idx, const MemorySample& sample);
// {"parameters": …, "buffers": …, "gradients": …, "optimizer_state": …,
//  "activations_and_temporaries": …} in bytes: a memory entry's "categories", and its
// "interval_peak"'s.
Json category_bytes_json(const CategoryBytes& bytes);
// A measurement's category fields of its memory entry: {"categories": …,
// "categories_untracked_bytes": …} with a split, and "interval_peak": {"bytes_in_use": …,
// "categories": …} with an interval peak; an empty object without a split.
Json memory_category_fields(const MemoryMeasurement& m);

// training_summary.json (the RAVE guide's fields plus status, metrics and losses). The trainer calls start()
// once, record_step() per optimisation step, and write() on every exit path (it may be called repeatedly;
// each call rewrites the file atomically with the current end time).
class TrainingSummary {
 public:
  void start();  // records training_start_time (Unix seconds) and the monotonic start
  void record_step(int64_t step, double loss, int64_t samples = 0);
  void set_metric(const std::string& name, double value);  // last validation values
  void set_info(const std::string& key, Json value);       // model_family, config_name, device…

  // status: "completed", "interrupted" or "failed: <reason>"; "running" while training (the
  // trainer rewrites the file at log cadence, so that a killed run leaves its figures so far).
  Json to_json(const std::string& status) const;
  void write(const std::filesystem::path& path, const std::string& status) const;

  int64_t total_steps() const { return total_steps_; }

 private:
  bool started_ = false;
  double start_unix_ = 0.0;
  std::chrono::steady_clock::time_point start_mono_;
  int64_t total_steps_ = 0;
  int64_t last_step_ = -1;
  int64_t total_samples_ = 0;
  bool has_loss_ = false;
  double first_loss_ = 0.0;
  double last_loss_ = 0.0;
  std::map<std::string, double> metrics_;
  Json info_ = Json::object();
};

}  // namespace rt::prof
