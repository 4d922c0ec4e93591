// The config reference, generated from the schema (config_schema.h) and the registered families
// (family_registry.h): docs/config.md is `train --config_reference` (scripts/update_docs.sh
// regenerates it; a CTest test fails when the committed file is stale), and --help lists each
// family's keys under its name.
#pragma once

#include <string>

namespace rt {

// Markdown: the common keys per section, the aliases, then each family's keys under its name,
// with default, accepted values, dedicated flag and help; architecture keys are marked.
std::string config_reference_markdown();

// For --help: each family, its help line and the names of its keys.
std::string family_keys_help();

// The shipped configs that mirror RAVE's gin files (a [stack] table with `mirrors`), found in
// `dirs` (config_search_dirs() by default): Markdown for docs/config.md (name, kind, what it
// does, RAVE's file, the minimum GPU memory RAVE states, what it needs), and plain text for --help.
std::string rave_configs_markdown();
std::string rave_configs_help();

}  // namespace rt
