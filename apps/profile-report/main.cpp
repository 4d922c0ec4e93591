// profile-report: bottleneck analysis of a run directory. Parse, analyse, print, plot.
#include <iostream>
#include <optional>

#include "profiling/report/export_lists.h"
#include "profiling/report/plots.h"
#include "profiling/report/report_format.h"
#include "profiling/report/run_report.h"
#include "util/cli_parse.h"
#include "util/error.h"
#include "util/path_kind.h"
#include "util/run_pointer.h"

int main(int argc, char** argv) {
  CLI::App app{
      "profile-report: time breakdown, bottleneck, memory growth and top operators of a training run",
      "profile-report"};
  std::string run_dir, other_dir, plots_dir, export_dir;
  bool json = false;
  int top = 10;
  app.add_option("RUN_DIR", run_dir, "run directory written by train (or <out_path>/latest)")->required();
  app.add_option("--compare", other_dir, "second run directory: both side by side with ratios (B/A)");
  app.add_flag("--json", json, "print the analysis as JSON instead of text");
  auto* plots =
      app.add_option("--plots", plots_dir,
                     "write memory_plot.png and step_time_plot.png (gnuplot) into DIR (default: RUN_DIR)")
          ->expected(0, 1);
  app.add_option("--top", top, "operators listed from the trace(s)")->check(CLI::PositiveNumber);
  auto* export_list =
      app.add_option(
             "--export_list", export_dir,
             "instead of the report: write timing_profile.json and memory_profile.json (and each rank's) "
             "into DIR as one JSON list each, every rotated part in order, the list format the profiling "
             "guides read whole")
          ->type_name("DIR");
  export_list->excludes("--compare")->excludes("--json")->excludes(plots);
  bool force = false;
  app.add_flag("--force", force,
               "let --plots and --export_list replace files of those names already in their folder");
  RT_CLI_PARSE(app, argc, argv, "profile-report");

  try {
    // What --plots would write over, before anything is read or written (--export_list checks
    // its own: export_profile_lists).
    if (!force) {
      std::vector<std::filesystem::path> targets;
      if (plots->count() > 0) {
        const std::filesystem::path dir =
            plots_dir.empty() ? rt::resolve_run_pointer(run_dir) : std::filesystem::path(plots_dir);
        for (const char* stem : {"memory_plot", "step_time_plot"})
          for (const char* ext : {".png", ".dat", ".gp"}) targets.push_back(dir / (std::string(stem) + ext));
      }
      for (const auto& t : targets) {
        if (rt::something_is_at(t)) {
          throw rt::Error("--plots: '" + t.string() +
                          "' already exists; pass --force to replace it, or choose another folder");
        }
      }
    }
    if (export_list->count() > 0) {
      std::vector<std::string> notes;
      for (const auto& e : rt::report::export_profile_lists(run_dir, export_dir, &notes, force)) {
        std::cout << "exported: " << e.written.string() << " (" << e.entries << " entries from " << e.files
                  << (e.files == 1 ? " file" : " files") << ")\n";
      }
      for (const auto& n : notes) std::cerr << "note: " << n << "\n";
      return 0;
    }
    rt::report::ReportOptions options;
    options.top_ops = top;
    const auto a = rt::report::analyse_run(run_dir, options);
    std::optional<rt::report::RunAnalysis> b;
    if (!other_dir.empty()) b = rt::report::analyse_run(other_dir, options);

    if (json) {
      std::cout << (b ? rt::report::comparison_json(a, *b) : rt::report::to_json(a)).dump(2) << "\n";
    } else {
      std::cout << (b ? rt::report::format_comparison(a, *b) : rt::report::format_report(a));
    }
    if (plots->count() > 0) {
      std::vector<const rt::report::RunAnalysis*> runs{&a};
      if (b) runs.push_back(&*b);
      std::vector<std::string> notes;
      const auto written = rt::report::write_plots(
          runs, plots_dir.empty() ? a.run_dir : std::filesystem::path(plots_dir), &notes);
      // With --json, stdout stays pure JSON: plot messages go to stderr.
      std::ostream& msg = json ? std::cerr : std::cout;
      for (const auto& p : written) msg << "plot: " << p.string() << "\n";
      for (const auto& n : notes) msg << "plot: " << n << "\n";
    }
    return 0;
  } catch (const rt::Error& e) {
    std::cerr << "error: " << e.what() << "\n";
    return 2;
  } catch (const std::exception& e) {
    // Not rt::error_text (util/error_text.h): profile-report links no LibTorch.
    std::cerr << "error: " << rt::terminal_safe(e.what()) << "\n";
    return 1;
  }
}
