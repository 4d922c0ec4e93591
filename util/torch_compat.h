// The one place where LibTorch 1.13 (Debian) and 2.x APIs differ (docs/building.md: any
// LibTorch >= 1.13).
#pragma once

#include <ATen/autocast_mode.h>
#include <torch/csrc/jit/passes/tensorexpr_fuser.h>
#include <torch/torch.h>
#include <torch/version.h>

#include <cstring>
#include <sstream>
#include <string>
#include <type_traits>
#include <utility>

#define RT_TORCH_AT_LEAST(major, minor) \
  (TORCH_VERSION_MAJOR > (major) || (TORCH_VERSION_MAJOR == (major) && TORCH_VERSION_MINOR >= (minor)))

namespace rt::compat {

#if RT_TORCH_AT_LEAST(2, 1)
template <class T>
using optional = std::optional<T>;
inline constexpr auto nullopt = std::nullopt;
#else
template <class T>
using optional = c10::optional<T>;
inline constexpr auto nullopt = c10::nullopt;
#endif

}  // namespace rt::compat

namespace rt::compat {

// c10::MemoryReportingInfoBase::reportMemoryUsage takes `int64_t total_allocated,
// int64_t total_reserved` in LibTorch 1.13 and `size_t` in 2.x. The type is read off the
// declaration itself, so an override written with compat::memory_total_t matches either.
namespace detail {
template <class F>
struct ReportMemoryUsageArgs;
template <class C, class R, class Ptr, class Size, class Total, class Reserved, class Dev>
struct ReportMemoryUsageArgs<R (C::*)(Ptr, Size, Total, Reserved, Dev)> {
  using total_type = Total;
  static_assert(std::is_same_v<Total, Reserved>, "reportMemoryUsage: unexpected signature");
};
}  // namespace detail
using memory_total_t = typename detail::ReportMemoryUsageArgs<
    decltype(&c10::MemoryReportingInfoBase::reportMemoryUsage)>::total_type;

}  // namespace rt::compat

namespace rt::compat {

// torch::optim::Optimizer keeps each parameter's state under a key made from its TensorImpl:
// the string c10::guts::to_string(impl) (an ostringstream of the pointer) in LibTorch 1.13, the
// pointer itself (void*) in 2.x. The key type is read off Optimizer::state(), so code that looks
// state up with optimizer_state_key() finds exactly what the stock optimizers and
// torch::optim's save()/load() wrote.
using OptimizerStateMap = std::remove_reference_t<decltype(std::declval<torch::optim::Optimizer&>().state())>;

namespace detail {
template <class Key, class Impl>
Key optimizer_state_key(Impl* impl) {
  if constexpr (std::is_same_v<Key, std::string>) {
    std::ostringstream os;  // LibTorch 1.13 c10/util/string_utils.h to_string()
    os << impl;
    return os.str();
  } else {
    return impl;
  }
}
}  // namespace detail

inline OptimizerStateMap::key_type optimizer_state_key(const at::Tensor& param) {
  return detail::optimizer_state_key<OptimizerStateMap::key_type>(param.unsafeGetTensorImpl());
}

// A c10::Allocator for CPU blocks, written once for both APIs: allocate() lost its const
// qualifier and copy_data() became a pure virtual in LibTorch 2.3 (c10::alloc_cpu/free_cpu are
// declared in c10/core/impl/alloc_cpu.h in both).
// Subclasses implement allocate_block(); copy_data() is a plain memcpy, as for c10's own CPU
// allocator.
class CpuAllocator : public c10::Allocator {
 public:
#if RT_TORCH_AT_LEAST(2, 3)
  c10::DataPtr allocate(size_t nbytes) final { return allocate_block(nbytes); }
  void copy_data(void* dest, const void* src, std::size_t count) const final {
    std::memcpy(dest, src, count);
  }
#else
  c10::DataPtr allocate(size_t nbytes) const final { return allocate_block(nbytes); }
#endif

 protected:
  virtual c10::DataPtr allocate_block(size_t nbytes) const = 0;
};

}  // namespace rt::compat

namespace rt::compat {

// Optimizer::zero_grad() zero-fills the gradients in LibTorch 1.13 but sets them to undefined
// by default from 2.0 (zero_grad(bool set_to_none = true)). Adam then skips a parameter that got
// no gradient instead of decaying its moments, so the stock path asks for zero-filling on both.
inline void zero_grad_filled(torch::optim::Optimizer& opt) {
#if RT_TORCH_AT_LEAST(2, 0)
  opt.zero_grad(/*set_to_none=*/false);
#else
  opt.zero_grad();
#endif
}

// ATen's autocast state of a device type (torch.autocast's __enter__/__exit__ set it). The
// per-device-type functions came in LibTorch 2.4; before, CUDA and CPU had functions of their own.
inline bool autocast_enabled(c10::DeviceType type) {
#if RT_TORCH_AT_LEAST(2, 4)
  return at::autocast::is_autocast_enabled(type);
#else
  return type == c10::DeviceType::CUDA ? at::autocast::is_enabled() : at::autocast::is_cpu_enabled();
#endif
}

// TorchScript's tensor-expression (NNC) fuser off for the process; the programs that run
// TorchScript files (export, generate, export_bench) and every test binary call it first. A
// LibTorch built with LLVM (Debian 13's) fuses TorchScript graphs on the CPU and compiles each fused
// group with LLVM on the first call: with Debian 13's 2.6 that compilation of an exported RAVE
// graph did not finish (export's read-back check spun in LLVMCodeGen). PyPI's builds have no LLVM
// and fuse nothing on the CPU, so with this every LibTorch runs the files the same way.
inline void disable_tensorexpr_fuser() { torch::jit::setTensorExprFuserEnabled(false); }

// F::apply(args...) for a torch::autograd::Function F. g++ 14 reports a false -Warray-bounds
// (or, depending on inlining, -Wstringop-overflow) in the std::vector<bool>::reserve() that LibTorch 2.x's
// Function<F>::apply inlines (torch/csrc/autograd/custom_function.h:
// node->is_variable_input_.reserve(num_inputs)), at the line that calls apply(); GCC checks diagnostic
// pragmas along the whole inlining chain, so silencing it here covers every caller and nothing else.
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Warray-bounds"
#pragma GCC diagnostic ignored "-Wstringop-overflow"
#endif
template <class F, class... Args>
auto apply_function(Args&&... args) {
  return F::apply(std::forward<Args>(args)...);
}
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic pop
#endif

}  // namespace rt::compat

// c10d (distributed/): ProcessGroupGloo and ProcessGroupNCCL derive from c10d::Backend since
// 2.0 (from c10d::ProcessGroup before), and their collectives are called on it directly.
// TCPStoreOptions::useLibUV defaults to true since 2.4, but Debian's 2.x LibTorch is built
// without libuv, so the option is cleared where it exists.
#define RT_C10D_HAS_BACKEND RT_TORCH_AT_LEAST(2, 0)
#define RT_TCPSTORE_HAS_LIBUV RT_TORCH_AT_LEAST(2, 4)
