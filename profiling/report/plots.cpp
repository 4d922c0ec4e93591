#include "profiling/report/plots.h"

#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <functional>
#include <iomanip>
#include <sstream>

#include "util/atomic_file.h"
#include "util/error.h"
#include "util/signals.h"

namespace rt::report {
namespace fs = std::filesystem;

namespace {

// gnuplot single-quoted string: only ' needs escaping (doubled).
std::string quote(const std::string& s) {
  std::string out = "'";
  for (char c : s) out += c == '\'' ? std::string("''") : std::string(1, c);
  return out + "'";
}

// Distinct colours that stay distinct for colour-blind readers (Okabe–Ito).
const char* kColours[] = {"#0072B2", "#D55E00", "#009E73", "#CC79A7",
                          "#E69F00", "#56B4E9", "#000000", "#F0E442"};

const char* kPreamble =
    "set terminal pngcairo size 1280,720 enhanced font 'DejaVu Sans,13' linewidth 1.5\n"
    "set border lw 1\nset grid xtics ytics lc rgb '#dddddd' lw 1 dt 1\n"
    "set key tmargin center horizontal noenhanced box spacing 1.2 width 2\n"
    "set autoscale xfix\nset offsets graph 0.02, graph 0.02, graph 0.08, 0\n"
    "set xlabel 'Training step'\nset mxtics\nset format y '%g'\n";

// Runs gnuplot on `script`; throws with its output when it fails.
void run_gnuplot(const std::string& gnuplot, const fs::path& script) {
  int pipefd[2];
  if (pipe(pipefd) != 0) throw Error("profile-report --plots: cannot create a pipe for gnuplot");
  const pid_t pid = fork();
  if (pid < 0) throw Error("profile-report --plots: cannot start " + gnuplot);
  if (pid == 0) {
    rt::restore_exec_signal_mask();
    dup2(pipefd[1], STDOUT_FILENO);
    dup2(pipefd[1], STDERR_FILENO);
    close(pipefd[0]);
    close(pipefd[1]);
    execlp(gnuplot.c_str(), gnuplot.c_str(), script.c_str(), static_cast<char*>(nullptr));
    _exit(127);
  }
  close(pipefd[1]);
  std::string output;
  char buf[4096];
  ssize_t n;
  while ((n = read(pipefd[0], buf, sizeof buf)) > 0) output.append(buf, static_cast<size_t>(n));
  close(pipefd[0]);
  int status = 0;
  waitpid(pid, &status, 0);
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
    throw Error("profile-report --plots: gnuplot failed on " + script.string() + ":\n" + output);
  }
}

// Legend names of memory_series keys.
std::string legend_name(const std::string& series) {
  if (series == "rss") return "process RSS";
  const auto space = series.find(' ');
  const std::string device = series.substr(0, space),
                    what = space == std::string::npos ? "" : series.substr(space + 1);
  const std::string dev = device == "cpu" ? "CPU allocator" : device;
  if (what == "bytes_in_use") return dev + (device == "cpu" ? ": bytes in use" : ": allocated");
  if (what == "peak") return dev + ": peak bytes in use";
  if (what == "reserved") return dev + ": reserved";
  return series;
}

std::string run_label(const std::vector<const RunAnalysis*>& runs, size_t i) {
  if (runs.size() == 1) return "";
  return std::string(1, static_cast<char>('A' + i)) + ": ";
}

// "<what> - A: name  vs  B: name (no data)"; `has_data` says which runs are drawn.
std::string title_of(const std::string& what, const std::vector<const RunAnalysis*>& runs,
                     const std::function<bool(const RunAnalysis&)>& has_data) {
  std::string t = what + " - ";
  for (size_t i = 0; i < runs.size(); ++i) {
    t += (i ? "  vs  " : "") + run_label(runs, i) + runs[i]->name + (has_data(*runs[i]) ? "" : " (no data)");
  }
  return t;
}

}  // namespace

std::string find_gnuplot() {
  if (const char* env = std::getenv("RT_GNUPLOT"); env && *env) return access(env, X_OK) == 0 ? env : "";
  const char* path = std::getenv("PATH");
  std::stringstream dirs(path ? path : "/usr/bin:/bin");
  std::string d;
  while (std::getline(dirs, d, ':')) {
    const fs::path p = fs::path(d.empty() ? "." : d) / "gnuplot";
    if (access(p.c_str(), X_OK) == 0) return p.string();
  }
  return "";
}

