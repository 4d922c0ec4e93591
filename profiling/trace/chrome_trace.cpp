#include "profiling/trace/chrome_trace.h"

#include <unistd.h>

#include <algorithm>
#include <cinttypes>
#include <cstdio>
#include <map>
#include <set>
#include <tuple>
#include <unordered_map>
#include <vector>

#include "profiling/trace/whole_us_times.h"
#include "util/atomic_file.h"
#include "util/error.h"

#ifdef RT_HAS_ZLIB
#include <zlib.h>
#endif

namespace rt::prof {

namespace {

std::string quote(const std::string& s) {
  return Json(s).dump(-1, ' ', false, Json::error_handler_t::replace);
}

// Nanoseconds → "µs with 3 decimals", exactly (integer arithmetic, no rounding drift).
void append_us(std::string& out, int64_t ns) {
  char buf[40];
  const bool neg = ns < 0;
  const uint64_t a = neg ? static_cast<uint64_t>(-(ns + 1)) + 1 : static_cast<uint64_t>(ns);
  std::snprintf(buf, sizeof buf, "%s%" PRIu64 ".%03" PRIu64, neg ? "-" : "", a / 1000, a % 1000);
  out += buf;
}

// Times are written either as whole µs (integers, whole_us_times.h) or as ns-resolution µs with
// 3 decimals; callers pass them in the writer's unit, relative to baseTimeNanoseconds.
class EventWriter {
 public:
  EventWriter(std::string& out, bool whole_us) : out_(out), whole_us_(whole_us) {}

  // Opens an event object with the common fields; the caller appends `, "args": …` if any
  // and then calls end().
  void begin(const char* ph, const char* cat, const std::string& name, int64_t pid, int64_t tid, int64_t ts) {
    out_ += first_ ? "\n  {" : ",\n  {";
    first_ = false;
    out_ += "\"ph\": \"";
    out_ += ph;
    out_ += "\"";
    if (cat != nullptr) {
      out_ += ", \"cat\": \"";
      out_ += cat;
      out_ += "\"";
    }
    out_ += ", \"name\": " + quote(name);
    out_ += ", \"pid\": " + std::to_string(pid) + ", \"tid\": " + std::to_string(tid) + ", \"ts\": ";
    time(ts);
  }
  void dur(int64_t d) {
    out_ += ", \"dur\": ";
    time(d);
  }
  void raw(const std::string& s) { out_ += s; }
  void end() { out_ += "}"; }

 private:
  void time(int64_t v) {
    if (whole_us_) {
      out_ += std::to_string(v);
    } else {
      append_us(out_, v);
    }
  }

