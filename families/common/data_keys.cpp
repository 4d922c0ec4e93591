#include "families/common/data_keys.h"

#include "util/error.h"

namespace rt {

const OptionsTable<DataSourceOptions>& data_source_keys() {
  static const OptionsTable<DataSourceOptions> table = {
      {&DataSourceOptions::db_path, "data.db_path"},           {&DataSourceOptions::kind, "data.kind"},
      {&DataSourceOptions::val_fraction, "data.val_fraction"}, {&DataSourceOptions::val_max, "data.val_max"},
      {&DataSourceOptions::split_seed, "data.split_seed"},
  };
  return table;
}

DataSourceOptions data_source_for(const Config& config, DataKind kind, const std::string& family) {
  DataSourceOptions d = data_source_keys().from(config);
  if (d.db_path.empty()) throw Error("no dataset: pass --db_path DB (or set data.db_path)");
  if (d.kind != kind) {
    throw Error("model.family = '" + family + "' trains on " + enum_name(kind) +
                " databases, but data.kind = '" + enum_name(d.kind) + "' (accepted: " + enum_name(kind) +
                ")");
  }
  return d;
}

}  // namespace rt
