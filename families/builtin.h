// The model families this program ships. A program registers them once, before it reads a
// config (the schema, --help and docs/config.md are built from the registrations): the apps'
// main(), the test suites' main (tests/support/families_main.cpp).
//
// Adding a family is one folder under families/ plus one line in families/builtin.cpp.
#pragma once

namespace rt {

// Registers rave and ssm (config/family_registry.h), in that order; later calls do nothing.
void register_builtin_model_families();

}  // namespace rt
