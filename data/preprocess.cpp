#include "data/preprocess.h"

#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cctype>
#include <chrono>
#include <cmath>
#include <condition_variable>
#include <cstdio>
#include <map>
#include <mutex>
#include <optional>
#include <set>
#include <thread>

#include "data/audio_dataset.h"
#include "data/audio_example.h"
#include "data/audio_io.h"
#include "data/db_metadata.h"
#include "data/lazy_audio.h"
#include "data/lmdb_store.h"
#include "util/error.h"
#include "util/path_kind.h"
#include "util/printable.h"
#include "util/signals.h"
#include "util/thread_limits.h"

namespace rt {
namespace fs = std::filesystem;
namespace {

// What one worker makes of one file.
struct FileResult {
  std::vector<std::string> records;  // Serialized AudioExamples, in chunk order (lazy: the reference).
  uint64_t chunks = 0;               // Chunks the records hold (lazy: the reference's).
  std::string skip_reason;           // Non-empty: the file is skipped.
  double seconds = 0.0;
};

FileResult process_file(const fs::path& path, const PreprocessOptions& opt) {
  FileResult result;
  std::string ext = path.extension().string();
  std::transform(ext.begin(), ext.end(), ext.begin(), [](unsigned char c) { return std::tolower(c); });
  if (ext == ".aac" || ext == ".m4a") {
    result.skip_reason =
        "AAC is not read: libsndfile, which preprocess decodes with, has no AAC decoder; convert the file "
        "first "
        "(e.g. ffmpeg -i IN" +
        ext + " OUT.flac)";
    return result;
  }
  std::error_code ec;
  if (fs::file_size(path, ec) == 0 && !ec) {
    result.skip_reason = "empty file";
    return result;
  }
  AudioData audio;
  SourceFacts source;
  try {
    audio = load_audio(path, opt.sampling_rate, opt.channels, &source);
  } catch (const Error& e) {
    std::string why = e.what();
    const std::string prefix = "cannot decode '" + path.string() + "': ";
    if (why.rfind(prefix, 0) == 0) why = why.substr(prefix.size());
    result.skip_reason = "not readable as audio (" + why + ")";
    return result;
  }
  if (!audio.truncated.empty()) {
    char buf[64];
    std::snprintf(buf, sizeof(buf), " (%.2f s of it decodes)", audio.seconds());
    result.skip_reason = "truncated: " + audio.truncated + buf + "; re-export or repair it";
    return result;
  }
  const int64_t chunk = 2 * opt.num_signal;
  const int64_t frames = audio.frames();
  const int64_t n_chunks = frames / chunk;
  if (n_chunks == 0) {
    char buf[160];
    std::snprintf(
        buf, sizeof(buf),
        "too short: %.2f s after resampling, one chunk needs %.2f s (2 * num_signal = %lld samples)",
        audio.seconds(), static_cast<double>(chunk) / opt.sampling_rate, static_cast<long long>(chunk));
    result.skip_reason = buf;
    return result;
  }
  result.seconds = static_cast<double>(n_chunks * chunk) / opt.sampling_rate;
  result.chunks = static_cast<uint64_t>(n_chunks);
  if (opt.lazy) {
    // A reference: the loader decodes the file as above when it draws a chunk (data/lazy_audio.h).
    LazyFile f{path, source.seconds, source.channels, frames, chunk, n_chunks, 0, 0};
    stat_source(path, &f.size, &f.mtime_ns);
    result.records.push_back(encode_lazy_record(f));
    return result;
  }
  std::vector<int16_t> samples(static_cast<size_t>(chunk * opt.channels));
  for (int64_t k = 0; k < n_chunks; ++k) {
    to_int16(audio, k * chunk, chunk, samples.data());
    result.records.push_back(encode_waveform(samples.data(), opt.channels, chunk, opt.sampling_rate));
  }
  return result;
}

std::string hms(double seconds) {
  const auto s = static_cast<long long>(std::llround(seconds));
  char buf[64];
  std::snprintf(buf, sizeof(buf), "%lld:%02lld:%02lld", s / 3600, (s / 60) % 60, s % 60);
  return buf;
}

// Every skipped input with its reason, paths shown terminal-safe.
void log_skipped(std::ostream& log, const std::vector<SkippedFile>& skipped) {
  if (skipped.empty()) return;
  log << "preprocess: skipped " << skipped.size() << " file(s):\n";
  for (const auto& sk : skipped)
    log << "  " << terminal_safe(sk.path.string()) << ": " << terminal_safe(sk.reason) << "\n";
}

// The folders' files of other extensions, counted (RAVE's --ext search leaves them unread too).
void log_other_ext(std::ostream& log, size_t other, const std::vector<std::string>& extensions) {
  if (other == 0) return;
  std::string list;
  for (const auto& e : extensions) list += (list.empty() ? "" : " ") + e;
  log << "preprocess: " << other << " file(s) in the folders are of none of --ext's extensions (" << list
      << "): not read\n";
}

// A flag's number as the user would write it ("0.5", "16384").
std::string number_text(double v) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%g", v);
  return buf;
}

std::string gb(double bytes) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%.3f GB", bytes / (1024.0 * 1024.0 * 1024.0));
  return buf;
}

