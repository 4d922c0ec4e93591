// A TOML config file (`--config FILE`, and a run's own config.toml on resume): parsed, checked
// against the schema of every family, finalized, then printed back and re-read.
#include <cstdint>

#include "config/config.h"
#include "families/builtin.h"
#include "fuzz_support.h"

extern "C" int LLVMFuzzerInitialize(int* /*argc*/, char*** /*argv*/) {
  rt::register_builtin_model_families();
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const auto file = rt::fuzz::scratch_file("fuzz.toml", data, size);
  std::string text;
  rt::fuzz::expect_accepted_or_refused([&] { text = rt::load_config_file(file).to_toml(); });
  if (text.empty()) return 0;
  // What we print for an accepted config must read back: any refusal here is a finding.
  const auto again =
      rt::fuzz::scratch_file("again.toml", reinterpret_cast<const uint8_t*>(text.data()), text.size());
  try {
    (void)rt::load_config_file(again);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "finding: an accepted config, printed by to_toml, does not read back: %s\n%s\n",
                 e.what(), text.c_str());
    std::abort();
  }
  return 0;
}
