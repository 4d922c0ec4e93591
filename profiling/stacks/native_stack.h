// Native call stacks for `with_stack`: cheap capture at operator entry, symbolisation
// once per unique address afterwards.
//
// Capture uses libunwind's unw_backtrace when the build found it (RT_HAS_LIBUNWIND), glibc's
// backtrace() otherwise. Symbolisation uses libdw (RT_HAS_LIBDW: debug info, .symtab and
// .dynsym of each module, and separate debug files found through .gnu_debuglink), then dladdr
// (the dynamic symbol table: what a library without debug info, such as Debian's
// libtorch_cpu.so, still names). Both name a frame only by a symbol that contains it, so a
// frame in a function the library does not export stays "<module>+0x<offset>" rather than
// being charged to the exported function before it, and is listed in unresolved(). Names are
// demangled with abi::__cxa_demangle and shortened to the function name without its
// parameter list.
#pragma once

#include <cstddef>
#include <memory>
#include <set>
#include <string>
#include <unordered_map>
#include <vector>

namespace rt::prof {

// Writes up to `max_frames` return addresses of the calling thread, leaf first, into
// `frames`; returns how many. Async-signal-unsafe; allocation-free.
int capture_native_stack(void** frames, int max_frames);

// Resolves addresses to readable frame names, caching each address. Not thread-safe: one
// Symbolizer per writer. Unknown addresses become "<module>+0x<offset>" or "0x<addr>".
class Symbolizer {
 public:
  Symbolizer();
  ~Symbolizer();
  Symbolizer(const Symbolizer&) = delete;
  Symbolizer& operator=(const Symbolizer&) = delete;

  // `is_return_address`: frames above the leaf hold return addresses, which point past the
  // call; looking up addr − 1 names the calling function even when the call is its last
  // instruction.
  const std::string& symbolize(void* addr, bool is_return_address = true);

  // Symbolises a leaf-first stack and drops the profiler's own frames at the leaf end
  // (RecordFunction callback machinery and rt::prof), so the stack starts at the code that
  // called the operator.
  std::vector<std::string> symbolize_stack(const std::vector<void*>& frames);

  size_t cache_size() const { return cache_.size(); }

  // The frame names symbolize() could not resolve ("<module>+0x<offset>", "0x<addr>").
  const std::set<std::string>& unresolved() const { return unresolved_; }

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
  std::unordered_map<void*, std::string> cache_;
  std::set<std::string> unresolved_;
};

// "_ZN2at6native5addmmE..." → "at::native::addmm". Returns the input when it is not a
// mangled C++ name.
std::string demangle_function_name(const char* symbol);

}  // namespace rt::prof
