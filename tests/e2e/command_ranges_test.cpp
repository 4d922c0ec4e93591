// Every command at the edges of its flags, as a careful user tries them: each count or size flag
// at both edges of the range docs/cli.md states ("Exit status, and the ranges of counts and
// sizes") and one value past each, read from that table so that the documentation and the
// commands cannot drift apart; a command line that does not parse is refused by every command
// the same way (one line, exit 2); paths holding an escape sequence are shown escaped.
#include <regex>
#include <thread>

#include "e2e/e2e_fixtures.h"
#include "util/atomic_file.h"

namespace rt::e2e {
namespace {

using testing::contains;

struct RangeRow {
  std::string command, flag;
  std::vector<std::string> accepted, refused;
};

int64_t cores() { return std::max<int64_t>(1, std::thread::hardware_concurrency()); }

// Whether a line of `output` refuses `flag`: an error naming it (a warning that merely mentions
// the flag, or the report of what the flag chose, is no refusal).
bool refuses(const std::string& output, const std::string& flag) {
  std::istringstream in(output);
  for (std::string line; std::getline(in, line);) {
    if (contains(line, "error") && contains(line, flag)) return true;
  }
  return false;
}

// The values of one cell: every backticked number, and the spelled-out edges the table uses.
std::vector<std::string> cell_values(const std::string& cell, int64_t latent_size) {
  std::vector<std::string> out;
  const std::regex number(R"(`(-?[0-9]+(?:\.[0-9]+)?)`)");
  for (std::sregex_iterator it(cell.begin(), cell.end(), number), end; it != end; ++it)
    out.push_back((*it)[1]);
  if (contains(cell, "4 × cores + 1")) {
    out.push_back(std::to_string(4 * cores() + 1));
  } else if (contains(cell, "4 × cores")) {
    out.push_back(std::to_string(4 * cores()));
  }
  if (contains(cell, "the model's latent size + 1")) {
    out.push_back(std::to_string(latent_size + 1));
  } else if (contains(cell, "the model's latent size")) {
    out.push_back(std::to_string(latent_size));
  }
  return out;
}

std::vector<RangeRow> documented_ranges(int64_t latent_size) {
  std::istringstream in(read_file(testing::source_path("docs/cli.md")));
  std::vector<RangeRow> rows;
  bool inside = false;
  const std::regex row(R"(^\| ([a-z-]+) \| `(--[a-z_]+)` \| (.*) \| (.*) \|$)");
  for (std::string line; std::getline(in, line);) {
    if (line.rfind("| command | flag | edges, accepted |", 0) == 0) inside = true;
    if (!inside) continue;
    if (line.empty()) break;
    std::smatch m;
    if (!std::regex_match(line, m, row)) continue;
    rows.push_back({m[1], m[2], cell_values(m[3], latent_size), cell_values(m[4], latent_size)});
  }
  return rows;
}

class CommandRanges : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = new ScratchDir("e2e_command_ranges");
    const fs::path db = make_demo_db(dir_->path(), 1.0);
    auto r = run_command(tiny_train_command(db, dir_->path() / "runs", "--max_steps 2 2>&1"));
    ASSERT_EQ(r.exit_code, 0) << r.output;
    run_ = run_dir_from_output(r.output);
    auto e =
        run_command(bin_path("export") + " --run " + quote(run_.string()) + " --check_seconds 0 --output " +
                    quote((dir_->path() / "probe.ts").string()) + " 2>&1");
    ASSERT_EQ(e.exit_code, 0) << e.output;
    std::smatch m;
    ASSERT_TRUE(std::regex_search(e.output, m, std::regex(R"(latent_size [0-9]+ of ([0-9]+))"))) << e.output;
    latent_size_ = std::stoll(m[1]);
    auto g = run_command(bin_path("preprocess") + " --generate_neural_demo " +
                         quote((dir_->path() / "neural_demo").string()) + " --groups 1 --trials 2 2>&1");
    ASSERT_EQ(g.exit_code, 0) << g.output;
  }
  void SetUp() override { ASSERT_GT(latent_size_, 0) << "the suite's training run or export failed"; }
  static void TearDownTestSuite() {
    delete dir_;
    dir_ = nullptr;
  }
  // The rest of a command line that gets past the flag's check quickly and then stops at once
  // for a reason that names another flag (a missing input, files already there), or does a
  // tiny job: a value the flag accepts is not refused, whatever happens after.
  static std::string rest_of(const RangeRow& row) {
    const std::string scratch = quote((dir_->path() / "scratch").string());
    const std::string missing = quote((dir_->path() / "missing").string());
    const std::string& c = row.command;
    const std::string& f = row.flag;
    if (c == "train")
      return "--config tiny_rave --db_path " + missing + " --out_path " + scratch + " --max_steps 1";
    if (c == "preprocess") {
      if (f == "--demo_seconds")
        return "--generate_demo " + quote((dir_->path() / "audio").string());  // its files are there
      if (f == "--groups" || f == "--units" || f == "--trials" || f == "--eval_trials" || f == "--bins")
        return "--generate_neural_demo " + quote((dir_->path() / "neural_demo").string());
      if (f == "--smoothing_sigma_ms" || f == "--bin_ms")
        return "--kind neural --input_path " + missing + " --output_path " + scratch;
      return "--input_path " + missing + " --output_path " + scratch;
    }
    if (c == "evaluate") return "--ckpt " + missing;
    if (c == "generate") {
      if (f == "--seconds" || f == "--temperature") return "--prior " + missing;
      return "--model " + missing + " --stream --input " + missing;
    }
    if (c == "export") {
      if (f == "--threads" || f == "--seconds" || f == "--block") return "--benchmark " + missing;
      return "--run " + quote(run_.string()) + " --output " + quote((dir_->path() / "edge.ts").string()) +
             " --force" + (f == "--check_seconds" ? "" : " --check_seconds 0");
    }
    if (c == "profile-report") return missing;
    return "";
  }
  static ScratchDir* dir_;
  static fs::path run_;
  static int64_t latent_size_;
};
ScratchDir* CommandRanges::dir_ = nullptr;
fs::path CommandRanges::run_;
int64_t CommandRanges::latent_size_ = 0;

