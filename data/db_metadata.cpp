#include "data/db_metadata.h"

#include <cstdio>
#include <sstream>
#include <string>

#include "util/atomic_file.h"
#include "util/error.h"

namespace rt {
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
    const auto colon = line.find(':');
    if (colon == std::string::npos) {
      throw Error("'" + path.string() + "' line " + std::to_string(line_no) + ": expected 'key: value', got '" + line + "'");
    }
    const std::string key = trim(line.substr(0, colon));
    const std::string value = trim(line.substr(colon + 1));
    try {
      if (key == "channels") {
        meta.channels = std::stoi(value);
      } else if (key == "sr") {
        meta.sr = static_cast<int>(std::stod(value));
      } else if (key == "n_seconds") {
        meta.n_seconds = std::stod(value);
      } else if (key == "lazy") {
        meta.lazy = value == "true" || value == "True";
      }  // Other keys (written by newer RAVE versions) carry nothing we need.
    } catch (const std::exception&) {
      throw Error("'" + path.string() + "' line " + std::to_string(line_no) + ": bad value '" + value +
                  "' for '" + key + "'");
    }
  }
  return meta;
}

}  // namespace rt
