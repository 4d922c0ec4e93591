// --target_libtorch's table and rule (export/checks/libtorch_target.h) on small TorchScript modules
// whose needs are known from PyTorch's own history: aten::gelu's `approximate` raised the file
// format to 10 (caffe2/serialize/versions.h, read by LibTorch 1.12 on), conv1d's string padding
// is the overload aten::conv1d.padding of 1.9, and aten::dim is a TorchScript builtin that became
// a native function only in later releases.
#include "export/checks/libtorch_target.h"

#include <gtest/gtest.h>
#include <torch/script.h>

#include <algorithm>
#include <sstream>

#include "util/error.h"

namespace rt::exporting {
namespace {

struct Scripted {
  std::string bytes;
  TorchScriptNeeds needs;
};

// `forward` as given, saved and loaded back as a host would load the file.
Scripted script_forward(const std::string& body) {
  torch::jit::Module m("TargetProbe");
  m.define("def forward(self, x):\n" + body);
  std::ostringstream out;
  m.save(out);
  Scripted s;
  s.bytes = out.str();
  std::istringstream in(s.bytes);
  s.needs = torchscript_needs(torch::jit::load(in), file_format_version_of(s.bytes));
  return s;
}

LibTorchRelease release(const std::string& name) { return parse_target_libtorch(name, nullptr); }

std::string newest() { return libtorch_releases().back().name(); }

bool has(const std::vector<std::string>& list, const std::string& op) {
  return std::find(list.begin(), list.end(), op) != list.end();
}

TEST(LibTorchTarget, TheTableHoldsTheReleasesReadersAsTheirHeadersSay) {
  const auto& all = libtorch_releases();
  ASSERT_GE(all.size(), 20u);
  EXPECT_EQ(all.front().name(), "1.4");
  EXPECT_EQ(release("1.11").reads_up_to, 9u);
  EXPECT_EQ(release("1.12").reads_up_to, 10u);
  EXPECT_EQ(release("2.11").reads_up_to, 10u);
  for (size_t i = 1; i < all.size(); ++i)
    EXPECT_GE(all[i].reads_up_to, all[i - 1].reads_up_to) << all[i].name();
}

TEST(LibTorchTarget, APlainModuleLoadsWhereverItsFormatVersionIsRead) {
  const auto s = script_forward("  return torch.relu(x) + x.dim()\n");
  EXPECT_EQ(s.needs.file_format_version, 3u);
  EXPECT_TRUE(has(s.needs.checked, "aten::relu")) << ::testing::PrintToString(s.needs.checked);
  // aten::dim: a builtin in 1.13, a native function from 2.12 on; every release has it.
  EXPECT_TRUE(has(s.needs.checked, "aten::dim")) << ::testing::PrintToString(s.needs.checked);
  EXPECT_EQ(releases_that_load(s.needs), "1.5 … " + newest());
  EXPECT_EQ(why_release_cannot_load(s.needs, release("1.13")), "");
  EXPECT_EQ(why_release_cannot_load(s.needs, release("1.4")),
            "file format version 3, and LibTorch 1.4 reads versions up to 2");
}

TEST(LibTorchTarget, GeluWithApproximateNeedsFileFormatTenSoLibTorchOnePointTwelve) {
  const auto s = script_forward("  return torch.gelu(x, approximate=\"tanh\")\n");
  EXPECT_EQ(s.needs.file_format_version, 10u);
  EXPECT_EQ(releases_that_load(s.needs), "1.12 … " + newest());
  EXPECT_EQ(why_release_cannot_load(s.needs, release("1.11")),
            "file format version 10, and LibTorch 1.11 reads versions up to 9");
  const std::string refusal = target_refusal("model.ts", "1.11", s.needs);
  EXPECT_EQ(refusal,
            "--target_libtorch 1.11: LibTorch 1.11 cannot load 'model.ts': file format version 10, and "
            "LibTorch 1.11 reads versions up to 9 (it loads in LibTorch 1.12 … " +
                newest() + ")");
  EXPECT_EQ(refusal.find('\n'), std::string::npos);
  EXPECT_EQ(target_refusal("model.ts", "1.12.1", s.needs), "");
}

TEST(LibTorchTarget, AnOverloadAReleaseLacksIsNamed) {
  const auto s = script_forward("  return torch.conv1d(x, x, None, [1], \"same\")\n");
  EXPECT_LE(s.needs.file_format_version, 5u);  // LibTorch 1.8 reads it: the operator decides
  EXPECT_TRUE(has(s.needs.checked, "aten::conv1d.padding")) << ::testing::PrintToString(s.needs.checked);
  EXPECT_EQ(why_release_cannot_load(s.needs, release("1.8")),
            "it calls 1 operator(s) LibTorch 1.8 does not have: aten::conv1d.padding");
  EXPECT_EQ(why_release_cannot_load(s.needs, release("1.9")), "");
  EXPECT_EQ(releases_that_load(s.needs), "1.9 … " + newest());
}

TEST(LibTorchTarget, TargetsOutsideTheTableOrNotVersionsAreRefusedNamingTheFlag) {
  bool newer = false;
  EXPECT_EQ(parse_target_libtorch("1.13", &newer).name(), "1.13");
  EXPECT_FALSE(newer);
  EXPECT_EQ(parse_target_libtorch("1.13.1", &newer).name(), "1.13");
  EXPECT_EQ(parse_target_libtorch("9.0", &newer).name(), newest());
  EXPECT_TRUE(newer);
  auto refused = [](const std::string& text, const std::string& says) {
    try {
      parse_target_libtorch(text, nullptr);
      ADD_FAILURE() << text << " accepted";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(says), std::string::npos) << e.what();
      EXPECT_NE(std::string(e.what()).find("--target_libtorch"), std::string::npos) << e.what();
    }
  };
  refused("1.3", "older than the release table, which starts at 1.4");
  refused("1.14", "there was no LibTorch 1.14 release (the table has 1.4 … 1.13, 2.0 … ");
  refused("two", "is not a version");
  refused("2", "is not a version");
  refused("2.x", "is not a version");
  refused("2.1.x", "is not a version");
  refused("", "is not a version");
}

}  // namespace
}  // namespace rt::exporting
