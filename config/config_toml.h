// Parsing a config file's TOML, for Config (the sections) and ConfigStack (the [stack] table):
// one place that turns toml++'s parse error into rt::Error "<origin>:<line>:<column>: TOML parse
// error: …".
#pragma once

#include <toml++/toml.h>

#include <string>

#include "util/error.h"

namespace rt {

inline toml::table parse_config_toml(const std::string& text, const std::string& origin) {
  try {
    return toml::parse(text, origin);
  } catch (const toml::parse_error& e) {
    const auto& where = e.source().begin;
    throw Error(origin + ":" + std::to_string(where.line) + ":" + std::to_string(where.column) +
                ": TOML parse error: " + std::string(e.description()));
  }
}

}  // namespace rt
