#include "profiling/stacks/native_stack.h"

#include <cxxabi.h>
#include <dlfcn.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>

#ifdef RT_HAS_LIBUNWIND
#define UNW_LOCAL_ONLY
#include <libunwind.h>
#else
#include <execinfo.h>
#endif

#ifdef RT_HAS_LIBDW
#include <elfutils/libdwfl.h>
#endif

namespace rt::prof {

int capture_native_stack(void** frames, int max_frames) {
  if (max_frames <= 0) return 0;
#ifdef RT_HAS_LIBUNWIND
  return unw_backtrace(frames, max_frames);
#else
  return backtrace(frames, max_frames);
#endif
}

namespace {

// Drops a trailing parameter list "(…)" (balanced, from the end) and a trailing " const".
std::string strip_parameters(std::string name) {
  if (name.size() > 6 && name.compare(name.size() - 6, 6, " const") == 0) name.resize(name.size() - 6);
  if (name.empty() || name.back() != ')') return name;
  int depth = 0;
  for (size_t i = name.size(); i-- > 0;) {
    if (name[i] == ')') ++depth;
    if (name[i] == '(' && --depth == 0) {
      // "(anonymous namespace)" is part of a name, not a parameter list.
      if (i > 0) name.resize(i);
      return name;
    }
  }
  return name;
}

}  // namespace

std::string demangle_function_name(const char* symbol) {
  if (symbol == nullptr || *symbol == '\0') return {};
  int status = -1;
  char* out = abi::__cxa_demangle(symbol, nullptr, nullptr, &status);
  if (status != 0 || out == nullptr) {
    std::free(out);
    return symbol;
  }
  std::string name = strip_parameters(out);
  std::free(out);
  return name;
}

struct Symbolizer::Impl {
#ifdef RT_HAS_LIBDW
  Dwfl* dwfl = nullptr;
  Dwfl_Callbacks callbacks{};
  char* debuginfo_path = nullptr;
  Impl() {
    callbacks.find_elf = dwfl_linux_proc_find_elf;
    callbacks.find_debuginfo = dwfl_standard_find_debuginfo;
    callbacks.debuginfo_path = &debuginfo_path;
    dwfl = dwfl_begin(&callbacks);
    if (dwfl != nullptr) {
      if (dwfl_linux_proc_report(dwfl, getpid()) != 0 || dwfl_report_end(dwfl, nullptr, nullptr) != 0) {
        dwfl_end(dwfl);
        dwfl = nullptr;
      }
    }
  }
  ~Impl() {
    if (dwfl != nullptr) dwfl_end(dwfl);
  }
  bool lookup(uintptr_t addr, std::string& out) {
    if (dwfl == nullptr) return false;
    Dwfl_Module* mod = dwfl_addrmodule(dwfl, addr);
    if (mod == nullptr) return false;
    const char* sym = dwfl_module_addrname(mod, addr);
    if (sym == nullptr) return false;
    out = demangle_function_name(sym);
    return true;
  }
#else
  bool lookup(uintptr_t, std::string&) { return false; }
#endif
};

Symbolizer::Symbolizer() : impl_(std::make_unique<Impl>()) {}
Symbolizer::~Symbolizer() = default;

const std::string& Symbolizer::symbolize(void* addr, bool is_return_address) {
  auto it = cache_.find(addr);
  if (it != cache_.end()) return it->second;
  uintptr_t pc = reinterpret_cast<uintptr_t>(addr);
  if (is_return_address && pc > 0) pc -= 1;
  std::string name;
  if (!impl_->lookup(pc, name)) {
    Dl_info info{};
    const bool found = dladdr(reinterpret_cast<void*>(pc), &info) != 0;
    if (found && info.dli_sname != nullptr) {
      name = demangle_function_name(info.dli_sname);
    } else if (found && info.dli_fname != nullptr) {
      const char* slash = std::strrchr(info.dli_fname, '/');
      char buf[64];
      std::snprintf(buf, sizeof buf, "+0x%lx",
                    static_cast<unsigned long>(pc - reinterpret_cast<uintptr_t>(info.dli_fbase)));
      name = std::string(slash ? slash + 1 : info.dli_fname) + buf;
      unresolved_.insert(name);
    } else {
      char buf[32];
      std::snprintf(buf, sizeof buf, "0x%lx", static_cast<unsigned long>(pc));
      name = buf;
      unresolved_.insert(name);
    }
  }
  // Collapsed-stack lines use ';' between frames and ' ' before the value.
  for (char& c : name) {
    if (c == ';') c = ':';
    if (c == '\n' || c == '\t') c = ' ';
  }
  return cache_.emplace(addr, std::move(name)).first->second;
}

std::vector<std::string> Symbolizer::symbolize_stack(const std::vector<void*>& frames) {
  std::vector<std::string> names;
  names.reserve(frames.size());
  for (size_t i = 0; i < frames.size(); ++i) names.push_back(symbolize(frames[i], i > 0));
  // The leaf end holds our callback and ATen's callback dispatch; cut after the last of them
  // among the first frames.
  size_t cut = 0;
  const size_t scan = std::min<size_t>(names.size(), 16);
  for (size_t i = 0; i < scan; ++i) {
    const std::string& s = names[i];
    if (s.find("rt::prof::(anonymous namespace)::on_op_start") != std::string::npos ||
        s.find("RecordFunction") != std::string::npos ||
        s.find("capture_native_stack") != std::string::npos || s.find("unw_backtrace") != std::string::npos ||
        s.find("runStartCallbacks") != std::string::npos || s.find("runCallbacks") != std::string::npos) {
      cut = i + 1;
    }
  }
  names.erase(names.begin(), names.begin() + static_cast<std::ptrdiff_t>(cut));
  return names;
}

}  // namespace rt::prof
