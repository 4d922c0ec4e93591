#include "data/neural/neural_inspect.h"

#include <algorithm>
#include <cstdio>
#include <map>
#include <set>
#include <sstream>

#include "audio_example.pb.h"
#include "data/lmdb_store.h"
#include "data/neural/neural_record.h"
#include "util/atomic_file.h"
#include "util/error.h"
#include "util/json.h"
#include "util/printable.h"
#include "util/signals.h"

namespace rt::neural {
namespace {

std::string fmt(double v, const char* f = "%g") {
  char buf[64];
  std::snprintf(buf, sizeof buf, f, v);
  return buf;
}

}  // namespace

bool is_neural_database(const std::filesystem::path& db) {
  std::error_code ec;
  if (std::filesystem::is_regular_file(db / "metadata.yaml", ec) &&
      read_file(db / "metadata.yaml").find("kind: neural") != std::string::npos) {
    return true;
  }
  // No or foreign metadata: the first record decides by its buffers, whether or not it is
  // valid (a bad neural record is reported as one, not as a bad audio record).
  LmdbStore store(db, LmdbStore::Mode::kReadOnly);
  bool neural = false;
  store.for_each([&](std::string_view, std::string_view value) {
    audio_example::AudioExample ex;
    neural =
        ex.ParseFromArray(value.data(), static_cast<int>(value.size())) && ex.buffers().count("spikes") > 0;
    return false;
  });
  return neural;
}

std::vector<std::string> inspect_neural_database(const std::filesystem::path& db, std::ostream& out) {
  LmdbStore store(db, LmdbStore::Mode::kReadOnly);
  const size_t entries = store.count();
  out << "database: " << terminal_safe(db.string()) << "\n";
  out << "kind: neural\n";
  out << "entries: " << entries << " trials\n";
  // The loader's own checks (NeuralDataset), every failure listed instead of the first.
  NeuralDatabaseCheck check(db);

  struct GroupStats {
    int64_t units = 0, dims = 0, train = 0, eval = 0, other = 0, min_bins = 0, max_bins = 0, total_bins = 0;
    std::set<double> bin_ms, sigma;
    size_t order = 0;
  };
  std::map<std::string, GroupStats> groups;
  std::vector<std::string> bad;
  size_t index = 0;
  store.for_each([&](std::string_view key_view, std::string_view value) {
    const std::string key(key_view);
    throw_if_stop_requested("while inspecting " + db.string());
    try {
      NeuralRecord r = check.add(index++, key, value, "record '" + printable(key) + "'");
      auto [it, fresh] = groups.try_emplace(r.group);
      GroupStats& g = it->second;
      const int64_t T = r.spikes.size(0);
      if (fresh) {
        g.order = groups.size() - 1;
        g.units = r.spikes.size(1);
        g.dims = r.behavior.size(1);
        g.min_bins = g.max_bins = T;
      }
      g.min_bins = std::min(g.min_bins, T);
      g.max_bins = std::max(g.max_bins, T);
      g.total_bins += T;
      g.bin_ms.insert(r.bin_ms);
      g.sigma.insert(r.smoothing_sigma_ms);
      (r.split == "train" ? g.train : r.split == "eval" ? g.eval : g.other) += 1;
    } catch (const std::exception& e) {
      bad.push_back(key + ": " + e.what());
    }
    return true;
  });

  std::vector<std::pair<std::string, const GroupStats*>> ordered;
  for (const auto& [name, g] : groups) ordered.emplace_back(name, &g);
  std::sort(ordered.begin(), ordered.end(),
            [](const auto& a, const auto& b) { return a.second->order < b.second->order; });
  std::set<double> sigmas;
  for (const auto& [name, g] : ordered) sigmas.insert(g->sigma.begin(), g->sigma.end());
  out << "spikes: ";
  if (sigmas.empty()) {
    out << "n/a (no readable records)\n";
  } else if (sigmas.size() == 1 && *sigmas.begin() == 0.0) {
    out << "binned counts (smoothed at load with data.smoothing_sigma_ms)\n";
  } else {
    out << "smoothed at import, sigma";
    for (double s : sigmas) out << " " << fmt(s) << " ms";
    out << (sigmas.size() > 1 ? " (differs between records)" : "") << "\n";
  }
  out << "groups: " << ordered.size() << "\n";
  int64_t max_units = 0;
  for (const auto& [name, g] : ordered) {
    max_units = std::max(max_units, g->units);
    const int64_t trials = g->train + g->eval + g->other;
    out << "  " << printable(name) << ": " << g->units << " units, " << g->dims << " behaviour dims, "
        << trials << " trials (" << g->train << " train, " << g->eval << " eval"
        << (g->other ? ", " + std::to_string(g->other) + " unlabelled" : "") << "), "
        << (g->min_bins == g->max_bins ? std::to_string(g->min_bins)
                                       : std::to_string(g->min_bins) + "–" + std::to_string(g->max_bins))
        << " bins of";
    for (double b : g->bin_ms) out << " " << fmt(b) << " ms";
    const double seconds = static_cast<double>(g->total_bins) * *g->bin_ms.begin() / 1000.0;
    out << " (" << fmt(seconds, "%.1f") << " s recorded)\n";
  }
  if (ordered.size() > 1)
    out << "widest group: " << max_units << " units (narrower groups are zero-padded)\n";
  if (bad.empty() && entries > 0) {
    out << "all " << entries << " records decode\n";
  } else if (!bad.empty()) {
    out << bad.size() << " of " << entries << " records are bad:\n";
    for (const auto& b : bad) out << "  " << b << "\n";
  }
  try {
    check.finish(entries);
  } catch (const Error& e) {
    out << "database: " << e.what() << "\n";
    bad.push_back(std::string("database: ") + e.what());
  }
  return bad;
}

}  // namespace rt::neural
