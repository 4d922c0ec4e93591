// The audio record: RAVE's AudioExample protobuf as read from an LMDB value (parse, then the
// waveform buffer for a mono, a stereo and a "from the record" database), and its float buffers.
#include <cstdint>
#include <string_view>

#include "data/audio_example.h"
#include "fuzz_support.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view bytes(reinterpret_cast<const char*>(data), size);
  for (int channels : {0, 1, 2}) {
    rt::fuzz::expect_accepted_or_refused([&] {
      const auto w = rt::decode_waveform(bytes, "00000000", channels);
      if (!w.samples.empty()) (void)rt::waveform_to_tensor(w);
    });
  }
  rt::fuzz::expect_accepted_or_refused([&] {
    const auto example = rt::parse_example(bytes, "00000000");
    (void)rt::get_metadata(example, "group");
  });
  return 0;
}
