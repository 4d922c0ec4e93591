#include "export/checks/realtime_check.h"

#include <sched.h>
#include <time.h>
#include <torch/script.h>
#include <torch/version.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <fstream>
#include <iomanip>
#include <map>
#include <numeric>
#include <optional>
#include <sstream>
#include <thread>

#include "export/checks/file_facts.h"
#include "export/onnx/onnx_graph.h"
#include "util/error.h"
#include "util/error_text.h"
#include "util/path_kind.h"
#include "util/signals.h"
#include "util/thread_limits.h"

namespace rt::exporting {
namespace {

namespace fs = std::filesystem;

constexpr int64_t kMaxBlock = int64_t{1} << 24;  // 16 M samples: far beyond any host buffer
constexpr double kMaxSeconds = 3600.0;

std::string trim(const std::string& s) {
  const auto b = s.find_first_not_of(" \t");
  if (b == std::string::npos) return "";
  return s.substr(b, s.find_last_not_of(" \t") - b + 1);
}

// The CPUs this process may run on (its affinity mask), else the hardware's count.
int64_t available_cores() {
  cpu_set_t set;
  CPU_ZERO(&set);
  if (sched_getaffinity(0, sizeof(set), &set) == 0) return std::max(1, CPU_COUNT(&set));
  return std::max(1u, std::thread::hardware_concurrency());
}

// /proc/cpuinfo's first "model name", else "unknown CPU".
std::string cpu_model() {
  std::ifstream in("/proc/cpuinfo");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("model name", 0) != 0) continue;
    const auto colon = line.find(':');
    if (colon != std::string::npos) return trim(line.substr(colon + 1));
  }
  return "unknown CPU (no \"model name\" in /proc/cpuinfo)";
}

double process_cpu_seconds() {
  timespec t{};
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
  return static_cast<double>(t.tv_sec) + 1e-9 * static_cast<double>(t.tv_nsec);
}

// CPU time of each of this process's threads in nanoseconds, by thread id: schedstat's first
// field (/proc/self/task/<tid>/schedstat), else utime + stime in clock ticks (stat, fields 14
// and 15 after the parenthesised command name).
std::map<std::string, double> thread_cpu_ns() {
  std::map<std::string, double> ns;
  std::error_code ec;
  const double tick_ns = 1e9 / static_cast<double>(std::max(1L, ::sysconf(_SC_CLK_TCK)));
  for (const auto& e : fs::directory_iterator("/proc/self/task", ec)) {
    const std::string tid = e.path().filename().string();
    std::ifstream sched(e.path() / "schedstat");
    double run = 0;
    if (sched >> run) {
      ns[tid] = run;
      continue;
    }
    std::ifstream in(e.path() / "stat");
    std::string stat;
    std::getline(in, stat);
    const auto close = stat.rfind(')');
    if (close == std::string::npos) continue;
    std::istringstream fields(stat.substr(close + 2));
    std::string f;
    double ticks = 0;
    for (int i = 3; i <= 15 && fields >> f; ++i) {
      if (i == 14 || i == 15) ticks += std::stod(f);
    }
    ns[tid] = ticks * tick_ns;
  }
  return ns;
}

// An integer attribute (int, float or one-element tensor), if the module has it.
std::optional<int64_t> int_attr(const torch::jit::Module& m, const std::string& name) {
  if (!m.hasattr(name)) return std::nullopt;
  const auto v = m.attr(name);
  if (v.isInt()) return v.toInt();
  if (v.isDouble()) return static_cast<int64_t>(std::llround(v.toDouble()));
  if (v.isTensor() && v.toTensor().numel() == 1) return v.toTensor().item<int64_t>();
  return std::nullopt;
}

// nn~'s <method>_params: [in_channels, in_ratio, out_channels, out_ratio]; empty when absent.
std::vector<int64_t> method_params(const torch::jit::Module& m, const std::string& method) {
  const std::string name = method + "_params";
  if (!m.hasattr(name)) return {};
  const auto v = m.attr(name);
  if (!v.isTensor() || v.toTensor().numel() != 4) return {};
  auto t = v.toTensor().to(torch::kLong).contiguous();
  return std::vector<int64_t>(t.data_ptr<int64_t>(), t.data_ptr<int64_t>() + 4);
}

