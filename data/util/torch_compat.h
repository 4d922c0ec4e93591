// The one place where LibTorch 1.13 (Debian) and 2.x APIs differ (SPEC §2).
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
