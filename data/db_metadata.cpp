#include "data/db_metadata.h"

#include <cmath>
#include <cstdio>
#include <sstream>
#include <string>

#include "data/lmdb_store.h"
#include "util/atomic_file.h"
#include "util/error.h"
#include "util/parse.h"
#include "util/path_kind.h"
#include "util/printable.h"

namespace rt {
namespace fs = std::filesystem;
namespace {

std::string yaml_float(double v) {
  char buf[64];
  std::snprintf(buf, sizeof(buf), "%.17g", v);
  std::string s = buf;
  if (s.find_first_of(".eEn") == std::string::npos) s += ".0";  // Stay a YAML float.
  return s;
}

std::string trim(const std::string& s) {
  const auto b = s.find_first_not_of(" \t\r");
  if (b == std::string::npos) return "";
  return s.substr(b, s.find_last_not_of(" \t\r") - b + 1);
}

}  // namespace

void write_db_metadata(const std::filesystem::path& db, const DbMetadata& meta) {
  std::ostringstream out;
  out << "channels: " << meta.channels << "\n"
      << "lazy: " << (meta.lazy ? "true" : "false") << "\n"
      << "n_seconds: " << yaml_float(meta.n_seconds) << "\n"
      << "sr: " << meta.sr << "\n";
  write_file_atomic(db / "metadata.yaml", out.str());
}

std::optional<DbMetadata> read_db_metadata(const std::filesystem::path& db) {
  const auto path = db / "metadata.yaml";
  if (!std::filesystem::exists(path)) return std::nullopt;
  std::istringstream in(read_file(path));
  DbMetadata meta;
  std::string line;
  int line_no = 0;
  while (std::getline(in, line)) {
    ++line_no;
    line = trim(line);
    if (line.empty() || line[0] == '#' || line == "---") continue;
    const std::string at = "'" + path.string() + "' line " + std::to_string(line_no);
    const auto colon = line.find(':');
    if (colon == std::string::npos)
      throw Error(at + ": expected 'key: value', got '" + printable(line) + "'");
    // As messages show them: a crafted file's bytes escaped (util/printable.h).
    const std::string key = printable(trim(line.substr(0, colon)));
    const std::string value = printable(trim(line.substr(colon + 1)));
    auto integer = [&](int64_t lo, int64_t hi, const std::string& unit) {
      const auto v = parse_int64(value);
      if (!v || *v < lo || *v > hi) {
        throw Error(at + ": " + key + ": " + value + " is not accepted; an integer in [" +
                    std::to_string(lo) + ", " + std::to_string(hi) + "]" + unit);
      }
      return static_cast<int>(*v);
    };
    if (key == "channels") {
      meta.channels = integer(1, kMaxChannels, "");
    } else if (key == "sr") {
      // RAVE writes sr as an int; a float spelling of a whole number ("44100.0") is the same rate.
      const auto v = parse_finite(value);
      if (!v || *v < kMinSampleRate || *v > kMaxSampleRate || *v != std::floor(*v)) {
        throw Error(at + ": sr: " + value + " is not accepted; a sampling rate in [" +
                    std::to_string(kMinSampleRate) + ", " + std::to_string(kMaxSampleRate) + "] Hz");
      }
      meta.sr = static_cast<int>(*v);
    } else if (key == "n_seconds") {
      const auto v = parse_finite(value);
      if (!v || *v < 0) throw Error(at + ": n_seconds: " + value + " is not accepted; a number >= 0");
      meta.n_seconds = *v;
    } else if (key == "lazy") {
      if (value != "true" && value != "True" && value != "false" && value != "False")
        throw Error(at + ": lazy: " + value + " is not accepted; true or false");
      meta.lazy = value == "true" || value == "True";
    }  // Other keys (written by newer RAVE versions) carry nothing we need.
  }
  return meta;
}

DbMetadata require_db_metadata(const std::filesystem::path& db) {
  auto meta = read_db_metadata(db);
  if (!meta) {
    throw Error(
        "database '" + db.string() +
        "' has no metadata.yaml: it was not finished (preprocess writes it last, "
        "so it was interrupted; RAVE's preprocess also leaves none when its map fills). Build it again, or "
        "write metadata.yaml with the records' channels and sr (keys: channels, lazy, n_seconds, sr)");
  }
  return *meta;
}

void require_no_database_at(const std::filesystem::path& folder, const std::string& flag) {
  const std::string at = flag + " '" + folder.string() + "'";
  const std::string choose = "; choose a new folder, or delete the database there first";
  std::error_code ec;
  if (fs::is_regular_file(folder / "data.mdb", ec) && fs::file_size(folder / "data.mdb", ec) == 0 && !ec) {
    throw Error(at +
                " holds an empty data.mdb (0 bytes: left by an import that crashed or was killed before "
                "its first write); delete it (and lock.mdb), or choose a new folder");
  }
  if (something_is_at(folder / "data.mdb")) {
    const uint64_t entries = LmdbStore(folder, LmdbStore::Mode::kReadOnly).count();
    if (entries > 0)
      throw Error(at + " already holds a database of " + std::to_string(entries) + " entries" + choose);
  }
  if (something_is_at(folder / "metadata.yaml")) {
    throw Error(at + " already holds a metadata.yaml, which this import would replace" + choose);
  }
}

NewDatabase::NewDatabase(const fs::path& folder, const std::string& flag) : folder_(folder) {
  std::error_code ec;
  const fs::file_status st = fs::status(folder, ec);
  if (fs::exists(st) && !fs::is_directory(st)) {
    throw Error(flag + " '" + folder.string() + "' is " + file_kind_text(st) +
                ", not a folder: a database is a folder (data.mdb, lock.mdb, metadata.yaml); choose a new "
                "folder's path");
  }
  require_no_database_at(folder, flag);
  if (!fs::exists(st)) {
    fs::create_directories(folder, ec);
    if (ec) {
      throw Error(flag + " '" + folder.string() + "': cannot create the folder (" + ec.message() + ")");
    }
    created_folder_ = true;
  }
}

NewDatabase::~NewDatabase() {
  if (keep_) return;
  std::error_code ec;
  for (const char* name : {"data.mdb", "lock.mdb", "metadata.yaml"}) fs::remove(folder_ / name, ec);
  if (created_folder_ && fs::is_empty(folder_, ec)) fs::remove(folder_, ec);
}

}  // namespace rt