TEST_F(CommandRanges, EveryCountAndSizeFlagIsHeldToTheRangeThisTableStates) {
  const auto rows = documented_ranges(latent_size_);
  ASSERT_GE(rows.size(), 25u) << "docs/cli.md's table of ranges was not found";
  std::set<std::string> commands;
  for (const auto& row : rows) {
    commands.insert(row.command);
    ASSERT_GE(row.accepted.size(), 2u) << row.command << " " << row.flag;
    ASSERT_GE(row.refused.size(), 2u) << row.command << " " << row.flag;
    // train names its keys' origin: the flag as typed.
    for (const auto& v : row.accepted) {
      auto r = run_command(bin_path(row.command) + " " + row.flag + " " + v + " " + rest_of(row) + " 2>&1");
      EXPECT_FALSE(refuses(r.output, row.flag))
          << row.command << " " << row.flag << " " << v << " is refused, though the table accepts it:\n"
          << r.output;
      EXPECT_FALSE(contains(r.output, "frame #")) << r.output;
    }
    for (const auto& v : row.refused) {
      auto r = run_command(bin_path(row.command) + " " + row.flag + " " + v + " " + rest_of(row) + " 2>&1");
      EXPECT_NE(r.exit_code, 0) << row.command << " " << row.flag << " " << v << "\n" << r.output;
      EXPECT_TRUE(refuses(r.output, row.flag))
          << row.command << " " << row.flag << " " << v << " is not refused naming the flag:\n"
          << r.output;
      EXPECT_EQ(std::count(r.output.begin(), r.output.end(), '\n'), 1) << "one line:\n" << r.output;
      EXPECT_FALSE(contains(r.output, "frame #")) << r.output;
    }
  }
  for (const char* c : {"train", "preprocess", "evaluate", "generate", "export", "profile-report"})
    EXPECT_TRUE(commands.count(c)) << c << " has no row in the table";
}

