#include "distributed/communicator.h"

#include <cstring>

#include "util/error.h"

namespace rt::dist {

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
  std::string ranks = differ.size() == 1 ? "rank " : "ranks ";
  for (size_t i = 0; i < differ.size(); ++i) ranks += (i ? ", " : "") + std::to_string(differ[i]);
  throw Error("mismatched " + what + " across ranks: " + ranks +
              (differ.size() == 1 ? " differs" : " differ") +
              " from rank 0; every rank must be started with the same settings");
}

}  // namespace rt::dist
