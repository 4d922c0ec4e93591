// The neural record (an AudioExample holding spikes, behaviour and metadata), decoded as the
// SSM dataset does, then smoothed with the record's own bin width: a crafted bin_ms must be
// refused at decoding, not turn into an unbounded smoothing window.
#include <cstdint>
#include <string_view>

#include "data/neural/neural_record.h"
#include "fuzz_support.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view bytes(reinterpret_cast<const char*>(data), size);
  rt::fuzz::expect_accepted_or_refused([&] {
    const auto record = rt::neural::decode_neural_record(bytes, "db key 00000000");
    (void)rt::neural::gaussian_smooth(record.spikes, 20.0, record.bin_ms);
  });
  return 0;
}