void validate(const PreprocessOptions& o) {
  if (o.input_paths.empty()) throw Error("--input_path: give at least one file or folder");
  if (o.output_path.empty()) throw Error("--output_path: required");
  if (o.sampling_rate < kMinSampleRate || o.sampling_rate > kMaxSampleRate) {
    throw Error("--sampling_rate " + std::to_string(o.sampling_rate) + ": must be in [" +
                std::to_string(kMinSampleRate) + ", " + std::to_string(kMaxSampleRate) + "] Hz");
  }
  if (o.channels < 1 || o.channels > kMaxChannels) {
    throw Error("--channels " + std::to_string(o.channels) + ": must be in [1, " +
                std::to_string(kMaxChannels) + "]");
  }
  if (o.num_signal < 1 || o.num_signal > kMaxDecodedSamples / 2 / o.channels) {
    throw Error("--num_signal " + std::to_string(o.num_signal) + ": must be in [1, " +
                std::to_string(kMaxDecodedSamples / 2 / o.channels) + "] at " + std::to_string(o.channels) +
                " channel(s)");
  }
  check_max_db_size(o.max_db_size_gb);
  normalize_extensions(o.extensions);
  const int64_t cores = machine_cores();
  if (o.workers < 0 || o.workers > max_thread_count(cores)) {
    throw Error("--workers " + std::to_string(o.workers) + ": must be in [0, " +
                std::to_string(max_thread_count(cores)) + "] (0 = all cores; at most 4 × this machine's " +
                std::to_string(cores) + " cores)");
  }
}

}  // namespace

void check_max_db_size(double gb) {
  if (!(gb > 0 && gb <= kMaxDbSizeGb)) {
    throw Error("--max_db_size " + number_text(gb) + " is not accepted: > 0 and at most " +
                number_text(kMaxDbSizeGb) + " (GB, the LMDB map size)");
  }
}

const std::vector<std::string>& rave_audio_extensions() {
  static const std::vector<std::string> extensions{"aif", "aiff", "wav", "opus", "mp3", "aac", "flac", "ogg"};
  return extensions;
}

std::vector<std::string> normalize_extensions(const std::vector<std::string>& values) {
  std::vector<std::string> out;
  for (const auto& v : values) {
    std::string e = v.rfind('.', 0) == 0 ? v.substr(1) : v;
    const bool ok = !e.empty() && e.size() <= 16 &&
                    std::all_of(e.begin(), e.end(), [](unsigned char c) { return std::isalnum(c) != 0; });
    if (!ok) {
      throw Error("--ext '" + printable(v) +
                  "' is not an extension: 1 to 16 letters and digits, with or without the dot (e.g. --ext "
                  "wav --ext mp3)");
    }
    std::transform(e.begin(), e.end(), e.begin(), [](unsigned char c) { return std::tolower(c); });
    if (std::find(out.begin(), out.end(), e) == out.end()) out.push_back(e);
  }
  if (out.empty())
    throw Error("--ext: give at least one extension (RAVE's default: aif aiff wav opus mp3 aac flac ogg)");
  return out;
}

namespace {

// Whether `path`'s extension (any case) is one of `extensions` (canonical).
bool has_extension(const fs::path& path, const std::vector<std::string>& extensions) {
  std::string e = path.extension().string();
  if (e.empty()) return false;
  e = e.substr(1);
  std::transform(e.begin(), e.end(), e.begin(), [](unsigned char c) { return std::tolower(c); });
  return std::find(extensions.begin(), extensions.end(), e) != extensions.end();
}

}  // namespace