std::string list_text(const std::vector<int64_t>& v) {
  std::string s = "[";
  for (size_t i = 0; i < v.size(); ++i) s += (i ? ", " : "") + std::to_string(v[i]);
  return s + "]";
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

// torch::set_num_threads for the check's duration.
class ThreadCount {
 public:
  explicit ThreadCount(int64_t n) : before_(torch::get_num_threads()) {
    torch::set_num_threads(static_cast<int>(n));
  }
  ~ThreadCount() { torch::set_num_threads(before_); }
  ThreadCount(const ThreadCount&) = delete;
  ThreadCount& operator=(const ThreadCount&) = delete;

 private:
  int before_;
};

torch::jit::Module load_file(const fs::path& file) {
  const std::string name = "--benchmark '" + file.string() + "'";
  std::error_code ec;
  if (const std::string why = not_a_regular_file(file); !why.empty())
    throw Error(name + " " + why + " (expected a TorchScript .ts file)");
  if (onnx::looks_like_onnx(file)) {
    // Timing it with our own operator runner would time LibTorch, not the host's runtime.
    throw Error(name +
                " is an ONNX file: its speed is ONNX Runtime's, which export does not link; time it in the "
                "host, or with benchmarks/onnx_race.py (ONNX Runtime, one thread, block by block)");
  }
  verify_export_file(file);  // a damaged file is refused, not timed
  torch::jit::Module m;
  try {
    m = torch::jit::load(file.string());  // as nn~'s Backend::load
  } catch (const std::exception& e) {
    throw Error(name + " cannot be read as a TorchScript file (torch::jit::load: " +
                first_line(error_text(e)) + "); pass a file written by `export` or RAVE's `rave export`");
  }
  refuse_training_checkpoint(m, file, "--benchmark");
  m.eval();
  return m;
}

}  // namespace

std::vector<int64_t> parse_block_sizes(const std::string& text) {
  std::vector<int64_t> blocks;
  std::stringstream in(text);
  std::string item;
  const std::string accepted =
      "block sizes are whole numbers of samples above 0, comma-separated (e.g. --block 2048,4096)";
  if (trim(text).empty()) throw Error("--block '" + text + "' is empty: " + accepted);
  if (trim(text).back() == ',') throw Error("--block '" + text + "' ends with a comma: " + accepted);
  while (std::getline(in, item, ',')) {
    const std::string v = trim(item);
    const bool digits = !v.empty() && v.size() <= 9 &&
                        std::all_of(v.begin(), v.end(), [](char c) { return c >= '0' && c <= '9'; });
    if (!digits) throw Error("--block '" + text + "': '" + v + "' is not a block size: " + accepted);
    const int64_t b = std::stoll(v);
    if (b <= 0 || b > kMaxBlock) {
      throw Error("--block '" + text + "': " + v + " is out of range: " + accepted + ", at most " +
                  std::to_string(kMaxBlock));
    }
    if (std::find(blocks.begin(), blocks.end(), b) == blocks.end()) blocks.push_back(b);
  }
  return blocks;
}

