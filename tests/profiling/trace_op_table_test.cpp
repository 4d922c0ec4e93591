// The top-N operator table in torch's key_averages().table() layout.
#include <gtest/gtest.h>

#include <sstream>

#include "profiling/trace/op_table.h"
#include "util/error.h"

namespace rt::prof {
namespace {

Activity span(ActivityKind kind, const std::string& name, int64_t start_us, int64_t end_us, int64_t tid = 1) {
  Activity a;
  a.kind = kind;
  a.name = name;
  a.start_ns = start_us * 1000;
  a.end_ns = end_us * 1000;
  a.pid = 100;
  a.tid = tid;
  return a;
}

// ProfilerStep#1 [0,1000) ⊃ aten::linear [100,600) ⊃ aten::addmm [150,550); aten::relu [700,900).
Timeline synthetic() {
  Timeline t;
  t.activities.push_back(span(ActivityKind::kUserAnnotation, "ProfilerStep#1", 0, 1000));
  t.activities.push_back(span(ActivityKind::kCpuOp, "aten::linear", 100, 600));
  t.activities.push_back(span(ActivityKind::kCpuOp, "aten::addmm", 150, 550));
  t.activities.push_back(span(ActivityKind::kCpuOp, "aten::relu", 700, 900));
  t.activities.push_back(span(ActivityKind::kCpuOp, "aten::relu", 950, 1000));
  t.activities[2].input_dims = {{4}, {2, 3}, {3, 4}};
  t.activities[2].input_types = {"float", "float", "float"};
  finalize_timeline(t);
  return t;
}

TEST(TraceOpTableTest, SelfTimesAndCounts) {
  const auto stats = key_averages(synthetic(), false);
  ASSERT_EQ(stats.size(), 4u);
  std::map<std::string, OpStats> by;
  for (const auto& s : stats) by[s.key] = s;
  EXPECT_EQ(by["ProfilerStep#1"].self_cpu_ns, (1000 - 500 - 200 - 50) * 1000);
  EXPECT_EQ(by["aten::linear"].self_cpu_ns, 100 * 1000);
  EXPECT_EQ(by["aten::linear"].cpu_total_ns, 500 * 1000);
  EXPECT_EQ(by["aten::relu"].count, 2);
  EXPECT_EQ(by["aten::relu"].cpu_total_ns, 250 * 1000);
}

TEST(TraceOpTableTest, TorchLayout) {
  OpTableOptions o;
  o.row_limit = 2;
  const std::string table = op_table(key_averages(synthetic(), true), o);
  std::istringstream in(table);
  std::vector<std::string> lines;
  for (std::string l; std::getline(in, l);) lines.push_back(l);
  ASSERT_EQ(lines.size(), 7u) << table;  // rule, header, rule, 2 rows, rule, footer
  // Name column: longest name + 4 = 18; the others 12 wide; 2 spaces after each column.
  const std::string name_rule(18, '-');
  EXPECT_EQ(lines[0].substr(0, 20), name_rule + "  ");
  EXPECT_EQ(lines[0], lines[2]);
  EXPECT_EQ(lines[0], lines[5]);
  EXPECT_EQ(lines[1].substr(0, 20), "              Name  ");
  for (const char* h :
       {"Self CPU %", "Self CPU", "CPU total %", "CPU total", "CPU time avg", "# of Calls", "Input Shapes"}) {
    EXPECT_NE(lines[1].find(h), std::string::npos) << h;
  }
  EXPECT_EQ(lines[1].find("CPU Mem"), std::string::npos);
  // Sorted by self CPU time: addmm (400 us) first, then the step (250 us).
  EXPECT_EQ(lines[3].substr(0, 18), "       aten::addmm");
  EXPECT_NE(lines[3].find("  400.000us  "), std::string::npos) << lines[3];
  EXPECT_NE(lines[3].find("[[4], [2, 3], [3, 4]]"), std::string::npos) << lines[3];
  EXPECT_EQ(lines[4].substr(0, 18), "    ProfilerStep#1");
  // 400 / (250+100+400+250) = 40.00%
  EXPECT_NE(lines[3].find("  40.00%  "), std::string::npos) << lines[3];
  EXPECT_EQ(lines[6], "Self CPU time total: 1.000ms");
}

TEST(TraceOpTableTest, SortByCountAndMemoryColumns) {
  OpTableOptions o;
  o.sort_by = "count";
  o.profile_memory = true;
  const std::string table = op_table(key_averages(synthetic(), false), o);
  std::istringstream in(table);
  std::vector<std::string> lines;
  for (std::string l; std::getline(in, l);) lines.push_back(l);
  EXPECT_NE(lines[3].find("aten::relu"), std::string::npos) << table;
  EXPECT_NE(lines[1].find("Self CPU Mem"), std::string::npos);
  EXPECT_EQ(lines[1].find("Input Shapes"), std::string::npos);
}

TEST(TraceOpTableTest, FormattingMatchesTorch) {
  EXPECT_EQ(format_time_us(12.3456), "12.346us");
  EXPECT_EQ(format_time_us(1234.5), "1.234ms");  // printf rounds half to even on the binary value
  EXPECT_EQ(format_time_us(2.5e6), "2.500s");
  EXPECT_EQ(format_time_share(1, 4), "25.00%");
  EXPECT_EQ(format_time_share(0, 0), "NaN");
  EXPECT_EQ(format_memory(512), "512 b");
  EXPECT_EQ(format_memory(2048), "2.00 Kb");
  EXPECT_EQ(format_memory(-3 * 1024 * 1024), "-3.00 Mb");
}

TEST(TraceOpTableTest, UnknownSortKeyNamesAcceptedKeys) {
  OpTableOptions o;
  o.sort_by = "self_cpu_time";
  try {
    op_table({}, o);
    FAIL();
  } catch (const Error& e) {
    const std::string msg = e.what();
    EXPECT_NE(msg.find("profiling.sort_by"), std::string::npos);
    EXPECT_NE(msg.find("self_cpu_time_total"), std::string::npos);
  }
}

}  // namespace
}  // namespace rt::prof
