#include "trainer/run_dir.h"

#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <iostream>
#include <random>

#include "util/atomic_file.h"
#include "util/error.h"

namespace rt {

namespace fs = std::filesystem;

namespace {

std::string today() {
  const std::time_t now = std::time(nullptr);
  std::tm local{};
  localtime_r(&now, &local);
  char buf[16];
  std::strftime(buf, sizeof buf, "%Y-%m-%d", &local);
  return buf;
}

uint32_t random_u32() {
  thread_local std::mt19937 gen{std::random_device{}() ^ static_cast<uint32_t>(::getpid())};
  return gen();
}

}  // namespace

std::vector<fs::path> remove_stale_temporaries(const fs::path& run_dir) {
  std::vector<fs::path> removed;
  std::error_code ec;
  for (fs::recursive_directory_iterator it(run_dir, fs::directory_options::skip_permission_denied, ec), end;
       !ec && it != end; it.increment(ec)) {
    if (!it->is_regular_file(ec)) continue;
    // "<file>.tmp.<pid>": write_file_atomic's and the checkpoint writer's temporary names.
    const std::string name = it->path().filename().string();
    const size_t at = name.rfind(".tmp.");
    if (at == std::string::npos || at == 0) continue;
    const std::string digits = name.substr(at + 5);
    if (digits.empty() || digits.size() > 9 || digits.find_first_not_of("0123456789") != std::string::npos) continue;
    const pid_t pid = static_cast<pid_t>(std::stol(digits));
    // A live process (or one we may not signal) may still be writing it.
    if (pid == ::getpid() || ::kill(pid, 0) == 0 || errno == EPERM) continue;
    std::error_code rm;
    if (fs::remove(it->path(), rm)) {
      std::cerr << "removed '" << it->path().string() << "', a temporary file left by process " << pid
                << " (no longer running)\n";
      removed.push_back(it->path());
    }
  }
  return removed;
}

RunDir create_run_dir(const fs::path& out_path, const std::string& name) {
  // The name as shown in the message, control characters escaped ("\x0a").
  std::string shown;
  bool control = false;
  for (char c : name) {
    if (static_cast<unsigned char>(c) >= 0x20 && c != 0x7f) {
      shown += c;
      continue;
    }
    control = true;
    shown += std::string("\\x") + "0123456789abcdef"[(c >> 4) & 0xf] + "0123456789abcdef"[c & 0xf];
  }
  if (name.empty() || name.find('/') != std::string::npos || control) {
    throw Error("train.name = '" + shown +
                "' cannot name a run directory; expected a non-empty name without '/' or control characters "
                "(newlines, tabs)");
  }
  std::error_code ec;
  fs::create_directories(out_path, ec);
  if (ec) throw Error("cannot create train.out_path '" + out_path.string() + "': " + ec.message());
  const std::string prefix = name + "_" + today() + "_";
  for (int attempt = 0; attempt < 100; ++attempt) {
    char hex[8];
    std::snprintf(hex, sizeof hex, "%06x", random_u32() & 0xffffffu);
    const fs::path dir = out_path / (prefix + hex);
    // mkdir fails with EEXIST when another run took the name: then draw again.
    if (::mkdir(dir.c_str(), 0755) == 0) {
      update_latest_link(out_path, dir);
      return RunDir{dir, {}, false};
    }
    if (errno != EEXIST)
      throw Error("cannot create run directory '" + dir.string() + "': " + std::strerror(errno));
  }
  throw Error("cannot create a run directory '" + (out_path / prefix).string() +
              "XXXXXX': every name tried exists");
}

RunDir open_run_dir(const fs::path& run_dir, const fs::path& out_path) {
  std::error_code ec;
  if (!fs::is_directory(run_dir, ec)) throw Error("run directory '" + run_dir.string() + "' does not exist");
  fs::create_directories(out_path, ec);
  update_latest_link(out_path, run_dir);
  return RunDir{run_dir, {}, true};
}

void update_latest_link(const fs::path& out_path, const fs::path& run_dir) {
  std::error_code ec;
  const fs::path base = fs::weakly_canonical(out_path, ec);
  const fs::path target_abs = fs::weakly_canonical(run_dir, ec);
  fs::path target = target_abs.lexically_relative(base);
  if (target.empty()) target = target_abs;
  const fs::path latest = out_path / "latest";
  const fs::path tmp =
      out_path / (".latest.tmp." + std::to_string(::getpid()) + "." + std::to_string(random_u32()));
  if (::symlink(target.c_str(), tmp.c_str()) != 0) {
    throw Error("cannot create symlink '" + tmp.string() + "' -> '" + target.string() +
                "': " + std::strerror(errno));
  }
  if (::rename(tmp.c_str(), latest.c_str()) != 0) {
    const std::string why = std::strerror(errno);
    ::unlink(tmp.c_str());
    throw Error("cannot update '" + latest.string() + "' (is it a directory?): " + why);
  }
}

fs::path resolve_checkpoint(const std::string& ckpt, const fs::path& out_path) {
  if (ckpt.empty()) return {};
  std::error_code ec;
  if (ckpt == "last") {
    const fs::path p = out_path / "latest" / "checkpoints" / "last.ckpt";
    if (!fs::is_regular_file(p, ec)) {
      throw Error("train.ckpt = \"last\": no checkpoint at '" + p.string() +
                  "' (expected <train.out_path>/latest/checkpoints/last.ckpt from an earlier run)");
    }
    return fs::canonical(p);  // resolve `latest`, which the new run will re-point
  }
  if (!fs::is_regular_file(ckpt, ec)) {
    throw Error("train.ckpt = '" + ckpt + "': no such checkpoint file (expected a path or \"last\")");
  }
  return fs::path(ckpt);
}

fs::path run_dir_of_checkpoint(const fs::path& checkpoint) {
  std::error_code ec;
  const fs::path abs = fs::weakly_canonical(checkpoint, ec);
  if (ec) return {};
  const fs::path folder = abs.parent_path();
  if (folder.filename() != "checkpoints") return {};
  const fs::path run = folder.parent_path();
  return fs::is_regular_file(run / "config.toml", ec) ? run : fs::path();
}

RunDir prepare_run_dir(const Config& config) {
  return prepare_run_dir(config, resolve_checkpoint(config.get_string("train.ckpt"), config.get_string("train.out_path")));
}

RunDir prepare_run_dir(const Config& config, const fs::path& ckpt) {
  const fs::path out_path = config.get_string("train.out_path");
  RunDir run;
  const fs::path existing = ckpt.empty() ? fs::path() : run_dir_of_checkpoint(ckpt);
  if (!existing.empty()) {
    run = open_run_dir(existing, out_path);
    remove_stale_temporaries(run.path);
  } else {
    run = create_run_dir(out_path, config.get_string("train.name"));
  }
  run.checkpoint = ckpt;
  write_run_config(run.path, config);
  return run;
}

void write_run_config(const fs::path& run_dir, const Config& config) {
  write_file_atomic(run_dir / "config.toml", config.to_toml());
}

}  // namespace rt
