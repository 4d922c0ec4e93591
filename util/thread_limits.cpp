#include "util/thread_limits.h"

#include <algorithm>
#include <thread>

#include "util/error.h"

namespace rt {

int64_t machine_cores() { return std::max<int64_t>(1, std::thread::hardware_concurrency()); }

int64_t max_thread_count(int64_t cores) { return 4 * std::max<int64_t>(1, cores); }

void check_thread_count(const std::string& flag, int64_t value, int64_t min, const std::string& zero_means) {
  const int64_t max = max_thread_count();
  if (value >= min && value <= max) return;
  throw Error(flag + " " + std::to_string(value) + " is not accepted: " + std::to_string(min) + " to " +
              std::to_string(max) + " (at most 4 × this machine's " + std::to_string(machine_cores()) +
              " cores" + (min == 0 && !zero_means.empty() ? "; 0 = " + zero_means : std::string()) + ")");
}

}  // namespace rt
