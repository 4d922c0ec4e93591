// metadata.yaml inside a database folder, as RAVE's preprocess writes it (yaml.safe_dump of
// {lazy, channels, n_seconds, sr}, keys sorted) and its loader reads it.
#pragma once

#include <filesystem>
#include <optional>

namespace rt {

struct DbMetadata {
  bool lazy = false;
  int channels = 1;
  double n_seconds = 0.0;
  int sr = 44100;
};

// Writes <db>/metadata.yaml atomically.
void write_db_metadata(const std::filesystem::path& db, const DbMetadata& meta);

// Reads <db>/metadata.yaml; nullopt when the file does not exist (RAVE leaves none after a
// map-full error). Throws rt::Error naming the file and line on unparsable content.
std::optional<DbMetadata> read_db_metadata(const std::filesystem::path& db);

}  // namespace rt
