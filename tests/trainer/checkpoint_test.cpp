// Checkpoint integrity: a checkpoint whose bytes changed after it was written is refused by name
// instead of loading altered weights (torch's own reader does not check the zip CRCs).
#include "training/checkpoint.h"

#include <gtest/gtest.h>
#include <zlib.h>

#include <string>
#include <utility>
#include <vector>

#include "support/expect.h"
#include "support/test_support.h"
#include "training/zip_integrity.h"
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

// A zip archive of stored entries with correct CRCs, as any zip writer makes it.
std::string stored_zip(const std::vector<std::pair<std::string, std::string>>& entries) {
  auto le = [](uint64_t v, int n) {
    std::string b;
    for (int i = 0; i < n; ++i) b += static_cast<char>((v >> (8 * i)) & 0xff);
    return b;
  };
  std::string local, central;
  for (const auto& [name, data] : entries) {
    const auto crc = crc32(0, reinterpret_cast<const Bytef*>(data.data()), static_cast<uInt>(data.size()));
    const std::string common = le(20, 2) + le(0, 2) + le(0, 2) + le(0, 2) + le(0, 2) + le(crc, 4) +
                               le(data.size(), 4) + le(data.size(), 4) + le(name.size(), 2) + le(0, 2);
    central += le(0x02014b50, 4) + le(20, 2) + common + le(0, 2) + le(0, 2) + le(0, 2) + le(0, 4) +
               le(local.size(), 4) + name;
    local += le(0x04034b50, 4) + common + name + data;
  }
  return local + central + le(0x06054b50, 4) + le(0, 2) + le(0, 2) + le(entries.size(), 2) +
         le(entries.size(), 2) + le(central.size(), 4) + le(local.size(), 4) + le(0, 2);
}

void expect_damaged(const fs::path& path, const std::string& why) {
  try {
    verify_zip_entries(path);
    FAIL() << path << " passed";
  } catch (const Error& e) {
    EXPECT_HAS(std::string(e.what()), "checkpoint '" + path.string() + "' is damaged");
    EXPECT_HAS(std::string(e.what()), why);
  }
  EXPECT_THROW(read_checkpoint_meta(path), Error);
}

// Zip archives without torch's layout are refused by name before torch's reader sees them:
// fuzz_checkpoint found that an empty archive made that reader throw from its constructor,
// leaking its state (LeakSanitizer).
TEST(CheckpointIntegrity, ArchivesWithoutTorchsLayoutAreRefusedByName) {
  testing::ScratchDir scratch;
  const fs::path empty = scratch / "empty.ckpt", flat = scratch / "flat.ckpt", mixed = scratch / "mixed.ckpt",
                 no_version = scratch / "no_version.ckpt", ok = scratch / "ok.ckpt";
  write_file_atomic(empty, stored_zip({}));
  expect_damaged(empty, "holds no entries");
  write_file_atomic(flat, stored_zip({{"data.pkl", "x"}, {"version", "3\n"}}));
  expect_damaged(flat, "entry 'data.pkl' is not inside the archive's folder");
  write_file_atomic(mixed, stored_zip({{"a/data.pkl", "x"}, {"b/version", "3\n"}}));
  expect_damaged(mixed, "entry 'b/version' lies outside the archive's folder 'a/'");
  write_file_atomic(no_version, stored_zip({{"a/data.pkl", "x"}}));
  expect_damaged(no_version, "no 'a/version' entry");
  // An entry whose general-purpose flags say encrypted (bit 0): torch's reader threw from its
  // constructor on it. Flags sit at offset 6 of the local header and 8 of the central one.
  std::string encrypted = stored_zip({{"a/data.pkl", "x"}, {"a/version", "3\n"}});
  const size_t central = encrypted.find(std::string("PK\x01\x02", 4));
  ASSERT_NE(central, std::string::npos);
  encrypted[6] = encrypted[central + 8] = 1;
  write_file_atomic(scratch / "encrypted.ckpt", encrypted);
  expect_damaged(scratch / "encrypted.ckpt", "entry 'a/data.pkl' is marked encrypted");
  // A file format version torch's reader refuses (it threw from its constructor on version 0).
  write_file_atomic(scratch / "v0.ckpt", stored_zip({{"a/data.pkl", "x"}, {"a/version", "0\n"}}));
  expect_damaged(scratch / "v0.ckpt", "file format version '0' is not one this LibTorch reads (1 to ");
  write_file_atomic(scratch / "vx.ckpt", stored_zip({{"a/data.pkl", "x"}, {"a/version", "three"}}));
  expect_damaged(scratch / "vx.ckpt", "file format version 'three'");
  // As torch's reader, `.data/version` wins over `version`.
  write_file_atomic(scratch / "vdata.ckpt",
                    stored_zip({{"a/data.pkl", "x"}, {"a/version", "0\n"}, {"a/.data/version", "3\n"}}));
  EXPECT_EQ(verify_zip_entries(scratch / "vdata.ckpt"), 3u);
  // torch writes zip64 end records, and its reader takes the directory from them: one naming
  // another directory than the plain end record (found by fuzz_checkpoint) is refused.
  write_test_checkpoint(ok);
  std::string bytes = read_file(ok);
  const size_t e64 = bytes.rfind(std::string("PK\x06\x06", 4));
  ASSERT_NE(e64, std::string::npos) << "torch's writer no longer adds a zip64 end record";
  EXPECT_GE(verify_zip_entries(ok), 4u);
  bytes[e64 + 32] = static_cast<char>(bytes[e64 + 32] - 1);  // one entry fewer
  write_file_atomic(scratch / "zip64.ckpt", bytes);
  expect_damaged(scratch / "zip64.ckpt", "its zip64 end record names another central directory");
  // The version record marked as a directory (MS-DOS attribute 0x10 at offset 38 of its central
  // header): torch's reader extracted nothing and parsed an unwritten buffer.
  std::string dir_entry = stored_zip({{"a/data.pkl", "x"}, {"a/version", "3\n"}});
  const size_t version_header = dir_entry.rfind(std::string("PK\x01\x02", 4));
  dir_entry[version_header + 38] = 0x10;
  write_file_atomic(scratch / "dir.ckpt", dir_entry);
  expect_damaged(scratch / "dir.ckpt", "entry 'a/version' is marked as a directory");
  // The hand-made writer is right: with a version record, the layout passes.
  write_file_atomic(ok, stored_zip({{"a/data.pkl", "x"}, {"a/version", "3\n"}}));
  EXPECT_EQ(verify_zip_entries(ok), 2u);
}

}  // namespace
}  // namespace rt
