// What a command's --output may replace (export's .ts file, evaluate's JSON): never something
// that is not a regular file (a folder, a device such as /dev/null, a FIFO: the atomic rename
// would put a file in its place), one of the command's own inputs, a training checkpoint, a
// run's own files (config.toml, the summary and profiles beside checkpoints/, the files in
// checkpoints/) or an out_path's `latest` pointer; any other existing file only with --force.
#pragma once

#include <filesystem>
#include <string>
#include <vector>

namespace rt {

// Returns when `output` may be written; throws rt::Error naming `flag`, the path, what it is
// and `command` ("export") otherwise. Nothing is written.
void check_output_target(const std::filesystem::path& output,
                         const std::vector<std::filesystem::path>& inputs, bool force,
                         const std::string& command, const std::string& flag = "--output");

}  // namespace rt
