#include "models/common/module_path.h"

namespace rt::models {

void assign_module_paths(torch::nn::Module& root, const std::string& prefix) {
  for (const auto& item : root.named_modules(prefix, /*include_self=*/false)) {
    if (auto* traced = dynamic_cast<TracedModule*>(item.value().get())) traced->set_module_path(item.key());
  }
}

}  // namespace rt::models
