// RT_CLI_PARSE(app, argc, argv, "generate"): CLI11's CLI11_PARSE for our apps, with the
// convention `train` keeps (config/cli.cpp): a command line that does not parse (an unknown
// flag, a value of the wrong type, a missing required flag) is refused in one line,
//   error: command line: <what> (`generate --help` lists the flags)
// with exit status 2, as every command of the project does; CLI11's own exit codes (104–109)
// and wording are not used. The text is terminal-safe (util/error.h): CLI11 echoes the
// offending value, and a value with an escape sequence must not reach the terminal raw.
// Help and version requests print as CLI11_PARSE prints them (exit 0).
#pragma once

#include <CLI/CLI.hpp>
#include <iostream>

#include "util/error.h"

namespace rt {

// Exit status of a command line that is refused (every command: docs/cli.md "Exit status").
inline constexpr int kExitUsage = 2;

}  // namespace rt

#define RT_CLI_PARSE(app, argc, argv, command)                                                \
  try {                                                                                       \
    (app).parse((argc), (argv));                                                              \
  } catch (const CLI::Success& e) { /* --help, --help-all, --version */                       \
    return (app).exit(e);                                                                     \
  } catch (const CLI::ParseError& e) {                                                        \
    std::cerr << "error: command line: " << rt::terminal_safe(e.what()) << " (`" << (command) \
              << " --help` lists the flags)\n";                                               \
    return rt::kExitUsage;                                                                    \
  }
