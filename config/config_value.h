// Config values as text and as TOML: command-line text and TOML nodes parsed into a key's type,
// values formatted back in TOML syntax (an exact round trip), and "did you mean" suggestions.
// The Config store (config.h) and the reference (config_reference.h) are built on these.
#pragma once

#include <toml++/toml.h>

#include <string>
#include <vector>

#include "config/config_schema.h"

namespace rt {

// `v` in TOML syntax: strings quoted and escaped, floats in the shortest text that reads back
// to the same double (always with '.' or 'e'), lists as arrays.
std::string value_text(const ConfigValue& v);

// What kind of value `v` holds ("an integer", "a float list"), for type errors.
const char* value_kind(const ConfigValue& v);

// Converts `v` to `type` (int → float, int list → float list); false on a mismatch.
bool coerce_value(const ConfigValue& v, KeyType type, ConfigValue* out);

// Parses a bool as the command line accepts it (true/false/True/False/1/0/yes/no/on/off);
// false when `text` is not a bool spelling.
bool parse_bool_text(const std::string& text, bool* out);

// Parses command-line text as a value of `type`: bools as above, integers with an optional
// '+', finite floats, strings with optional surrounding quotes, lists as TOML arrays with the
// brackets optional ("[4, 4, 2]" or "4,4,2"; "[[1,3],[1]]"). False when the text is not one.
bool parse_value_text(const std::string& text, KeyType type, ConfigValue* out);

// Converts a TOML node to `type`; false on a type mismatch. Integers are accepted for floats.
bool toml_to_value(const toml::node& node, KeyType type, ConfigValue* out);
// The node as a TOML file spells it ("\"many\"", "1.5"), for errors.
std::string toml_node_text(const toml::node& node);

// "; did you mean 'x'?" with the candidate closest to `name`, or "" when none is close.
std::string did_you_mean(const std::string& name, const std::vector<std::string>& candidates);

}  // namespace rt
