// Shared by the fuzz targets: what counts as a finding, and a scratch file for decoders that
// read from a path.
//
// A decoder of outside data may accept its input or refuse it with rt::Error (a message naming
// the file, key and field). Anything else is a finding: a crash or undefined behaviour
// (AddressSanitizer, UBSan), an allocation beyond libFuzzer's -rss_limit_mb / -malloc_limit_mb,
// or any other exception escaping to the user (a raw c10::Error with its backtrace, a
// std::invalid_argument from stoll, …), which aborts here so libFuzzer records the input.
#pragma once

#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <filesystem>
#include <fstream>
#include <string>
#include <typeinfo>

#include "util/error.h"

namespace rt::fuzz {

template <typename F>
void expect_accepted_or_refused(F&& decode) {
  try {
    decode();
  } catch (const rt::Error&) {
    // A clear refusal: what the decoder is for.
  } catch (const std::exception& e) {
    std::fprintf(stderr, "finding: %s escaped instead of rt::Error: %s\n", typeid(e).name(), e.what());
    std::abort();
  }
}

// A per-process folder under $TMPDIR holding `name` with exactly the bytes given.
inline std::filesystem::path scratch_file(const std::string& name, const uint8_t* data, size_t size) {
  static const std::filesystem::path dir = [] {
    const char* tmp = std::getenv("TMPDIR");
    auto d = std::filesystem::path(tmp && *tmp ? tmp : "/tmp") / ("rt_fuzz." + std::to_string(::getpid()));
    std::filesystem::create_directories(d);
    return d;
  }();
  const auto path = dir / name;
  std::ofstream(path, std::ios::binary | std::ios::trunc).write(reinterpret_cast<const char*>(data), size);
  return path;
}

}  // namespace rt::fuzz