  std::string& out_;
  bool whole_us_;
  bool first_ = true;
};

void metadata_event(EventWriter& w, const char* name, int64_t pid, int64_t tid, int64_t ts,
                    const Json& args) {
  w.begin("M", nullptr, name, pid, tid, ts);
  w.raw(", \"args\": " + args.dump());
  w.end();
}

Json op_args(const Activity& a, bool record_shapes) {
  Json args = Json::object();
  if (a.external_id >= 0) args["External id"] = a.external_id;
  if (a.kind == ActivityKind::kCpuOp) {
    if (a.record_function_id >= 0) args["Record function id"] = a.record_function_id;
    if (a.sequence_nr >= 0) {
      args["Sequence number"] = a.sequence_nr;
      args["Fwd thread id"] = std::max<int64_t>(a.fwd_thread_id, 0);
    }
  }
  // Recorded spans of collectives (recorded_span.h) carry their message's dims as well: the
  // TensorBoard plugin sizes communication from them (torch_tb_profiler trace.py).
  if ((a.kind == ActivityKind::kCpuOp && record_shapes) || !a.input_types.empty()) {
    args["Input Dims"] = a.input_dims;
    args["Input type"] = a.input_types;
  }
  if (!a.call_stack.empty()) {
    std::string stack;
    for (const auto& f : a.call_stack) {
      if (!stack.empty()) stack += ";";
      stack += f;
    }
    args["Call stack"] = stack;
  }
  if (a.correlation >= 0 && !is_cpu_kind(a.kind)) args["correlation"] = a.correlation;
  if (a.args.is_object()) {
    for (auto it = a.args.begin(); it != a.args.end(); ++it) args[it.key()] = it.value();
  }
  return args;
}

// torch's args of a module event. TensorBoard's plugin builds the Module view's tree from
// "Python id" → "Python parent id" links and merges calls by (name, "Python module id")
// (torch_tb_profiler/profiler/module_op.py); here the parent is the enclosing module span.
struct ModuleArgs {
  int64_t python_id = 0;  // 0: not a module span
  int64_t parent_id = 0;  // 0: no enclosing module span
  int64_t module_id = 0;  // one per module path
};

std::vector<ModuleArgs> module_args(const Timeline& t) {
  const auto& acts = t.activities;
  std::vector<ModuleArgs> out(acts.size());
  std::vector<int64_t> enclosing(acts.size(), 0);  // python id of the innermost module span around i
  std::unordered_map<std::string, int64_t> module_ids;
  int64_t next_python_id = 1;
  for (size_t i = 0; i < acts.size(); ++i) {  // parents come before their children
    const int64_t p = acts[i].parent;
    const int64_t around = p < 0 ? 0 : (out[p].python_id > 0 ? out[p].python_id : enclosing[p]);
    enclosing[i] = around;
    if (acts[i].kind != ActivityKind::kPythonFunction) continue;
    out[i].python_id = next_python_id++;
    out[i].parent_id = around;
    out[i].module_id =
        module_ids.emplace(acts[i].name, static_cast<int64_t>(module_ids.size()) + 1).first->second;
  }
  return out;
}

// Each allocation's category: the category of the next free of its block (same device and
// address, later in time); null when the block outlives the window. Blocks are tagged after
// they are allocated (a parameter, a gradient, an optimizer's state), so only a free knows.
std::vector<const char*> memory_categories(const std::vector<MemoryEvent>& memory) {
  std::vector<size_t> order(memory.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::stable_sort(order.begin(), order.end(),
                   [&](size_t x, size_t y) { return memory[x].time_ns < memory[y].time_ns; });
  std::vector<const char*> out(memory.size(), nullptr);
  std::map<std::tuple<int, int, uint64_t>, const char*> freed_later;
  for (auto it = order.rbegin(); it != order.rend(); ++it) {
    const MemoryEvent& m = memory[*it];
    const auto key = std::make_tuple(m.device_type, m.device_id, m.addr);
    if (m.bytes < 0) {
      out[*it] = m.category;
      freed_later[key] = m.category;
    } else if (auto f = freed_later.find(key); f != freed_later.end()) {
      out[*it] = f->second;
      freed_later.erase(f);
    }
  }
  return out;
}

std::string hostname() {
  char buf[256] = {0};
  if (gethostname(buf, sizeof buf - 1) != 0 || buf[0] == '\0') return "localhost";
  return buf;
}

}  // namespace

std::string chrome_trace_json(const Timeline& t, const ChromeTraceOptions& options) {
  // The base is the earliest time in the window so every ts is ≥ 0.
  int64_t base = t.start_ns;
  for (const auto& a : t.activities) base = std::min(base, a.start_ns);
  for (const auto& m : t.memory) base = std::min(base, m.time_ns);
  const int64_t end = std::max(t.end_ns, base);
  // Every time as written: whole µs laid out to keep the nesting, or ns (3 decimals).
  WholeUsTimes us;
  if (options.whole_us) us = whole_us_times(t, base);
  const auto start_of = [&](size_t i) {
    return options.whole_us ? us.start_us[i] : t.activities[i].start_ns - base;
  };
  const auto end_of = [&](size_t i) {
    return options.whole_us ? us.end_us[i] : t.activities[i].end_ns - base;
  };

  std::string out;
  out.reserve(256 + t.activities.size() * 256);
  out += "{\n  \"schemaVersion\": " + std::to_string(kSchemaVersion) + ",\n";
  out += "  \"deviceProperties\": " +
         (t.device_properties.is_array() ? t.device_properties : Json::array()).dump() + ",\n";
  // Written by hand: HTA needs a space after the colon of "rank".
  out += "  \"distributedInfo\": {\"backend\": " + quote(options.backend) +
         ", \"rank\": " + std::to_string(options.rank) +
         ", \"world_size\": " + std::to_string(options.world_size) + "},\n";
  if (t.metadata.is_object()) {
    for (auto it = t.metadata.begin(); it != t.metadata.end(); ++it) {
      if (it.key() == "traceName" || it.key() == "traceEvents") continue;
      out += "  " + quote(it.key()) + ": " + it.value().dump() + ",\n";
    }
  }
  if (options.whole_us) {
    // Says how far the layout moved times later than plain rounding (whole_us_times.h).
    out += "  \"whole_us_timestamps\": {\"max_shift_us\": " + std::to_string(us.max_shift_us) + "},\n";
  }
  out += "  \"displayTimeUnit\": \"ms\",\n";
  out += "  \"baseTimeNanoseconds\": " + std::to_string(base + t.unix_minus_steady_ns) + ",\n";
  out += "  \"traceEvents\": [";

  EventWriter w(out, options.whole_us);
  // Process and thread metadata: CPU process(es), then GPU devices and their streams.
  std::set<int64_t> cpu_pids;
  for (const auto& th : t.threads) cpu_pids.insert(th.pid);
  std::set<int64_t> gpu_pids;
  std::set<std::pair<int64_t, int64_t>> gpu_streams;
  for (const auto& a : t.activities) {
    if (is_cpu_kind(a.kind)) {
      cpu_pids.insert(a.pid);
    } else {
      gpu_pids.insert(a.pid);
      gpu_streams.insert({a.pid, a.tid});
    }
  }
  for (int64_t pid : cpu_pids) {
    metadata_event(w, "process_name", pid, 0, 0, {{"name", "rt-train"}});
    metadata_event(w, "process_labels", pid, 0, 0, {{"labels", "CPU"}});
    metadata_event(w, "process_sort_index", pid, 0, 0, {{"sort_index", pid}});
  }
  for (const auto& th : t.threads) {
    const std::string label =
        "thread " + std::to_string(th.tid) + (th.name.empty() ? "" : " (" + th.name + ")");
    metadata_event(w, "thread_name", th.pid, th.tid, 0, {{"name", label}});
    metadata_event(w, "thread_sort_index", th.pid, th.tid, 0, {{"sort_index", th.sort_index}});
  }
  for (int64_t dev : gpu_pids) {
    metadata_event(w, "process_name", dev, 0, 0, {{"name", "GPU " + std::to_string(dev)}});
    metadata_event(w, "process_labels", dev, 0, 0, {{"labels", "GPU " + std::to_string(dev)}});
    metadata_event(w, "process_sort_index", dev, 0, 0, {{"sort_index", 0x1000000 + dev}});
  }
  for (const auto& [dev, stream] : gpu_streams) {
    metadata_event(w, "thread_name", dev, stream, 0, {{"name", "stream " + std::to_string(stream)}});
    metadata_event(w, "thread_sort_index", dev, stream, 0, {{"sort_index", stream}});
  }

  const bool record_shapes = t.metadata.is_object() && t.metadata.value("record_shapes", 0) != 0;
  const std::vector<ModuleArgs> modules = module_args(t);
  for (size_t i = 0; i < t.activities.size(); ++i) {
    const Activity& a = t.activities[i];
    w.begin("X", category_name(a.kind), a.name, a.pid, a.tid, start_of(i));
    w.dur(end_of(i) - start_of(i));
    Json args = op_args(a, record_shapes);
    if (modules[i].python_id > 0) {
      args["Python id"] = modules[i].python_id;
      if (modules[i].parent_id > 0) args["Python parent id"] = modules[i].parent_id;
      args["Python module id"] = modules[i].module_id;
    }
    if (!args.empty()) w.raw(", \"args\": " + args.dump(-1, ' ', false, Json::error_handler_t::replace));
    w.end();
  }
  const std::vector<const char*> categories = memory_categories(t.memory);
  for (size_t i = 0; i < t.memory.size(); ++i) {
    const MemoryEvent& m = t.memory[i];
    w.begin("i", "cpu_instant_event", "[memory]", m.pid, m.tid,
            options.whole_us ? us.memory_us[i] : m.time_ns - base);
    Json args = {{"Total Reserved", m.total_reserved},
                 {"Total Allocated", m.total_allocated},
                 {"Bytes", m.bytes},
                 {"Addr", m.addr},
                 {"Device Id", m.device_id},
                 {"Device Type", m.device_type}};
    if (categories[i] != nullptr) args["Category"] = categories[i];
    w.raw(", \"s\": \"t\", \"args\": " + args.dump());
    w.end();
  }
  for (const auto& f : t.flows) {
    if (f.from >= t.activities.size() || f.to >= t.activities.size()) continue;
    const Activity& src = t.activities[f.from];
    const Activity& dst = t.activities[f.to];
    w.begin("s", "ac2g", "ac2g", src.pid, src.tid, start_of(f.from));
    w.raw(", \"id\": " + std::to_string(f.id));
    w.end();
    w.begin("f", "ac2g", "ac2g", dst.pid, dst.tid, start_of(f.to));
    w.raw(", \"id\": " + std::to_string(f.id) + ", \"bp\": \"e\"");
    w.end();
  }
  const int64_t main_pid = cpu_pids.empty() ? 0 : *cpu_pids.begin();
  w.begin("i", nullptr, "Record Window End", main_pid, 0, options.whole_us ? us.window_end_us : end - base);
  w.raw(", \"s\": \"g\"");
  w.end();
  out += "\n  ],\n  \"traceName\": " + quote(options.trace_name) + "\n}\n";
  return out;
}

bool chrome_trace_gzip_available() {
#ifdef RT_HAS_ZLIB
  return true;
#else
  return false;
#endif
}

std::string gzip_compress(const std::string& data) {
#ifdef RT_HAS_ZLIB
  z_stream zs{};
  if (deflateInit2(&zs, Z_DEFAULT_COMPRESSION, Z_DEFLATED, 15 + 16, 8, Z_DEFAULT_STRATEGY) != Z_OK) {
    throw Error("gzip: deflateInit2 failed");
  }
  std::string out;
  out.resize(deflateBound(&zs, static_cast<uLong>(data.size())) + 32);
  zs.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(data.data()));
  zs.avail_in = static_cast<uInt>(data.size());
  zs.next_out = reinterpret_cast<Bytef*>(out.data());
  zs.avail_out = static_cast<uInt>(out.size());
  const int rc = deflate(&zs, Z_FINISH);
  const size_t produced = zs.total_out;
  deflateEnd(&zs);
  if (rc != Z_STREAM_END) throw Error("gzip: deflate failed (" + std::to_string(rc) + ")");
  out.resize(produced);
  return out;
#else
  (void)data;
  throw Error("gzip output requested (profiling.gzip = true) but this build has no zlib");
#endif
}

TraceFiles write_chrome_trace(const Timeline& t, const std::filesystem::path& dir, bool gzip,
                              ChromeTraceOptions options) {
  TraceFiles files;
  const int64_t unix_now = t.end_ns + t.unix_minus_steady_ns;
  const std::string stem = hostname() + "_" + std::to_string(getpid()) + "." + std::to_string(unix_now);
  files.trace = dir / "profiler_traces" / (stem + kTraceFileSuffix + (gzip ? ".gz" : ""));
  files.step_copy = dir / (profile_step_stem(t, options.file_tag) + ".json");
  if (options.trace_name.empty()) options.trace_name = files.trace.string();
  const std::string json = chrome_trace_json(t, options);
  write_file_atomic(files.trace, gzip ? gzip_compress(json) : json);
  // The same bytes under the RAVE guide's name: a hard link (a symbolic link where the
  // filesystem has none), not a second copy of a trace that can take megabytes. A gzipped
  // trace is other bytes: the step file is then written out.
  if (gzip) {
    write_file_atomic(files.step_copy, json);
  } else {
    link_file_atomic(files.trace, files.step_copy);
  }
  return files;
}

ChromeTraceOutput::ChromeTraceOutput(bool gzip, ChromeTraceOptions options)
    : gzip_(gzip), options_(std::move(options)) {
  if (gzip_ && !chrome_trace_gzip_available()) {
    throw Error("profiling.gzip = true but this build has no zlib; set profiling.gzip = false");
  }
}

void ChromeTraceOutput::write(const Timeline& timeline, const WindowContext& window, OutputResult& result) {
  ChromeTraceOptions options = options_;
  options.file_tag = window.file_tag;
  const TraceFiles files = write_chrome_trace(timeline, window.output_dir, gzip_, options);
  result.files = {files.trace, files.step_copy};
}

}  // namespace rt::prof
