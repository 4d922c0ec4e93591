// The project's one JSON helper: nlohmann::json plus atomic writing: result files are valid JSON whenever no
// write is in progress.
#pragma once

#include <filesystem>
#include <nlohmann/json.hpp>

namespace rt {

using Json = nlohmann::json;

// Serialises `value` (indent 2, or compact with indent < 0) and replaces `path` atomically.
void write_json_atomic(const std::filesystem::path& path, const Json& value, int indent = 2);

// Parses a JSON file; throws rt::Error naming the path and the parse position on failure.
Json read_json(const std::filesystem::path& path);

}  // namespace rt
