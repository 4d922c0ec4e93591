// evaluate: score a training checkpoint on a database without training (trainer/evaluate.h).
//   evaluate --ckpt RUN_DIR|CKPT|last [--db_path DB] [--split val|train|all] [--batch N]
//            [--threads N] [--workers N] [--device cpu|cuda|cuda:N] [--output FILE.json [--force]]
#include <cstdlib>
#include <iostream>

#include "families/builtin.h"
#include "trainer/evaluate.h"
#include "trainer/output_target.h"
#include "util/atomic_file.h"
#include "util/blas_kernels.h"
#include "util/cli_parse.h"
#include "util/error.h"
#include "util/error_text.h"
#include "util/interruptible.h"
#include "util/signals.h"
#include "util/thread_limits.h"

namespace {

// --batch's largest value: the figures do not depend on it, only the memory a batch takes.
constexpr int64_t kMaxBatch = 65536;

}  // namespace

int main(int argc, char** argv) {
  rt::announce_blas_kernels();
  rt::register_builtin_model_families();
  rt::install_stop_signal_handlers();
  CLI::App app{
      "Score a training checkpoint on a database, as the run's validation does, without training: SSM "
      "decoders report behaviour R² pooled, per dimension and per session; RAVE its validation distance "
      "(docs/cli.md \"evaluate\")."};
  rt::EvaluateOptions o;
  std::string split = "val", output;
  bool force = false;
  app.add_option("--ckpt", o.checkpoint,
                 "checkpoint file, run directory (its best.ckpt, else last.ckpt), `latest` pointer, or last "
                 "(<out_path>/latest)")
      ->required();
  app.add_option("--out_path", o.out_path, "where `--ckpt last` looks for `latest`")->capture_default_str();
  app.add_option("--db_path", o.db_path,
                 "database to score on (default: the checkpoint's data.db_path); it must hold what the model "
                 "was trained on: the same audio channels and rate, or the same sessions (neural groups)");
  app.add_option("--split", split,
                 "val: the held-out split training validated on (data.val_fraction, data.val_max, "
                 "data.split_seed); train: the training split; all: every example")
      ->capture_default_str();
  app.add_option("--batch", o.batch, "batch size, 1 to 65536 (default: the checkpoint's train.batch)");
  app.add_option(
      "--threads", o.threads,
      "intra-op CPU threads, 1 to 4 × the machine's cores (default: the checkpoint's train.threads)");
  app.add_option(
      "--workers", o.workers,
      "loader worker threads, 0 (load on the main thread) to 4 × the machine's cores (default: the "
      "checkpoint's data.workers)");
  app.add_option("--device", o.device, "auto, cpu, cuda or cuda:N (default: the checkpoint's train.device)");
  app.add_option("--output", output, "also write the figures as JSON to this file");
  app.add_flag("--force", force,
               "replace the file at --output when it exists; a checkpoint, a run's own files and anything "
               "that is not a regular file are never replaced");
  RT_CLI_PARSE(app, argc, argv, "evaluate");
  try {
    o.split = rt::parse_enum<rt::EvalSplit>(split, "--split");
    if (app.count("--batch") > 0 && (o.batch < 1 || o.batch > kMaxBatch)) {
      throw rt::Error("--batch " + std::to_string(o.batch) + " is not accepted: 1 to " +
                      std::to_string(kMaxBatch) + " examples");
    }
    if (app.count("--threads") > 0) rt::check_thread_count("--threads", o.threads, 1);
    if (app.count("--workers") > 0)
      rt::check_thread_count("--workers", o.workers, 0, "load on the main thread");
    if (app.count("--force") > 0 && output.empty()) throw rt::Error("--force goes with --output");
    if (!output.empty()) rt::check_output_target(output, {o.checkpoint, o.db_path}, force, "evaluate");
    // A validation pass over a large database is one long call: a stop signal ends it at once.
    const rt::EvaluateResult r = rt::run_interruptible([&] { return rt::evaluate_checkpoint(o); },
                                                       "while evaluating; nothing was written");
    std::cout << r.text();
    if (!output.empty()) {
      rt::write_file_atomic(output, r.to_json().dump(2) + "\n");
      std::cout << "wrote " << rt::terminal_safe(output) << "\n";
    }
    return 0;
  } catch (const rt::StopRequested& e) {
    // The evaluation may still run on its thread (util/interruptible.h): end here.
    std::cerr << "evaluate: " << e.what() << "\n";
    std::cerr.flush();
    std::_Exit(128 + e.signal());
  } catch (const std::exception& e) {
    std::cerr << "evaluate: error: " << rt::error_text(e) << "\n";
    return 1;
  }
}
