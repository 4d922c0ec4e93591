#include "training/checkpoint.h"

#include <string>

#include "config/config.h"
#include "training/zip_integrity.h"
#include "util/atomic_file.h"
#include "util/error.h"
#include "util/path_kind.h"
#include "util/run_pointer.h"

namespace rt {

namespace fs = std::filesystem;
namespace {

constexpr const char* kFormat = "rave-ssm-trainer checkpoint v1";

std::string read_string(torch::serialize::InputArchive& a, const std::string& key, const std::string& file) {
  c10::IValue v;
  if (!a.try_read(key, v) || !v.isString()) {
    throw Error("'" + file + "' is not a checkpoint of this trainer (missing '" + key + "')");
  }
  return v.toStringRef();
}

CheckpointMeta read_meta(torch::serialize::InputArchive& a, const std::string& file) {
  CheckpointMeta m;
  if (read_string(a, "meta/format", file) != kFormat) {
    throw Error("'" + file + "' has an unknown checkpoint format (expected '" + std::string(kFormat) + "')");
  }
  m.family = read_string(a, "meta/family", file);
  m.signature = read_string(a, "meta/signature", file);
  m.config_toml = read_string(a, "meta/config", file);
  c10::IValue v;
  if (!a.try_read("meta/step", v) || !v.isInt()) {
    throw Error("'" + file + "' is not a checkpoint of this trainer (missing 'meta/step')");
  }
  m.step = v.toInt();
  if (a.try_read("meta/best", v) && v.isDouble()) {
    m.best = v.toDouble();
    m.has_best = true;
  }
  return m;
}

torch::serialize::InputArchive open_archive(const std::filesystem::path& path) {
  if (const std::string why = not_a_regular_file(path); !why.empty())
    throw Error("checkpoint '" + path.string() + "' " + why);
  // torch's reader skips the entries' CRCs: a flipped bit would load and train on.
  verify_zip_entries(path);
  torch::serialize::InputArchive a;
  try {
    a.load_from(path.string());
  } catch (const c10::Error& e) {
    throw Error("cannot read checkpoint '" + path.string() + "': " + e.what_without_backtrace());
  } catch (const std::exception&
               e) {  // torch's archive reader also throws plain runtime_errors (found by fuzz_checkpoint)
    throw Error("cannot read checkpoint '" + path.string() + "': " + first_line(e.what()));
  }
  return a;
}

}  // namespace

void save_checkpoint(const std::filesystem::path& path, const CheckpointMeta& meta,
                     const std::function<void(torch::serialize::OutputArchive&)>& write_model) {
  torch::serialize::OutputArchive archive;
  archive.write("meta/format", c10::IValue(std::string(kFormat)));
  archive.write("meta/family", c10::IValue(meta.family));
  archive.write("meta/signature", c10::IValue(meta.signature));
  archive.write("meta/config", c10::IValue(meta.config_toml));
  archive.write("meta/step", c10::IValue(meta.step));
  if (meta.has_best) archive.write("meta/best", c10::IValue(meta.best));
  torch::serialize::OutputArchive model;
  write_model(model);
  archive.write("model", model);

  // Serialised in memory first, then written by write_file_atomic: a write that fails inside
  // torch's zip writer (a full disk) throws again from its destructor and aborts the process;
  // a memory buffer cannot fail that way, and write_file_atomic reports a full disk by name and
  // removes its temporary file.
  std::string bytes;
  try {
    archive.save_to([&bytes](const void* data, size_t n) -> size_t {
      bytes.append(static_cast<const char*>(data), n);
      return n;
    });
  } catch (const c10::Error& e) {
    throw Error("cannot serialise checkpoint '" + path.string() + "': " + e.what_without_backtrace());
  }
  write_file_atomic(path, bytes);
}

std::optional<int64_t> checkpoint_step(const torch::jit::Module& module) {
  if (!module.hasattr("meta/format") || !module.hasattr("meta/step")) return std::nullopt;
  const c10::IValue format = module.attr("meta/format"), step = module.attr("meta/step");
  if (!format.isString() || format.toStringRef() != kFormat || !step.isInt()) return std::nullopt;
  return step.toInt();
}

CheckpointMeta read_checkpoint_meta(const std::filesystem::path& path) {
  auto a = open_archive(path);
  return read_meta(a, path.string());
}

CheckpointMeta load_checkpoint(const std::filesystem::path& path, const CheckpointMeta& expected,
                               const std::function<void(torch::serialize::InputArchive&)>& read_model) {
  auto a = open_archive(path);
  CheckpointMeta m = read_meta(a, path.string());
  if (m.family != expected.family || !signatures_match(m.signature, expected.signature)) {
    throw Error("checkpoint '" + path.string() + "' was made with another config: it holds model '" +
                m.family + "' [" + m.signature + "], this run builds '" + expected.family + "' [" +
                expected.signature + "]");
  }
  torch::serialize::InputArchive model;
  a.read("model", model);
  try {
    read_model(model);
  } catch (const c10::Error& e) {
    throw Error("checkpoint '" + path.string() + "' does not fit the model: " + e.what_without_backtrace());
  }
  return m;
}

fs::path resolve_run_or_checkpoint(const std::string& value, const std::string& name) {
  std::error_code ec;
  // A run directory, or the `latest` pointer naming one (util/run_pointer.h).
  const fs::path run = resolve_run_pointer(value);
  if (fs::is_directory(run, ec)) {
    for (const char* file : {"best.ckpt", "last.ckpt"}) {
      const fs::path p = run / "checkpoints" / file;
      if (fs::is_regular_file(p, ec)) return p;
    }
    throw Error(name + " = '" + value +
                "' is a directory without checkpoints/best.ckpt or checkpoints/last.ckpt (expected a run "
                "directory, a `latest` pointer or a checkpoint file)");
  }
  if (const fs::path gone = dangling_run_pointer(value); !gone.empty()) {
    throw Error(name + " = '" + value + "' is a `latest` pointer naming the run '" + gone.string() +
                "', which no longer exists (deleted or moved): name a run directory or a checkpoint file");
  }
  if (const std::string why = not_a_regular_file(value); !why.empty()) {
    throw Error(name + " = '" + value + "' " + why + " (expected a run directory or a checkpoint file)");
  }
  return fs::path(value);
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

}  // namespace rt
