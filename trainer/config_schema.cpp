#include "trainer/config_schema.h"

#include <cmath>
#include <cstdio>
#include <map>

namespace rt {
namespace {

// Fluent construction keeps the table below one line per key.
struct Spec : KeySpec {
  Spec(std::string k, KeyType t, ConfigValue def, std::string h) {
    key = std::move(k);
    type = t;
    default_value = std::move(def);
    help = std::move(h);
  }
  Spec& ge(double v) {
    min = v;
    min_exclusive = false;
    return *this;
  }
  Spec& gt(double v) {
    min = v;
    min_exclusive = true;
    return *this;
  }
  Spec& le(double v) {
    max = v;
    max_exclusive = false;
    return *this;
  }
  Spec& lt(double v) {
    max = v;
    max_exclusive = true;
    return *this;
  }
  Spec& one_of(std::vector<int64_t> v) {
    allowed = std::move(v);
    return *this;
  }
  Spec& is_odd() {
    odd = true;
    return *this;
  }
  Spec& is_even() {
    even = true;
    return *this;
  }
  Spec& cli(std::string f) {
    flag = std::move(f);
    return *this;
  }
};

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

std::vector<KeySpec> build_schema() {
  std::vector<Spec> s = {
      // [model] RAVE (defaults: acids-ircam/RAVE configs/v1.gin + v2.gin)
      E("model.family", "rave", {"rave", "ssm"}, "model family to train"),
      E("model.version", "v2", {"v1", "v2", "v3"}, "RAVE version (architecture and losses)"),
      I("model.capacity", 96, "RAVE channel capacity (base width of encoder/decoder)").ge(1),
      I("model.latent_size", 128, "RAVE latent dimensions").ge(1),
      I("model.n_band", 16, "PQMF bands").one_of({1, 2, 4, 8, 16, 32, 64}),
      IL("model.ratios", {4, 4, 4, 2}, "RAVE up/downsampling ratio per block").ge(1),
      ILL("model.dilations", {{1, 3, 9}, {1, 3, 9}, {1, 3, 9}, {1, 3}}, "RAVE residual dilations per block")
          .ge(1),
      I("model.kernel_size", 3, "RAVE convolution kernel size").ge(1).is_odd(),
      E("model.activation", "leaky_relu", {"leaky_relu", "snake"}, "RAVE activation (v3: snake)"),
      E("model.padding", "centered", {"centered", "causal"}, "convolution padding mode"),
      B("model.amplitude_modulation", true, "RAVE generator amplitude modulation"),
      B("model.adain", false, "AdaIN after encoder convs (v3; identity in training, shifts layer names)"),
      I("model.noise_bands", 0, "v1 noise generator bands (0 = off; v1: 5)").ge(0),
      IL("model.noise_ratios", {4, 4, 4}, "noise generator downsampling ratios").ge(1),
      E("model.discriminator", "period_scale", {"none", "period_scale", "descript"},
        "discriminator (v3: descript)"),
      I("model.discriminator_capacity", 96, "discriminator base channels (RAVE ties it to capacity)").ge(1),
      I("model.discriminator_n_layers", 4, "discriminator layers").ge(1),
      IL("model.periods", {2, 3, 5, 7, 11}, "multi-period discriminator periods").ge(1),
      I("model.n_scales", 3, "multi-scale discriminator scales").ge(0),
      IL("model.mrd_n_ffts", {2048, 1024, 512}, "multi-resolution discriminator FFT sizes").ge(1),
      IL("model.stft_scales", {2048, 1024, 512, 256, 128}, "multiscale spectral distance scales").ge(1),
      // [model] SSM (defaults: Melina-Jingting/foundational_ssm, NLB MC_Maze)
      E("model.variant", "s5_maze", {"s5_maze", "foundational"}, "SSM decoder variant"),
      I("model.input_dim", 182, "SSM input channels (neural units)").ge(1),
      I("model.output_dim", 2, "SSM output channels (behaviour)").ge(1),
      I("model.d_model", 64, "SSM model width").ge(1),
      I("model.state_dim", 64, "SSM state size P").ge(2).is_even(),
      I("model.n_layers", 1, "SSM layers").ge(1),
      F("model.dropout", 0.05, "SSM dropout probability").ge(0).lt(1),
      E("model.discretization", "zoh", {"zoh", "bilinear"}, "SSM discretization"),
      E("model.scan", "parallel", {"parallel", "sequential", "fused"}, "SSM scan implementation (fused: CPU kernel)"),
      F("model.dt_min", 0.001, "SSM minimum initial time step").gt(0),
      F("model.dt_max", 0.1, "SSM maximum initial time step (> dt_min)").gt(0),
      I("model.ssm_blocks", 1, "SSM blocks (block-diagonal HiPPO init)").ge(1),
      I("model.context_dim", 8, "foundational SSM session context size").ge(0),
      B("model.conj_sym", true, "SSM conjugate symmetry (half the state stored)"),
      // [data]
      S("data.db_path", "", "LMDB dataset directory").cli("db_path"),
      E("data.kind", "audio", {"audio", "neural"}, "dataset kind"),
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
      F("data.slowdown_ms", 0.0, "artificial per-example loading delay in ms (bottleneck tests)").ge(0),
      // [train]
      S("train.name", "", "run name (\"\" = config file stem)").cli("name"),
      S("train.out_path", "runs", "folder that holds run directories").cli("out_path"),
      I("train.max_steps", 6000000, "training steps").ge(1).cli("max_steps"),
      I("train.batch", 8, "batch size").ge(1).cli("batch"),
      I("train.val_every", 10000, "validate every N steps").ge(1).cli("val_every"),
      I("train.save_every", 500000, "save step_<N>.ckpt every N steps").ge(1).cli("save_every"),
      S("train.ckpt", "", "resume from a checkpoint path, or \"last\" (<out_path>/latest)").cli("ckpt"),
      E("train.device", "auto", {"auto", "cpu", "cuda"}, "compute device").cli("device"),
      I("train.threads", 0, "intra-op CPU threads (0 = all cores)").ge(0).cli("threads"),
      I("train.seed", 0, "random seed").cli("seed"),
      I("train.log_every", 100, "log losses every N steps").ge(1).cli("log_every"),
      F("train.lr", 1e-3, "learning rate").gt(0),
      I("train.phase_1_duration", 1000000, "RAVE: steps of phase 1 (representation learning)").ge(0),
      I("train.update_discriminator_every", 4, "RAVE: discriminator update period").ge(1),
      F("train.beta_start", 1e-6, "RAVE: KL weight at step 0").gt(0),
      F("train.beta_end", 5e-2, "RAVE: KL weight after warmup").gt(0),
      I("train.beta_warmup_steps", 20000, "RAVE: KL weight warmup steps").ge(0),
      F("train.feature_matching_weight", 20.0, "RAVE: feature matching loss weight").ge(0),
      F("train.adam_beta1", 0.5, "Adam beta1").ge(0).lt(1),
      F("train.adam_beta2", 0.9, "Adam beta2").ge(0).lt(1),
      F("train.lr_end_factor", 0.1, "RAVE: LinearLR end factor over phase 1").gt(0).le(1),
      F("train.discriminator_lr", 1e-4, "RAVE: discriminator learning rate").gt(0),
      F("train.weight_decay", 0.01, "SSM: AdamW weight decay").ge(0),
      B("train.fused_optimizer", true,
        "one-pass Adam/AdamW update per parameter and set-to-none gradients (false: LibTorch's stock optimizers and zero_grad)"),
      E("train.lr_schedule", "constant", {"constant", "cosine"}, "SSM: learning rate schedule"),
      I("train.warmup_steps", 0, "SSM: linear learning rate warmup steps").ge(0),
      I("train.inject_nan_at_step", -1, "test/diagnostic: fill the batch of step N with NaN (-1 = off)").ge(-1),
      // [profiling] (seeds: all five guides)
      B("profiling.timing", false, "per-step timing profile (timing_profile.json)")
          .cli("enable_timing_profiling"),
      B("profiling.memory", false, "memory profile (memory_profile.json)").cli("enable_memory_profiling"),
      B("profiling.enabled", false, "detailed operator tracing (Chrome trace)").cli("enable_profiling"),
      I("profiling.profile_steps", 100, "traced steps: active = N after skip_first")
          .ge(1)
          .cli("profile_steps"),
      S("profiling.output_dir", "", "profiling output folder (\"\" = the run directory)"),
      I("profiling.log_every", 0, "profiling log period (0 = train.log_every)").ge(0),
      I("profiling.timing_every", 1, "record timing every N steps").ge(1),
      I("profiling.memory_every", 10, "record memory every N steps").ge(1),
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

// "" when `x` satisfies the bounds/parity/allowed set of `s`.
std::string check_number(const KeySpec& s, double x, bool is_int) {
  bool ok = true;
  if (s.min) ok = ok && (s.min_exclusive ? x > *s.min : x >= *s.min);
  if (s.max) ok = ok && (s.max_exclusive ? x < *s.max : x <= *s.max);
  if (is_int) {
    const auto i = static_cast<int64_t>(x);
    if (s.odd) ok = ok && (i % 2 != 0);
    if (s.even) ok = ok && (i % 2 == 0);
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
      std::string t = odd ? "an odd integer" : even ? "an even integer" : "an integer";
      return range.empty() ? t : t + " " + range;
    }
    case KeyType::Float:
      return range.empty() ? "a number" : "a number " + range;
    case KeyType::IntList:
      return "a list of integers" + (range.empty() ? "" : " " + range) + ", e.g. [4, 4, 2]";
    case KeyType::IntListList:
      return "a list of integer lists" + (range.empty() ? "" : " (integers " + range + ")") +
             ", e.g. [[1, 3, 9], [1, 3]]";
    case KeyType::FloatList:
      return "a list of numbers" + (range.empty() ? "" : " " + range) + ", e.g. [0.5, 1.0]";
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
      for (const auto& c : choices)
        if (c == s) return "";
      return "not one of the choices";
    }
    case KeyType::Int:
      return check_number(*this, static_cast<double>(std::get<int64_t>(v)), true);
    case KeyType::Float:
      return check_number(*this, std::get<double>(v), false);
    case KeyType::IntList:
      for (int64_t x : std::get<std::vector<int64_t>>(v))
        if (!check_number(*this, static_cast<double>(x), true).empty()) return "element out of range";
      return "";
    case KeyType::IntListList:
      for (const auto& row : std::get<std::vector<std::vector<int64_t>>>(v))
        for (int64_t x : row)
          if (!check_number(*this, static_cast<double>(x), true).empty()) return "element out of range";
      return "";
    case KeyType::FloatList:
      for (double x : std::get<std::vector<double>>(v))
        if (!check_number(*this, x, false).empty()) return "element out of range";
      return "";
  }
  return "";
}

const std::vector<KeySpec>& config_schema() {
  static const std::vector<KeySpec> schema = build_schema();
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
  static const std::map<std::string, const KeySpec*> index = [] {
    std::map<std::string, const KeySpec*> m;
    for (const auto& s : config_schema()) m[s.key] = &s;
    return m;
  }();
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
