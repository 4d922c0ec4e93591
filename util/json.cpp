#include "util/json.h"

#include "util/atomic_file.h"
#include "util/error.h"

namespace rt {

void write_json_atomic(const std::filesystem::path& path, const Json& value, int indent) {
  std::string text = value.dump(indent, ' ', false, Json::error_handler_t::replace);
  text.push_back('\n');
  write_file_atomic(path, text);
}

Json read_json(const std::filesystem::path& path) {
  const std::string text = read_file(path);
  try {
    return Json::parse(text);
  } catch (const Json::parse_error& e) {
    throw Error("'" + path.string() + "' is not valid JSON: " + e.what());
  }
}

}  // namespace rt
