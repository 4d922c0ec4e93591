#include "export/checks/libtorch_target.h"

#include <caffe2/serialize/inline_container.h>
#include <torch/csrc/jit/api/function_impl.h>

#include <algorithm>
#include <cctype>
#include <set>
#include <sstream>
#include <string_view>
#include <unordered_map>

#include "util/error.h"
#include "util/printable.h"

namespace rt::exporting {
namespace {

struct OpRow {
  std::string_view name;  // "aten::name.overload"
  uint64_t releases;      // bit i: libtorch_releases()[i] has it
  uint64_t native;        // bit i: a native function there (RegistrationDeclarations.h)
};

const std::vector<OpRow>& op_rows() {
  static const std::vector<OpRow> rows = {
#define RT_LIBTORCH_RELEASE(major, minor, patch, reads)
#define RT_LIBTORCH_OP(name, mask, native) {name, mask, native},
#include "export/checks/releases/libtorch_releases.inc"
#undef RT_LIBTORCH_OP
#undef RT_LIBTORCH_RELEASE
  };
  return rows;
}

std::string_view base_name(std::string_view op) { return op.substr(0, op.find('.')); }

// The releases that can run a call the file resolved to `op`. TorchScript code calls an operator
// by name and picks the overload by its arguments when the file is loaded. A native function's
// overloads are stable and each is a different signature: the overload itself must be there
// (aten::conv1d.padding, a string padding, came in 1.9). TorchScript's builtins renamed their
// overloads over time (aten::len in 1.4, aten::len.t later): any overload of the name does.
struct OpTable {
  std::unordered_map<std::string_view, const OpRow*> rows;
  std::unordered_map<std::string_view, uint64_t> by_name;  // OR over the overloads of a name
  uint64_t releases_running(std::string_view op) const {
    const OpRow* row = rows.at(op);
    return row->native != 0 ? row->releases : by_name.at(base_name(op));
  }
};

const OpTable& op_table() {
  static const OpTable table = [] {
    OpTable t;
    for (const auto& r : op_rows()) {
      t.rows.emplace(r.name, &r);
      t.by_name[base_name(r.name)] |= r.releases;
    }
    return t;
  }();
  return table;
}

size_t index_of(const LibTorchRelease& r) {
  const auto& all = libtorch_releases();
  for (size_t i = 0; i < all.size(); ++i) {
    if (all[i].major == r.major && all[i].minor == r.minor) return i;
  }
  throw Error("LibTorch " + r.name() + " is not in the release table");
}

void collect(const torch::jit::Block* block, std::set<std::string>& out) {
  for (const torch::jit::Node* n : block->nodes()) {
    if (const c10::FunctionSchema* s = n->maybeSchema()) {
      const auto& op = s->operator_name();
      out.insert(op.name + (op.overload_name.empty() ? "" : "." + op.overload_name));
    }
    for (const torch::jit::Block* b : n->blocks()) collect(b, out);
  }
}

// "1.12 … 2.12, 2.14 … 2.15" from a mask over the table.
std::string ranges_text(uint64_t mask) {
  const auto& all = libtorch_releases();
  std::string out;
  for (size_t i = 0; i < all.size();) {
    if (!(mask >> i & 1)) {
      ++i;
      continue;
    }
    size_t j = i;
    while (j + 1 < all.size() && (mask >> (j + 1) & 1)) ++j;
    out += (out.empty() ? "" : ", ") + all[i].name() + (j > i ? " … " + all[j].name() : "");
    i = j + 1;
  }
  return out;
}

uint64_t loading_mask(const TorchScriptNeeds& needs) {
  uint64_t mask = 0;
  const auto& all = libtorch_releases();
  for (size_t i = 0; i < all.size(); ++i) {
    if (why_release_cannot_load(needs, all[i]).empty()) mask |= uint64_t{1} << i;
  }
  return mask;
}

}  // namespace

std::string LibTorchRelease::name() const { return std::to_string(major) + "." + std::to_string(minor); }

const std::vector<LibTorchRelease>& libtorch_releases() {
  static const std::vector<LibTorchRelease> releases = {
#define RT_LIBTORCH_RELEASE(major, minor, patch, reads) {major, minor, patch, reads},
#define RT_LIBTORCH_OP(name, mask, native)
#include "export/checks/releases/libtorch_releases.inc"
#undef RT_LIBTORCH_OP
#undef RT_LIBTORCH_RELEASE
  };
  return releases;
}

TorchScriptNeeds torchscript_needs(const torch::jit::Module& m, uint64_t file_format_version) {
  std::set<std::string> ops;
  for (torch::jit::Function* f : m._ivalue()->compilation_unit()->get_functions()) {
    if (const torch::jit::GraphFunction* g = torch::jit::tryToGraphFunction(*f))
      collect(g->graph()->block(), ops);
  }
  TorchScriptNeeds needs;
  needs.file_format_version = file_format_version;
  for (const auto& op : ops) (op_table().rows.count(op) > 0 ? needs.checked : needs.unchecked).push_back(op);
  return needs;
}

uint64_t file_format_version_of(const std::string& bytes) {
  std::istringstream in(bytes);
  return caffe2::serialize::PyTorchStreamReader(&in).version();
}

std::string why_release_cannot_load(const TorchScriptNeeds& needs, const LibTorchRelease& release) {
  if (needs.file_format_version > release.reads_up_to) {
    return "file format version " + std::to_string(needs.file_format_version) + ", and LibTorch " +
           release.name() + " reads versions up to " + std::to_string(release.reads_up_to);
  }
  const uint64_t bit = uint64_t{1} << index_of(release);
  std::vector<std::string> missing;
  for (const auto& op : needs.checked) {
    if (!(op_table().releases_running(op) & bit)) missing.push_back(op);
  }
  if (missing.empty()) return "";
  std::string list;
  for (size_t i = 0; i < missing.size() && i < 4; ++i) list += (i ? ", " : "") + missing[i];
  if (missing.size() > 4) list += " and " + std::to_string(missing.size() - 4) + " more";
  return "it calls " + std::to_string(missing.size()) + " operator(s) LibTorch " + release.name() +
         " does not have: " + list;
}

std::string releases_that_load(const TorchScriptNeeds& needs) {
  const uint64_t mask = loading_mask(needs);
  const auto& all = libtorch_releases();
  return mask ? ranges_text(mask) : "none of " + all.front().name() + " … " + all.back().name();
}

std::string loads_in_text(const TorchScriptNeeds& needs) {
  return "LibTorch " + releases_that_load(needs) + " (file format version " +
         std::to_string(needs.file_format_version) + "; " + std::to_string(needs.checked.size()) +
         " aten operators checked against each release, " + std::to_string(needs.unchecked.size()) +
         " other operators not checked)";
}

LibTorchRelease parse_target_libtorch(const std::string& text, bool* newer_than_table) {
  const auto& all = libtorch_releases();
  const std::string accepted =
      "accepted: a LibTorch release MAJOR.MINOR, " + all.front().name() + " or later";
  int major = 0, minor = 0;
  size_t used = 0;
  try {
    major = std::stoi(text, &used);
    if (used >= text.size() || text[used] != '.' || !std::isdigit(static_cast<unsigned char>(text[used + 1])))
      throw std::invalid_argument("no minor");
    size_t more = 0;
    minor = std::stoi(text.substr(used + 1), &more);
    const std::string rest = text.substr(used + 1 + more);
    // An optional patch: ".N".
    if (!rest.empty() && (rest.size() < 2 || rest[0] != '.' ||
                          !std::all_of(rest.begin() + 1, rest.end(), [](char c) { return std::isdigit(c); })))
      throw std::invalid_argument("trailing");
  } catch (const std::exception&) {
    throw Error("--target_libtorch '" + printable(text) + "' is not a version (" + accepted + ", e.g. 1.13)");
  }
  if (newer_than_table) *newer_than_table = false;
  for (const auto& r : all) {
    if (r.major == major && r.minor == minor) return r;
  }
  const auto& newest = all.back();
  if (major > newest.major || (major == newest.major && minor > newest.minor)) {
    if (newer_than_table) *newer_than_table = true;
    return newest;
  }
  const auto& oldest = all.front();
  if (major < oldest.major || (major == oldest.major && minor < oldest.minor)) {
    throw Error("--target_libtorch " + printable(text) +
                " is older than the release table, which starts at " + oldest.name() + " (" + accepted + ")");
  }
  // The table's releases by major version: "1.4 … 1.13, 2.0 … 2.15".
  std::string has;
  for (size_t i = 0; i < all.size();) {
    size_t j = i;
    while (j + 1 < all.size() && all[j + 1].major == all[i].major) ++j;
    has += (has.empty() ? "" : ", ") + all[i].name() + (j > i ? " … " + all[j].name() : "");
    i = j + 1;
  }
  throw Error("--target_libtorch " + printable(text) + ": there was no LibTorch " + std::to_string(major) +
              "." + std::to_string(minor) + " release (the table has " + has + ")");
}

std::string target_refusal(const std::string& file, const std::string& target_text,
                           const TorchScriptNeeds& needs) {
  bool newer = false;
  const LibTorchRelease target = parse_target_libtorch(target_text, &newer);
  const std::string why = why_release_cannot_load(needs, target);
  if (why.empty()) return "";
  return "--target_libtorch " + printable(target_text) + ": LibTorch " + target.name() + " cannot load '" +
         printable(file) + "': " + why + " (it loads in LibTorch " + releases_that_load(needs) + ")";
}

}  // namespace rt::exporting
