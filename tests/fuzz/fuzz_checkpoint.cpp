// A checkpoint's metadata block (meta/format, family, signature, config, step, best), read from
// a torch archive as `--ckpt` and `export --run` do before anything else.
#include <cstdint>

#include "fuzz_support.h"
#include "training/checkpoint.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const auto file = rt::fuzz::scratch_file("fuzz.ckpt", data, size);
  rt::fuzz::expect_accepted_or_refused([&] { (void)rt::read_checkpoint_meta(file); });
  return 0;
}
