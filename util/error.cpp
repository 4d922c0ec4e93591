#include "util/error.h"

#include <algorithm>
#include <utility>

namespace rt {

Error::Error(const std::string& what) : std::runtime_error(terminal_safe(what)) {}

std::string terminal_safe(const std::string& text) {
  static const char* const kHex = "0123456789abcdef";
  std::string out;
  out.reserve(text.size());
  auto escape = [&](unsigned char u) {
    out += "\\x";
    out += kHex[u >> 4];
    out += kHex[u & 0xf];
  };
  const size_t n = text.size();
  for (size_t i = 0; i < n;) {
    const auto u = static_cast<unsigned char>(text[i]);
    if (u < 0x80) {
      if ((u < 0x20 && u != '\n' && u != '\t') || u == 0x7f) {
        escape(u);
      } else {
        out += static_cast<char>(u);
      }
      ++i;
      continue;
    }
    // A UTF-8 sequence: its length from the lead byte, continuation bytes 10xxxxxx, no overlong
    // forms, no surrogates, nothing above U+10FFFF.
    size_t len = 0;
    uint32_t cp = 0;
    if (u >= 0xc2 && u <= 0xdf) {
      len = 2, cp = u & 0x1f;
    } else if (u >= 0xe0 && u <= 0xef) {
      len = 3, cp = u & 0x0f;
    } else if (u >= 0xf0 && u <= 0xf4) {
      len = 4, cp = u & 0x07;
    }
    bool valid = len > 0 && i + len <= n;
    for (size_t k = 1; valid && k < len; ++k) {
      const auto c = static_cast<unsigned char>(text[i + k]);
      if ((c & 0xc0) != 0x80) valid = false;
      cp = (cp << 6) | (c & 0x3f);
    }
    if (valid) {
      valid = !(len == 3 && cp < 0x800) && !(len == 4 && (cp < 0x10000 || cp > 0x10ffff)) &&
              !(cp >= 0xd800 && cp <= 0xdfff) && !(cp >= 0x80 && cp <= 0x9f);  // C1 controls
    }
    if (!valid) {
      escape(u);  // this byte alone; the next starts afresh
      ++i;
      continue;
    }
    out.append(text, i, len);
    i += len;
  }
  return out;
}

std::string shape_text(const std::vector<int64_t>& shape) {
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); ++i) s += (i ? ", " : "") + std::to_string(shape[i]);
  return s + "]";
}

std::string first_line(const std::string& message) {
  const auto end = message.find('\n');
  return end == std::string::npos ? message : message.substr(0, end);
}

std::string count_text(int64_t n, const std::string& noun) {
  return std::to_string(n) + " " + noun + (n == 1 ? "" : "s");
}

size_t edit_distance(const std::string& a, const std::string& b) {
  std::vector<size_t> prev(b.size() + 1), cur(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j) prev[j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    cur[0] = i;
    for (size_t j = 1; j <= b.size(); ++j) {
      size_t subst = prev[j - 1] + (a[i - 1] == b[j - 1] ? 0 : 1);
      cur[j] = std::min({prev[j] + 1, cur[j - 1] + 1, subst});
    }
    std::swap(prev, cur);
  }
  return prev[b.size()];
}

namespace {

// "train.lr" → ("train", "lr"); "--max_steps" → ("", "max_steps").
std::pair<std::string, std::string> split_name(const std::string& name) {
  const size_t start = name.find_first_not_of('-');
  const std::string bare = start == std::string::npos ? "" : name.substr(start);
  const size_t dot = bare.find_last_of('.');
  if (dot == std::string::npos) return {"", bare};
  return {bare.substr(0, dot), bare.substr(dot + 1)};
}

// The first letter of every '_'-separated word: "learning_rate" → "lr".
std::string initials(const std::string& word) {
  std::string out;
  for (size_t i = 0; i < word.size(); ++i)
    if (word[i] != '_' && (i == 0 || word[i - 1] == '_')) out += word[i];
  return out;
}

// One name abbreviates the other: its initials ("lr" for "learning_rate") or its leading
// whole words ("batch" for "batch_size").
bool abbreviates(const std::string& a, const std::string& b) {
  if (a.size() >= 2 && b.find('_') != std::string::npos && initials(b) == a) return true;
  return a.size() < b.size() && b.compare(0, a.size(), a) == 0 && b[a.size()] == '_';
}

}  // namespace

std::string closest_match(const std::string& name, const std::vector<std::string>& candidates) {
  // Ranked by tier, then edit distance. Tiers: a typo (edit distance ≤ 2) or the same key in
  // another section; an abbreviation of the last segment either way, in the same section, then
  // in another; any other candidate within half the name's length.
  const auto [section, leaf] = split_name(name);
  std::string best;
  std::pair<int, size_t> best_rank{4, 0};
  for (const auto& c : candidates) {
    const auto [c_section, c_leaf] = split_name(c);
    const size_t d = edit_distance(name, c);
    int tier = 3;
    if (d <= 2 || (!leaf.empty() && leaf == c_leaf)) {
      tier = 0;
    } else if (abbreviates(leaf, c_leaf) || abbreviates(c_leaf, leaf)) {
      tier = section == c_section ? 1 : 2;
    } else if (d > std::max<size_t>(2, name.size() / 2)) {
      continue;
    }
    if (std::pair<int, size_t>{tier, d} < best_rank) {
      best_rank = {tier, d};
      best = c;
    }
  }
  return best;
}

}  // namespace rt