std::vector<fs::path> collect_input_files(const std::vector<fs::path>& inputs,
                                          std::vector<SkippedFile>& missing,
                                          const std::vector<std::string>& extensions, size_t* other) {
  std::set<fs::path> files;
  for (const auto& in : inputs) {
    std::error_code ec;
    if (fs::is_regular_file(in, ec)) {
      files.insert(fs::absolute(in).lexically_normal());
    } else if (fs::is_directory(in, ec)) {
      for (auto it = fs::recursive_directory_iterator(in, fs::directory_options::follow_directory_symlink |
                                                              fs::directory_options::skip_permission_denied);
           it != fs::recursive_directory_iterator(); ++it) {
        // A database inside the folder (an earlier import's output) is no audio to import.
        if (it->is_directory(ec) && fs::is_regular_file(it->path() / "data.mdb", ec)) {
          it.disable_recursion_pending();
          missing.push_back({it->path(), "an LMDB database (data.mdb), not audio: not searched"});
          continue;
        }
        if (!it->is_regular_file(ec)) continue;
        if (!extensions.empty() && !has_extension(it->path(), extensions)) {
          if (other != nullptr) ++*other;
          continue;
        }
        files.insert(fs::absolute(it->path()).lexically_normal());
      }
    } else {
      const std::string why = not_a_folder(in);
      missing.push_back({in, why.rfind("is ", 0) == 0 ? "is " + file_kind_text(fs::status(in, ec)) +
                                                            ", neither a file nor a folder"
                                                      : why});
    }
  }
  return {files.begin(), files.end()};
}

