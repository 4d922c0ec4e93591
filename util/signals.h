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
