#include "training/zip_integrity.h"

#include <caffe2/serialize/versions.h>
#include <zlib.h>

#include <algorithm>
#include <cctype>
#include <cstdint>
#include <cstdio>
#include <fstream>
#include <string>
#include <vector>

#include "util/error.h"

namespace rt {
namespace {

// Record signatures and fixed sizes (PKWARE APPNOTE 6.3, sections 4.3.7, 4.3.12, 4.3.14-16).
constexpr uint32_t kLocalSig = 0x04034b50, kCentralSig = 0x02014b50, kEndSig = 0x06054b50;
constexpr uint32_t kEnd64Sig = 0x06064b50, kEnd64LocatorSig = 0x07064b50;
constexpr size_t kLocalSize = 30, kCentralSize = 46, kEndSize = 22, kEnd64LocatorSize = 20, kEnd64Size = 56;
constexpr uint32_t kMax32 = 0xffffffffu;

uint64_t le(const unsigned char* p, int bytes) {
  uint64_t v = 0;
  for (int i = bytes - 1; i >= 0; --i) v = (v << 8) | p[i];
  return v;
}

std::string hex32(uint32_t v) {
  char buf[16];
  std::snprintf(buf, sizeof buf, "0x%08x", v);
  return buf;
}

class ZipFile {
 public:
  ZipFile(const std::filesystem::path& path, const ZipRole& role)
      : path_(path), role_(role), in_(path, std::ios::binary) {
    if (!in_) throw Error("cannot open " + role_.noun + " '" + path.string() + "'");
    in_.seekg(0, std::ios::end);
    size_ = static_cast<uint64_t>(in_.tellg());
  }

  [[noreturn]] void damaged(const std::string& what) const {
    throw Error(role_.noun + " '" + path_.string() + "' is damaged (" + what +
                "); it cannot be loaded: " + role_.remedy);
  }

  std::vector<unsigned char> read(uint64_t offset, uint64_t n, const char* what) {
    if (offset > size_ || n > size_ - offset) damaged(std::string(what) + " lies past the end of the file");
    std::vector<unsigned char> buf(n);
    in_.clear();
    in_.seekg(static_cast<std::streamoff>(offset));
    in_.read(reinterpret_cast<char*>(buf.data()), static_cast<std::streamsize>(n));
    if (!in_) damaged(std::string("cannot read ") + what);
    return buf;
  }

  uint32_t crc(uint64_t offset, uint64_t n, const std::string& entry) {
    if (offset > size_ || n > size_ - offset) damaged("entry '" + entry + "' lies past the end of the file");
    in_.clear();
    in_.seekg(static_cast<std::streamoff>(offset));
    std::vector<char> block(1 << 20);
    uLong c = crc32(0L, Z_NULL, 0);
    while (n > 0) {
      const auto chunk = static_cast<std::streamsize>(std::min<uint64_t>(n, block.size()));
      in_.read(block.data(), chunk);
      if (!in_) damaged("cannot read entry '" + entry + "'");
      c = crc32(c, reinterpret_cast<const Bytef*>(block.data()), static_cast<uInt>(chunk));
      n -= static_cast<uint64_t>(chunk);
    }
    return static_cast<uint32_t>(c);
  }

  // CRC-32 of a deflated entry's inflated bytes; checks they are `uncompressed` bytes long.
  uint32_t inflated_crc(uint64_t offset, uint64_t n, uint64_t uncompressed, const std::string& entry) {
    if (offset > size_ || n > size_ - offset) damaged("entry '" + entry + "' lies past the end of the file");
    const auto in = read(offset, n, "a compressed entry");
    z_stream z{};
    if (inflateInit2(&z, -MAX_WBITS) != Z_OK) damaged("cannot start zlib for entry '" + entry + "'");
    z.next_in = const_cast<Bytef*>(in.data());
    z.avail_in = static_cast<uInt>(in.size());
    std::vector<Bytef> out(1 << 16);
    uLong c = crc32(0L, Z_NULL, 0);
    uint64_t total = 0;
    int rc = Z_OK;
    while (rc == Z_OK) {
      z.next_out = out.data();
      z.avail_out = static_cast<uInt>(out.size());
      rc = inflate(&z, Z_NO_FLUSH);
      const auto got = out.size() - z.avail_out;
      c = crc32(c, out.data(), static_cast<uInt>(got));
      total += got;
      if (rc == Z_BUF_ERROR && z.avail_in == 0) break;
    }
    inflateEnd(&z);
    if (rc != Z_STREAM_END || total != uncompressed)
      damaged("entry '" + entry + "' does not inflate to its size");
    return static_cast<uint32_t>(c);
  }

  uint64_t size() const { return size_; }

