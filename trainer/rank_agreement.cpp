#include "trainer/rank_agreement.h"

#include <torch/torch.h>

#include <cmath>
#include <vector>

#include "util/signals.h"

namespace rt {

double stop_and_checkpoint_flags(bool stop, bool checkpoint) {
  return (stop ? 1.0 : 0.0) + (checkpoint ? kCheckpointFlag : 0.0);
}

AgreedFlags agree_on_flags(dist::Communicator& comm, double local, std::optional<double> carried) {
  if (!carried) {
    auto flag = torch::full({1}, local, torch::kDouble);
    comm.all_reduce_sum(flag);
    carried = flag.item<double>();
  }
  return {std::fmod(*carried, kCheckpointFlag) > 0, *carried >= kCheckpointFlag};
}

double StopAgreement::local_flags() {
  if (take_checkpoint_request()) checkpoint_requested_ = true;
  return stop_and_checkpoint_flags(stop_requested(), checkpoint_requested_);
}

void StopAgreement::after_step(dist::Communicator& comm, std::optional<double> carried) {
  if (comm.world_size() == 1) {
    checkpoint_agreed_ = take_checkpoint_request();
    return;
  }
  const AgreedFlags agreed = agree_on_flags(comm, local_flags(), carried);
  stop_agreed_ = agreed.stop;
  checkpoint_agreed_ = agreed.checkpoint;
  checkpoint_requested_ = false;
}

bool StopAgreement::stop(const dist::Communicator& comm) const {
  return comm.world_size() == 1 ? stop_requested() : stop_agreed_;
}

NonFiniteStep first_nonfinite_over_ranks(dist::Communicator& comm, int64_t local_first) {
  if (comm.world_size() == 1) return {local_first, ""};
  const auto all = torch::cat(comm.all_gather(torch::tensor({local_first}, torch::kLong)));
  const auto bad = all.ge(0);
  NonFiniteStep r;
  if (!bad.any().item<bool>()) return r;
  r.step = all.masked_select(bad).min().item<int64_t>();
  const auto ranks = all.eq(r.step).nonzero().flatten();
  for (int64_t i = 0; i < ranks.numel(); ++i)
    r.where += (i == 0 ? "" : ", ") + std::to_string(ranks[i].item<int64_t>());
  r.where = (ranks.numel() == 1 ? " on rank " : " on ranks ") + r.where;
  return r;
}

void mean_over_ranks(dist::Communicator& comm, std::map<std::string, double>& means,
                     const std::initializer_list<const char*>& summed) {
  if (comm.world_size() == 1 || means.empty()) return;
  std::vector<double> local;
  for (const auto& [tag, mean] : means) local.push_back(mean);
  auto values = torch::tensor(local, torch::kDouble);
  comm.all_reduce_sum(values);
  const auto sums = values.accessor<double, 1>();
  int64_t i = 0;
  for (auto& [tag, mean] : means) {
    bool sum = false;
    for (const char* s : summed) sum = sum || tag == s;
    mean = sums[i++] / (sum ? 1.0 : static_cast<double>(comm.world_size()));
  }
}

}  // namespace rt
