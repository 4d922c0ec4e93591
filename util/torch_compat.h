// The one place where LibTorch 1.13 (Debian) and 2.x APIs differ (README: any LibTorch >= 1.13).
#pragma once

#include <torch/torch.h>
#include <torch/version.h>

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

// c10::Allocator: allocate() lost its const qualifier and copy_data() became a pure virtual
// in LibTorch 2.3; alloc_cpu/free_cpu moved to c10/core/impl/alloc_cpu.h (still included by
// c10/core/CPUAllocator.h).
#if RT_TORCH_AT_LEAST(2, 3)
#define RT_ALLOCATE_CONST
#define RT_ALLOCATOR_HAS_COPY_DATA 1
#else
#define RT_ALLOCATE_CONST const
#define RT_ALLOCATOR_HAS_COPY_DATA 0
#endif

// c10d (distributed/): ProcessGroupGloo and ProcessGroupNCCL derive from c10d::Backend since
// 2.0 (from c10d::ProcessGroup before), and their collectives are called on it directly.
// TCPStoreOptions::useLibUV defaults to true since 2.4, but Debian's 2.x LibTorch is built
// without libuv, so the option is cleared where it exists.
#define RT_C10D_HAS_BACKEND RT_TORCH_AT_LEAST(2, 0)
#define RT_TCPSTORE_HAS_LIBUV RT_TORCH_AT_LEAST(2, 4)
