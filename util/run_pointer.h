// <out_path>/latest: a one-line text file naming the newest run directory (relative to out_path,
// or absolute when the run lies elsewhere), not a symbolic link. TensorBoard walks every
// directory under --logdir and follows links (TensorBoard's compat gfile module, io/gfile.py
// walk: isdir on each entry), so a `latest` link made every run appear twice, in the Scalars
// tab and in the PyTorch-profiler plugin; a regular file is not walked into. Our tools take the
// pointer wherever they take a run directory (train --ckpt last, profile-report, export --run).
#pragma once

#include <filesystem>

namespace rt {

// Writes <out_path>/latest naming `run_dir`, atomically (write_file_atomic): readers see the
// old or the new run, never none. Replaces a `latest` symlink left by an earlier version.
// Throws rt::Error naming the file on failure.
void write_latest_pointer(const std::filesystem::path& out_path, const std::filesystem::path& run_dir);

// `path` when it is a directory (a run, or an older `latest` symlink); the run directory a
// `latest` pointer file names; `path` unchanged otherwise (the caller's own "not a run
// directory" error then names what the user typed).
std::filesystem::path resolve_run_pointer(const std::filesystem::path& path);

// The run a file named `latest` names when that run is gone (deleted or moved): the path it
// names, for an error that says so rather than reading the pointer as a damaged checkpoint;
// empty for anything else (a directory, a pointer to a run that exists, another file).
std::filesystem::path dangling_run_pointer(const std::filesystem::path& path);

}  // namespace rt