 private:
  std::filesystem::path path_;
  ZipRole role_;
  std::ifstream in_;
  uint64_t size_ = 0;
};

}  // namespace

size_t verify_zip_entries(const std::filesystem::path& path, const ZipRole& role) {
  ZipFile zip(path, role);
  if (zip.size() < kEndSize) zip.damaged("too short for a zip archive");
  // The end record sits in the last 22 bytes plus a comment of at most 64 KiB.
  const uint64_t tail_size = std::min<uint64_t>(zip.size(), kEndSize + 0xffff);
  const uint64_t tail_at = zip.size() - tail_size;
  const auto tail = zip.read(tail_at, tail_size, "the end of the archive");
  int64_t end = -1;
  for (int64_t i = static_cast<int64_t>(tail_size - kEndSize); i >= 0; --i) {
    if (le(&tail[static_cast<size_t>(i)], 4) == kEndSig) {
      end = i;
      break;
    }
  }
  if (end < 0) zip.damaged("no end-of-central-directory record: not a zip archive, or truncated");
  const unsigned char* e = &tail[static_cast<size_t>(end)];
  uint64_t entries = le(e + 10, 2), cd_size = le(e + 12, 4), cd_offset = le(e + 16, 4);
  const bool saturated = entries == 0xffff || cd_size == kMax32 || cd_offset == kMax32;
  // torch's writer adds zip64 end records, and its reader (miniz) takes the directory from them
  // whenever their locator precedes the end record: so do we, and both records must agree
  // (found by fuzz_checkpoint: a zip64 record naming another directory than the one checked).
  const uint64_t end_at = tail_at + static_cast<uint64_t>(end);
  std::vector<unsigned char> loc;  // the zip64 locator, when one precedes the end record
  if (end_at >= kEnd64LocatorSize) {
    loc = zip.read(end_at - kEnd64LocatorSize, kEnd64LocatorSize, "the zip64 locator");
    if (le(loc.data(), 4) != kEnd64LocatorSig) loc.clear();
  }
  if (saturated && loc.empty()) zip.damaged("zip64 end-of-central-directory locator missing");
  if (!loc.empty()) {
    const auto e64 = zip.read(le(loc.data() + 8, 8), kEnd64Size, "the zip64 end record");
    if (le(e64.data(), 4) != kEnd64Sig) zip.damaged("zip64 end-of-central-directory record missing");
    const uint64_t entries64 = le(e64.data() + 32, 8), size64 = le(e64.data() + 40, 8),
                   offset64 = le(e64.data() + 48, 8);
    if ((entries != 0xffff && entries != entries64) || (cd_size != kMax32 && cd_size != size64) ||
        (cd_offset != kMax32 && cd_offset != offset64)) {
      zip.damaged("its zip64 end record names another central directory than its end record");
    }
    entries = entries64;
    cd_size = size64;
    cd_offset = offset64;
  }
  // torch's reader takes the first entry's folder as the archive's and needs its `version`
  // record; when either is missing it throws from its constructor and leaks miniz's state
  // (found by fuzz_checkpoint: an empty archive), so both are checked here, by name.
  if (entries == 0) zip.damaged("the archive holds no entries: not a checkpoint");
  const auto cd = zip.read(cd_offset, cd_size, "the central directory");
  std::string folder;
  bool has_version = false;
  std::string version_text, data_version_text;  // the `version` and `.data/version` records
  size_t at = 0;
  for (uint64_t n = 0; n < entries; ++n) {
    if (at + kCentralSize > cd.size() || le(&cd[at], 4) != kCentralSig)
      zip.damaged("central directory entry " + std::to_string(n) + " is malformed");
    const unsigned char* h = &cd[at];
    const uint64_t method = le(h + 10, 2);
    const auto stored_crc = static_cast<uint32_t>(le(h + 16, 4));
    uint64_t compressed = le(h + 20, 4), uncompressed = le(h + 24, 4), local = le(h + 42, 4);
    const size_t name_len = le(h + 28, 2), extra_len = le(h + 30, 2), comment_len = le(h + 32, 2);
    if (at + kCentralSize + name_len + extra_len + comment_len > cd.size())
      zip.damaged("central directory entry " + std::to_string(n) + " runs past the directory");
    const std::string name(reinterpret_cast<const char*>(h + kCentralSize), name_len);
    // Zip64 extended information (header id 1): the 64-bit values of the fields set to 2^32-1.
    for (size_t x = 0; x + 4 <= extra_len;) {
      const unsigned char* f = h + kCentralSize + name_len + x;
      const size_t id = le(f, 2), len = le(f + 2, 2);
      if (x + 4 + len > extra_len) break;
      if (id == 1) {
        size_t k = 4;
        auto take = [&](uint64_t& field) {
          if (field != kMax32) return;
          if (k + 8 > 4 + len) zip.damaged("entry '" + name + "' has a short zip64 field");
          field = le(f + k, 8);
          k += 8;
        };
        take(uncompressed);
        take(compressed);
        take(local);
      }
      x += 4 + len;
    }
    at += kCentralSize + name_len + extra_len + comment_len;
    if (n == 0) {
      const size_t slash = name.find('/');
      if (slash == std::string::npos || slash == 0)
        zip.damaged("entry '" + name +
                    "' is not inside the archive's folder (torch's layout: <name>/data.pkl …)");
      folder = name.substr(0, slash + 1);
    } else if (name.compare(0, folder.size(), folder) != 0) {
      zip.damaged("entry '" + name + "' lies outside the archive's folder '" + folder + "'");
    }
    const bool is_version = name == folder + "version" || name == folder + ".data/version";
    has_version = has_version || is_version;

    // Encrypted (bits 0, 6) or patch-data (bit 5) entries: torch's reader refuses them only
    // from its constructor, leaking its state (found by fuzz_checkpoint); torch never writes them.
    if (const uint64_t flags = le(h + 8, 2); flags & 0x61) {
      zip.damaged("entry '" + name + "' is marked " + ((flags & 0x41) ? "encrypted" : "as patch data") +
                  " (general-purpose flags " + std::to_string(flags) + "); torch writes neither");
    }
    // A directory entry (a name ending in '/', or the MS-DOS directory attribute): torch's reader
    // extracts nothing for it and would parse an unwritten buffer (found by fuzz_checkpoint on
    // the version record); torch writes none.
    if ((!name.empty() && name.back() == '/') || (le(h + 38, 4) & 0x10)) {
      zip.damaged("entry '" + name + "' is marked as a directory; torch writes only files");
    }
    // torch stores tensors (method 0) and deflates the archive's code files (method 8).
    if (method != 0 && method != 8) {
      zip.damaged("entry '" + name + "' uses compression method " + std::to_string(method) +
                  " (expected 0, stored, or 8, deflate)");
    }
    if (method == 0 && compressed != uncompressed)
      zip.damaged("entry '" + name + "' has two different sizes");
    const auto lh = zip.read(local, kLocalSize, ("the local header of entry '" + name + "'").c_str());
    if (le(lh.data(), 4) != kLocalSig)
      zip.damaged("entry '" + name + "' has no local header where it should");
    const size_t local_name_len = le(lh.data() + 26, 2), local_extra_len = le(lh.data() + 28, 2);
    const auto local_name = zip.read(local + kLocalSize, local_name_len, "a local file name");
    if (std::string(local_name.begin(), local_name.end()) != name)
      zip.damaged("entry '" + name + "' has another name in its local header");
    const uint64_t data = local + kLocalSize + local_name_len + local_extra_len;
    const uint32_t actual = method == 0 ? zip.crc(data, compressed, name)
                                        : zip.inflated_crc(data, compressed, uncompressed, name);
    if (actual != stored_crc) {
      zip.damaged("entry '" + name + "' fails its CRC-32 check: stored " + hex32(stored_crc) + ", computed " +
                  hex32(actual) + "; the file changed after it was written");
    }
    if (is_version) {
      // torch stores this record, a few digits; it is read below as torch's reader does.
      if (method != 0 || compressed > 32)
        zip.damaged("entry '" + name + "' is not a stored file format version");
      const auto v = zip.read(data, compressed, "the file format version");
      (name == folder + "version" ? version_text : data_version_text).assign(v.begin(), v.end());
    }
  }
  if (!has_version) zip.damaged("no '" + folder + "version' entry: not an archive torch wrote");
  // torch's reader takes `.data/version` when present, else `version`, reads it as stoull does
  // (spaces, then digits) and needs it within the versions it reads; otherwise it throws from its
  // constructor and leaks its state (found by fuzz_checkpoint: version 0).
  const std::string& text = data_version_text.empty() ? version_text : data_version_text;
  size_t i = text.find_first_not_of(" \t\n\r\f\v");
  uint64_t version = 0;
  bool digits = false;
  for (; i < text.size() && std::isdigit(static_cast<unsigned char>(text[i])) && version < 1000;
       ++i, digits = true)
    version = version * 10 + static_cast<uint64_t>(text[i] - '0');
  if (!digits || version < caffe2::serialize::kMinSupportedFileFormatVersion ||
      version > caffe2::serialize::kMaxSupportedFileFormatVersion) {
    zip.damaged("file format version '" + first_line(text) + "' is not one this LibTorch reads (" +
                std::to_string(caffe2::serialize::kMinSupportedFileFormatVersion) + " to " +
                std::to_string(caffe2::serialize::kMaxSupportedFileFormatVersion) + ")");
  }
  return static_cast<size_t>(entries);
}

}  // namespace rt
