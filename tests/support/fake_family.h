// A model family for tests of the registry and of the training loop: a linear layer fitted to
// synthetic in-memory data, registered as model.family = "fake" by fake_family.cpp itself
// (linked into the test binaries that use it). It owns one key, model.fake_width, bound to
// FakeOptions::width; it needs no database and trains through the real loop (run_training) in
// milliseconds.
#pragma once

#include <cstdint>

#include "trainer/family_registry.h"
#include "trainer/options_table.h"

namespace rt::testing {

inline constexpr const char* kFakeFamily = "fake";

struct FakeOptions {
  int64_t width = 4;  // model.fake_width: input features of the linear layer, in [1, 64]
};

// The family's [model] keys.
const OptionsTable<FakeOptions>& fake_model_keys();

// The registration fake_family.cpp makes (a second register_model_family with it throws).
FamilyRegistration fake_family_registration();

}  // namespace rt::testing
