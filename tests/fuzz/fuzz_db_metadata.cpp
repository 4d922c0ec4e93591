// metadata.yaml of a database folder, as RAVE's preprocess and ours write it.
#include <cstdint>

#include "data/db_metadata.h"
#include "fuzz_support.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const auto file = rt::fuzz::scratch_file("metadata.yaml", data, size);
  rt::fuzz::expect_accepted_or_refused([&] { (void)rt::read_db_metadata(file.parent_path()); });
  return 0;
}