PreprocessResult preprocess_audio(const PreprocessOptions& opt, std::ostream& log) {
  validate(opt);
  PreprocessResult result;
  const std::vector<std::string> extensions = normalize_extensions(opt.extensions);
  const std::vector<fs::path> files =
      collect_input_files(opt.input_paths, result.skipped, extensions, &result.files_other_ext);
  result.files_total = files.size() + result.skipped.size();

  // LMDB wants a page-multiple map size.
  const double requested = opt.max_db_size_gb * 1024.0 * 1024.0 * 1024.0;
  const uint64_t page = static_cast<uint64_t>(::sysconf(_SC_PAGESIZE));
  const uint64_t map_size =
      std::max<uint64_t>(page * 16, (static_cast<uint64_t>(requested) + page - 1) / page * page);
  if (files.empty()) {
    // Nothing to import: no database is made (the folder is left as it was).
    log_skipped(log, result.skipped);
    log_other_ext(log, result.files_other_ext, extensions);
    log << "preprocess: no input file found: no database was made at '"
        << terminal_safe(opt.output_path.string()) << "'\n";
    return result;
  }
  // Nothing is imported from inside the database being written: the next import of that folder
  // would count the database's own files among its inputs.
  std::error_code canon_ec;
  const fs::path out_abs = fs::weakly_canonical(fs::absolute(opt.output_path), canon_ec);
  for (const auto& in : opt.input_paths) {
    std::error_code ec;
    if (!fs::is_directory(in, ec)) continue;
    const fs::path in_abs = fs::weakly_canonical(fs::absolute(in), ec);
    const fs::path rel = out_abs.lexically_relative(in_abs);
    if (!rel.empty() && *rel.begin() != "..") {
      throw Error("--output_path '" + opt.output_path.string() + "' is inside --input_path '" + in.string() +
                  "': the database would be written among the files it is made from; choose a folder outside "
                  "the inputs (e.g. datasets/<name>)");
    }
  }
  // A failed, stopped or empty import leaves the folder as it was (NewDatabase); declared before
  // the store, which must close first.
  NewDatabase target(opt.output_path, "--output_path");
  LmdbStore store(opt.output_path, LmdbStore::Mode::kReadWrite, map_size);

  const int hw = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  const int n_workers = std::max(1, std::min<int>(opt.workers > 0 ? opt.workers : hw,
                                                  static_cast<int>(std::max<size_t>(files.size(), 1))));
  // Decoded-but-unwritten files are bounded so memory stays flat on large folders.
  const size_t window = static_cast<size_t>(n_workers) * 2;

  std::mutex mu;
  std::condition_variable cv;
  std::map<size_t, FileResult> ready;
  size_t next_claim = 0, next_write = 0;
  bool stop = false;

  auto worker = [&] {
    for (;;) {
      size_t i;
      {
        std::unique_lock<std::mutex> lock(mu);
        cv.wait(lock, [&] { return stop || next_claim >= files.size() || next_claim < next_write + window; });
        if (stop || next_claim >= files.size() || stop_requested()) return;
        i = next_claim++;
      }
      FileResult r;
      try {
        r = process_file(files[i], opt);
      } catch (const std::exception& e) {
        r.records.clear();
        r.skip_reason = std::string("failed: ") + e.what();
      }
      {
        std::lock_guard<std::mutex> lock(mu);
        ready.emplace(i, std::move(r));
      }
      cv.notify_all();
    }
  };
  std::vector<std::thread> threads;
  for (int w = 0; w < n_workers; ++w) threads.emplace_back(worker);

  const bool tty = ::isatty(STDERR_FILENO) != 0;
  const size_t report_every = std::max<size_t>(1, files.size() / 20);
  size_t last_reported = static_cast<size_t>(-1);
  auto progress = [&](size_t done, bool final_line) {
    if (!tty && !final_line && done % report_every != 0) return;
    if (!tty && final_line && done == last_reported) return;
    last_reported = done;
    char buf[256];
    std::snprintf(buf, sizeof(buf), "files %zu/%zu, chunks %llu, audio %s (%.1f s)", done, files.size(),
                  static_cast<unsigned long long>(result.chunks), hms(result.seconds).c_str(),
                  result.seconds);
    log << (tty ? "\r" : "") << "preprocess: " << buf << (tty && !final_line ? "" : "\n") << std::flush;
  };

  // Commits group a few chunks, so a full map loses at most one group.
  constexpr size_t kChunksPerCommit = 16;
  uint64_t key_index = 0;
  try {
    for (size_t i = 0; i < files.size(); ++i) {
      FileResult r;
      {
        std::unique_lock<std::mutex> lock(mu);
        // Woken every 100 ms to notice SIGINT/SIGTERM while a worker decodes a long file.
        while (!cv.wait_for(lock, std::chrono::milliseconds(100), [&] { return ready.count(i) > 0; })) {
          throw_if_stop_requested("after " + std::to_string(result.chunks) + " chunks from " +
                                  std::to_string(result.files_used) +
                                  " files; the unfinished database was removed");
        }
        r = std::move(ready[i]);
        ready.erase(i);
        next_write = i + 1;
      }
      cv.notify_all();
      // A worker stopped by the signal leaves a failure, not a file to skip.
      throw_if_stop_requested("after " + std::to_string(result.chunks) + " chunks from " +
                              std::to_string(result.files_used) +
                              " files; the unfinished database was removed");
      if (!r.skip_reason.empty()) {
        result.skipped.push_back({files[i], r.skip_reason});
      } else {
        uint64_t file_chunks = 0;
        try {
          for (size_t start = 0; start < r.records.size(); start += kChunksPerCommit) {
            LmdbStore::Writer writer(store);
            const size_t end = std::min(r.records.size(), start + kChunksPerCommit);
            for (size_t k = start; k < end; ++k)
              writer.put(LmdbStore::key_for_index(key_index + (k - start)), r.records[k]);
            writer.commit();
            key_index += end - start;
            const uint64_t chunks = opt.lazy ? r.chunks : end - start;
            file_chunks += chunks;
            result.chunks += chunks;
            result.seconds +=
                static_cast<double>(chunks) * 2.0 * static_cast<double>(opt.num_signal) / opt.sampling_rate;
          }
        } catch (const MapFullError&) {
          if (file_chunks > 0) ++result.files_used;
          throw;
        }
        ++result.files_used;
      }
      progress(i + 1, false);
    }
  } catch (const MapFullError&) {
    result.map_full = true;
  } catch (...) {
    {
      std::lock_guard<std::mutex> lock(mu);
      stop = true;
    }
    cv.notify_all();
    for (auto& t : threads) t.join();
    throw;
  }
  {
    std::lock_guard<std::mutex> lock(mu);
    stop = true;
  }
  cv.notify_all();
  for (auto& t : threads) t.join();
  progress(result.map_full ? result.files_used : files.size(), true);

  std::error_code ec;
  result.db_bytes = fs::file_size(opt.output_path / "data.mdb", ec);
  if (result.chunks == 0) {
    // Nothing to train on: the folder is left as it was (a corrected command can use it).
    log_skipped(log, result.skipped);
    log_other_ext(log, result.files_other_ext, extensions);
    log << "preprocess: no chunk written (" << result.files_total
        << " input file(s), none gave a chunk): no database was made at '"
        << terminal_safe(opt.output_path.string()) << "'\n";
    return result;
  }
  // Written last and also after a full map, so the database always describes itself.
  write_db_metadata(opt.output_path, DbMetadata{opt.lazy, opt.channels, result.seconds, opt.sampling_rate});
  target.keep();

  if (result.map_full) {
    log << "preprocess: the database reached --max_db_size " << opt.max_db_size_gb << " (map size "
        << gb(static_cast<double>(map_size)) << ", data.mdb " << gb(static_cast<double>(result.db_bytes))
        << "); stopped after " << result.chunks << " chunks. Everything written so far is committed and "
        << "metadata.yaml describes it; raise --max_db_size to store more.\n";
  }
  log_skipped(log, result.skipped);
  log_other_ext(log, result.files_other_ext, extensions);
  log << "preprocess: wrote " << result.chunks << " chunks (" << hms(result.seconds) << ", " << result.seconds
      << " s)" << (opt.lazy ? " as " + std::to_string(key_index) + " lazy file references" : std::string())
      << " from " << result.files_used << " of " << result.files_total << " files to '"
      << terminal_safe(opt.output_path.string()) << "'; skipped " << result.skipped.size() << "\n";
  return result;
}

