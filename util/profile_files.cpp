#include "util/profile_files.h"

#include <algorithm>
#include <utility>

#include "util/atomic_file.h"
#include "util/error.h"

namespace rt {
namespace {

namespace fs = std::filesystem;

// K of a part's name, or -1.
int64_t part_index(const fs::path& path, const std::string& name) {
  const std::string prefix = path.stem().string() + ".part", ext = path.extension().string();
  if (name.size() <= prefix.size() + ext.size() || name.compare(0, prefix.size(), prefix) != 0 ||
      name.compare(name.size() - ext.size(), ext.size(), ext) != 0) {
    return -1;
  }
  const std::string digits = name.substr(prefix.size(), name.size() - prefix.size() - ext.size());
  if (digits.empty() || digits.size() > 12 || digits.find_first_not_of("0123456789") != std::string::npos)
    return -1;
  return std::stoll(digits);
}

}  // namespace

// The entries of one list file; line by line when it does not parse whole (a write cut short).
Json read_profile_list_file(const fs::path& file, std::vector<std::string>* notes) {
  const std::string text = read_file(file);
  try {
    Json j = Json::parse(text);
    if (j.is_array()) return j;
  } catch (const std::exception&) {
  }
  Json out = Json::array();
  size_t skipped = 0;
  size_t begin = 0;
  while (begin < text.size()) {
    size_t end = text.find('\n', begin);
    if (end == std::string::npos) end = text.size();
    std::string line = text.substr(begin, end - begin);
    begin = end + 1;
    const size_t first = line.find_first_not_of(" \t\r");
    if (first == std::string::npos) continue;
    line = line.substr(first);
    while (!line.empty() && (line.back() == ',' || line.back() == ' ' || line.back() == '\r'))
      line.pop_back();
    if (line == "[" || line == "]" || line == "[]") continue;
    try {
      Json e = Json::parse(line);
      if (e.is_object()) {
        out.push_back(std::move(e));
        continue;
      }
    } catch (const std::exception&) {
    }
    ++skipped;
  }
  if (out.empty() && skipped > 0)
    throw Error("'" + file.string() + "' is not a JSON list, nor one entry per line");
  if (notes != nullptr) {
    notes->push_back("'" + file.string() + "' was cut short while being written (a killed process?): its " +
                     std::to_string(out.size()) + " complete entries are read" +
                     (skipped > 0 ? ", " + std::to_string(skipped) + " incomplete line(s) skipped" : ""));
  }
  return out;
}

fs::path profile_part_path(const fs::path& path, int64_t k) {
  return path.parent_path() /
         (path.stem().string() + ".part" + std::to_string(k) + path.extension().string());
}

std::vector<std::pair<int64_t, fs::path>> indexed_profile_parts(const fs::path& path) {
  std::vector<std::pair<int64_t, fs::path>> out;
  std::error_code ec;
  const fs::path dir = path.parent_path().empty() ? fs::path(".") : path.parent_path();
  for (fs::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
    const int64_t k = part_index(path, it->path().filename().string());
    if (k > 0) out.emplace_back(k, it->path());
  }
  std::sort(out.begin(), out.end());
  return out;
}

std::vector<fs::path> profile_parts(const fs::path& path) {
  std::vector<fs::path> out;
  for (auto& [k, p] : indexed_profile_parts(resolve_profile_link(path))) out.push_back(std::move(p));
  return out;
}

Json read_profile_entries(const fs::path& path, std::vector<std::string>* notes) {
  Json all = Json::array();
  std::vector<fs::path> files = profile_parts(path);
  std::error_code ec;
  if (fs::exists(path, ec)) files.push_back(path);
  for (const auto& f : files) {
    for (auto& e : read_profile_list_file(f, notes)) all.push_back(std::move(e));
  }
  return all;
}

fs::path resolve_profile_link(const fs::path& path) {
  std::error_code ec;
  if (!fs::is_symlink(path, ec)) return path;
  const fs::path target = fs::read_symlink(path, ec);
  if (ec) return path;
  return target.is_absolute() ? target : path.parent_path() / target;
}

}  // namespace rt
