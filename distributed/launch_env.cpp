#include "distributed/launch_env.h"

#include <cctype>
#include <cerrno>
#include <climits>
#include <cstdlib>
#include <optional>

#include "util/error.h"

extern char** environ;

namespace rt::dist {
namespace {

constexpr size_t kMaxHosts = 100000;

std::optional<std::string> lookup(const EnvMap& env, const std::string& key) {
  auto it = env.find(key);
  if (it == env.end() || it->second.empty()) return std::nullopt;
  return it->second;
}

// A whole decimal integer in [lo, hi], else rt::Error naming the variable.
int parse_int(const std::string& key, const std::string& value, long lo, long hi,
              const std::string& expected) {
  const auto v = parse_whole_number(value, lo, hi);
  if (!v) throw Error(key + "=" + value + " is not valid: expected " + expected);
  return static_cast<int>(*v);
}

int required_int(const EnvMap& env, const std::string& key, long lo, long hi, const std::string& expected,
                 const std::string& context) {
  auto v = lookup(env, key);
  if (!v) throw Error(key + " is not set: " + context);
  return parse_int(key, *v, lo, hi, expected);
}

// The rendezvous variables every multi-process launch needs.
void read_master(const EnvMap& env, LaunchEnv& out, const std::string& world_key) {
  auto addr = lookup(env, "MASTER_ADDR");
  if (!addr) {
    throw Error(world_key + "=" + std::to_string(out.world_size) +
                " but MASTER_ADDR is not set: every rank needs the address of the host running rank 0 "
                "(the rendezvous store); torchrun and `train --nproc_per_node` set it");
  }
  out.master_addr = *addr;
  auto port = lookup(env, "MASTER_PORT");
  if (!port) {
    throw Error(world_key + "=" + std::to_string(out.world_size) +
                " but MASTER_PORT is not set: every rank needs the rendezvous store's port");
  }
  out.master_port = parse_int("MASTER_PORT", *port, 1, 65535, "a TCP port in 1..65535");
}

void check_ranks(const LaunchEnv& e, const std::string& rank_key, const std::string& world_key,
                 const std::string& local_key, const std::string& local_world_key) {
  if (e.rank >= e.world_size) {
    throw Error(rank_key + "=" + std::to_string(e.rank) + " is not valid with " + world_key + "=" +
                std::to_string(e.world_size) + ": ranks are 0.." + std::to_string(e.world_size - 1));
  }
  if (e.local_world_size > e.world_size) {
    throw Error(local_world_key + "=" + std::to_string(e.local_world_size) + " is larger than " + world_key +
                "=" + std::to_string(e.world_size));
  }
  if (e.local_rank >= e.local_world_size) {
    throw Error(local_key + "=" + std::to_string(e.local_rank) + " is not valid with " + local_world_key +
                "=" + std::to_string(e.local_world_size) + ": local ranks are 0.." +
                std::to_string(e.local_world_size - 1));
  }
}

LaunchEnv parse_torchrun(const EnvMap& env) {
  LaunchEnv e;
  e.source = LaunchEnv::Source::kTorchrun;
  const std::string context =
      "torchrun-style launches set RANK, WORLD_SIZE, MASTER_ADDR and MASTER_PORT together";
  e.world_size = required_int(env, "WORLD_SIZE", 1, INT_MAX, "an integer >= 1", context);
  e.rank = required_int(env, "RANK", 0, INT_MAX, "an integer >= 0", context);
  auto local = lookup(env, "LOCAL_RANK");
  auto local_world = lookup(env, "LOCAL_WORLD_SIZE");
  e.local_rank = local ? parse_int("LOCAL_RANK", *local, 0, INT_MAX, "an integer >= 0") : e.rank;
  e.local_world_size =
      local_world ? parse_int("LOCAL_WORLD_SIZE", *local_world, 1, INT_MAX, "an integer >= 1") : e.world_size;
  check_ranks(e, "RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE");
  if (auto agent = lookup(env, "TORCHELASTIC_USE_AGENT_STORE")) {
    if (*agent != "True" && *agent != "False") {
      throw Error("TORCHELASTIC_USE_AGENT_STORE=" + *agent + " is not valid: expected True or False");
    }
    e.agent_store = *agent == "True";
  }
  if (auto restarts = lookup(env, "TORCHELASTIC_RESTART_COUNT")) {
    e.restart_count = parse_int("TORCHELASTIC_RESTART_COUNT", *restarts, 0, INT_MAX, "an integer >= 0");
  }
  if (e.distributed()) read_master(env, e, "WORLD_SIZE");
  return e;
}

LaunchEnv parse_slurm(const EnvMap& env) {
  LaunchEnv e;
  e.source = LaunchEnv::Source::kSlurm;
  const std::string context = "srun sets SLURM_PROCID and SLURM_NTASKS for every task";
  auto ntasks = lookup(env, "SLURM_NTASKS") ? "SLURM_NTASKS" : "SLURM_NPROCS";
  e.world_size = required_int(env, ntasks, 1, INT_MAX, "an integer >= 1", context);
  e.rank = required_int(env, "SLURM_PROCID", 0, INT_MAX, "an integer >= 0", context);
  auto local = lookup(env, "SLURM_LOCALID");
  e.local_rank = local ? parse_int("SLURM_LOCALID", *local, 0, INT_MAX, "an integer >= 0") : 0;
  const int node = lookup(env, "SLURM_NODEID") ? parse_int("SLURM_NODEID", *lookup(env, "SLURM_NODEID"), 0,
                                                           INT_MAX, "an integer >= 0")
                                               : 0;
  std::string local_world_key = "SLURM_TASKS_PER_NODE";
  if (auto per_node = lookup(env, "SLURM_TASKS_PER_NODE")) {
    auto counts = expand_slurm_tasks_per_node(*per_node);
    if (static_cast<size_t>(node) >= counts.size()) {
      throw Error("SLURM_NODEID=" + std::to_string(node) + " but SLURM_TASKS_PER_NODE=" + *per_node +
                  " lists " + std::to_string(counts.size()) + " node(s)");
    }
    e.local_world_size = counts[static_cast<size_t>(node)];
  } else if (auto n = lookup(env, "SLURM_NTASKS_PER_NODE")) {
    local_world_key = "SLURM_NTASKS_PER_NODE";
    e.local_world_size = parse_int(local_world_key, *n, 1, INT_MAX, "an integer >= 1");
  } else {
    throw Error("SLURM_PROCID is set but SLURM_TASKS_PER_NODE is not: " + context);
  }
  check_ranks(e, "SLURM_PROCID", ntasks, "SLURM_LOCALID", local_world_key);
  if (!e.distributed()) return e;
  EnvMap with_master = env;
  if (!lookup(env, "MASTER_ADDR")) {
    for (const char* key : {"SLURM_STEP_NODELIST", "SLURM_JOB_NODELIST", "SLURM_NODELIST"}) {
      if (auto list = lookup(env, key)) {
        with_master["MASTER_ADDR"] = first_slurm_host(*list, key);
        break;
      }
    }
  }
  if (!lookup(with_master, "MASTER_PORT")) {
    int port = kDefaultMasterPort;
    if (auto job = lookup(env, "SLURM_JOB_ID")) {
      const std::string tail = job->size() > 4 ? job->substr(job->size() - 4) : *job;
      port = 15000 + parse_int("SLURM_JOB_ID", tail, 0, 9999, "a job number");
    }
    with_master["MASTER_PORT"] = std::to_string(port);
  }
  read_master(with_master, e, ntasks);
  return e;
}

// Parses "a-b" or "a" of a bracket group into the padded strings it stands for.
void expand_range(const std::string& range, const std::string& variable, const std::string& list,
                  std::vector<std::string>& out) {
  auto bad = [&](const std::string& why) {
    return Error(variable + "=" + list + " is not a valid node list: " + why + " in range '" + range + "'");
  };
  const size_t dash = range.find('-');
  const std::string lo = range.substr(0, dash);
  const std::string hi = dash == std::string::npos ? lo : range.substr(dash + 1);
  for (const std::string& s : {lo, hi}) {
    if (s.empty() || s.size() > 18) throw bad("expected a number");
    for (char c : s) {
      if (!std::isdigit(static_cast<unsigned char>(c))) throw bad("expected digits");
    }
  }
  const unsigned long long a = std::stoull(lo), b = std::stoull(hi);
  if (b < a) throw bad("the range is decreasing");
  if (b - a >= kMaxHosts) throw bad("more than " + std::to_string(kMaxHosts) + " hosts");
  for (unsigned long long v = a; v <= b; ++v) {
    std::string digits = std::to_string(v);
    if (digits.size() < lo.size()) digits.insert(0, lo.size() - digits.size(), '0');
    out.push_back(std::move(digits));
  }
}

// One item of a node list as its literal and bracketed parts: every part is a list of
// alternatives (a literal has one).
std::vector<std::vector<std::string>> item_parts(const std::string& item, const std::string& variable,
                                                 const std::string& list) {
  std::vector<std::vector<std::string>> parts;
  size_t i = 0;
  while (i < item.size()) {
    if (item[i] == ']') throw Error(variable + "=" + list + " is not a valid node list: unmatched ']'");
    if (item[i] != '[') {
      const size_t next = item.find_first_of("[]", i);
      parts.push_back({item.substr(i, next - i)});
      i = next == std::string::npos ? item.size() : next;
      continue;
    }
    const size_t close = item.find(']', i);
    if (close == std::string::npos)
      throw Error(variable + "=" + list + " is not a valid node list: unmatched '['");
    const std::string inside = item.substr(i + 1, close - i - 1);
    if (inside.find('[') != std::string::npos) {
      throw Error(variable + "=" + list + " is not a valid node list: nested '['");
    }
    std::vector<std::string> values;
    size_t start = 0;
    for (;;) {
      const size_t comma = inside.find(',', start);
      expand_range(inside.substr(start, comma - start), variable, list, values);
      if (values.size() > kMaxHosts) {
        throw Error(variable + "=" + list + " is not a valid node list: more than " +
                    std::to_string(kMaxHosts) + " hosts");
      }
      if (comma == std::string::npos) break;
      start = comma + 1;
    }
    parts.push_back(std::move(values));
    i = close + 1;
  }
  return parts;
}

// Splits a node list at the commas outside brackets.
std::vector<std::string> list_items(const std::string& list, const std::string& variable) {
  std::vector<std::string> items;
  int depth = 0;
  std::string current;
  for (char c : list) {
    if (c == '[') ++depth;
    if (c == ']') --depth;
    if (depth < 0 || depth > 1)
      throw Error(variable + "=" + list + " is not a valid node list: unbalanced brackets");
    if (c == ',' && depth == 0) {
      items.push_back(current);
      current.clear();
    } else {
      current += c;
    }
  }
  if (depth != 0) throw Error(variable + "=" + list + " is not a valid node list: unbalanced brackets");
  items.push_back(current);
  for (const auto& item : items) {
    if (item.empty()) throw Error(variable + "=" + list + " is not a valid node list: empty host name");
  }
  return items;
}

}  // namespace

EnvMap process_environment() {
  EnvMap env;
  for (char** p = environ; p != nullptr && *p != nullptr; ++p) {
    const std::string kv = *p;
    const size_t eq = kv.find('=');
    if (eq != std::string::npos) env[kv.substr(0, eq)] = kv.substr(eq + 1);
  }
  return env;
}

std::string LaunchEnv::describe() const {
  if (source == Source::kSingleProcess) return "single process";
  std::string s = "rank " + std::to_string(rank) + " of " + std::to_string(world_size) + " (local " +
                  std::to_string(local_rank) + " of " + std::to_string(local_world_size) + ")";
  if (distributed()) s += ", rendezvous " + master_addr + ":" + std::to_string(master_port);
  return s + (source == Source::kSlurm ? " (SLURM)" : " (torchrun)");
}

LaunchEnv parse_launch_env(const EnvMap& env) {
  if (lookup(env, "RANK") || lookup(env, "WORLD_SIZE")) return parse_torchrun(env);
  if (lookup(env, "SLURM_PROCID")) return parse_slurm(env);
  return LaunchEnv{};
}

std::optional<long> parse_whole_number(const std::string& value, long lo, long hi) {
  if (value.empty() || std::isspace(static_cast<unsigned char>(value[0]))) return std::nullopt;
  char* end = nullptr;
  errno = 0;
  const long v = std::strtol(value.c_str(), &end, 10);
  if (*end != '\0' || errno != 0 || v < lo || v > hi) return std::nullopt;
  return v;
}

std::vector<std::string> expand_slurm_nodelist(const std::string& list, const std::string& variable) {
  std::vector<std::string> hosts;
  for (const auto& item : list_items(list, variable)) {
    const auto parts = item_parts(item, variable, list);
    // Odometer over the parts, the last part turning fastest.
    std::vector<size_t> pos(parts.size(), 0);
    for (;;) {
      std::string host;
      for (size_t p = 0; p < parts.size(); ++p) host += parts[p][pos[p]];
      hosts.push_back(std::move(host));
      if (hosts.size() > kMaxHosts) {
        throw Error(variable + "=" + list + " is not a valid node list: more than " +
                    std::to_string(kMaxHosts) + " hosts");
      }
      size_t p = parts.size();
      while (p > 0 && ++pos[p - 1] == parts[p - 1].size()) pos[--p] = 0;
      if (p == 0) break;
    }
  }
  return hosts;
}

std::string first_slurm_host(const std::string& list, const std::string& variable) {
  const auto items = list_items(list, variable);
  std::string host;
  for (const auto& part : item_parts(items.front(), variable, list)) host += part.front();
  return host;
}

std::vector<int> expand_slurm_tasks_per_node(const std::string& value, const std::string& variable) {
  const auto bad = [&] {
    return Error(variable + "=" + value + " is not valid: expected a list like 2(x3),1");
  };
  const auto number = [&](const std::string& s, long lo) {
    if (s.empty() || s.size() > 9 || s.find_first_not_of("0123456789") != std::string::npos) throw bad();
    const long v = std::stol(s);
    if (v < lo) throw bad();
    return static_cast<int>(v);
  };
  std::vector<int> counts;
  size_t start = 0;
  for (;;) {
    const size_t comma = value.find(',', start);
    const std::string item = value.substr(start, comma - start);
    const size_t paren = item.find("(x");
    const int count = number(item.substr(0, paren), 0);
    int repeat = 1;
    if (paren != std::string::npos) {
      if (item.back() != ')') throw bad();
      repeat = number(item.substr(paren + 2, item.size() - paren - 3), 1);
    }
    if (counts.size() + static_cast<size_t>(repeat) > kMaxHosts) throw bad();
    counts.insert(counts.end(), static_cast<size_t>(repeat), count);
    if (comma == std::string::npos) break;
    start = comma + 1;
  }
  return counts;
}

}  // namespace rt::dist
