// Fault injection for tests, as a data source: a BatchStream around the training loader that
// fills one step's batch with NaN (its target, or its input when it has none), so that the
// loss turns non-finite on this rank alone, without passing through batch statistics shared
// with the other ranks. The trainer takes it through TrainingJobOptions (trainer/trainer.h);
// the `train_with_faults` test executable sets it from RT_TEST_NAN_AT_STEP and RT_TEST_NAN_RANK.
#pragma once

#include <torch/torch.h>

#include <cstdint>
#include <cstdlib>
#include <limits>
#include <memory>
#include <optional>
#include <string>
#include <utility>

#include "data/loader.h"
#include "trainer/trainer.h"

namespace rt::testing {

class NanAtStep final : public BatchStream {
 public:
  // Corrupts the global batch `step` (Batch::batch_idx: the step that trains it when the run
  // starts from step 0).
  NanAtStep(std::unique_ptr<BatchStream> inner, int64_t step) : inner_(std::move(inner)), step_(step) {}

  std::optional<Batch> next() override {
    std::optional<Batch> batch = inner_->next();
    if (batch && batch->batch_idx == step_) {
      (batch->target.defined() ? batch->target : batch->input).fill_(std::numeric_limits<float>::quiet_NaN());
    }
    return batch;
  }

 private:
  std::unique_ptr<BatchStream> inner_;
  int64_t step_;
};

// Options that corrupt step `step`'s batch on `rank` (-1: every rank).
inline TrainingJobOptions nan_at_step(int64_t step, int rank = -1) {
  TrainingJobOptions o;
  o.wrap_train_batches = [step, rank](std::unique_ptr<BatchStream> loader,
                                      int this_rank) -> std::unique_ptr<BatchStream> {
    if (rank >= 0 && rank != this_rank) return loader;
    return std::make_unique<NanAtStep>(std::move(loader), step);
  };
  return o;
}

// nan_at_step from RT_TEST_NAN_AT_STEP (unset: no fault) and RT_TEST_NAN_RANK (unset: every rank).
inline TrainingJobOptions nan_options_from_environment() {
  const char* step = std::getenv("RT_TEST_NAN_AT_STEP");
  if (step == nullptr) return {};
  const char* rank = std::getenv("RT_TEST_NAN_RANK");
  return nan_at_step(std::stoll(step), rank != nullptr ? std::stoi(rank) : -1);
}

}  // namespace rt::testing
