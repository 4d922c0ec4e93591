#include "config/cli.h"

#include <CLI/CLI.hpp>
#include <algorithm>
#include <cctype>
#include <map>
#include <set>

#include "config/config_reference.h"
#include "config/config_stack.h"
#include "config/config_value.h"
#include "util/error.h"

namespace rt {
namespace {

const char* kFooter =
    R"(Config keys: every key of the [model] [data] [train] [profiling] sections can be set with
  --section.key VALUE | --section.key=VALUE | section.key=VALUE | --override section.key=VALUE
Precedence: built-in defaults < --config files (repeatable, stacked in order) < flags and overrides in
  command-line order (later wins).
Bools: true/false/True/False/1/0/yes/no/on/off; a bare bool flag (--profiling.record_shapes) means true.
Lists: --model.ratios [4,4,2] (or 4,4,2); lists of lists: --model.dilations [[1,3,9],[1,3]].
`train --config NAME --print_config` prints every key with its value, meaning, range and default.
Aliases (the guides' spellings): profiling.wait_steps/warmup_steps/active_steps/repeat_cycles,
  trace_memory (profile_memory), profile_every_n_steps (memory_every), log_dir (output_dir),
  start_step (skip_first), end_step (active = end_step - start_step),
  schedule_every_n_steps (wait = n - warmup - active).
Long runs: timing/memory profiles stream to disk and rotate into <name>.part<K>.json at
  profiling.profile_part_mb (64 MiB), keeping profiling.profile_parts (8) files per profile.
Signals: Ctrl-C, SIGTERM, SIGHUP and SIGQUIT stop after the current step with every file written
  (exit 130, 143, 129, 131); SIGUSR1 writes a checkpoint now and training goes on.
)";

// The CLI11 app and which option sets which key.
struct Parser {
  CLI::App app{"Train a RAVE audio autoencoder or an SSM neural decoder, with built-in profiling.", "train"};
  CLI::Option* config = nullptr;
  CLI::Option* override_opt = nullptr;
  CLI::Option* gpu = nullptr;
  CLI::Option* positional = nullptr;
  CLI::Option* augment = nullptr;
  CLI::Option* summary = nullptr;
  CLI::Option* print_config = nullptr;
  std::map<CLI::Option*, std::string> option_key;  // dedicated and --section.key options
  std::map<CLI::Option*, std::string> option_flag;
  std::set<std::string> bool_flags, value_flags, plain_flags;  // with leading dashes

  Parser() {
    app.set_help_flag("-h,--help", "Print this help and exit");
    app.footer(std::string(kFooter) + rave_configs_help() + family_keys_help());
    config =
        app.add_option("--config",
                       "Config file path, or a name (v3, v3.toml) looked up in configs/; repeatable: later "
                       "files overlay earlier ones key by key, as RAVE stacks gin files (--config v2 "
                       "--config causal); a file already in the stack (--config v3 --config v2: v3 "
                       "includes v2) is refused")
            ->type_name("PATH|NAME")
            ->multi_option_policy(CLI::MultiOptionPolicy::TakeAll);
    value_flags.insert("--config");
    for (const auto& spec : config_schema()) {
      if (spec.flag.empty()) continue;
      const bool is_bool = spec.type == KeyType::Bool;
      // const: CLI11 binds a non-const std::string argument as the option's target variable.
      const std::string desc = spec.help + " [" + spec.key + "; " + spec.allowed_text() + "]";
      auto* o = app.add_option("--" + spec.flag, desc)
                    ->multi_option_policy(CLI::MultiOptionPolicy::TakeAll)
                    ->type_name(is_bool                     ? "[BOOL]"
                                : spec.type == KeyType::Int ? "INT"
                                                            : "VALUE");
      add_key_option(o, spec.key, "--" + spec.flag, is_bool);
    }
    override_opt = app.add_option("--override", "Set any key: --override section.key=value (repeatable)")
                       ->type_name("KEY=VALUE")
                       ->multi_option_policy(CLI::MultiOptionPolicy::TakeAll);
    value_flags.insert("--override");
    gpu = app.add_option(
                 "--gpu",
                 "RAVE's flag: train on GPU N (train.device = cuda:N); -1 = on the CPU (train.device = cpu)")
              ->type_name("N")
              ->multi_option_policy(CLI::MultiOptionPolicy::TakeAll);
    value_flags.insert("--gpu");
    augment =
        app.add_option("--augment",
                       "RAVE's --augment: append an augmentation to data.augment (mute, compress, gain; "
                       "repeatable, applied in order)")
            ->type_name("NAME")
            ->multi_option_policy(CLI::MultiOptionPolicy::TakeAll);
    value_flags.insert("--augment");
    // Taken out by main() before parsing (distributed/local_launcher.h); listed for --help.
    app.add_option(
           "--nproc_per_node",
           "Data-parallel: start N ranks of this training on this machine (as torchrun --nproc_per_node N; "
           "train.distributed.* keys; docs/distributed.md)")
        ->type_name("N");
    value_flags.insert("--nproc_per_node");
    summary = app.add_flag("--summary", "Print the model's modules with parameter counts and exit");
    print_config = app.add_flag("--print_config", "Print the fully resolved config (TOML) and exit");
    app.add_flag("--config_reference",
                 "Print the reference of every config key (Markdown: docs/config.md) and exit");
    plain_flags = {"--summary", "--print_config", "--config_reference", "--help", "-h"};
    // Hidden --section.key options, aliases included (they are described in the footer).
    for (const auto& spec : config_schema()) {
      auto* o =
          app.add_option("--" + spec.key)->group("")->multi_option_policy(CLI::MultiOptionPolicy::TakeAll);
      add_key_option(o, spec.key, "--" + spec.key, spec.type == KeyType::Bool);
    }
    for (const auto& alias : config_aliases()) {
      auto* o =
          app.add_option("--" + alias.alias)->group("")->multi_option_policy(CLI::MultiOptionPolicy::TakeAll);
      const KeySpec* target = find_key_spec(alias.target);
      const bool is_bool = alias.kind == AliasKind::Rename && target->type == KeyType::Bool;
      add_key_option(o, alias.alias, "--" + alias.alias, is_bool);
    }
    positional = app.add_option("assignments", "section.key=value overrides")
                     ->expected(0, CLI::detail::expected_max_vector_size)
                     ->allow_extra_args()
                     ->multi_option_policy(CLI::MultiOptionPolicy::TakeAll)
                     ->type_name("KEY=VALUE");
  }

