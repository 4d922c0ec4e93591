#pragma once
// Why writing a file failed, in the words a user acts on: a full disk (ENOSPC, EDQUOT) and a file
// size limit (EFBIG) are named as such; anything else names the failing call and errno's text.
// The message ends by saying that the previous file, if any, is unchanged: every writer that
// uses it writes a temporary and renames it over the target only when complete
// (util/atomic_file.h, util/profile_export.h).
#include <filesystem>
#include <string>

namespace rt {

std::string write_failure_message(const std::filesystem::path& path, const char* call, int err);

}  // namespace rt
