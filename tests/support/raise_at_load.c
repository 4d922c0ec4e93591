/* LD_PRELOAD'ed by ProfilingSignals.ASignalWhileLibrariesInitialiseEndsTheRunWithAMessage: a
   signal raised by a shared library's initialiser, the moment LibTorch's own initialisers run
   in (the ~0.5 s before main). RT_RAISE_AT_LOAD names the signal's number. */
#include <signal.h>
#include <stdlib.h>

__attribute__((constructor)) static void raise_at_load(void) {
  const char* sig = getenv("RT_RAISE_AT_LOAD");
  if (sig != NULL && atoi(sig) > 0) raise(atoi(sig));
}
