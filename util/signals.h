// Cooperative shutdown on SIGINT / SIGTERM: the handler only records the signal;
// the trainer polls stop_requested() between steps, flushes its files and exits with
// 128 + signal (130 for Ctrl-C, 143 for SIGTERM). The first signal says "stopping after this
// step…" on a terminal; a second Ctrl-C stops at once (SIGINT's default action); a SIGTERM after
// the first signal (a launcher closing its ranks) does not cut the stop short.
#pragma once

namespace rt {

void install_stop_signal_handlers();
// Whether the handler prints its messages; install_stop_signal_handlers() turns them on when
// stderr is a terminal.
void set_stop_messages(bool on);
bool stop_requested();
int stop_signal();  // 0 when none was received.
void clear_stop_request();  // For tests.

}  // namespace rt

#include <string>

#include "util/error.h"

namespace rt {

// Thrown by long preparations (audio preprocessing, neural import, demo generation, database
// scans) when SIGINT or SIGTERM arrived: the apps catch it and exit 128 + signal.
class StopRequested : public Error {
 public:
  StopRequested(const std::string& what, int signal) : Error(what), signal_(signal) {}
  int signal() const { return signal_; }

 private:
  int signal_;
};

// Throws StopRequested ("stopped by SIGTERM <during>") when a stop was requested.
void throw_if_stop_requested(const std::string& during);

}  // namespace rt
