#include "profiling/cuda_memory_snapshot.h"

#include <torch/torch.h>

#include <atomic>
#include <optional>
#include <string>

#include "util/atomic_file.h"
#include "util/error.h"
#include "util/torch_compat.h"

// The C++ recorder (torch/csrc/cuda/memory_snapshot.h: _record_memory_history with string
// options, _memory_snapshot_pickled) came in LibTorch 2.1.
#if defined(RT_TORCH_HAS_CUDA) && RT_TORCH_AT_LEAST(2, 1)
#define RT_CUDA_MEMORY_HISTORY 1
#include <torch/csrc/cuda/memory_snapshot.h>
#endif

namespace rt::prof {
namespace {
std::atomic<bool> g_recording{false};
}  // namespace

bool cuda_memory_history_compiled() {
#if defined(RT_CUDA_MEMORY_HISTORY)
  return true;
#else
  return false;
#endif
}

std::string cuda_memory_history_unavailable_reason() {
#if defined(RT_CUDA_MEMORY_HISTORY)
  return torch::cuda::is_available() ? "" : "no CUDA device is usable";
#elif defined(RT_TORCH_HAS_CUDA)
  return "this LibTorch has no C++ memory-history recorder (it came in LibTorch 2.1)";
#else
  return "this LibTorch was built without CUDA";
#endif
}

void start_cuda_memory_history(size_t max_entries) {
  if (const auto why = cuda_memory_history_unavailable_reason(); !why.empty()) {
    throw Error("cannot record CUDA memory history: " + why);
  }
#if defined(RT_CUDA_MEMORY_HISTORY)
  // enabled "all": allocations, frees and segment events; context "all": a stack on both;
  // stacks "all": C++ frames as well (this process has no Python frames).
  const std::optional<std::string> all = std::string("all");
  torch::cuda::_record_memory_history(all, all, "all", max_entries);
  g_recording = true;
#else
  (void)max_entries;
#endif
}

void stop_cuda_memory_history() {
#if defined(RT_CUDA_MEMORY_HISTORY)
  if (g_recording.exchange(false)) {
    // enabled = None stops recording (torch.cuda.memory._record_memory_history(enabled=None)).
    torch::cuda::_record_memory_history(std::optional<std::string>(), std::optional<std::string>("all"),
                                        "all", 0);
  }
#endif
}

void write_cuda_memory_snapshot(const std::filesystem::path& path) {
  if (const auto why = cuda_memory_history_unavailable_reason(); !why.empty()) {
    throw Error("cannot write a CUDA memory snapshot to " + path.string() + ": " + why);
  }
#if defined(RT_CUDA_MEMORY_HISTORY)
  write_file_atomic(path, torch::cuda::_memory_snapshot_pickled());
#endif
}

}  // namespace rt::prof
