// Keeping the memory a training step frees for the next step, instead of handing it back to
// the system and faulting it in again.
//
// A training step allocates and frees the same large tensors (activations, their gradients,
// STFT buffers) every iteration. glibc's defaults serve blocks over 128 KiB (raised
// dynamically up to 32 MiB) with mmap and return the top of the heap above 128 KiB (twice the
// dynamic threshold) with trim: each step then faults its working set in again, page by page,
// zero-filled by the kernel. BENCHMARKS.md, "Freed memory kept for reuse
// (train.retain_freed_memory)", has the page faults per step with the defaults and with
// retention (not copied here, where a rerun would leave them stale).
//
// retain_freed_heap_memory() sets M_MMAP_THRESHOLD to 32 MiB (glibc's largest) and
// M_TRIM_THRESHOLD to 1 GiB (mallopt(3)): blocks up to 32 MiB come from the heap and freed
// ones stay there for reuse. Peak RSS is unchanged (the peak recurs every step); RSS after a
// peak stays near it. Blocks over 32 MiB are still mmapped.
#pragma once

#include <string>

namespace rt {

struct HeapRetention {
  bool applied = false;
  std::string description;  // what was done, or why not ("glibc malloc as the environment tunes it")
};

// Idempotent. Does nothing when not built against glibc, or when the environment already tunes
// glibc's malloc (GLIBC_TUNABLES with glibc.malloc.*, MALLOC_MMAP_THRESHOLD_,
// MALLOC_TRIM_THRESHOLD_): the user's choice wins.
HeapRetention retain_freed_heap_memory();

}  // namespace rt
