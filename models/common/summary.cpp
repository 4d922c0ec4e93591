#include "models/common/summary.h"

#include <sstream>

namespace rt::models {

int64_t count_parameters(const torch::nn::Module& module, bool trainable_only) {
  int64_t n = 0;
  for (const auto& p : module.parameters(/*recurse=*/true))
    if (!trainable_only || p.requires_grad()) n += p.numel();
  return n;
}

int64_t count_buffers(const torch::nn::Module& module) {
  int64_t n = 0;
  for (const auto& b : module.buffers(/*recurse=*/true)) n += b.numel();
  return n;
}

std::string format_count(int64_t n) {
  std::string digits = std::to_string(n < 0 ? -n : n);
  std::string out;
  for (size_t i = 0; i < digits.size(); ++i) {
    if (i > 0 && (digits.size() - i) % 3 == 0) out += ',';
    out += digits[i];
  }
  return n < 0 ? "-" + out : out;
}

namespace {

// "rt::models::WNConv1dImpl" → "WNConv1d".
std::string short_type(const torch::nn::Module& m) {
  std::string name = m.name();
  const auto colon = name.rfind("::");
  if (colon != std::string::npos) name = name.substr(colon + 2);
  const std::string impl = "Impl";
  if (name.size() > impl.size() && name.compare(name.size() - impl.size(), impl.size(), impl) == 0)
    name.resize(name.size() - impl.size());
  return name;
}

void print_tree(std::ostringstream& os, const torch::nn::Module& m, const std::string& name, int depth,
                int max_depth) {
  os << std::string(static_cast<size_t>(2 * depth), ' ') << name << " (" << short_type(m) << ")  params "
     << format_count(count_parameters(m));
  const int64_t buffers = count_buffers(m);
  if (buffers > 0) os << "  [buffers " << format_count(buffers) << "]";
  os << '\n';
  if (max_depth >= 0 && depth >= max_depth) return;
  for (const auto& child : m.named_children())
    print_tree(os, *child.value(), child.key(), depth + 1, max_depth);
}

}  // namespace

std::string module_summary(const torch::nn::Module& module, const std::string& root_name, int max_depth) {
  std::ostringstream os;
  print_tree(os, module, root_name, 0, max_depth);
  const int64_t total = count_parameters(module);
  const int64_t trainable = count_parameters(module, true);
  os << "total params " << format_count(total) << " (trainable " << format_count(trainable) << ", fixed "
     << format_count(total - trainable) << "), buffers " << format_count(count_buffers(module)) << '\n';
  return os.str();
}

}  // namespace rt::models
