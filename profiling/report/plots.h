// profile-report --plots: PNG plots drawn by gnuplot (Debian package gnuplot-nox, pngcairo
// terminal) run as a subprocess: memory_plot.png (the JAX guide's "Memory over steps": current
// and peak, MiB or GiB) and step_time_plot.png (step time and data-loading time per step in ms,
// with the steady-state median). With two runs, both are drawn on the same axes.
#pragma once

#include <filesystem>
#include <string>
#include <vector>

#include "profiling/report/run_report.h"

namespace rt::report {

// The gnuplot executable: $RT_GNUPLOT when set, else "gnuplot" found on PATH; "" when absent.
std::string find_gnuplot();

// Writes the plots for `runs` (1 or 2; labelled A and B when 2) into `dir` (created if needed)
// and returns the files written. A plot whose data no run has is skipped and explained in
// *notes (e.g. "no memory_profile.json"). The gnuplot scripts are kept next to the PNGs
// (<plot>.gp, data in <plot>.dat) so that a user can restyle a plot.
// Throws rt::Error when gnuplot is missing (naming the package to install), fails (with its
// message), or a file cannot be written.
std::vector<std::filesystem::path> write_plots(const std::vector<const RunAnalysis*>& runs,
                                               const std::filesystem::path& dir,
                                               std::vector<std::string>* notes);

}  // namespace rt::report
