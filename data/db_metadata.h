// metadata.yaml inside a database folder, as RAVE's preprocess writes it (yaml.safe_dump of
// {lazy, channels, n_seconds, sr}, keys sorted) and its loader reads it.
#pragma once

#include <filesystem>
#include <optional>
#include <string>

namespace rt {

// The ranges a database's channels and sampling rate are held to, wherever they are read
// (metadata.yaml, records) or asked for (preprocess): outside them no real audio lives, and
// 0 once trained silently as 44100 Hz.
inline constexpr int kMinSampleRate = 1000;
inline constexpr int kMaxSampleRate = 768000;
inline constexpr int kMaxChannels = 256;

struct DbMetadata {
  bool lazy = false;
  int channels = 1;
  double n_seconds = 0.0;
  int sr = 44100;
};

// Writes <db>/metadata.yaml atomically.
void write_db_metadata(const std::filesystem::path& db, const DbMetadata& meta);

// Reads <db>/metadata.yaml; nullopt when the file does not exist (RAVE leaves none after a
// map-full error). Throws rt::Error naming the file, line and key on unparsable content, on a
// value outside its range (channels in [1, kMaxChannels], sr in [kMinSampleRate,
// kMaxSampleRate], n_seconds finite and >= 0, lazy true or false: a lazy database's records
// are references to files, data/lazy_audio.h).
std::optional<DbMetadata> read_db_metadata(const std::filesystem::path& db);

// read_db_metadata, and a missing file is an error too: the database was not finished (our
// preprocess writes it last; RAVE's stops without it when its map fills, and RAVE's own loader
// then cannot open the database either). The message says how to finish it.
DbMetadata require_db_metadata(const std::filesystem::path& db);

// Before an import writes a database into `folder`: throws rt::Error naming `flag` and the
// folder when the folder already holds one, a data.mdb with entries or a metadata.yaml (which
// the import would replace). A folder that does not exist, is empty, or holds other files
// passes. Nothing is created or opened for writing.
void require_no_database_at(const std::filesystem::path& folder, const std::string& flag);

// A database an import is building in `folder` (preprocess --output_path): an import that fails
// or is stopped part way, or writes nothing, leaves the folder as it found it. The constructor
// refuses what require_no_database_at refuses, a data.mdb of 0 bytes (a crashed import's), and
// a path that is a file or anything but a folder, naming `flag`; then it creates the folder
// when needed. Unless keep() was called, the destructor removes the database files the import
// made (data.mdb, lock.mdb, metadata.yaml) and the folder when it created it and it is empty.
// Destroy it after the LmdbStore writing into it.
class NewDatabase {
 public:
  NewDatabase(const std::filesystem::path& folder, const std::string& flag);
  ~NewDatabase();
  NewDatabase(const NewDatabase&) = delete;
  NewDatabase& operator=(const NewDatabase&) = delete;
  void keep() { keep_ = true; }

 private:
  std::filesystem::path folder_;
  bool created_folder_ = false, keep_ = false;
};

}  // namespace rt
