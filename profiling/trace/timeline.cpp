#include "profiling/trace/timeline.h"

#include <algorithm>
#include <numeric>
#include <unordered_map>

namespace rt::prof {

namespace {
// Indexed by ActivityKind; names from libkineto's ActivityType.cpp.
constexpr const char* kCategoryNames[] = {
    "cpu_op",     "user_annotation", "gpu_user_annotation", "kernel",          "gpu_memcpy",
    "gpu_memset", "cuda_runtime",    "cuda_driver",         "python_function",
};
static_assert(sizeof(kCategoryNames) / sizeof(kCategoryNames[0]) == static_cast<size_t>(ActivityKind::kCount),
              "one category name per ActivityKind");
}  // namespace

const char* category_name(ActivityKind kind) {
  const auto i = static_cast<size_t>(kind);
  return i < static_cast<size_t>(ActivityKind::kCount) ? kCategoryNames[i] : "unknown";
}

bool is_cpu_kind(ActivityKind kind) {
  return kind == ActivityKind::kCpuOp || kind == ActivityKind::kUserAnnotation ||
         kind == ActivityKind::kPythonFunction || kind == ActivityKind::kCudaRuntime ||
         kind == ActivityKind::kCudaDriver;
}

void finalize_timeline(Timeline& t) {
  auto& acts = t.activities;
  const size_t n = acts.size();
  std::vector<size_t> order(n);
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    const Activity& x = acts[a];
    const Activity& y = acts[b];
    if (x.pid != y.pid) return x.pid < y.pid;
    if (x.tid != y.tid) return x.tid < y.tid;
    if (x.start_ns != y.start_ns) return x.start_ns < y.start_ns;
    return x.end_ns > y.end_ns;  // the enclosing span first
  });
  std::vector<int64_t> new_index(n);
  std::vector<Activity> sorted;
  sorted.reserve(n);
  for (size_t i = 0; i < n; ++i) {
    new_index[order[i]] = static_cast<int64_t>(i);
    sorted.push_back(std::move(acts[order[i]]));
  }
  acts = std::move(sorted);
  for (auto& m : t.memory) {
    if (m.owner >= 0 && static_cast<size_t>(m.owner) < n) m.owner = new_index[m.owner];
  }
  for (auto& f : t.flows) {
    f.from = static_cast<size_t>(new_index[f.from]);
    f.to = static_cast<size_t>(new_index[f.to]);
  }

  // Exact nesting per (pid, tid), CPU and GPU alike: walk in start order with a stack of
  // open spans. TensorBoard's plugin drops ops that partially overlap a sibling.
  std::vector<size_t> stack;
  for (size_t i = 0; i < n; ++i) {
    Activity& a = acts[i];
    if (a.end_ns < a.start_ns) a.end_ns = a.start_ns;
    if (i == 0 || acts[i - 1].pid != a.pid || acts[i - 1].tid != a.tid) stack.clear();
    while (!stack.empty() && acts[stack.back()].end_ns <= a.start_ns) stack.pop_back();
    if (!stack.empty()) {
      const Activity& p = acts[stack.back()];
      if (a.end_ns > p.end_ns) a.end_ns = p.end_ns;  // partial overlap: clamp into the parent
      a.parent = static_cast<int64_t>(stack.back());
    } else {
      a.parent = -1;
    }
    if (a.end_ns > a.start_ns) stack.push_back(i);
  }

  // Dense External ids for CPU activities in start order (Kineto numbers them the same way).
  std::vector<size_t> by_start;
  for (size_t i = 0; i < n; ++i) {
    if (acts[i].kind == ActivityKind::kCpuOp || acts[i].kind == ActivityKind::kUserAnnotation) {
      by_start.push_back(i);
    }
  }
  std::stable_sort(by_start.begin(), by_start.end(),
                   [&](size_t a, size_t b) { return acts[a].start_ns < acts[b].start_ns; });
  std::unordered_map<int64_t, int64_t> rf_to_external;
  int64_t next_id = 1;
  for (size_t i : by_start) {
    acts[i].external_id = next_id++;
    if (acts[i].record_function_id >= 0) rf_to_external[acts[i].record_function_id] = acts[i].external_id;
  }
  for (auto& a : acts) {
    if (a.linked_record_function_id >= 0) {
      auto it = rf_to_external.find(a.linked_record_function_id);
      a.external_id = it == rf_to_external.end() ? -1 : it->second;
    }
  }
}

}  // namespace rt::prof
