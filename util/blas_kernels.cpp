#include "util/blas_kernels.h"

#include <dlfcn.h>

#include <cctype>
#include <cstdlib>
#include <iostream>
#include <mutex>

namespace rt {
namespace {

using CoreNameFn = char* (*)();
using VoidFn = void (*)();

template <typename F>
F symbol(const char* name) {
  return reinterpret_cast<F>(dlsym(RTLD_DEFAULT, name));
}

std::string openblas_core() {
  const auto corename = symbol<CoreNameFn>("openblas_get_corename");
  if (corename == nullptr) return "";
  const char* name = corename();
  return name != nullptr ? name : "";
}

bool cpu_has_avx2_fma() {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_cpu_init();
  return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
#else
  return false;
#endif
}

bool cpu_has_avx512() {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_cpu_init();
  return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
         __builtin_cpu_supports("avx512dq") && __builtin_cpu_supports("avx512vl");
#else
  return false;
#endif
}

bool same_name(const std::string& a, const std::string& b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i) {
    if (std::tolower(static_cast<unsigned char>(a[i])) != std::tolower(static_cast<unsigned char>(b[i])))
      return false;
  }
  return true;
}

}  // namespace

std::string blas_kernels_to_force(const std::string& openblas_core, bool avx2_fma, bool avx512,
                                  bool user_chose) {
  // OpenBLAS's x86-64 fallback for a CPU it does not know; a real Prescott has no AVX2.
  if (user_chose || !same_name(openblas_core, "Prescott") || !avx2_fma) return "";
  return avx512 ? "SkylakeX" : "Haswell";
}

std::string BlasKernelChoice::note() const {
  if (chosen.empty()) return "";
  return "note: OpenBLAS did not recognise this CPU and chose its " + found + " kernels; it runs its " +
         chosen + " kernels instead, which the CPU's features allow (OPENBLAS_CORETYPE=" + chosen +
         "; set OPENBLAS_CORETYPE yourself to choose)";
}

BlasKernelChoice choose_blas_kernels() {
  static std::once_flag once;
  static BlasKernelChoice result;
  std::call_once(once, [] {
    result.found = openblas_core();
    const std::string want = blas_kernels_to_force(result.found, cpu_has_avx2_fma(), cpu_has_avx512(),
                                                   std::getenv("OPENBLAS_CORETYPE"));
    const auto quit = symbol<VoidFn>("gotoblas_dynamic_quit");
    const auto init = symbol<VoidFn>("gotoblas_dynamic_init");
    if (want.empty() || quit == nullptr || init == nullptr) return;
    // gotoblas_dynamic_init reads OPENBLAS_CORETYPE and sets up that kernel table; quit clears
    // the one chosen at load so that init chooses again.
    setenv("OPENBLAS_CORETYPE", want.c_str(), 0);
    quit();
    init();
    const std::string now = openblas_core();
    if (same_name(now, want)) result.chosen = now;
  });
  return result;
}

void announce_blas_kernels() {
  const std::string note = choose_blas_kernels().note();
  if (!note.empty()) std::cerr << note << std::endl;
}

std::string blas_kernels_running() { return openblas_core(); }

}  // namespace rt
