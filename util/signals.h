// Cooperative shutdown on SIGINT / SIGTERM: the handler only records the signal;
// the trainer polls stop_requested() between steps, flushes its files and exits with
// 128 + signal (130 for Ctrl-C, 143 for SIGTERM). A second signal of the same kind while the
// flush runs restores the default action, so a stuck process can still be killed.
#pragma once

namespace rt {

void install_stop_signal_handlers();
bool stop_requested();
int stop_signal();  // 0 when none was received.
void clear_stop_request();  // For tests.

}  // namespace rt
