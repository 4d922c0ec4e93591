// Integrity of a checkpoint's zip container, checked before torch reads it.
//
// torch's archive reader (miniz, built with its CRC checks turned off) does not compare an
// entry's bytes with the CRC-32 the writer stored, so a flipped bit in a tensor loads and
// trains on. verify_zip_entries reads the central directory and recomputes every entry's
// CRC-32 (zlib's crc32): tensors are stored (method 0); the small code files torch writes are
// deflated (method 8) and inflated to be checked. Zip64 sizes and offsets are followed.
#pragma once

#include <filesystem>
#include <string>

namespace rt {

// Throws rt::Error naming `path` and, for a damaged entry, the entry's name and both CRCs,
// when the file is not a readable zip archive (no end-of-central-directory record, a header
// or an entry reaching past the end of the file, a local header whose name differs from the
// central directory's), does not have torch's layout (no entries, entries outside one top folder,
// no `version` record) or an entry's bytes do not match its stored CRC-32. Reads the file
// once, in blocks; returns the number of entries checked.
// `role` names the file in the messages: a checkpoint by default, or an exported TorchScript
// file (export/checks/file_facts.h), which torch writes as the same zip archive.
struct ZipRole {
  std::string noun = "checkpoint";
  std::string remedy = "use another checkpoint of the run (checkpoints/step_<N>.ckpt, best.ckpt)";
};
size_t verify_zip_entries(const std::filesystem::path& path, const ZipRole& role = ZipRole());

}  // namespace rt
