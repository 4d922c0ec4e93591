#include "trainer/step_log.h"

#include <cmath>

namespace rt {

void StepLog::record(int64_t step, const StepResult& result) {
  steps_.push_back(step);
  examples_.push_back(result.examples);
  losses_.push_back(result.loss);
  const size_t begin = values_.size();
  for (const auto& [tag, value] : result.scalars.device) {
    tags_.push_back(tag);
    values_.push_back(value);
  }
  scalar_ranges_.emplace_back(begin, values_.size());
  step_host_.push_back(result.scalars.host);
}

void StepLog::add_host(const std::string& tag, double value) {
  Sum& s = sums_[tag];
  s.sum += value;
  ++s.n;
}

StepLog::Flushed StepLog::flush() {
  Flushed out;
  if (steps_.empty()) return out;
  // One host copy for everything: the losses, then every scalar, as float64.
  std::vector<torch::Tensor> all;
  all.reserve(losses_.size() + values_.size());
  for (const auto& l : losses_) all.push_back(l.reshape({1}).to(torch::kFloat64));
  for (const auto& v : values_) all.push_back(v.reshape({1}).to(torch::kFloat64));
  const torch::Tensor host = torch::cat(all).to(torch::kCPU).contiguous();
  const double* h = host.data_ptr<double>();
  const size_t n_steps = steps_.size();
  for (size_t i = 0; i < n_steps; ++i) {
    if (!std::isfinite(h[i])) {
      out.first_nonfinite_step = steps_[i];
      break;
    }
    out.steps.push_back({steps_[i], h[i], examples_[i]});
    interval_steps_ += 1;
    interval_examples_ += examples_[i];
    last_loss_ = h[i];
    for (size_t k = scalar_ranges_[i].first; k < scalar_ranges_[i].second; ++k)
      add_host(tags_[k], h[n_steps + k]);
    for (const auto& [tag, value] : step_host_[i]) add_host(tag, value);
  }
  steps_.clear();
  examples_.clear();
  losses_.clear();
  scalar_ranges_.clear();
  tags_.clear();
  values_.clear();
  step_host_.clear();
  return out;
}

std::map<std::string, double> StepLog::take_means() {
  std::map<std::string, double> means;
  for (const auto& [tag, s] : sums_) means[tag] = s.sum / static_cast<double>(s.n);
  sums_.clear();
  return means;
}

std::map<std::string, double> StepLog::end_interval(double seconds, int64_t samples_per_example) {
  const double examples_per_s = static_cast<double>(interval_examples_) / seconds;
  add_host("train/step_time", seconds / static_cast<double>(interval_steps_));
  add_host("train/samples_per_second", examples_per_s * static_cast<double>(samples_per_example));
  add_host("train/examples_per_second", examples_per_s);
  interval_steps_ = interval_examples_ = 0;
  return take_means();
}

}  // namespace rt
