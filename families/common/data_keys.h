// The data keys every family reads from the common schema (config/config_schema.cpp): the
// database, its kind and the train/validation split (data/split.h).
#pragma once

#include <cstdint>
#include <string>

#include "config/options_table.h"
#include "data/data_kind.h"

namespace rt {

struct DataSourceOptions {
  std::string db_path;  // data.db_path
  DataKind kind = DataKind::kAudio;
  double val_fraction = 0.02;
  int64_t val_max = 1000;
  int64_t split_seed = 42;
};

const OptionsTable<DataSourceOptions>& data_source_keys();

// data_source_keys().from(config), checked for a family that trains on `kind` databases: throws
// rt::Error when no database is named or data.kind is another kind.
DataSourceOptions data_source_for(const Config& config, DataKind kind, const std::string& family);

}  // namespace rt
