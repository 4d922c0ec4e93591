#include "profiling/stacks/elf_symbols.h"

#include <elf.h>

#include <algorithm>
#include <fstream>
#include <string_view>

namespace rt::prof {

namespace {

// Reads `n` bytes at `offset`; false on a short read.
bool read_at(std::ifstream& f, uint64_t offset, void* out, size_t n) {
  f.seekg(static_cast<std::streamoff>(offset));
  f.read(static_cast<char*>(out), static_cast<std::streamsize>(n));
  return static_cast<size_t>(f.gcount()) == n;
}

// Bounds on what a section header may ask us to read: libtorch_cpu's .dynsym is 0.8 MB and
// its .dynstr 2.7 MB; a corrupt header must not make us allocate gigabytes.
constexpr uint64_t kMaxSectionBytes = uint64_t{256} << 20;

}  // namespace

ElfDynamicSymbols::ElfDynamicSymbols(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  Elf64_Ehdr eh{};
  if (!f || !read_at(f, 0, &eh, sizeof eh)) return;
  if (std::string_view(reinterpret_cast<const char*>(eh.e_ident), 4) != std::string_view(ELFMAG, SELFMAG) ||
      eh.e_ident[EI_CLASS] != ELFCLASS64 || eh.e_ident[EI_DATA] != ELFDATA2LSB ||
      eh.e_shentsize != sizeof(Elf64_Shdr) || eh.e_phentsize != sizeof(Elf64_Phdr)) {
    return;
  }
  for (uint16_t i = 0; i < eh.e_phnum; ++i) {
    Elf64_Phdr ph{};
    if (!read_at(f, eh.e_phoff + uint64_t{i} * sizeof ph, &ph, sizeof ph)) return;
    if (ph.p_type == PT_LOAD) {
      const uint64_t align = ph.p_align > 1 ? ph.p_align : 1;
      first_load_vaddr_ = ph.p_vaddr & ~(align - 1);
      break;
    }
  }
  std::vector<Elf64_Shdr> sections(eh.e_shnum);
  for (uint16_t i = 0; i < eh.e_shnum; ++i) {
    if (!read_at(f, eh.e_shoff + uint64_t{i} * sizeof(Elf64_Shdr), &sections[i], sizeof(Elf64_Shdr))) return;
  }
  for (const Elf64_Shdr& sh : sections) {
    if (sh.sh_type != SHT_DYNSYM || sh.sh_link >= sections.size() || sh.sh_entsize != sizeof(Elf64_Sym)) continue;
    const Elf64_Shdr& str = sections[sh.sh_link];
    if (sh.sh_size > kMaxSectionBytes || str.sh_size > kMaxSectionBytes) return;
    strings_.resize(str.sh_size);
    std::vector<Elf64_Sym> syms(sh.sh_size / sizeof(Elf64_Sym));
    if (!read_at(f, str.sh_offset, strings_.data(), strings_.size()) ||
        !read_at(f, sh.sh_offset, syms.data(), syms.size() * sizeof(Elf64_Sym))) {
      strings_.clear();
      return;
    }
    strings_.push_back('\0');  // a truncated table still ends its last name
    for (const Elf64_Sym& s : syms) {
      const int type = ELF64_ST_TYPE(s.st_info);
      if ((type != STT_FUNC && type != STT_GNU_IFUNC) || s.st_shndx == SHN_UNDEF || s.st_size == 0 ||
          s.st_name >= strings_.size()) {
        continue;
      }
      symbols_.push_back({s.st_value, s.st_size, s.st_name});
    }
    break;
  }
  std::sort(symbols_.begin(), symbols_.end(), [](const Symbol& a, const Symbol& b) { return a.value < b.value; });
}

const char* ElfDynamicSymbols::lookup(uint64_t addr) const {
  auto it = std::upper_bound(symbols_.begin(), symbols_.end(), addr,
                             [](uint64_t a, const Symbol& s) { return a < s.value; });
  // Nested or aliased symbols: the nearest preceding ones, until one contains addr.
  for (int tries = 0; it != symbols_.begin() && tries < 8; ++tries) {
    --it;
    if (addr < it->value + it->size) return strings_.c_str() + it->name;
  }
  return nullptr;
}

}  // namespace rt::prof
