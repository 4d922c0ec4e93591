// A model family for tests of the registry and of the training loop: a linear layer fitted to
// synthetic in-memory data, registered as model.family = "fake" by fake_family.cpp itself
// (linked into the test binaries that use it). It owns one key, model.fake_width, bound to
// FakeOptions::width; it needs no database and trains through the real loop (run_training) in
// milliseconds.
#pragma once

#include <cstdint>
#include <filesystem>
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "config/config.h"
#include "config/family_registry.h"
#include "config/options_table.h"

namespace rt::testing {

inline constexpr const char* kFakeFamily = "fake";

struct FakeOptions {
  int64_t width = 4;  // model.fake_width: input features of the linear layer, in [1, 64]
};

// The family's [model] keys.
const OptionsTable<FakeOptions>& fake_model_keys();

// Called at the start of every fake train_step with the step number, before the batch is used:
// loop tests inject what a run meets (a signal, an exception) at a chosen step. An empty
// function (the default) does nothing; set it back to {} when the test ends.
void set_fake_step_hook(std::function<void(int64_t step)> hook);

// A finalized config that trains the fake family in-process: run `name` under `out_path`, one
// thread, no loader workers, batch 4, lr 0.1, 6 steps, validation every 3, logging every 2;
// `overrides` (key, value) are applied last, as flags would be.
Config fake_run_config(const std::filesystem::path& out_path, const std::string& name,
                       const std::vector<std::pair<std::string, std::string>>& overrides = {});

// The registration fake_family.cpp makes (a second register_model_family with it throws).
FamilyRegistration fake_family_registration();

}  // namespace rt::testing
