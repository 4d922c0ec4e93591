// How many threads a command's flag may ask for: at most 4 × the machine's cores (a value past
// that only oversubscribes the cores, and 10^5 threads exhaust the process's memory and stop it
// from taking signals). Every command takes the bound from max_thread_count: `train`
// (train.threads, data.workers, its own message), `preprocess --workers`, `export --benchmark
// --threads` (over the cores the process may run on), and `evaluate` and `generate` through
// check_thread_count.
#pragma once

#include <cstdint>
#include <string>

namespace rt {

// std::thread::hardware_concurrency(), at least 1.
int64_t machine_cores();
// 4 × `cores`.
int64_t max_thread_count(int64_t cores = machine_cores());

// Throws rt::Error naming `flag` and the accepted range [min, max_thread_count()] when `value`
// is outside it; `zero_means` ("every core") is said when min is 0.
void check_thread_count(const std::string& flag, int64_t value, int64_t min,
                        const std::string& zero_means = "");

}  // namespace rt
