// Where the README, the demo and the profiling example put a user's datasets and runs: in
// folders git ignores, not in source folders (`data/` is the data library), and the same
// folders everywhere, so the README's `profile-report runs/latest` works right after the demo.
#include <gtest/gtest.h>

#include <algorithm>
#include <regex>
#include <set>
#include <sstream>

#include "support/test_support.h"
#include "util/atomic_file.h"

namespace rt {
namespace {

namespace fs = std::filesystem;

// Top-level folders that .gitignore ignores with a `/name/` line.
std::set<std::string> ignored_top_folders() {
  std::set<std::string> out;
  std::istringstream in(read_file(testing::source_path(".gitignore")));
  const std::regex folder(R"(^/([A-Za-z0-9_.-]+)/$)");
  std::smatch m;
  for (std::string line; std::getline(in, line);) {
    if (std::regex_match(line, m, folder)) out.insert(m[1]);
  }
  return out;
}

// The text of the README's fenced code blocks.
std::string readme_code() {
  std::istringstream in(read_file(testing::source_path("README.md")));
  std::string code;
  bool inside = false;
  for (std::string line; std::getline(in, line);) {
    if (line.rfind("```", 0) == 0) {
      inside = !inside;
      continue;
    }
    if (inside) code += line + "\n";
  }
  return code;
}

// The README is the two commands and the few lines a newcomer reads first; the rest is in docs/.
TEST(ReadmePaths, TheReadmeStaysWithinAHundredAndFiftyLines) {
  const std::string readme = read_file(testing::source_path("README.md"));
  EXPECT_LE(std::count(readme.begin(), readme.end(), '\n'), 150) << "move the detail to docs/";
}

TEST(ReadmePaths, DatasetsAndRunsInTheExamplesLiveInIgnoredNonSourceFolders) {
  const auto ignored = ignored_top_folders();
  const std::string code = readme_code();
  // Paths given to the options that name a user's data or runs, and to the run-taking tools.
  const std::regex arg(
      R"((?:--output_path|--db_path|--input_path|--out_path|--generate_neural_demo|--generate_demo|--run|profile-report|--compare)\s+([^\s\\]+))");
  int checked = 0;
  for (std::sregex_iterator it(code.begin(), code.end(), arg), end; it != end; ++it) {
    const std::string path = (*it)[1];
    if (path.empty() || path[0] == '~' || path[0] == '/' || path[0] == '-' || path[0] == '$' ||
        path[0] == '[') {
      continue;  // the user's own absolute paths, or an option
    }
    const std::string top = path.substr(0, path.find('/'));
    ++checked;
    EXPECT_TRUE(ignored.count(top)) << "README example path '" << path
                                    << "' is not under a folder .gitignore ignores";
    EXPECT_FALSE(fs::exists(testing::source_path(top + "/CMakeLists.txt")))
        << "README example path '" << path << "' is inside the source folder " << top << "/";
  }
  EXPECT_GE(checked, 10) << "the README's examples were not found";
}

TEST(ReadmePaths, TheDemoWritesWhereTheReadmeLooks) {
  const std::string demo = read_file(testing::source_path("scripts/demo.sh"));
  const std::string code = readme_code();
  // The README analyses `runs/latest` and trains on the demo's database.
  ASSERT_NE(code.find("profile-report runs/latest"), std::string::npos);
  EXPECT_NE(demo.find("RUNS=\"$ROOT/runs\""), std::string::npos) << "the demo's runs are not in runs/";
  EXPECT_NE(demo.find("--out_path \"$RUNS\""), std::string::npos)
      << "the demo's train does not write to runs/";
  const std::regex db(R"(--db_path\s+(datasets/demo)\b)");
  EXPECT_TRUE(std::regex_search(code, db)) << "the README's examples do not train on the demo's database";
  EXPECT_NE(demo.find("--output_path \"$DATASETS/demo\""), std::string::npos)
      << "the demo's database is not datasets/demo";
  EXPECT_NE(demo.find("DATASETS=\"$ROOT/datasets\""), std::string::npos);
  const auto ignored = ignored_top_folders();
  EXPECT_TRUE(ignored.count("runs") && ignored.count("datasets"))
      << "runs/ and datasets/ must be ignored by git";
  // tensorboard.sh opens the same runs by default.
  EXPECT_NE(read_file(testing::source_path("scripts/tensorboard.sh")).find("LOGDIR=\"${1:-$ROOT/runs}\""),
            std::string::npos);
}

// The targets a `TARGETS="${NAME:-a b c}"` line of demo.sh builds by default.
std::set<std::string> demo_targets(const std::string& demo, const std::string& variable) {
  const std::regex line("TARGETS=\"\\$\\{" + variable + ":-([a-z -]+)\\}\"");
  std::smatch m;
  std::set<std::string> out;
  if (!std::regex_search(demo, m, line)) return out;
  std::istringstream names(m[1].str());
  for (std::string n; names >> n;) out.insert(n);
  return out;
}

// A new user runs scripts/demo.sh, then the README's commands: every program they name under
// build/bin/ must be one the demo built (before the run: train, preprocess; after it: the rest).
TEST(ReadmePaths, EveryBinaryTheReadmeRunsIsOneTheDemoBuilds) {
  const std::string demo = read_file(testing::source_path("scripts/demo.sh"));
  std::set<std::string> built = demo_targets(demo, "TARGETS");
  for (const auto& t : demo_targets(demo, "AFTER_TARGETS")) built.insert(t);
  ASSERT_TRUE(built.count("train") && built.count("preprocess")) << "demo.sh's TARGETS line was not found";
  const std::string readme = read_file(testing::source_path("README.md"));
  const std::regex bin(R"(build/bin/([A-Za-z_-]+))");
  std::set<std::string> named;
  for (std::sregex_iterator it(readme.begin(), readme.end(), bin), end; it != end; ++it)
    named.insert((*it)[1]);
  EXPECT_GE(named.size(), 6u) << "the README's build/bin/ commands were not found";
  for (const auto& n : named) {
    EXPECT_TRUE(built.count(n)) << "the README runs build/bin/" << n
                                << ", which scripts/demo.sh does not build";
    EXPECT_TRUE(fs::exists(testing::source_path("apps/" + n)))
        << "build/bin/" << n << " is no program of apps/";
  }
}

}  // namespace
}  // namespace rt
