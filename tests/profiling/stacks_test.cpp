// with_stack: native stacks captured per op, symbolised, collapsed by self time.
#include <gtest/gtest.h>

#include <regex>
#include <set>
#include <sstream>

#include "profiling/stacks/native_stack.h"
#include "profiling/trace/collapsed_stacks.h"
#include "profiling/trace/op_tracer.h"
#include "support/test_support.h"
#include "trace_test_model.h"
#include "util/atomic_file.h"

namespace rt::prof {
namespace {

TEST(StacksTest, DemangleShortensToFunctionName) {
  EXPECT_EQ(demangle_function_name("_ZN2at6native5addmmERKNS_6TensorES3_"), "at::native::addmm");
  EXPECT_EQ(demangle_function_name("main"), "main");
}

volatile int g_sink = 0;
__attribute__((noinline)) int capture_here(void** frames, int n) {
  const int got = capture_native_stack(frames, n);
  g_sink = g_sink + 1;  // not a tail call: keeps this frame on the stack
  return got;
}

TEST(StacksTest, CaptureAndSymbolizeNamesTheCaller) {
  void* frames[32];
  const int n = capture_here(frames, 32);
  ASSERT_GT(n, 2);
  Symbolizer sym;
  std::string all;
  for (int i = 0; i < n; ++i) all += sym.symbolize(frames[i], i > 0) + "\n";
  EXPECT_NE(all.find("capture_here"), std::string::npos) << all;
  EXPECT_NE(all.find("StacksTest_CaptureAndSymbolizeNamesTheCaller"), std::string::npos) << all;
}

__attribute__((noinline)) void traced_user_function(testing::TinyNet& net, torch::optim::SGD& opt,
                                                    const torch::Tensor& x, const torch::Tensor& y) {
  for (int i = 0; i < 3; ++i) testing::train_step(net, opt, x, y);
}

// Three training steps of a tiny net through traced_user_function, traced with stacks.
Timeline trace_three_steps_with_stacks() {
  torch::set_num_threads(1);
  torch::manual_seed(0);
  testing::TinyNet net;
  torch::optim::SGD opt(net->parameters(), torch::optim::SGDOptions(0.01));
  auto x = torch::randn({8, 2, 16}), y = torch::randn({8, 4});
  OpTracerOptions o;
  o.with_stack = true;
  OpTracer tracer(o);
  tracer.start();
  tracer.step_begin(0);
  traced_user_function(net, opt, x, y);
  tracer.step_end();
  Timeline t = tracer.stop();
  finalize_timeline(t);
  return t;
}

TEST(StacksTest, CollapsedStacksFileFormat) {
  Timeline t = trace_three_steps_with_stacks();
  size_t with_stack = 0;
  for (const auto& a : t.activities) with_stack += (a.kind == ActivityKind::kCpuOp && !a.call_stack.empty());
  EXPECT_GT(with_stack, 20u);

  std::set<std::string> op_names;
  for (const auto& a : t.activities) op_names.insert(a.name);
  rt::testing::ScratchDir dir("stacks");
  write_collapsed_stacks(t, dir / "profile_step_0_stacks.txt");
  const std::string text = read_file(dir / "profile_step_0_stacks.txt");
  std::istringstream in(text);
  std::string line;
  size_t lines = 0, through_user_fn = 0;
  const std::regex format(R"(^[^ ].* [0-9]+$)");
  while (std::getline(in, line)) {
    ++lines;
    EXPECT_TRUE(std::regex_match(line, format)) << line;
    EXPECT_EQ(line.back() == '0' && line[line.rfind(' ') + 1] == '0', false) << "zero-valued line: " << line;
    through_user_fn += line.find("traced_user_function") != std::string::npos;
    // Root first: the leaf frame is the operator name.
    const std::string stack = line.substr(0, line.rfind(' '));
    const std::string leaf = stack.substr(stack.rfind(';') + 1);
    EXPECT_TRUE(op_names.count(leaf)) << leaf;
    EXPECT_EQ(stack.find("rt::prof::(anonymous namespace)::on_op_start"), std::string::npos) << line;
  }
  EXPECT_GT(lines, 3u);
  EXPECT_GT(through_user_fn, 0u) << text;
}

// Frames no symbol contains are named "<module>+0x<offset>" and counted per module in a note
// kept out of the stacks file (the folded format has no comments).
TEST(StacksTest, UnresolvedFramesAreCountedOutsideTheStacksFile) {
  Timeline t;
  Activity a;
  a.name = "aten::add";
  a.start_ns = 0;
  a.end_ns = 5000;
  a.call_stack = {"libfoo.so.1+0x1a2b", "libfoo.so.1+0x3c4d", "rt::train", "main"};  // leaf first
  t.activities.push_back(a);
  finalize_timeline(t);
  const std::string plain = collapsed_stacks(t);
  EXPECT_EQ(plain, "main;rt::train;libfoo.so.1+0x3c4d;libfoo.so.1+0x1a2b;aten::add 5\n");
  EXPECT_EQ(unresolved_frames_note(t), "");

  t.unresolved_frames = {"libfoo.so.1+0x1a2b", "libfoo.so.1+0x3c4d", "libbar.so+0x10"};  // bar: not written
  EXPECT_EQ(collapsed_stacks(t), plain) << "the file holds stack lines only";
  const std::string note = unresolved_frames_note(t);
  EXPECT_EQ(note.rfind("2 of 5 distinct frames unresolved", 0), 0u) << note;
  EXPECT_NE(note.find(" libfoo.so.1 (2)"), std::string::npos) << note;
  EXPECT_EQ(note.find("libbar"), std::string::npos) << note;
}

// libtorch_cpu ships without debug info or .symtab: an address inside one of its exported
// functions, past the entry, is named from the dynamic symbol table, demangled, and is not
// listed as unresolved.
TEST(StacksTest, ExportedLibtorchFunctionIsNamedPastItsEntry) {
  auto* fn = reinterpret_cast<char*>(&at::_ops::add_Tensor::call);
  Symbolizer sym;
  EXPECT_EQ(sym.symbolize(fn + 4, false), "at::_ops::add_Tensor::call");
  EXPECT_EQ(sym.symbolize(fn + 5, true), "at::_ops::add_Tensor::call");  // a return address: looks up fn + 4
  EXPECT_TRUE(sym.unresolved().empty());
}

// In a real stack, a frame is listed in unresolved() exactly when it is shown as
// "<module>+0x<offset>" (or "0x<addr>"): the stacks file's comment counts what stays unnamed.
TEST(StacksTest, UnresolvedFramesAreExactlyTheOnesShownAsOffsets) {
  Timeline t = trace_three_steps_with_stacks();
  const std::regex offset(R"(^(\S+\+0x[0-9a-f]+|0x[0-9a-f]+)$)");
  size_t frames = 0;
  for (const auto& a : t.activities) {
    for (const auto& f : a.call_stack) {
      ++frames;
      EXPECT_EQ(std::regex_match(f, offset), t.unresolved_frames.count(f) == 1) << f;
    }
  }
  EXPECT_GT(frames, 0u);
  for (const auto& f : t.unresolved_frames) EXPECT_TRUE(std::regex_match(f, offset)) << f;
}

}  // namespace
}  // namespace rt::prof