  void add_key_option(CLI::Option* o, const std::string& key, const std::string& flag, bool is_bool) {
    option_key[o] = key;
    option_flag[o] = flag;
    (is_bool ? bool_flags : value_flags).insert(flag);
  }

  std::vector<std::string> all_flags() const {
    std::vector<std::string> all(bool_flags.begin(), bool_flags.end());
    all.insert(all.end(), value_flags.begin(), value_flags.end());
    all.insert(all.end(), plain_flags.begin(), plain_flags.end());
    return all;
  }

  // Rewrites bool flags to the --flag=value form (bare → true, "--flag True" → "--flag=True")
  // so that CLI11 sees one value per occurrence; rejects unknown flags with a suggestion.
  std::vector<std::string> normalize(const std::vector<std::string>& args) const {
    std::vector<std::string> out;
    for (size_t i = 0; i < args.size(); ++i) {
      const std::string& t = args[i];
      if (t == "--") {
        out.insert(out.end(), args.begin() + static_cast<long>(i), args.end());
        break;
      }
      const bool looks_numeric =
          t.size() > 1 && t[0] == '-' && (std::isdigit(static_cast<unsigned char>(t[1])) || t[1] == '.');
      if (t.size() < 2 || t[0] != '-' || looks_numeric) {
        out.push_back(t);
        continue;
      }
      const auto eq = t.find('=');
      const std::string name = t.substr(0, eq);
      const bool has_value = eq != std::string::npos;
      if (bool_flags.count(name)) {
        bool ignored = false;
        if (has_value) {
          out.push_back(t);
        } else if (i + 1 < args.size() && parse_bool_text(args[i + 1], &ignored)) {
          out.push_back(name + "=" + args[++i]);
        } else {
          out.push_back(name + "=true");
        }
      } else if (value_flags.count(name)) {
        if (has_value) {
          out.push_back(t);
        } else if (i + 1 < args.size()) {
          out.push_back(t);
          out.push_back(args[++i]);
        } else {
          throw Error("command line: " + name + " needs a value (`train --help` lists the flags)");
        }
      } else if (plain_flags.count(name)) {
        if (has_value) throw Error("command line: " + name + " takes no value (got '" + t + "')");
        out.push_back(t);
      } else {
        std::string msg = "command line: unknown flag '" + name + "'";
        const std::string best = closest_match(name, all_flags());
        if (!best.empty()) msg += "; did you mean '" + best + "'?";
        msg += " (`train --help` lists the flags; any config key can be set with --section.key value)";
        throw Error(msg);
      }
    }
    return out;
  }
};

void apply_assignment(Config& config, const std::string& text, const std::string& origin) {
  const auto eq = text.find('=');
  if (eq == std::string::npos || eq == 0) {
    throw Error("command line: " + origin +
                ": expected section.key=value (e.g. profiling.enabled=true), got '" + text + "'");
  }
  config.set(text.substr(0, eq), text.substr(eq + 1), origin);
}

// RAVE's --gpu N (scripts/train.py: a GPU index; -1 trains on the CPU) as a train.device value.
std::string gpu_flag_device(const std::string& text) {
  const bool digits = !text.empty() && text.size() <= 4 &&
                      std::all_of(text.begin(), text.end(), [](unsigned char c) { return std::isdigit(c); });
  if (text == "-1") return "cpu";
  if (!digits) {
    throw Error("command line: --gpu " + text + ": expected a GPU index (0, 1, ...) or -1 for the CPU");
  }
  return "cuda:" + std::to_string(std::stoi(text));
}

}  // namespace

std::string train_help_text() {
  Parser p;
  return p.app.help();
}

TrainArgs parse_train_args(const std::vector<std::string>& args,
                           const std::vector<std::filesystem::path>& config_dirs) {
  TrainArgs result;
  Parser p;
  if (std::any_of(args.begin(), args.end(),
                  [](const std::string& a) { return a == "--help" || a == "-h"; })) {
    result.help = true;
    result.help_text = p.app.help();
    return result;
  }
  if (std::find(args.begin(), args.end(), "--config_reference") != args.end()) {
    result.config_reference = true;
    return result;
  }
  std::vector<std::string> tokens = p.normalize(args);
  std::reverse(tokens.begin(), tokens.end());  // CLI11 parses a reversed vector
  try {
    p.app.parse(tokens);
  } catch (const CLI::CallForHelp&) {
    result.help = true;
    result.help_text = p.app.help();
    return result;
  } catch (const CLI::ParseError& e) {
    throw Error(std::string("command line: ") + e.what() + " (`train --help` lists the flags)");
  }

  Config& config = result.config;
  ConfigStack stack;
  if (p.config->count() > 0) {
    std::vector<std::string> names = p.config->results();
    stack = ConfigStack::merge(names, config_dirs, config);
    result.config_path = stack.top_level().back();
    result.config_name = stack.name();
    result.config_files = stack.top_level();
  }
  std::map<CLI::Option*, size_t> seen;
  for (CLI::Option* o : p.app.parse_order()) {
    const size_t index = seen[o]++;
    if (index >= o->results().size()) continue;
    const std::string& text = o->results()[index];
    if (o == p.override_opt) {
      apply_assignment(config, text, "--override " + text);
    } else if (o == p.augment) {
      const std::string now = config.get_string("data.augment");
      config.set("data.augment", now.empty() ? text : now + "," + text, "--augment " + text);
    } else if (o == p.gpu) {
      config.set("train.device", gpu_flag_device(text), "--gpu " + text);
    } else if (o == p.positional) {
      apply_assignment(config, text, "argument '" + text + "'");
    } else if (auto it = p.option_key.find(o); it != p.option_key.end()) {
      config.set(it->second, text, p.option_flag.at(o));
    }
  }
  if (config.get_string("train.name").empty()) {
    config.set("train.name", result.config_name.empty() ? "run" : result.config_name, "--config (file name)");
  }
  if (config.get_bool("train.smoke_test")) {
    // A smoke run is a run of its own (its checkpoint is a few steps old): never a resume, and
    // named apart; its validation looks at two batches.
    if (!config.get_string("train.ckpt").empty()) {
      throw Error("--smoke_test starts a separate short run and cannot resume train.ckpt = '" +
                  config.get_string("train.ckpt") + "'; drop one of the two");
    }
    config.set("train.name", config.get_string("train.name") + "_smoke", "--smoke_test");
    config.set(
        "data.val_max",
        std::to_string(std::min<int64_t>(config.get_int("data.val_max"), 2 * config.get_int("train.batch"))),
        "--smoke_test");
  }
  stack.check(config);
  config.finalize();
  result.summary = p.summary->count() > 0;
  result.print_config = p.print_config->count() > 0;
  return result;
}

TrainArgs parse_train_args(int argc, const char* const* argv,
                           const std::vector<std::filesystem::path>& config_dirs) {
  std::vector<std::string> args;
  for (int i = 1; i < argc; ++i) args.emplace_back(argv[i]);
  return parse_train_args(args, config_dirs);
}

}  // namespace rt
