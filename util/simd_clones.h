// RT_SIMD_CLONES: marks a function whose plain loops the compiler vectorises to be compiled three
// times on x86-64 GCC — for x86-64-v4 (AVX-512 F/BW/DQ/VL, with FMA), for AVX2 and for the
// default target (SSE2) — with the version picked at load time (ifunc) by the CPU's features.
// Elsewhere (clang, other architectures) it expands to nothing. Used by the
// hand-written CPU kernels (training/fused_adam_kernel.cpp, models/ssm/fused_ops.cpp).
#pragma once

#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__) && defined(__has_attribute)
#if __has_attribute(target_clones)
#define RT_SIMD_CLONES __attribute__((target_clones("arch=x86-64-v4", "avx2", "default")))
#endif
#endif
#ifndef RT_SIMD_CLONES
#define RT_SIMD_CLONES
#endif