namespace {

void check_ranges(const RealtimeCheckOptions& o, const RealtimeCheck& r) {
  if (o.threads < 1 || o.threads > max_thread_count(r.cores)) {
    throw Error("--threads " + std::to_string(o.threads) + " is outside 1 … " +
                std::to_string(max_thread_count(r.cores)) + " (4 × this machine's " +
                count_text(r.cores, "core") + ")");
  }
  if (!(o.seconds > 0.0 && o.seconds <= kMaxSeconds)) {
    std::ostringstream s;
    s << "--seconds " << o.seconds << " is outside (0, " << kMaxSeconds
      << "]: the seconds of audio timed per block size";
    throw Error(s.str());
  }
}

// The block layout nn~ reads: forward_params / encode_params [in_channels, in_ratio,
// out_channels, out_ratio], the channels, the latent frame and the rate.
struct Layout {
  std::vector<int64_t> forward, encode;
  int64_t in_ratio = 1;
};

Layout read_layout(torch::jit::Module& m, const std::string& file, RealtimeCheck& r) {
  Layout l{method_params(m, "forward"), method_params(m, "encode")};
  const auto n_channels = int_attr(m, "n_channels");
  r.channels = !l.forward.empty() ? l.forward[0] : n_channels.value_or(0);
  if (r.channels <= 0) {
    throw Error(file + " says neither how many channels forward takes (forward_params[0]) nor n_channels");
  }
  if (!l.forward.empty()) {
    if (l.forward[1] <= 0 || l.forward[3] <= 0)
      throw Error(file + " has invalid forward_params " + list_text(l.forward));
    l.in_ratio = l.forward[1];
    r.frame = std::lcm(l.forward[1], l.forward[3]);
  }
  if (!l.encode.empty() && l.encode[3] > 0) r.frame = std::lcm(r.frame, l.encode[3]);
  const auto sr = m.hasattr("sr") ? int_attr(m, "sr") : int_attr(m, "sampling_rate");
  if (!sr || *sr <= 0) throw Error(file + " has no sampling rate (attribute sr or sampling_rate)");
  r.sampling_rate = *sr;
  if (m.hasattr("streaming") && m.attr("streaming").isBool()) r.streaming = m.attr("streaming").toBool();
  return l;
}

// --block, or 2048 and 4096 where they are whole latent frames; each a multiple of the frame.
std::vector<int64_t> choose_blocks(const RealtimeCheckOptions& o, const RealtimeCheck& r, const Layout& l,
                                   const std::string& file) {
  std::vector<int64_t> blocks = o.blocks;
  if (blocks.empty()) {
    for (int64_t b : {2048, 4096}) {
      if (b % r.frame == 0) blocks.push_back(b);
    }
    if (blocks.empty()) blocks = {r.frame, 2 * r.frame};
  }
  for (int64_t b : blocks) {
    if (b > 0 && b <= kMaxBlock && b % r.frame == 0) continue;
    const int64_t below = std::max<int64_t>(1, b / r.frame) * r.frame, above = (b / r.frame + 1) * r.frame;
    std::ostringstream s;
    s << "--block " << b << " is not a whole number of latent frames of " << file << ": its blocks must be "
      << "multiples of " << r.frame << " samples (forward_params " << list_text(l.forward);
    if (!l.encode.empty())
      s << ", encode_params " << list_text(l.encode) << ": one latent frame = " << l.encode[3] << " samples";
    s << "), as nn~'s buffers are; e.g. --block " << below
      << (below != above ? "," + std::to_string(above) : "");
    throw Error(s.str());
  }
  return blocks;
}

// The figures of one block size from its calls' wall times and the threads' CPU time. Busy: a
// thread that ran at least 1 % of all the threads' CPU time during the timed blocks (a pool
// thread woken for nothing is not one).
void summarise(BlockTiming& t, const std::vector<double>& ms, const std::map<std::string, double>& cpu_before,
               const std::map<std::string, double>& cpu_after, double block_s) {
  t.process_threads = static_cast<int64_t>(cpu_after.size());
  std::map<std::string, double> ran;
  double all = 0.0;
  for (const auto& [tid, v] : cpu_after) {
    const auto before = cpu_before.find(tid);
    ran[tid] = v - (before == cpu_before.end() ? 0.0 : before->second);
    all += ran[tid];
  }
  for (const auto& [tid, v] : ran) t.busy_threads += v > 0.01 * all ? 1 : 0;
  t.median_ms = median(ms);
  t.max_ms = *std::max_element(ms.begin(), ms.end());
  t.late = std::count_if(ms.begin(), ms.end(), [&](double v) { return v > t.deadline_ms; });
  t.compute_s = std::accumulate(ms.begin(), ms.end(), 0.0) / 1000.0;
  t.audio_s = static_cast<double>(t.calls) * block_s;
  t.rtf_median = t.median_ms > 0 ? t.deadline_ms / t.median_ms : 0.0;
  t.rtf_total = t.compute_s > 0 ? t.audio_s / t.compute_s : 0.0;
  t.cpu_percent = 100.0 * t.cpu_s / t.audio_s;
  t.voices = static_cast<int64_t>(std::floor(t.rtf_total));
}

// One block size timed: warm-up calls, then --seconds of audio in blocks of noise.
BlockTiming time_block(torch::jit::Method& forward, const std::string& file, int64_t block, int64_t in_ratio,
                       const RealtimeCheckOptions& o, const RealtimeCheck& r) {
  const std::vector<int64_t> shape{1, r.channels, block / in_ratio};
  auto call = [&](const torch::Tensor& x) {
    c10::IValue out;
    try {
      out = forward({x});
    } catch (const std::exception& e) {
      throw Error(file + ": forward failed on a " + shape_text(shape) + " block (--block " +
                  std::to_string(block) + "): " + first_line(error_text(e)));
    }
    if (!out.isTensor())
      throw Error(file + ": forward returned " + out.tagKind() + ", not a tensor of audio");
  };
  auto noise = [&] { return (torch::rand(shape) * 2.0 - 1.0) * 0.5; };
  for (int64_t i = 0; i < r.warmup_blocks; ++i) call(noise());
  BlockTiming t;
  t.block = block;
  const double block_s = static_cast<double>(block) / static_cast<double>(r.sampling_rate);
  t.deadline_ms = 1000.0 * block_s;
  t.calls = std::max<int64_t>(1, static_cast<int64_t>(std::ceil(o.seconds / block_s)));
  std::vector<double> ms;
  ms.reserve(static_cast<size_t>(t.calls));
  const auto cpu_before = thread_cpu_ns();
  for (int64_t i = 0; i < t.calls; ++i) {
    throw_if_stop_requested("while timing " + std::to_string(block) + "-sample blocks");
    const auto x = noise();
    const double cpu0 = process_cpu_seconds();
    const auto t0 = std::chrono::steady_clock::now();
    call(x);
    const auto t1 = std::chrono::steady_clock::now();
    t.cpu_s += process_cpu_seconds() - cpu0;
    ms.push_back(std::chrono::duration<double, std::milli>(t1 - t0).count());
  }
  summarise(t, ms, cpu_before, thread_cpu_ns(), block_s);
  return t;
}

}  // namespace

