// Memory snapshots of the CUDA caching allocator: the history of every allocation and free
// (with its stack) and the segments, in the pickle that torch.cuda.memory._dump_snapshot writes
// and https://pytorch.org/memory_viz opens (PyTorch's "Understanding CUDA Memory Usage").
#pragma once

#include <cstddef>
#include <filesystem>
#include <string>

namespace rt::prof {

// Whether this build can record them: a LibTorch with CUDA, 2.1 or later (the C++ recorder,
// torch/csrc/cuda/memory_snapshot.h). Otherwise the reason, for messages.
bool cuda_memory_history_compiled();
std::string cuda_memory_history_unavailable_reason();

// Starts recording (torch.cuda.memory._record_memory_history(max_entries=...), stacks of both
// languages): every allocation and free from now on, the last `max_entries` of them kept.
// Throws rt::Error when not compiled or no GPU is usable.
void start_cuda_memory_history(size_t max_entries);
// Stops recording and drops the history (no-op when not recording).
void stop_cuda_memory_history();
// Writes the snapshot to `path` (atomically: a reader never sees half a file).
void write_cuda_memory_snapshot(const std::filesystem::path& path);

}  // namespace rt::prof