namespace {

// What inspect returns: the key of every bad record ("<key>: why") and of every database-level
// problem ("metadata.yaml: why", "database: why").
std::vector<std::string> bad_keys(const std::vector<std::string>& bad,
                                  const std::vector<std::string>& problems) {
  std::vector<std::string> keys;
  for (const auto& b : bad) keys.push_back(b.substr(0, b.find(':')));
  for (const auto& p : problems) keys.push_back(p.substr(0, p.find(':')));
  return keys;
}

// A lazy database's inspection: every reference read, and its file checked to be there as
// preprocess read it (size and modification time); the audio is not decoded.
std::vector<std::string> inspect_lazy(LmdbStore& store, const DbMetadata& meta, const fs::path& db,
                                      const std::vector<std::string>& problems, std::ostream& out) {
  out << "kind: lazy (each record references a source file, decoded when the loader draws one of its "
         "chunks)\n";
  size_t files = 0;
  int64_t chunks = 0, chunk = 0;
  std::vector<std::string> bad;
  store.for_each([&](std::string_view key_view, std::string_view value) {
    const std::string key(key_view);
    throw_if_stop_requested("while inspecting '" + db.string() + "'");
    try {
      const LazyFile f = decode_lazy_record(value, key);
      const std::string change = source_change(f);
      if (change == kSourceGone) throw Error("'" + printable(f.path.string()) + "' is gone");
      if (!change.empty())
        throw Error("'" + printable(f.path.string()) + "' changed since preprocess --lazy read it (" +
                    change + ")");
      ++files;
      chunks += f.chunks;
      chunk = f.chunk;
    } catch (const std::exception& e) {
      bad.push_back(printable(key) + ": " + e.what());
    }
    return true;
  });
  out << "sampling rate: " << meta.sr << " Hz\n";
  out << "channels: " << meta.channels << "\n";
  const double seconds = static_cast<double>(chunks * chunk) / meta.sr;
  char buf[64];
  std::snprintf(buf, sizeof(buf), "%.3f", seconds);
  out << "files: " << files << ", chunks: " << chunks << " of " << chunk << " samples\n";
  out << "total duration: " << hms(seconds) << " (" << buf << " s)\n";
  if (bad.empty() && files > 0) {
    out << "all " << files << " files are where preprocess --lazy read them, unchanged\n";
  } else if (!bad.empty()) {
    out << bad.size() << " of " << store.count() << " references fail:\n";
    for (const auto& b : bad) out << "  " << b << "\n";
  }
  for (const auto& p : problems) out << p << "\n";
  return bad_keys(bad, problems);
}

}  // namespace

