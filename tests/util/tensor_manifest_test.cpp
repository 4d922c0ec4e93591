#include "util/tensor_manifest.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "support/expect.h"
#include "support/test_support.h"
#include "util/atomic_file.h"
#include "util/json.h"

namespace rt::tensor_manifest {
namespace {

using testing::error_of;

TEST(TensorManifest, WrittenFilesReadBackWithTheirOwnKeysShapesDtypesAndValues) {
  testing::ScratchDir dir;
  const std::vector<float> a = {1.5f, -2.0f, 3.25f, 0.0f, 5.0f, 6.0f};
  const std::vector<double> b = {0.1, 0.2};
  const std::vector<int16_t> pcm = {-32768, 0, 16384};
  const float scalar = 7.0f;
  TensorFileWriter w;
  w.add("weight:a", {2, 3}, Dtype::kFloat32, a.data());
  w.add("grad:b", {2}, Dtype::kFloat64, b.data());
  w.add("input:x", {1, 3}, Dtype::kPcm16, pcm.data());
  w.add("output:s", {}, Dtype::kFloat32, &scalar);
  EXPECT_EQ(w.size(), 4u);
  EXPECT_EQ(w.bytes(), 24u + 16u + 6u + 4u);
  w.write(dir / "t", Json{{"model", "m"}, {"losses", {{"loss", 0.5}}}, {"tensors", "replaced"}});

  const TensorFile f = read_tensor_file(dir / "t");
  EXPECT_EQ(f.manifest["format"], "rt-golden/1");
  EXPECT_EQ(f.manifest["model"], "m");
  EXPECT_EQ(f.manifest["losses"]["loss"], 0.5);
  ASSERT_EQ(f.tensors.size(), 4u);
  EXPECT_EQ(f.tensors[0].name, "weight:a");
  EXPECT_EQ(f.tensors[0].shape, (std::vector<int64_t>{2, 3}));
  EXPECT_EQ(f.tensors[1].dtype, Dtype::kFloat64);
  EXPECT_EQ(f.tensors[2].dtype, Dtype::kPcm16);
  EXPECT_EQ(f.tensors[3].shape, std::vector<int64_t>{});
  EXPECT_EQ(f.tensors[3].numel(), 1);
  // Float32 entries name no dtype (the format's default); the others do.
  EXPECT_FALSE(f.manifest["tensors"][0].contains("dtype"));
  EXPECT_EQ(f.manifest["tensors"][2]["dtype"], "pcm16");
  const TensorEntry* e = f.find("grad:b");
  ASSERT_NE(e, nullptr);
  EXPECT_EQ(e->offset, 24u);
  EXPECT_EQ(std::memcmp(f.values(*e), b.data(), 16), 0);
  EXPECT_EQ(std::memcmp(f.values(*f.find("input:x")), pcm.data(), 6), 0);
  EXPECT_EQ(f.find("nothing"), nullptr);
  // One line per tensor, as the Python writers lay the file out.
  const std::string text = read_file(dir / "t.json");
  EXPECT_HAS(text, "\n  {\"name\":\"weight:a\",\"offset\":0,\"shape\":[2,3]},\n");
}

TEST(TensorManifest, AFileWithoutTensorsIsAManifestOnly) {
  testing::ScratchDir dir;
  TensorFileWriter().write(dir / "empty", Json{{"model", "m"}});
  const TensorFile f = read_tensor_file(dir / "empty");
  EXPECT_TRUE(f.tensors.empty());
  EXPECT_TRUE(f.data.empty());
  EXPECT_EQ(f.manifest["model"], "m");
}

TEST(TensorManifest, ReadingRefusesAnotherFormatGapsTrailingBytesRepeatsAndUnknownDtypes) {
  testing::ScratchDir dir;
  const std::vector<float> v = {1, 2, 3, 4};
  auto write = [&](const std::string& stem, const Json& tensors, size_t bin_bytes,
                   const std::string& format = "rt-golden/1") {
    write_file_atomic(dir / (stem + ".json"), Json{{"format", format}, {"tensors", tensors}}.dump());
    write_file_atomic(dir / (stem + ".bin"), std::string(reinterpret_cast<const char*>(v.data()), bin_bytes));
  };
  const Json one = Json::array({{{"name", "a"}, {"shape", {2}}, {"offset", 0}}});
  write("other", one, 8, "something/2");
  EXPECT_HAS(error_of([&] { read_tensor_file(dir / "other"); }), "is not format rt-golden/1");
  write("trailing", one, 12);
  EXPECT_HAS(error_of([&] { read_tensor_file(dir / "trailing"); }), "4 bytes after its last tensor");
  write("gap", Json::array({{{"name", "a"}, {"shape", {1}}, {"offset", 4}}}), 8);
  EXPECT_HAS(error_of([&] { read_tensor_file(dir / "gap"); }), "tensor 'a' at offset 4");
  write("short", one, 4);
  EXPECT_HAS(error_of([&] { read_tensor_file(dir / "short"); }), "tensor 'a' at offset 0");
  write("twice",
        Json::array(
            {{{"name", "a"}, {"shape", {1}}, {"offset", 0}}, {{"name", "a"}, {"shape", {1}}, {"offset", 4}}}),
        8);
  EXPECT_HAS(error_of([&] { read_tensor_file(dir / "twice"); }), "tensor 'a' is listed twice");
  write("dtype", Json::array({{{"name", "a"}, {"shape", {1}}, {"offset", 0}, {"dtype", "int8"}}}), 4);
  EXPECT_HAS(error_of([&] { read_tensor_file(dir / "dtype"); }), "dtype 'int8'");
  write("negative", Json::array({{{"name", "a"}, {"shape", {-1}}, {"offset", 0}}}), 4);
  EXPECT_HAS(error_of([&] { read_tensor_file(dir / "negative"); }), "negative dimension");
  write("noname", Json::array({{{"shape", {1}}, {"offset", 0}}}), 4);
  EXPECT_HAS(error_of([&] { read_tensor_file(dir / "noname"); }), "lacks name, shape or offset");
}

TEST(TensorManifest, TheWriterRefusesARepeatedName) {
  const float x = 1.0f;
  TensorFileWriter w;
  w.add("a", {1}, Dtype::kFloat32, &x);
  EXPECT_HAS(error_of([&] { w.add("a", {1}, Dtype::kFloat32, &x); }), "tensor 'a' was already added");
}

}  // namespace
}  // namespace rt::tensor_manifest
