// `export --benchmark FILE.ts`: will an exported file keep up in realtime on this machine?
//
// The file is loaded as nn~'s backend loads it (torch::jit::load, eval) and `forward` is called
// on consecutive [1, C, block] blocks of noise under c10::InferenceMode, on the threads given
// (torch::set_num_threads, 1 by default: the cost of one voice on one core), a few warm-up
// blocks first, then `seconds` of audio per block size, each call timed. The figures per block size:
// the milliseconds of a block (median and slowest: an audio callback must return within the
// block's duration every time), the realtime factor (audio seconds / compute seconds), the CPU
// time one voice takes (% of one core), and the voices that fit: floor(realtime factor of the
// whole run), the copies of the model that can run one after another within every block's
// duration on the threads given; 0 = it does not keep up. docs/export.md, "Will it keep up?".
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

namespace rt::exporting {

struct RealtimeCheckOptions {
  std::filesystem::path file;
  std::vector<int64_t> blocks;  // samples per call; empty = 2048 and 4096 (those that are whole frames)
  int64_t threads = 1;          // torch::set_num_threads during the check (restored after)
  double seconds = 10.0;        // audio timed per block size
  int64_t warmup_blocks = 4;    // calls before the timed ones, per block size
};

struct BlockTiming {
  int64_t block = 0;       // samples per call
  double deadline_ms = 0;  // the block's duration: the audio callback's deadline
  int64_t calls = 0;       // timed calls
  int64_t late = 0;        // calls slower than the deadline
  double median_ms = 0, max_ms = 0;
  double audio_s = 0;      // calls × block / sampling rate
  double compute_s = 0;    // wall time of the timed calls
  double cpu_s = 0;        // the process's CPU time during the timed calls (every thread)
  double rtf_median = 0;   // deadline / median call
  double rtf_total = 0;    // audio_s / compute_s
  double cpu_percent = 0;  // 100 · cpu_s / audio_s: % of one core one voice takes
  int64_t voices = 0;      // floor(rtf_total); 0: does not keep up
  // The threads that ran during the timed calls (at least 1 % of the CPU time all threads took,
  // /proc/self/task): what a host gives one voice; and the process's threads then (LibTorch's
  // pools included).
  int64_t busy_threads = 0, process_threads = 0;
};

struct RealtimeCheck {
  std::filesystem::path file;
  int64_t sampling_rate = 0, channels = 0;
  int64_t frame = 1;   // blocks are multiples of this (forward's and encode's ratios)
  int streaming = -1;  // the file's `streaming` attribute: 1, 0, or -1 when it has none
  int64_t threads = 1;
  int64_t cores = 0;  // CPUs this process may run on
  int64_t warmup_blocks = 0;
  double seconds = 0;
  std::string cpu_model, torch_version;
  std::vector<BlockTiming> rows;  // one per block size, in the order asked
};

// "2048,4096" → {2048, 4096}, duplicates dropped. Throws rt::Error naming --block, the value and
// what is accepted (whole numbers of samples above 0, comma-separated).
std::vector<int64_t> parse_block_sizes(const std::string& text);

// Runs the check. Throws rt::Error naming the file when it is missing, is not a TorchScript
// file, has no `forward`, no channel count or no sampling rate, or when forward fails; naming
// the flag and value for a block that is not a whole number of latent frames, --threads < 1 or
// --seconds <= 0.
RealtimeCheck run_realtime_check(const RealtimeCheckOptions& options);

// The table printed by `export --benchmark`, with the machine, the LibTorch version, the
// thread count and what each column means.
std::string format_realtime_check(const RealtimeCheck& check);

}  // namespace rt::exporting
