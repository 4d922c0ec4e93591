// Cooperative shutdown on SIGINT, SIGTERM, SIGHUP and SIGQUIT: the signal is only recorded; the trainer polls
// stop_requested() between steps, flushes its files and exits with 128 + signal (130 for Ctrl-C, 143 for
// SIGTERM, 129 for SIGHUP: a closed ssh session or terminal, 131 for SIGQUIT: Ctrl-\). The first signal says
// "stopping after this step…" on a terminal; a second Ctrl-C stops at once (SIGINT's default action); a later
// SIGTERM, SIGHUP or SIGQUIT (a launcher closing its ranks, the terminal going away) does not cut the stop
// short.
//
// SIGUSR1 asks for a checkpoint now: the trainer writes one after the current step and trains
// on (take_checkpoint_request()). SIGPIPE is ignored: a closed log pipe (`train | tee` whose
// tee died, an ssh session's stdout) makes writes to it fail instead of killing the run.
//
// `train` installs the handlers first thing (its executable's DT_PREINIT_ARRAY, before any
// shared library's initialiser, and again in a constructor before main: apps/train/main.cpp),
// so a signal during start-up ends it with a message, never with the default action. A signal
// the parent held pending (a blocked mask is inherited across exec) is taken then. A SIGHUP
// ignored at start (`nohup train …`) stays ignored.
//
// The signals are taken on a thread of their own ("rt-signals", sigwait): installing blocks
// them in the calling thread, and so in every thread started after it, so that no signal
// handler ever runs on the stack of code that was computing. oneDNN's sgemm (Debian's libdnnl
// 2.6, which models/common/row_linear.h calls) keeps data below its stack pointer that a handler's
// frame overwrites: a signal landing there corrupted the heap (tests/models/row_linear_test.cpp).
// Consequences: a stop signal must come from outside the thread that installed (kill(2), a terminal, a
// launcher); raise(3) in a thread that blocks it leaves it pending there. A child process
// forked to exec another program calls restore_exec_signal_mask() first.
#pragma once

namespace rt {

void install_stop_signal_handlers();
// Whether the handler prints its messages; install_stop_signal_handlers() turns them on when
// stderr is a terminal.
void set_stop_messages(bool on);
bool stop_requested();
// Whether SIGUSR1 arrived since the last call (then clears it).
bool take_checkpoint_request();
// "SIGINT", "SIGTERM", "SIGHUP", "SIGQUIT", "SIGUSR1", else "a signal".
const char* signal_name(int sig);
int stop_signal();          // 0 when none was received.
void clear_stop_request();  // For tests.
// Signals taken since the start (every one: stop signals and SIGUSR1); for tests.
long signals_received();
// Between fork and exec (async-signal-safe): the signal mask the process was started with, so
// that the program it runs gets Ctrl-C and SIGTERM as usual.
void restore_exec_signal_mask();

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
