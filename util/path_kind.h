// What a path is, in words, for messages about a file the user named: "does not exist" is said
// only of a path that does not exist, never of a folder, FIFO or device given where a file is
// expected (or a file where a folder is).
#pragma once

#include <filesystem>
#include <string>

namespace rt {

// "a folder", "a regular file", "a FIFO", "a character device", "a block device", "a socket",
// "a symbolic link", "nothing (it does not exist)", "something else" (an unknown type).
std::string file_kind_text(const std::filesystem::file_status& status);

// Why `path` is not what is expected there, or "" when it is: "does not exist", "is a folder,
// not a file", "is a FIFO, not a file", "is a regular file, not a folder", "cannot be examined:
// Permission denied". Symbolic links are followed (a dangling one "does not exist (a symbolic
// link to a missing file)").
std::string not_a_regular_file(const std::filesystem::path& path);
std::string not_a_folder(const std::filesystem::path& path);

// Whether anything is at `path`, the link itself when it is a symbolic link (a dangling one
// counts): what a command that must not replace a file checks before writing there.
bool something_is_at(const std::filesystem::path& path);

}  // namespace rt