// One convention for a command line that does not parse: one line, exit 2, whatever the command.
TEST_F(CommandRanges, AMalformedCommandLineIsRefusedTheSameWayByEveryCommand) {
  const struct {
    std::string command, args;
  } cases[] = {
      {"train", "--bogus 1"},
      {"train", "--config tiny_rave --max_steps abc"},
      {"preprocess", "--bogus 1"},
      {"preprocess", "--sampling_rate abc --input_path x --output_path y"},
      {"evaluate", "--ckpt x --bogus 1"},
      {"evaluate", "--ckpt x --batch abc"},
      {"generate", "--model x --input y --bogus 1"},
      {"generate", "--model x --input y --threads abc"},
      {"export", "--bogus 1"},
      {"export", "--run x --latent_size abc"},
      {"profile-report", "x --bogus 1"},
      {"profile-report", "x --top abc"},
  };
  for (const auto& c : cases) {
    auto r = run_command(bin_path(c.command) + " " + c.args + " 2>&1");
    EXPECT_EQ(r.exit_code, 2) << c.command << " " << c.args << "\n" << r.output;
    EXPECT_EQ(r.output.rfind("error: ", 0), 0u) << c.command << " " << c.args << "\n" << r.output;
    if (contains(c.args, "--bogus")) {
      EXPECT_EQ(r.output.rfind("error: command line: ", 0), 0u) << r.output;
      EXPECT_TRUE(contains(r.output, "--bogus")) << r.output;
      EXPECT_TRUE(contains(r.output, "(`" + c.command + " --help` lists the flags")) << r.output;
    } else {
      EXPECT_TRUE(contains(r.output, "abc")) << r.output;  // the value refused, named
    }
    EXPECT_EQ(std::count(r.output.begin(), r.output.end(), '\n'), 1) << r.output;
  }
}

// Paths with an escape sequence (a folder named by a script gone wrong) reach the terminal
// escaped in what train, export and preprocess print.
TEST_F(CommandRanges, PathsWithAnEscapeSequenceAreShownEscaped) {
  const fs::path odd = dir_->path() / "odd\x1b[31mred";
  auto t = run_command(tiny_train_command(dir_->path() / "db", odd, "--max_steps 1 2>&1"));
  EXPECT_EQ(t.exit_code, 0) << t.output;
  EXPECT_TRUE(contains(t.output, "run directory: " + dir_->path().string() + "/odd\\x1b[31mred/"))
      << t.output;
  auto e = run_command(bin_path("export") + " --run " + quote(run_.string()) +
                       " --check_seconds 0 --output " + quote((odd / "m.ts").string()) + " 2>&1");
  EXPECT_EQ(e.exit_code, 0) << e.output;
  EXPECT_TRUE(contains(e.output, "exported " + dir_->path().string() + "/odd\\x1b[31mred/m.ts")) << e.output;
  auto p = run_command(bin_path("preprocess") + " --input_path " + quote((odd / "nothing").string()) +
                       " --output_path " + quote((dir_->path() / "never").string()) + " 2>&1");
  EXPECT_EQ(p.exit_code, 1) << p.output;
  EXPECT_TRUE(contains(p.output, "odd\\x1b[31mred/nothing: does not exist")) << p.output;
  auto report = run_command(bin_path("profile-report") + " " + quote((odd / "latest").string()) + " 2>&1");
  EXPECT_EQ(report.exit_code, 0) << report.output;
  EXPECT_TRUE(contains(report.output, "profile-report: " + dir_->path().string() + "/odd\\x1b[31mred/"))
      << report.output;
  for (const auto* r : {&t, &e, &p, &report}) EXPECT_FALSE(contains(r->output, "\x1b")) << r->output;
}

}  // namespace
}  // namespace rt::e2e
