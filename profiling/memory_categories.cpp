#include "profiling/memory_categories.h"

#include <algorithm>
#include <unordered_set>

namespace rt::prof {

MemoryCategories::MemoryCategories(MemoryCategorySource source, std::shared_ptr<MemoryReporter> reporter)
    : source_(std::move(source)), reporter_(std::move(reporter)) {
  if (!source_.parameters) return;
  std::weak_ptr<MemoryReporter> weak = reporter_;
  for (auto& p : source_.parameters()) {
    if (!p.defined() || !p.requires_grad()) continue;
    const unsigned pos = p.register_hook([weak](const at::Tensor& grad) {
      if (!grad.defined() || !grad.has_storage()) return;
      if (auto r = weak.lock()) r->tag_storage(grad.storage(), MemoryCategory::kGradients);
    });
    hooks_.emplace_back(p, pos);
  }
  // Tags what exists already (parameters, buffers), so that the next peak knows them.
  measure(0);
}

MemoryCategories::~MemoryCategories() {
  for (auto& [tensor, pos] : hooks_) tensor.remove_hook(pos);
}

CategorySplit MemoryCategories::measure(int64_t bytes_in_use) {
  CategorySplit split;
  int64_t counted = 0;  // category bytes inside bytes_in_use
  std::unordered_set<const void*> seen;
  auto visit = [&](MemoryCategory category, const at::Tensor& t) {
    if (!t.defined() || !t.has_storage()) return;
    const c10::Storage& storage = t.storage();
    const void* key = storage.data();
    if (key == nullptr || !seen.insert(key).second) return;
    const auto nbytes = static_cast<int64_t>(storage.nbytes());
    split.bytes[category] += nbytes;
    if (t.is_cuda() || reporter_->tag_storage(storage, category)) {
      counted += nbytes;
    } else {
      split.untracked_bytes += nbytes;
    }
  };
  auto each = [&](const std::function<std::vector<at::Tensor>()>& list, MemoryCategory category) {
    if (!list) return std::vector<at::Tensor>();
    auto tensors = list();
    for (const auto& t : tensors) visit(category, t);
    return tensors;
  };
  const auto parameters = each(source_.parameters, MemoryCategory::kParameters);
  each(source_.buffers, MemoryCategory::kBuffers);
  each(source_.optimizer_state, MemoryCategory::kOptimizerState);
  for (const auto& p : parameters) {
    if (p.defined()) visit(MemoryCategory::kGradients, p.grad());
  }
  split.bytes[MemoryCategory::kOther] = std::max<int64_t>(0, bytes_in_use - counted);
  return split;
}

}  // namespace rt::prof