std::vector<std::string> inspect_database(const fs::path& db, std::ostream& out) {
  LmdbStore store(db, LmdbStore::Mode::kReadOnly);
  const size_t entries = store.count();
  out << "database: " << terminal_safe(db.string()) << "\n";
  out << "entries: " << entries << "\n";
  // What the loader (AudioDataset) refuses, inspect lists: the database-level problems first.
  std::vector<std::string> problems;
  std::optional<DbMetadata> meta;
  try {
    meta = require_db_metadata(db);
  } catch (const Error& e) {
    problems.push_back(std::string("metadata.yaml: ") + e.what());
  }
  if (entries == 0) problems.push_back("database: '" + db.string() + "' holds no records");
  if (meta && meta->lazy) return inspect_lazy(store, *meta, db, problems, out);
  out << "kind: eager (the audio is stored in the records)\n";

  struct BufferInfo {
    std::string precision;
    std::vector<int32_t> first_shape;
    bool shape_varies = false;
    size_t records = 0;
  };
  std::map<std::string, BufferInfo> buffers;
  std::vector<std::string> bad;
  int channels = meta ? meta->channels : 0;
  int sr = meta ? meta->sr : 0;
  std::set<int> rates;
  double total_samples = 0.0;
  size_t waveforms = 0;
  store.for_each([&](std::string_view key_view, std::string_view value) {
    const std::string key(key_view);
    throw_if_stop_requested("while inspecting '" + db.string() + "'");
    try {
      AudioExample ex = parse_example(value, key);
      // The loader's decode (channels and rate checked against metadata.yaml), or without one
      // what the records alone say, to describe them.
      // Both check every buffer (check_record_buffers): inspect refuses what training refuses.
      const Waveform w = meta ? decode_database_waveform(value, key, *meta) : get_waveform(ex, key, channels);
      if (!meta) check_record_buffers(ex, key);
      if (channels == 0) channels = w.channels;
      if (w.sampling_rate > 0) rates.insert(w.sampling_rate);
      total_samples += static_cast<double>(w.length);
      ++waveforms;
      for (const auto& [name, buf] : ex.buffers()) {
        auto& info = buffers[name];
        std::vector<int32_t> shape(buf.shape().begin(), buf.shape().end());
        if (info.records == 0) {
          info.precision = precision_name(buf.precision());
          info.first_shape = shape;
        } else if (shape != info.first_shape) {
          info.shape_varies = true;
        }
        ++info.records;
      }
    } catch (const std::exception& e) {
      bad.push_back(printable(key) + ": " + e.what());
    }
    return true;
  });
  if (sr == 0 && !rates.empty()) sr = *rates.begin();
  out << "sampling rate: " << (sr > 0 ? std::to_string(sr) + " Hz" : std::string("unknown")) << "\n";
  if (rates.size() > 1 || (!rates.empty() && meta && *rates.begin() != meta->sr)) {
    out << "  note: records carry sampling rates";
    for (int r : rates) out << " " << r;
    out << " Hz\n";
  }
  out << "channels: " << channels << "\n";
  if (waveforms > 0 && sr > 0) {
    const double seconds = total_samples / sr;
    char buf[64];
    std::snprintf(buf, sizeof(buf), "%.3f", seconds);
    out << "total duration: " << hms(seconds) << " (" << buf << " s)\n";
    if (meta && std::fabs(meta->n_seconds - seconds) > 1e-3 * std::max(1.0, seconds)) {
      out << "  note: metadata.yaml says n_seconds " << meta->n_seconds << "\n";
    }
  } else {
    out << "total duration: n/a (no waveform buffers)\n";
  }
  out << "buffers:\n";
  for (const auto& [name, info] : buffers) {
    out << "  " << printable(name) << ": " << info.precision << ", shape [";
    for (size_t i = 0; i < info.first_shape.size(); ++i) out << (i ? ", " : "") << info.first_shape[i];
    out << "]" << (info.shape_varies ? " (varies)" : "") << ", in " << info.records << " records";
    if (name == kWaveformBuffer)
      out << " (shape field is RAVE's (channels, bytes/channels); lengths come from the data)";
    out << "\n";
  }
  if (bad.empty() && entries > 0) {
    out << "all " << entries << " records decode\n";
  } else if (!bad.empty()) {
    out << bad.size() << " of " << entries << " records fail to decode:\n";
    for (const auto& b : bad) out << "  " << b << "\n";
  }
  for (const auto& p : problems) out << p << "\n";
  return bad_keys(bad, problems);
}

}  // namespace rt
