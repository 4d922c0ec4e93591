#include "util/heap_retention.h"

#include <cstdlib>
#include <cstring>
#include <mutex>

#if defined(__GLIBC__)
#include <malloc.h>
#endif

namespace rt {
namespace {

constexpr int kMmapThreshold = 32 << 20;  // glibc's maximum (HEAP_MAX_SIZE / 2 on 64-bit)
constexpr int kTrimThreshold = 1 << 30;

HeapRetention apply() {
  HeapRetention r;
#if defined(__GLIBC__)
  const char* tunables = std::getenv("GLIBC_TUNABLES");
  if ((tunables && std::strstr(tunables, "glibc.malloc.")) || std::getenv("MALLOC_MMAP_THRESHOLD_") ||
      std::getenv("MALLOC_TRIM_THRESHOLD_")) {
    r.description = "glibc malloc as the environment tunes it";
    return r;
  }
  if (mallopt(M_MMAP_THRESHOLD, kMmapThreshold) != 1 || mallopt(M_TRIM_THRESHOLD, kTrimThreshold) != 1) {
    r.description = "glibc malloc defaults (mallopt refused the thresholds)";
    return r;
  }
  r.applied = true;
  r.description =
      "glibc malloc, freed memory kept for reuse (M_MMAP_THRESHOLD 32 MiB, M_TRIM_THRESHOLD 1 GiB)";
#else
  r.description = "the C library's malloc defaults (not glibc)";
#endif
  return r;
}

}  // namespace

HeapRetention retain_freed_heap_memory() {
  static std::once_flag once;
  static HeapRetention result;
  std::call_once(once, [] { result = apply(); });
  return result;
}

}  // namespace rt
