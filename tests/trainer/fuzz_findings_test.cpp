// Inputs found by the fuzz targets (tests/fuzz/, scripts/fuzz.sh), kept as regression tests.
// The raw inputs are also in the seed corpora (tests/fuzz/corpus/<target>/regress-*), which
// every fuzz run replays under the sanitizers first.
#include <caffe2/serialize/inline_container.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <string>
#include <utility>
#include <vector>

#include "support/test_support.h"
#include "training/checkpoint.h"
#include "util/atomic_file.h"
#include "util/error.h"

namespace rt {
namespace {

namespace fs = std::filesystem;

// fuzz_checkpoint: one byte changed in the archive's pickle made torch's reader throw a plain
// std::runtime_error with a multi-line excerpt of the pickle, which escaped as a raw error.
TEST(CheckpointFuzzFindings, ACorruptPickleIsRefusedInOneLineNamingTheFile) {
  testing::ScratchDir dir("ckpt_fuzz");
  const fs::path ckpt = dir / "corrupt.ckpt";
  CheckpointMeta meta;
  meta.family = "rave";
  meta.signature = "model.family = rave";
  meta.step = 3;
  save_checkpoint(ckpt, meta, [](torch::serialize::OutputArchive& a) { a.write("w", torch::ones({2})); });
  // The archive is rewritten by torch's own writer, so every entry's CRC matches: the damage
  // must be found by the pickle reader, not by the integrity check before it.
  std::vector<std::pair<std::string, std::string>> records;
  {
    caffe2::serialize::PyTorchStreamReader reader(ckpt.string());
    for (const auto& name : reader.getAllRecords()) {
      auto [data, size] = reader.getRecord(name);
      records.emplace_back(name, std::string(static_cast<const char*>(data.get()), size));
    }
  }
  bool corrupted = false;
  for (auto& [name, bytes] : records) {
    const auto at = bytes.find("ccollections\nOrderedDict");
    if (name == "data.pkl" && at != std::string::npos) {
      bytes[at + 1] = '(';
      corrupted = true;
    }
  }
  ASSERT_TRUE(corrupted) << "the archive's data.pkl no longer names collections.OrderedDict";
  fs::remove(ckpt);
  {
    caffe2::serialize::PyTorchStreamWriter writer(ckpt.string());
    for (const auto& [name, bytes] : records) {
      if (name != "version") writer.writeRecord(name, bytes.data(), bytes.size());
    }
    writer.writeEndOfFile();
  }
  try {
    (void)read_checkpoint_meta(ckpt);
    FAIL() << "a corrupt checkpoint was read";
  } catch (const Error& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find(ckpt.string()), std::string::npos) << what;
    EXPECT_EQ(what.find('\n'), std::string::npos) << "one line:\n" << what;
    EXPECT_EQ(what.find("damaged"), std::string::npos)
        << "refused by the CRC check, not the pickle reader: " << what;
  }
}

TEST(FirstLine, KeepsTheTextBeforeTheFirstNewline) {
  EXPECT_EQ(first_line("expected ) but found 'eof' here:\n(ollections"), "expected ) but found 'eof' here:");
  EXPECT_EQ(first_line("one line"), "one line");
  EXPECT_EQ(first_line(""), "");
}

}  // namespace
}  // namespace rt
