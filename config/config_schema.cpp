#include "config/config_schema.h"

#include <cmath>
#include <cstdio>
#include <map>
#include <mutex>

#include "config/family_registry.h"

namespace rt {
namespace keys {

Spec::Spec(std::string k, KeyType t, ConfigValue def, std::string h) {
  key = std::move(k);
  type = t;
  default_value = std::move(def);
  help = std::move(h);
}
Spec& Spec::ge(double v) {
  min = v;
  min_exclusive = false;
  return *this;
}
Spec& Spec::gt(double v) {
  min = v;
  min_exclusive = true;
  return *this;
}
Spec& Spec::le(double v) {
  max = v;
  max_exclusive = false;
  return *this;
}
Spec& Spec::lt(double v) {
  max = v;
  max_exclusive = true;
  return *this;
}
Spec& Spec::one_of(std::vector<int64_t> v) {
  allowed = std::move(v);
  return *this;
}
Spec& Spec::is_odd() {
  odd = true;
  return *this;
}
Spec& Spec::multiple_of(int64_t n) {
  divisor = n;
  return *this;
}
Spec& Spec::not_empty() {
  non_empty = true;
  return *this;
}
Spec& Spec::cli(std::string f) {
  flag = std::move(f);
  return *this;
}
Spec& Spec::defines_architecture() {
  architecture = true;
  return *this;
}

Spec B(std::string k, bool d, std::string h) { return Spec(std::move(k), KeyType::Bool, d, std::move(h)); }
Spec I(std::string k, int64_t d, std::string h) { return Spec(std::move(k), KeyType::Int, d, std::move(h)); }
Spec F(std::string k, double d, std::string h) { return Spec(std::move(k), KeyType::Float, d, std::move(h)); }
Spec S(std::string k, std::string d, std::string h) {
  return Spec(std::move(k), KeyType::String, std::move(d), std::move(h));
}
Spec E(std::string k, std::string d, std::vector<std::string> c, std::string h) {
  Spec s(std::move(k), KeyType::Enum, std::move(d), std::move(h));
  s.choices = std::move(c);
  return s;
}
Spec IL(std::string k, std::vector<int64_t> d, std::string h) {
  return Spec(std::move(k), KeyType::IntList, std::move(d), std::move(h));
}
Spec ILL(std::string k, std::vector<std::vector<int64_t>> d, std::string h) {
  return Spec(std::move(k), KeyType::IntListList, std::move(d), std::move(h));
}
Spec FL(std::string k, std::vector<double> d, std::string h) {
  return Spec(std::move(k), KeyType::FloatList, std::move(d), std::move(h));
}
Spec Field(std::string k, std::string h) {
  return Spec(std::move(k), KeyType::Int, int64_t{0}, std::move(h));
}

}  // namespace keys

namespace {

using namespace keys;

// The keys every family shares. Each family declares its own (families/rave/rave_family.cpp,
// families/ssm/ssm_family.cpp); model.family's choices are the registered families.
std::vector<KeySpec> build_common_schema() {
  std::vector<Spec> s = {
      // [model]
      E("model.family", "rave", {}, "model family to train (its keys are listed under its name)"),
      // [data]
      S("data.db_path", "", "LMDB dataset directory").cli("db_path"),
      E("data.kind", "audio", {"audio", "neural"}, "dataset kind"),  // DataKind's names
      I("data.n_signal", 131072, "samples per training example").ge(1).cli("n_signal"),
      I("data.channels", 0, "audio channels (0 = from the database)").ge(0),
      I("data.workers", 2, "loader worker threads (0 = load on the training thread)").ge(0).cli("workers"),
      I("data.prefetch", 4, "batches queued per loader").ge(1),
      B("data.phase_mangle", true, "random phase mangling augmentation"),
      F("data.phase_mangle_p", 0.8, "phase mangling probability").ge(0).le(1),
      B("data.dequantize", true, "dequantization noise augmentation"),
      F("data.val_fraction", 0.02, "fraction of the database held out for validation").gt(0).lt(1),
      I("data.val_max", 1000, "maximum validation examples").ge(1),
      I("data.split_seed", 42, "seed of the train/validation split"),
      F("data.smoothing_sigma_ms", 40.0, "neural: Gaussian spike smoothing sigma in ms").ge(0),
      B("data.normalize", false, "peak-normalise every example, at most +30 dB (RAVE's --normalize)")
          .cli("normalize"),
      B("data.derivative", false,
        "train on the signal's derivative (x[n] - x[n-1]) / 2; validation audio is integrated back (RAVE's "
        "--derivative)")
          .cli("derivative"),
      FL("data.rand_pitch", {},
         "RAVE's --rand_pitch LO,HI: with probability 0.5 resample each record by a ratio in [LO, HI] before "
         "the crop (scipy's resample_poly); [] = off")
          .cli("rand_pitch"),
      S("data.augment", "",
        "augmentations, comma-separated, applied in order: mute, compress, gain (RAVE's --augment files; "
        "`--augment NAME` appends one), normalize_ambient (normalize_ambient.toml); data/augment.h"),
      F("data.slowdown_ms", 0.0, "artificial per-example loading delay in ms (bottleneck tests)").ge(0),
      // [train]
      S("train.name", "", "run name (\"\" = config file stem)").cli("name"),
      S("train.out_path", "runs", "folder that holds run directories").cli("out_path"),
      I("train.max_steps", 6000000, "training steps").ge(1).cli("max_steps"),
      I("train.batch", 8, "batch size").ge(1).cli("batch"),
      I("train.val_every", 10000, "validate every N steps").ge(1).cli("val_every"),
      I("train.save_every", 500000, "save step_<N>.ckpt every N steps").ge(1).cli("save_every"),
      S("train.ckpt", "", "resume from a checkpoint path, or \"last\" (<out_path>/latest)").cli("ckpt"),
      E("train.device", "auto", {"auto", "cpu", "cuda", "cuda:N"},
        "compute device: cuda = a rank's own GPU (LOCAL_RANK), cuda:N = GPU N (one process; --gpu N sets it, "
        "as "
        "RAVE's --gpu)")
          .cli("device"),
      E("train.precision", "fp32", {"fp32", "bf16", "fp16"},
        "training precision, as torch.autocast: bf16 / fp16 run each step's forward pass and loss under "
        "autocast "
        "(parameters, gradients, optimizer state and checkpoints stay float32); fp16 (CUDA only) scales the "
        "loss "
        "as torch.cuda.amp.GradScaler and skips a step whose gradients overflow")
          .cli("precision"),
      B("train.tf32", true,
        "CUDA: float32 matmuls and convolutions may use TF32 tensor cores "
        "(torch.set_float32_matmul_precision("
        "'high'), as RAVE's train.py); false: 'highest'"),
      B("train.cudnn_benchmark", true,
        "CUDA: cuDNN times its convolution algorithms for each new input shape and keeps the fastest "
        "(torch.backends.cudnn.benchmark, as RAVE's train.py)"),
      I("train.threads", 0, "intra-op CPU threads (0 = all cores)").ge(0).cli("threads"),
      I("train.seed", 0, "random seed").cli("seed"),
      I("train.log_every", 100, "log losses every N steps").ge(1).cli("log_every"),
      B("train.progress", true,
        "print the step line every train.log_every steps, with phase, elapsed time and ETA (RAVE's "
        "--progress; "
        "false: TensorBoard and the summary only)")
          .cli("progress"),
      B("train.smoke_test", false,
        "run a few steps of each training phase (RAVE: phase 1 and phase 2 with a discriminator update), one "
        "short validation and the final checkpoint, then report step times, peak memory and the projected "
        "duration of train.max_steps (RAVE's --smoke_test); before a later phase starts (RAVE's phase 2), "
        "it forecasts that phase's peak memory and says what to change when it will not fit")
          .cli("smoke_test"),
      F("train.smoke_test_memory_gib", 0.0,
        "--smoke_test: forecast a later phase's peak memory against this many GiB (a smaller card than the "
        "one at hand; exit status 1 when it will not fit); 0 = the device's own free memory")
          .ge(0)
          .cli("smoke_test_memory_gib"),
      F("train.lr", 1e-3, "learning rate").gt(0),
      B("train.retain_freed_memory", true,
        "keep the memory a step frees for the next step (glibc malloc: M_MMAP_THRESHOLD 32 MiB, "
        "M_TRIM_THRESHOLD "
        "1 GiB) instead of returning it to the system and faulting it in again; false: the C library's "
        "defaults. "
        "GLIBC_TUNABLES with glibc.malloc.* wins"),
      B("train.fused_optimizer", true,
        "one-pass Adam/AdamW update per parameter and set-to-none gradients (false: LibTorch's stock "
        "optimizers and zero_grad)"),
      // [train.distributed] (torchrun / SLURM / --nproc_per_node; docs/distributed.md)
      E("train.distributed.backend", "auto", {"auto", "gloo", "nccl"},  // dist::Backend's names
        "data-parallel backend: auto = NCCL on CUDA, Gloo on CPU"),
      E("train.distributed.batch_norm", "sync", {"sync", "local"},
        "data-parallel BatchNorm (SSM blocks, RAVE v1 encoder): sync = statistics over every rank's batch "
        "(SyncBatchNorm: N ranks x B train as 1 x N*B); local = each rank's own batch (DDP's default: "
        "no collective in forward or backward; rank 0's running statistics are broadcast before each "
        "validation)"),
      F("train.distributed.bucket_mb", 25.0,
        "data-parallel: cap of a gradient bucket (one all-reduce) in MiB, DDP's bucket_cap_mb; smaller "
        "buckets "
        "start their all-reduce earlier in backward, at one more collective each")
          .gt(0)
          .le(4096),
      F("train.distributed.first_bucket_mb", 1.0,
        "data-parallel: cap of the first gradient bucket (the last layers' gradients, ready first) in MiB; "
        "DDP's 1 MiB. A model whose gradients fit in it gets a single all-reduce after backward: lower it to "
        "overlap")
          .gt(0)
          .le(4096),
      I("train.distributed.small_all_reduce_kib", 1024,
        "data-parallel, Gloo: an all-reduce whose other ranks' data come to at most this many KiB ((world - "
        "1) x "
        "the tensor's size) runs as one all-gather and a sum in rank order on every rank: world - 1 "
        "transfers "
        "instead of the ring's 4 x (world - 1), the same sum on every rank (for 2 ranks, the ring's sum and "
        "bytes); larger ones keep Gloo's ring. 0 = always the ring. Unused with NCCL")
          .ge(0)
          .le(1 << 20),
      E("train.distributed.gloo_loop", "batch", {"batch", "normal"},
        "data-parallel, Gloo: scheduling of Gloo's network event-loop thread. batch = SCHED_BATCH: a message "
        "that arrives does not preempt the thread running on that core (which may be Gloo's own worker, "
        "holding the connection's lock that the loop then spins on); normal = the default policy"),
      E("train.distributed.wait", "auto", {"auto", "active", "passive"},  // dist::WaitPolicy's names

        "data-parallel: how a rank waits for a collective: active = polls, yielding its core, for up to 50 "
        "ms "
        "before sleeping (it sees the completion at once instead of being woken, as MPI and "
        "OMP_WAIT_POLICY=active do); passive = sleeps at "
        "once; auto = active with Gloo when this host's ranks x intra-op threads fit its cores (loader "
        "workers, "
        "which active waits yield to, not counted), else passive (NCCL: always passive)"),
      I("train.distributed.timeout_s", 300,
        "data-parallel: bound on the rendezvous, every collective and the wait for a lost rank, in seconds")
          .ge(1)
          .le(86400),
      // [profiling] (seeds: all five guides)
      B("profiling.timing", false, "per-step timing profile (timing_profile.json)")
          .cli("enable_timing_profiling"),
      B("profiling.memory", false, "memory profile (memory_profile.json)").cli("enable_memory_profiling"),
      B("profiling.enabled", false, "detailed operator tracing (Chrome trace)").cli("enable_profiling"),
      I("profiling.profile_steps", 0,
        "traced steps: sets active = N, wait = 0, repeat = 1 (config.toml records those; 0 = the schedule "
        "keys decide)")
          .ge(0)
          .cli("profile_steps"),
      S("profiling.output_dir", "", "profiling output folder (\"\" = the run directory)"),
      I("profiling.log_every", 0, "profiling log period (0 = train.log_every)").ge(0),
      I("profiling.timing_every", 1, "record timing every N steps").ge(1),
      I("profiling.memory_every", 10, "record memory every N steps").ge(1),
      I("profiling.profile_part_mb", 64,
        "timing/memory profile: rotate the file into <name>.part<K>.json at this size in MiB (0 = one file, "
        "unbounded)")
          .ge(0),
      I("profiling.profile_parts", 8,
        "timing/memory profile: files kept, the current one included; the oldest part goes first "
        "(bound: profile_parts × profile_part_mb per profile)")
          .ge(2),
      I("profiling.wait", 0, "schedule: steps skipped at the start of each cycle").ge(0),
      I("profiling.warmup", 1, "schedule: steps traced but discarded per cycle").ge(0),
      I("profiling.active", 3, "schedule: steps recorded per cycle").ge(1),
      I("profiling.repeat", 1, "schedule: cycles (0 = until the end)").ge(0),
      I("profiling.skip_first", 10, "schedule: steps skipped before the first cycle").ge(0),
      B("profiling.record_shapes", false, "record operator input shapes"),
      B("profiling.profile_memory", false, "record operator memory allocations"),
      B("profiling.with_stack", false, "record call stacks (collapsed stacks file)"),
      B("profiling.with_modules", false, "record module hierarchy"),
      E("profiling.sort_by", "self_cpu_time_total",
        {"self_cpu_time_total", "cpu_time_total", "self_cuda_time_total", "cuda_time_total", "count",
         "self_cpu_memory_usage"},
        "operator table sort column"),
      I("profiling.row_limit", 10, "operator table rows").ge(1),
      B("profiling.gzip", false, "gzip the trace files"),
      I("profiling.memory_snapshot_step", -1,
        "CUDA: write memory_snapshot_step<N>.pickle (the caching allocator's history, for "
        "https://pytorch.org/memory_viz) after step N (-1 = never); recording starts with the run")
          .ge(-1),
      B("profiling.memory_snapshot_on_oom", false,
        "CUDA: record the caching allocator's history and write memory_snapshot_oom.pickle when a step runs "
        "out of memory"),
      I("profiling.memory_snapshot_entries", 100000,
        "CUDA: allocation and free events a memory snapshot keeps (the most recent)")
          .ge(1),
      B("profiling.whole_us_timestamps", true,
        "trace times in whole µs, nesting kept, so Holistic Trace Analysis's default rounding leaves them "
        "alone (false: ns resolution, which HTA's call graph rejects unless HTA_DISABLE_NS_ROUNDING=1)"),
  };
  return std::vector<KeySpec>(s.begin(), s.end());
}

std::string fmt_num(double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%g", v);
  return buf;
}

std::string range_text(const KeySpec& s) {
  if (s.min && s.max) {
    return "in " + std::string(s.min_exclusive ? "(" : "[") + fmt_num(*s.min) + ", " + fmt_num(*s.max) +
           (s.max_exclusive ? ")" : "]");
  }
  if (s.min) return std::string(s.min_exclusive ? "> " : ">= ") + fmt_num(*s.min);
  if (s.max) return std::string(s.max_exclusive ? "< " : "<= ") + fmt_num(*s.max);
  return "";
}

std::string join(const std::vector<std::string>& v) {
  std::string out;
  for (size_t i = 0; i < v.size(); ++i) out += (i ? ", " : "") + v[i];
  return out;
}

// "" when `x` satisfies the bounds/parity/divisor/allowed set of `s`.
std::string check_number(const KeySpec& s, double x, bool is_int) {
  bool ok = true;
  if (s.min) ok = ok && (s.min_exclusive ? x > *s.min : x >= *s.min);
  if (s.max) ok = ok && (s.max_exclusive ? x < *s.max : x <= *s.max);
  if (is_int) {
    const auto i = static_cast<int64_t>(x);
    if (s.odd) ok = ok && (i % 2 != 0);
    if (s.divisor > 0) ok = ok && (i % s.divisor == 0);
    if (!s.allowed.empty()) {
      bool found = false;
      for (int64_t a : s.allowed) found = found || a == i;
      ok = ok && found;
    }
  } else {
    ok = ok && std::isfinite(x);
  }
  return ok ? "" : "out of range";
}

}  // namespace

const char* key_type_name(KeyType t) {
  switch (t) {
    case KeyType::Bool:
      return "bool";
    case KeyType::Int:
      return "integer";
    case KeyType::Float:
      return "float";
    case KeyType::String:
      return "string";
    case KeyType::Enum:
      return "enum";
    case KeyType::IntList:
      return "integer list";
    case KeyType::IntListList:
      return "list of integer lists";
    case KeyType::FloatList:
      return "float list";
  }
  return "?";
}

std::string KeySpec::allowed_text() const {
  const std::string range = range_text(*this);
  switch (type) {
    case KeyType::Bool:
      return "true or false";
    case KeyType::String:
      return "a string";
    case KeyType::Enum:
      return "one of " + join(choices);
    case KeyType::Int: {
      if (!allowed.empty()) {
        std::vector<std::string> a;
        for (int64_t v : allowed) a.push_back(std::to_string(v));
        return "an integer, one of " + join(a);
      }
      std::string t = odd ? "an odd integer" : divisor == 2 ? "an even integer" : "an integer";
      if (divisor > 2) t += " multiple of " + std::to_string(divisor);
      return range.empty() ? t : t + " " + range;
    }
    case KeyType::Float:
      return range.empty() ? "a number" : "a number " + range;
    case KeyType::IntList:
    case KeyType::IntListList: {
      std::string each = range;
      if (divisor > 0)
        each += std::string(each.empty() ? "" : ", ") + "multiples of " + std::to_string(divisor);
      const std::string list = non_empty ? "a non-empty list of " : "a list of ";
      if (type == KeyType::IntList)
        return list + "integers" + (each.empty() ? "" : " " + each) + ", e.g. [4, 4, 2]";
      if (non_empty)
        each = "each non-empty" + std::string(each.empty() ? "" : "; integers " + each);
      else if (!each.empty())
        each = "integers " + each;
      return list + "integer lists" + (each.empty() ? "" : " (" + each + ")") + ", e.g. [[1, 3, 9], [1, 3]]";
    }
    case KeyType::FloatList:
      return std::string(non_empty ? "a non-empty list of numbers" : "a list of numbers") +
             (range.empty() ? "" : " " + range) + ", e.g. [0.5, 1.0]";
  }
  return "";
}

std::string KeySpec::check_range(const ConfigValue& v) const {
  switch (type) {
    case KeyType::Bool:
    case KeyType::String:
      return "";
    case KeyType::Enum: {
      const auto& s = std::get<std::string>(v);
      for (const auto& c : choices) {
        if (c == s) return "";
        // "cuda:N": the prefix and a whole number (N is not a spelling of its own).
        if (c.size() > 2 && c.compare(c.size() - 2, 2, ":N") == 0 && s.size() > c.size() - 1 &&
            s.compare(0, c.size() - 1, c, 0, c.size() - 1) == 0 && s.size() - (c.size() - 1) <= 4 &&
            s.find_first_not_of("0123456789", c.size() - 1) == std::string::npos)
          return "";
      }
      return "not one of the choices";
    }
    case KeyType::Int:
      return check_number(*this, static_cast<double>(std::get<int64_t>(v)), true);
    case KeyType::Float:
      return check_number(*this, std::get<double>(v), false);
    case KeyType::IntList: {
      const auto& list = std::get<std::vector<int64_t>>(v);
      if (non_empty && list.empty()) return "empty";
      for (int64_t x : list)
        if (!check_number(*this, static_cast<double>(x), true).empty()) return "element out of range";
      return "";
    }
    case KeyType::IntListList: {
      const auto& rows = std::get<std::vector<std::vector<int64_t>>>(v);
      if (non_empty && rows.empty()) return "empty";
      for (const auto& row : rows) {
        if (non_empty && row.empty()) return "empty row";
        for (int64_t x : row)
          if (!check_number(*this, static_cast<double>(x), true).empty()) return "element out of range";
      }
      return "";
    }
    case KeyType::FloatList: {
      const auto& list = std::get<std::vector<double>>(v);
      if (non_empty && list.empty()) return "empty";
      for (double x : list)
        if (!check_number(*this, x, false).empty()) return "element out of range";
      return "";
    }
  }
  return "";
}

namespace {

// The merged schema: the common keys, then each registered family's as it registers.
struct SchemaStore {
  std::deque<KeySpec> specs;
  std::map<std::string, const KeySpec*> index;
  KeySpec* family = nullptr;  // model.family, whose choices follow the registry
  size_t families = 0;        // registrations merged so far
};

// Registrations normally all happen at the start of main(); the lock keeps a late one from
// racing with another thread's lookup.
SchemaStore& synced_store() {
  static SchemaStore store;
  static std::mutex mutex;
  std::lock_guard<std::mutex> lock(mutex);
  if (store.specs.empty()) {
    for (const auto& spec : common_config_schema()) {
      store.specs.push_back(spec);
      store.index[spec.key] = &store.specs.back();
      if (spec.key == "model.family") store.family = &store.specs.back();
    }
  }
  const auto& families = model_families();
  if (store.families < families.size()) {
    for (; store.families < families.size(); ++store.families) {
      for (const auto& spec : families[store.families].keys) {
        store.specs.push_back(spec);
        store.index[spec.key] = &store.specs.back();
      }
    }
    store.family->choices = model_family_names();
  }
  return store;
}

}  // namespace

const std::deque<KeySpec>& config_schema() { return synced_store().specs; }

const std::vector<KeySpec>& common_config_schema() {
  static const std::vector<KeySpec> schema = build_common_schema();
  return schema;
}

const std::vector<AliasSpec>& config_aliases() {
  // The profiling guides' spellings (Lightning, JAX), mapped onto our keys.
  static const std::vector<AliasSpec> aliases = {
      {"profiling.wait_steps", "profiling.wait", AliasKind::Rename, "Lightning spelling of wait"},
      {"profiling.warmup_steps", "profiling.warmup", AliasKind::Rename, "Lightning spelling of warmup"},
      {"profiling.active_steps", "profiling.active", AliasKind::Rename, "Lightning spelling of active"},
      {"profiling.repeat_cycles", "profiling.repeat", AliasKind::Rename, "Lightning spelling of repeat"},
      {"profiling.trace_memory", "profiling.profile_memory", AliasKind::Rename,
       "JAX spelling of profile_memory"},
      {"profiling.profile_every_n_steps", "profiling.memory_every", AliasKind::Rename,
       "JAX spelling of memory_every"},
      {"profiling.log_dir", "profiling.output_dir", AliasKind::Rename, "JAX spelling of output_dir"},
      {"profiling.start_step", "profiling.skip_first", AliasKind::Rename, "JAX spelling of skip_first"},
      {"profiling.end_step", "profiling.active", AliasKind::EndStep,
       "JAX: last traced step; sets active = end_step - start_step (needs start_step)"},
      {"profiling.schedule_every_n_steps", "profiling.wait", AliasKind::CycleLength,
       "Lightning: cycle length; sets wait = n - warmup - active"},
  };
  return aliases;
}

const std::vector<std::string>& config_sections() {
  static const std::vector<std::string> sections = {"model", "data", "train", "profiling"};
  return sections;
}

const KeySpec* find_key_spec(const std::string& key) {
  const auto& index = synced_store().index;
  auto it = index.find(key);
  return it == index.end() ? nullptr : it->second;
}

const AliasSpec* find_alias_spec(const std::string& key) {
  for (const auto& a : config_aliases())
    if (a.alias == key) return &a;
  return nullptr;
}

const KeySpec& derived_alias_value_spec(const AliasSpec& alias) {
  static const std::map<std::string, KeySpec> specs = [] {
    std::map<std::string, KeySpec> m;
    for (const auto& a : config_aliases()) {
      if (a.kind == AliasKind::Rename) continue;
      m.emplace(a.alias, I(a.alias, 1, a.help).ge(1));
    }
    return m;
  }();
  return specs.at(alias.alias);
}

std::vector<std::string> all_key_names() {
  std::vector<std::string> names;
  for (const auto& s : config_schema()) names.push_back(s.key);
  for (const auto& a : config_aliases()) names.push_back(a.alias);
  return names;
}

}  // namespace rt
