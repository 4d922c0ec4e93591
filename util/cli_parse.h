// RT_CLI_PARSE(app, argc, argv): CLI11's CLI11_PARSE for our apps, with the parse error's text
// made terminal-safe (util/error.h): CLI11 echoes the offending value ("--threads: Value … could
// not be converted"), and a value with an escape sequence must not reach the terminal raw.
// Help and version requests print as CLI11_PARSE prints them.
#pragma once

#include <CLI/CLI.hpp>
#include <iostream>

#include "util/error.h"

#define RT_CLI_PARSE(app, argc, argv)                                                                     \
  try {                                                                                                   \
    (app).parse((argc), (argv));                                                                          \
  } catch (const CLI::Success& e) { /* --help, --help-all, --version */                                   \
    return (app).exit(e);                                                                                 \
  } catch (const CLI::ParseError& e) {                                                                    \
    std::cerr << "ERROR: " << rt::terminal_safe(e.what()) << "\nRun with --help for more information.\n"; \
    return e.get_exit_code();                                                                             \
  }
