// OpenBLAS picks its kernels once, at load, by the CPU's vendor, family and model. A CPU newer
// than the OpenBLAS release is in none of its tables, and it falls back to its Prescott (SSE3)
// kernels: Debian 12's OpenBLAS 0.3.21 does so on Intel's family 6 model 207 (Emerald Rapids),
// which has AVX-512. Every product LibTorch hands to OpenBLAS (Linear layers, 1×1 and
// transposed convolutions on the CPU, float64 gradients) then runs on the SSE3 kernels.
//
// choose_blas_kernels() undoes exactly that: when the library in the process is OpenBLAS, it
// runs the Prescott kernels, the CPU has AVX2 and FMA, and OPENBLAS_CORETYPE is unset (the
// user's choice wins), it sets OPENBLAS_CORETYPE to the kernels the CPU's features call for
// (SkylakeX with AVX-512 F/BW/DQ/VL, else Haswell) and re-initialises OpenBLAS with them, before
// any product has run. Child processes (local ranks) inherit the variable. Any other BLAS, or
// an OpenBLAS without the dynamic-architecture entry points, is left alone.
#pragma once

#include <string>

namespace rt {

struct BlasKernelChoice {
  std::string found;   // the kernels OpenBLAS chose itself ("" when the BLAS is not OpenBLAS)
  std::string chosen;  // the kernels it runs now, when choose_blas_kernels() changed them; else ""
  // One line for the log: what was found and done ("" when nothing was changed).
  std::string note() const;
};

// The kernels to ask for, given what OpenBLAS chose and the CPU's features; "" = keep its own.
std::string blas_kernels_to_force(const std::string& openblas_core, bool avx2_fma, bool avx512,
                                  bool user_chose);

// Call first thing in main(), before any tensor arithmetic. Idempotent: later calls return the
// first call's result.
BlasKernelChoice choose_blas_kernels();
// choose_blas_kernels(), and its note on stderr when it changed the kernels: a program's main().
void announce_blas_kernels();
// The kernels OpenBLAS runs now ("SkylakeX"), "" when the BLAS is not OpenBLAS.
std::string blas_kernels_running();

}  // namespace rt
