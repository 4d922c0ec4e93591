// The function symbols of an ELF file's dynamic symbol table (.dynsym), read from the file:
// what names a frame when a library ships without debug info or .symtab (Debian's
// libtorch_cpu.so keeps only .dynsym). A frame is named only by a symbol that contains it;
// an address in a hidden function (not exported) stays unresolved rather than being charged
// to the exported function that happens to precede it.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace rt::prof {

class ElfDynamicSymbols {
 public:
  // Reads `path` (64-bit little-endian ELF). A file that cannot be read or parsed gives an
  // empty table (every lookup fails); never throws.
  explicit ElfDynamicSymbols(const std::string& path);

  // The mangled name of the function symbol with value ≤ addr < value + size, or nullptr.
  // `addr` is a link-time address: runtime address − load base + first_load_vaddr().
  const char* lookup(uint64_t addr) const;

  // The p_vaddr of the first PT_LOAD segment, page-aligned: what the load base maps to.
  uint64_t first_load_vaddr() const { return first_load_vaddr_; }
  size_t size() const { return symbols_.size(); }

 private:
  struct Symbol {
    uint64_t value = 0;
    uint64_t size = 0;
    uint32_t name = 0;  // offset in strings_
  };
  std::string strings_;           // the .dynstr section
  std::vector<Symbol> symbols_;   // defined functions with a size, sorted by value
  uint64_t first_load_vaddr_ = 0;
};

}  // namespace rt::prof
