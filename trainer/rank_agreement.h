// The decisions every rank of a job takes together, each one collective on a Communicator:
// stopping on a signal and writing a checkpoint on request, the first non-finite step, and
// the logged means. With dist::LocalCommunicator (one process) each is the local value.
//
// Stop and checkpoint requests are summed into one number, each stopping rank adding 1 and
// each requesting rank kCheckpointFlag, so the sum tells both apart for any world size. In a
// data-parallel step the number rides in the last gradient bucket (GradientSync::carry), so it
// costs no collective of its own; agree_on_flags() is called with that carried sum, or makes
// the all-reduce itself when the step synchronised no gradients.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>

#include "distributed/communicator.h"

namespace rt {

// More than the ranks of a job (up to 4095), and small enough that a float32 gradient buffer,
// which carries the sum, holds it exactly (4095 × 4096 + 4095 < 2^24).
inline constexpr double kCheckpointFlag = 4096.0;

// This rank's contribution: 1 for a stop signal, kCheckpointFlag for a checkpoint request.
double stop_and_checkpoint_flags(bool stop, bool checkpoint);

struct AgreedFlags {
  bool stop = false;        // some rank got a stop signal
  bool checkpoint = false;  // some rank asked for a checkpoint
};
// `carried`: the sum over ranks already reduced with the gradients; otherwise `local` is summed
// over ranks here.
AgreedFlags agree_on_flags(dist::Communicator& comm, double local, std::optional<double> carried);

// One rank's stop signals and checkpoint requests (util/signals.h) and what the ranks agreed
// at the end of the last step, so that every rank stops, or writes a checkpoint, after the same
// step. One process reads its own signals.
class StopAgreement {
 public:
  // This rank's flags for the step (a SIGUSR1 is taken once and holds until agreed).
  double local_flags();
  // At the end of every step, inside it (the profiler plugin's Distributed view drops
  // collectives outside every step). `carried`: the flags' sum reduced with the gradients.
  void after_step(dist::Communicator& comm, std::optional<double> carried);
  // Whether to stop before the next step.
  bool stop(const dist::Communicator& comm) const;
  // Whether the ranks agreed on a checkpoint (SIGUSR1) during the last step.
  bool checkpoint() const { return checkpoint_agreed_; }

 private:
  bool checkpoint_requested_ = false;  // this rank got SIGUSR1, not agreed yet
  bool stop_agreed_ = false;
  bool checkpoint_agreed_ = false;
};

// The first step whose loss was non-finite over every rank (-1: none), and the ranks that had it
// there (" on rank 1", " on ranks 0, 1"; "" in a one-process job).
struct NonFiniteStep {
  int64_t step = -1;
  std::string where;
};
NonFiniteStep first_nonfinite_over_ranks(dist::Communicator& comm, int64_t local_first);

// Each tag's mean over ranks (every rank logs the same tags, so the maps line up); the tags in
// `summed` become the sum over ranks instead (throughput: the job's rate is its ranks' sum).
void mean_over_ranks(dist::Communicator& comm, std::map<std::string, double>& means,
                     const std::initializer_list<const char*>& summed);

}  // namespace rt
