// Checkpoint integrity: a checkpoint whose bytes changed after it was written is refused by name
// instead of loading altered weights (torch's own reader does not check the zip CRCs).
#include "trainer/checkpoint.h"

#include <gtest/gtest.h>

#include <string>

#include "support/expect.h"
#include "support/test_support.h"
#include "trainer/zip_integrity.h"
#include "util/atomic_file.h"
#include "util/error.h"

namespace rt {
namespace {

namespace fs = std::filesystem;

CheckpointMeta test_meta() {
  CheckpointMeta m;
  m.family = "fake";
  m.signature = "model.width = 4; ";
  m.config_toml = "[model]\n";
  m.step = 7;
  return m;
}

// A checkpoint holding one tensor 0, 1, …, 255 (float); returns the tensor's bytes.
std::string write_test_checkpoint(const fs::path& path) {
  const torch::Tensor w = torch::arange(256, torch::kFloat);
  save_checkpoint(path, test_meta(), [&](torch::serialize::OutputArchive& a) { a.write("w", w); });
  return std::string(static_cast<const char*>(w.data_ptr()), w.nbytes());
}

TEST(CheckpointIntegrity, AOneBitFlipInATensorIsRefusedNamingTheFileAndEntry) {
  testing::ScratchDir scratch;
  const fs::path path = scratch / "last.ckpt";
  const std::string tensor = write_test_checkpoint(path);
  auto read_w = [](torch::serialize::InputArchive& a) {
    torch::Tensor w;
    a.read("w", w);
    EXPECT_EQ(w.size(0), 256);
  };
  EXPECT_EQ(load_checkpoint(path, test_meta(), read_w).step, 7);

  std::string bytes = read_file(path);
  const size_t at = bytes.find(tensor);
  ASSERT_NE(at, std::string::npos) << "the tensor is not stored verbatim";
  bytes[at + 4 * 100 + 2] ^= 0x10;  // one bit of element 100's mantissa
  write_file_atomic(path, bytes);
  try {
    load_checkpoint(path, test_meta(), read_w);
    FAIL() << "a corrupt checkpoint loaded";
  } catch (const Error& e) {
    const std::string what = e.what();
    EXPECT_HAS(what, "checkpoint '" + path.string() + "' is damaged");
    EXPECT_HAS(what, "fails its CRC-32 check");
    EXPECT_HAS(what, "/data/0'");
  }
  EXPECT_THROW(read_checkpoint_meta(path), Error);
}

TEST(CheckpointIntegrity, EveryEntryOfAnIntactCheckpointIsChecked) {
  testing::ScratchDir scratch;
  const fs::path path = scratch / "ok.ckpt";
  write_test_checkpoint(path);
  // meta/format … meta/step, the tensor's data, data.pkl, version and friends.
  EXPECT_GE(verify_zip_entries(path), 4u);
  // Truncation (a copy cut short) loses the end-of-central-directory record.
  const std::string bytes = read_file(path);
  write_file_atomic(path, bytes.substr(0, bytes.size() - 30));
  try {
    verify_zip_entries(path);
    FAIL() << "a truncated checkpoint passed";
  } catch (const Error& e) {
    EXPECT_HAS(std::string(e.what()), "checkpoint '" + path.string() + "' is damaged");
  }
}

}  // namespace
}  // namespace rt