std::vector<fs::path> write_plots(const std::vector<const RunAnalysis*>& runs, const fs::path& dir_in,
                                  std::vector<std::string>* notes) {
  const fs::path dir = fs::absolute(dir_in);
  const std::string gnuplot = find_gnuplot();
  if (gnuplot.empty()) {
    throw Error(
        "profile-report --plots needs gnuplot with the pngcairo terminal, which was not found on PATH "
        "(install the Debian package gnuplot-nox: scripts/setup.sh does, or set RT_GNUPLOT)");
  }
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec) throw Error("profile-report --plots: cannot create " + dir.string() + ": " + ec.message());
  std::vector<fs::path> written;
  auto note = [&](const std::string& s) {
    if (notes) notes->push_back(s);
  };

  // Memory over steps: every series of every run, current solid, peak dashed.
  {
    double max_bytes = 0;
    for (const auto* r : runs) {
      for (const auto& [name, v] : r->memory_series) {
        for (double x : v) max_bytes = std::max(max_bytes, x);
      }
    }
    if (max_bytes <= 0) {
      note("memory_plot.png not written: no memory_profile.json (run with --enable_memory_profiling)");
    } else {
      const bool gib = max_bytes >= 4.0 * 1024 * 1024 * 1024;
      const double unit = gib ? 1024.0 * 1024 * 1024 : 1024.0 * 1024;
      std::ostringstream data, plot;
      data << std::setprecision(10);
      int block = 0, colour = 0;
      for (size_t i = 0; i < runs.size(); ++i) {
        for (const auto& [name, v] : runs[i]->memory_series) {
          data << "# " << run_label(runs, i) << name << "\n";
          for (size_t k = 0; k < v.size() && k < runs[i]->memory_steps.size(); ++k) {
            data << runs[i]->memory_steps[k] << " " << v[k] / unit << "\n";
          }
          data << "\n\n";
          const bool peak = name.size() > 5 && name.compare(name.size() - 5, 5, " peak") == 0;
          plot << (block ? ", \\\n     " : "plot ") << "'memory_plot.dat' index " << block
               << " using 1:2 with linespoints pt 7 ps 0.6 lw 2 dt " << (peak ? 2 : 1) << " lc rgb '"
               << kColours[colour++ % 8] << "' title " << quote(run_label(runs, i) + legend_name(name));
          ++block;
        }
      }
      write_file_atomic(dir / "memory_plot.dat", data.str());
      std::ostringstream gp;
      gp << kPreamble << "set output " << quote((dir / "memory_plot.png").string()) << "\n"
         << "set title "
         << quote(title_of("Memory over steps", runs,
                           [](const RunAnalysis& r) { return !r.memory_series.empty(); }))
         << " noenhanced\n"
         << "set ylabel 'Memory (" << (gib ? "GiB" : "MiB") << ")'\nset yrange [0:*]\n"
         << "cd " << quote(dir.string()) << "\n"
         << plot.str() << "\n";
      write_file_atomic(dir / "memory_plot.gp", gp.str());
      run_gnuplot(gnuplot, dir / "memory_plot.gp");
      written.push_back(dir / "memory_plot.png");
    }
  }

  // Step time over steps: per-step time and data-loading time (ms), steady median dashed.
  {
    const bool any =
        std::any_of(runs.begin(), runs.end(), [](const RunAnalysis* r) { return !r->step_times.empty(); });
    if (!any) {
      note("step_time_plot.png not written: no timing_profile.json (run with --enable_timing_profiling)");
    } else {
      std::ostringstream data, plot;
      data << std::setprecision(10);
      int block = 0;
      for (size_t i = 0; i < runs.size(); ++i) {
        const RunAnalysis& r = *runs[i];
        if (r.step_times.empty()) continue;
        const std::string colour = kColours[(2 * i) % 8], data_colour = kColours[(2 * i + 1) % 8];
        data << "# " << run_label(runs, i) << "step, step time ms, data time ms\n";
        for (size_t k = 0; k < r.step_times.size(); ++k) {
          data << r.steps[k] << " " << r.step_times[k] * 1e3 << " "
               << (k < r.data_times.size() ? r.data_times[k] * 1e3 : 0.0) << "\n";
        }
        data << "\n\n";
        const std::string what =
            r.step_time_source == "timing_profile.json" ? "step time" : "step time (mean per log interval)";
        plot << (block ? ", \\\n     " : "plot ") << "'step_time_plot.dat' index " << block
             << " using 1:2 with linespoints pt 7 ps 0.5 lw 2 lc rgb '" << colour << "' title "
             << quote(run_label(runs, i) + what);
        if (!r.data_times.empty()) {
          plot << ", \\\n     'step_time_plot.dat' index " << block << " using 1:3 with lines lw 2 lc rgb '"
               << data_colour << "' title " << quote(run_label(runs, i) + "data loading");
        }
        if (r.steady_step_time.n > 0) {
          std::ostringstream median;
          median << std::fixed << std::setprecision(2) << r.steady_step_time.median * 1e3;
          plot << ", \\\n     " << r.steady_step_time.median * 1e3 << " with lines dt 2 lw 2 lc rgb '"
               << colour << "' title " << quote(run_label(runs, i) + "steady median " + median.str() + " ms");
        }
        ++block;
      }
      write_file_atomic(dir / "step_time_plot.dat", data.str());
      std::ostringstream gp;
      gp << kPreamble << "set output " << quote((dir / "step_time_plot.png").string()) << "\n"
         << "set title "
         << quote(title_of("Step time over steps", runs,
                           [](const RunAnalysis& r) { return !r.step_times.empty(); }))
         << " noenhanced\n"
         << "set ylabel 'Time per step (ms)'\nset yrange [0:*]\nset samples 2\n"
         << "cd " << quote(dir.string()) << "\n"
         << plot.str() << "\n";
      write_file_atomic(dir / "step_time_plot.gp", gp.str());
      run_gnuplot(gnuplot, dir / "step_time_plot.gp");
      written.push_back(dir / "step_time_plot.png");
    }
  }
  return written;
}

}  // namespace rt::report