RealtimeCheck run_realtime_check(const RealtimeCheckOptions& o) {
  RealtimeCheck r;
  r.file = o.file;
  r.cores = available_cores();
  r.cpu_model = cpu_model();
  r.torch_version = TORCH_VERSION;
  r.threads = o.threads;
  r.seconds = o.seconds;
  r.warmup_blocks = std::max<int64_t>(0, o.warmup_blocks);
  check_ranges(o, r);
  auto m = load_file(o.file);
  const std::string file = "'" + o.file.string() + "'";
  auto forward = m.find_method("forward");
  if (!forward) {
    throw Error(file +
                " has no forward method: --benchmark expects an nn~ model file (written by `export` or "
                "RAVE's `rave export`) whose forward(x) takes audio blocks [batch, channels, samples]");
  }
  const Layout layout = read_layout(m, file, r);
  const std::vector<int64_t> blocks = choose_blocks(o, r, layout, file);
  ThreadCount threads(o.threads);
  c10::InferenceMode guard;  // as nn~'s Backend::perform
  for (int64_t block : blocks) r.rows.push_back(time_block(*forward, file, block, layout.in_ratio, o, r));
  return r;
}

std::string format_realtime_check(const RealtimeCheck& r) {
  std::ostringstream s;
  s << "realtime check of " << r.file.string() << "\n"
    << "  model: " << count_text(r.channels, "channel") << " at " << r.sampling_rate << " Hz, "
    << (r.streaming == 1   ? "streaming, "
        : r.streaming == 0 ? "offline (clicks at block edges: export --streaming for realtime use), "
                           : "")
    << "blocks in multiples of " << r.frame << " samples\n"
    << "  machine: " << r.cpu_model << ", " << count_text(r.cores, "core") << " available; LibTorch "
    << r.torch_version << "; " << count_text(r.threads, "thread") << " (torch::set_num_threads)\n"
    << "  forward on [1, " << r.channels << ", block] noise under InferenceMode: " << r.warmup_blocks
    << " warm-up blocks, then " << r.seconds << " s of audio per block size\n\n";
  s << "  block  deadline ms  median ms  slowest ms  late     RTF median  RTF total  CPU (1 core)  threads  "
       "voices\n";
  for (const auto& t : r.rows) {
    std::ostringstream late, cpu;
    late << t.late << "/" << t.calls;
    cpu << std::fixed << std::setprecision(1) << t.cpu_percent << " %";
    s << std::fixed << "  " << std::setw(5) << t.block << "  " << std::setw(11) << std::setprecision(1)
      << t.deadline_ms << "  " << std::setw(9) << std::setprecision(2) << t.median_ms << "  " << std::setw(10)
      << t.max_ms << "  " << std::left << std::setw(7) << late.str() << std::right << "  " << std::setw(10)
      << t.rtf_median << "  " << std::setw(9) << t.rtf_total << "  " << std::setw(12) << cpu.str() << "  "
      << std::setw(7) << (std::to_string(t.busy_threads) + "/" + std::to_string(t.process_threads)) << "  "
      << (t.voices > 0 ? std::to_string(t.voices) : "0: does not keep up") << "\n";
  }
  s << "\n"
    << "  deadline: the block's duration; the audio callback must return within it every time\n"
    << "    (late: timed blocks slower than that; slowest: the worst one).\n"
    << "  RTF: realtime factor, audio seconds / compute seconds (median block; all timed blocks).\n"
    << "  CPU: process CPU time / audio time, as a percentage of one core.\n"
    << "  threads: those that ran during the timed blocks / all of the process's (a host's voice uses as\n"
    << "    many; keep it at 1 with torch::set_num_threads(1) in the host, or OMP_NUM_THREADS=1).\n"
    << "  voices: floor(RTF total), the copies of this model that fit one after another in each block's\n"
    << "    duration on the " << count_text(r.threads, "thread")
    << " given; below 1 it does not keep up. Leave headroom: the host,\n"
    << "    other plug-ins and a busier machine need time too.\n";
  return s.str();
}

}  // namespace rt::exporting
