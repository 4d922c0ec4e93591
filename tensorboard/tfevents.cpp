#include "tensorboard/tfevents.h"

#include <cstring>

#include "tensorboard_event.pb.h"
#include "util/atomic_file.h"
#include "util/error.h"

namespace rt {
namespace {

// Slicing-by-8 tables: table[k][b] is the CRC of byte b followed by k zero bytes.
struct Crc32cTables {
  uint32_t t[8][256];
  Crc32cTables() {
    for (uint32_t i = 0; i < 256; ++i) {
      uint32_t crc = i;
      for (int bit = 0; bit < 8; ++bit) crc = (crc >> 1) ^ (0x82F63B78u & (0u - (crc & 1u)));
      t[0][i] = crc;
    }
    for (uint32_t i = 0; i < 256; ++i)
      for (int k = 1; k < 8; ++k) t[k][i] = (t[k - 1][i] >> 8) ^ t[0][t[k - 1][i] & 0xff];
  }
};

const Crc32cTables& tables() {
  static const Crc32cTables instance;
  return instance;
}

uint32_t load_le32(const unsigned char* p) {
  return uint32_t(p[0]) | uint32_t(p[1]) << 8 | uint32_t(p[2]) << 16 | uint32_t(p[3]) << 24;
}

uint64_t load_le64(const unsigned char* p) {
  return uint64_t(load_le32(p)) | uint64_t(load_le32(p + 4)) << 32;
}

void store_le32(char* p, uint32_t v) {
  for (int i = 0; i < 4; ++i) p[i] = static_cast<char>((v >> (8 * i)) & 0xff);
}

}  // namespace

uint32_t crc32c_extend(uint32_t crc, const void* data, size_t n) {
  const auto& t = tables().t;
  const auto* p = static_cast<const unsigned char*>(data);
  crc = ~crc;
  for (; n >= 8; n -= 8, p += 8) {
    const uint32_t lo = load_le32(p) ^ crc;
    const uint32_t hi = load_le32(p + 4);
    crc = t[7][lo & 0xff] ^ t[6][(lo >> 8) & 0xff] ^ t[5][(lo >> 16) & 0xff] ^ t[4][lo >> 24] ^
          t[3][hi & 0xff] ^ t[2][(hi >> 8) & 0xff] ^ t[1][(hi >> 16) & 0xff] ^ t[0][hi >> 24];
  }
  for (; n > 0; --n, ++p) crc = t[0][(crc ^ *p) & 0xff] ^ (crc >> 8);
  return ~crc;
}

uint32_t crc32c_mask(uint32_t crc) { return ((crc >> 15) | (crc << 17)) + 0xa282ead8u; }

uint32_t crc32c_unmask(uint32_t masked) {
  const uint32_t rot = masked - 0xa282ead8u;
  return (rot >> 17) | (rot << 15);
}

std::string tfrecord_frame(std::string_view payload) {
  std::string out(12 + payload.size() + 4, '\0');
  const uint64_t len = payload.size();
  for (int i = 0; i < 8; ++i) out[i] = static_cast<char>((len >> (8 * i)) & 0xff);
  store_le32(&out[8], crc32c_mask(crc32c(out.data(), 8)));
  std::memcpy(&out[12], payload.data(), payload.size());
  store_le32(&out[12 + payload.size()], crc32c_mask(crc32c(payload.data(), payload.size())));
  return out;
}

std::vector<TbRecord> read_tfevents(const std::filesystem::path& path, std::string* damage) {
  const std::string bytes = read_file(path);
  const auto* data = reinterpret_cast<const unsigned char*>(bytes.data());
  std::vector<TbRecord> records;
  if (damage != nullptr) damage->clear();
  auto fail = [&](uint64_t offset, const std::string& what) {
    const std::string msg =
        path.string() + ": " + what + " in the record at byte offset " + std::to_string(offset);
    if (damage == nullptr) throw Error(msg);
    *damage = msg;
  };
  uint64_t offset = 0;
  while (offset < bytes.size()) {
    const uint64_t left = bytes.size() - offset;
    if (left < 12) {
      fail(offset, "truncated header (" + std::to_string(left) + " of 12 bytes)");
      break;
    }
    const unsigned char* rec = data + offset;
    if (crc32c_mask(crc32c(rec, 8)) != load_le32(rec + 8)) {
      fail(offset, "bad length CRC");
      break;
    }
    const uint64_t len = load_le64(rec);
    if (len > left - 12 || left - 12 - len < 4) {
      fail(offset, "truncated data (length " + std::to_string(len) + ", " + std::to_string(left - 12) +
                       " bytes left including the CRC)");
      break;
    }
    if (crc32c_mask(crc32c(rec + 12, len)) != load_le32(rec + 12 + len)) {
      fail(offset, "bad data CRC");
      break;
    }
    tensorboard::Event event;
    if (!event.ParseFromArray(rec + 12, static_cast<int>(len))) {
      fail(offset, "undecodable Event");
      break;
    }
    TbRecord base;
    base.offset = offset;
    base.wall_time = event.wall_time();
    base.step = event.step();
    if (event.what_case() == tensorboard::Event::kFileVersion) {
      base.kind = TbRecord::Kind::FileVersion;
      base.file_version = event.file_version();
      records.push_back(base);
    } else if (event.what_case() == tensorboard::Event::kSummary) {
      for (const auto& v : event.summary().value()) {
        TbRecord r = base;
        r.tag = v.tag();
        switch (v.value_case()) {
          case tensorboard::Summary::Value::kSimpleValue:
            r.kind = TbRecord::Kind::Scalar;
            r.value = v.simple_value();
            break;
          case tensorboard::Summary::Value::kAudio:
            r.kind = TbRecord::Kind::Audio;
            r.encoded = v.audio().encoded_audio_string();
            r.content_type = v.audio().content_type();
            r.sample_rate = v.audio().sample_rate();
            r.channels = v.audio().num_channels();
            r.frames = v.audio().length_frames();
            break;
          case tensorboard::Summary::Value::kImage:
            r.kind = TbRecord::Kind::Image;
            r.encoded = v.image().encoded_image_string();
            r.width = v.image().width();
            r.height = v.image().height();
            break;
          default:
            r.kind = TbRecord::Kind::Other;
        }
        records.push_back(std::move(r));
      }
    } else {
      records.push_back(base);
    }
    offset += 12 + len + 4;
  }
  return records;
}

}  // namespace rt
