// What the training loop remembers between two host reads: each step's loss and scalars as the
// step left them (0-d tensors, on the device), so that steps never wait for the device. flush()
// moves them to the host in one copy — the loop calls it at log cadence, before validation,
// before a checkpoint and at the end — and reports the first non-finite loss; the scalars' sums
// accumulate until take_means() (once per log interval).
//
// Cost per step: a few vector appends, no tensor operation.
#pragma once

#include <torch/torch.h>

#include <cstdint>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "training/model_family.h"

namespace rt {

class StepLog {
 public:
  // Keeps `result` for step `step`. REQUIRES: result.loss is a defined 0-d tensor.
  void record(int64_t step, const StepResult& result);
  // Adds a host value (the step time; also each flushed scalar) to the sums take_means() averages.
  void add_host(const std::string& tag, double value);

  struct Step {
    int64_t step = 0;
    double loss = 0.0;
    int64_t examples = 0;
  };
  struct Flushed {
    std::vector<Step> steps;            // in order; steps from the first non-finite loss on are left out
    int64_t first_nonfinite_step = -1;  // -1: every loss was finite
  };
  // Reads every step recorded since the last flush on the host (one device→host copy), adds
  // their scalars to the sums, and forgets them.
  Flushed flush();
  // Mean of every tag since the last take_means() (over flushed steps and add_host values).
  std::map<std::string, double> take_means();

  // The log interval so far: the steps and examples flushed since the last end_interval().
  int64_t interval_steps() const { return interval_steps_; }
  // The loss of the last step flushed (0 before the first).
  double last_loss() const { return last_loss_; }
  // Ends the interval, which took `seconds`: adds train/step_time, train/samples_per_second
  // and train/examples_per_second, then returns take_means(). REQUIRES: interval_steps() > 0.
  std::map<std::string, double> end_interval(double seconds, int64_t samples_per_example);

 private:
  struct Sum {
    double sum = 0.0;
    int64_t n = 0;
  };

  std::vector<int64_t> steps_, examples_;
  std::vector<torch::Tensor> losses_;
  // Per step, [begin, end) of its device scalars in tags_/values_.
  std::vector<std::pair<size_t, size_t>> scalar_ranges_;
  std::vector<std::string> tags_;
  std::vector<torch::Tensor> values_;
  std::vector<std::vector<std::pair<std::string, double>>> step_host_;  // host scalars per step
  std::map<std::string, Sum> sums_;
  int64_t interval_steps_ = 0, interval_examples_ = 0;
  double last_loss_ = 0.0;
};

}  // namespace rt
