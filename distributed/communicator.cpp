#include "distributed/communicator.h"

#include <cstring>
#include <vector>

#include "util/error.h"

namespace rt::dist {
namespace {

std::vector<std::string> lines_of(const std::string& text) {
  std::vector<std::string> lines;
  size_t start = 0;
  while (start <= text.size()) {
    const size_t end = text.find('\n', start);
    lines.push_back(text.substr(start, end == std::string::npos ? std::string::npos : end - start));
    if (end == std::string::npos) break;
    start = end + 1;
  }
  return lines;
}

// "first difference at line N: rank 0 has 'a', rank R has 'b'".
std::string first_difference(const std::string& base, const std::string& other, int rank) {
  const auto a = lines_of(base), b = lines_of(other);
  size_t i = 0;
  while (i < a.size() && i < b.size() && a[i] == b[i]) ++i;
  auto line = [](const std::vector<std::string>& v, size_t k) {
    return k < v.size() ? "'" + v[k] + "'" : std::string("nothing (its text ends)");
  };
  return "first difference at line " + std::to_string(i + 1) + ": rank 0 has " + line(a, i) + ", rank " +
         std::to_string(rank) + " has " + line(b, i);
}

}  // namespace

std::string broadcast_text(Communicator& comm, const std::string& text, int root) {
  std::vector<torch::Tensor> length{torch::tensor({static_cast<int64_t>(text.size())}, torch::kLong)};
  comm.broadcast(length, root);
  std::vector<torch::Tensor> bytes{torch::zeros({length[0].item<int64_t>()}, torch::kUInt8)};
  if (comm.rank() == root && !text.empty()) std::memcpy(bytes[0].data_ptr(), text.data(), text.size());
  comm.broadcast(bytes, root);
  return std::string(static_cast<const char*>(bytes[0].data_ptr()), static_cast<size_t>(bytes[0].numel()));
}

void check_same_on_all_ranks(Communicator& comm, const std::string& what, const std::string& value) {
  if (comm.world_size() == 1) return;
  uint64_t hash = 14695981039346656037ULL;  // FNV-1a
  for (unsigned char c : value) {
    hash ^= c;
    hash *= 1099511628211ULL;
  }
  int64_t signed_hash = 0;
  std::memcpy(&signed_hash, &hash, sizeof hash);
  const auto hashes = comm.all_gather(torch::tensor({signed_hash}, torch::kInt64));
  std::vector<int> differ;
  for (size_t r = 1; r < hashes.size(); ++r) {
    if (hashes[r].item<int64_t>() != hashes[0].item<int64_t>()) differ.push_back(static_cast<int>(r));
  }
  if (differ.empty()) return;
  // Every rank saw the same hashes, so all of them take part in these broadcasts.
  const std::string base = broadcast_text(comm, value, 0);
  const std::string other = broadcast_text(comm, value, differ[0]);
  std::string ranks = differ.size() == 1 ? "rank " : "ranks ";
  for (size_t i = 0; i < differ.size(); ++i) ranks += (i ? ", " : "") + std::to_string(differ[i]);
  throw Error("mismatched " + what + " across ranks: " + ranks +
              (differ.size() == 1 ? " differs" : " differ") + " from rank 0; " +
              first_difference(base, other, differ[0]) +
              "; every rank must be started with the same settings");
}

}  // namespace rt::dist
