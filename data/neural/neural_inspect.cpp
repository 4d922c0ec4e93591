#include "data/neural/neural_inspect.h"

#include <algorithm>
#include <cstdio>
#include <map>
#include <set>
#include <sstream>

#include "data/lmdb_store.h"
#include "data/neural/neural_record.h"
#include "util/atomic_file.h"
#include "util/error.h"
#include "util/json.h"

namespace rt::neural {
namespace {

// The few fields of the importer's metadata.yaml (write_neural_metadata) inspect compares
// against: it is our own fixed layout, so a line reader suffices.
struct YamlSummary {
  bool present = false;
  bool neural = false;
  long long count = -1;
  std::map<std::string, long long> group_trials;
};

std::string trim(std::string s) {
  const auto b = s.find_first_not_of(" \t\r");
  const auto e = s.find_last_not_of(" \t\r");
  return b == std::string::npos ? std::string() : s.substr(b, e - b + 1);
}

YamlSummary read_yaml(const std::filesystem::path& db) {
  YamlSummary y;
  const auto path = db / "metadata.yaml";
  std::error_code ec;
  if (!std::filesystem::is_regular_file(path, ec)) return y;
  y.present = true;
  std::istringstream in(read_file(path));
  std::string line, group;
  while (std::getline(in, line)) {
    auto colon = line.find(':');
    if (colon == std::string::npos) continue;
    std::string key = trim(line.substr(0, colon)), value = trim(line.substr(colon + 1));
    if (key.rfind("- ", 0) == 0) key = trim(key.substr(2));
    try {
      if (key == "kind") y.neural = value == "neural";
      if (key == "count") y.count = std::stoll(value);
      if (key == "name")
        group = value.size() >= 2 && value.front() == '"' ? Json::parse(value).get<std::string>() : value;
      if (key == "trials" && !group.empty()) y.group_trials[group] = std::stoll(value);
    } catch (const std::exception&) {
      // A malformed line is reported as a mismatch below (the value stays unknown).
    }
  }
  return y;
}

std::string fmt(double v, const char* f = "%g") {
  char buf[64];
  std::snprintf(buf, sizeof buf, f, v);
  return buf;
}

}  // namespace

bool is_neural_database(const std::filesystem::path& db) {
  if (read_yaml(db).neural) return true;
  LmdbStore store(db, LmdbStore::Mode::kReadOnly);
  bool neural = false;
  store.for_each([&](std::string_view key, std::string_view value) {
    try {
      decode_neural_record(value, std::string(key));
      neural = true;
    } catch (const std::exception&) {
    }
    return false;  // the first record decides
  });
  return neural;
}

std::vector<std::string> inspect_neural_database(const std::filesystem::path& db, std::ostream& out) {
  LmdbStore store(db, LmdbStore::Mode::kReadOnly);
  const YamlSummary yaml = read_yaml(db);
  const size_t entries = store.count();
  out << "database: " << db.string() << "\n";
  out << "kind: neural\n";
  out << "entries: " << entries << " trials\n";
  if (!yaml.present) out << "metadata.yaml: missing (everything below comes from the records)\n";

  struct GroupStats {
    int64_t units = 0, dims = 0, train = 0, eval = 0, other = 0, min_bins = 0, max_bins = 0, total_bins = 0;
    std::set<double> bin_ms, sigma;
    size_t order = 0;
  };
  std::map<std::string, GroupStats> groups;
  std::vector<std::string> bad;
  store.for_each([&](std::string_view key_view, std::string_view value) {
    const std::string key(key_view);
    try {
      NeuralRecord r = decode_neural_record(value, "record '" + key + "'");
      auto [it, fresh] = groups.try_emplace(r.group);
      GroupStats& g = it->second;
      const int64_t T = r.spikes.size(0);
      if (fresh) {
        g.order = groups.size() - 1;
        g.units = r.spikes.size(1);
        g.dims = r.behavior.size(1);
        g.min_bins = g.max_bins = T;
      } else if (r.spikes.size(1) != g.units || r.behavior.size(1) != g.dims) {
        throw Error("group '" + r.group + "' has " + std::to_string(g.units) + " units / " +
                    std::to_string(g.dims) + " behaviour dims in its first record but " +
                    std::to_string(r.spikes.size(1)) + " / " + std::to_string(r.behavior.size(1)) + " here");
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
    out << "  " << name << ": " << g->units << " units, " << g->dims << " behaviour dims, " << trials
        << " trials (" << g->train << " train, " << g->eval << " eval"
        << (g->other ? ", " + std::to_string(g->other) + " unlabelled" : "") << "), "
        << (g->min_bins == g->max_bins ? std::to_string(g->min_bins)
                                       : std::to_string(g->min_bins) + "–" + std::to_string(g->max_bins))
        << " bins of";
    for (double b : g->bin_ms) out << " " << fmt(b) << " ms";
    const double seconds = static_cast<double>(g->total_bins) * *g->bin_ms.begin() / 1000.0;
    out << " (" << fmt(seconds, "%.1f") << " s recorded)\n";
    auto y = yaml.group_trials.find(name);
    if (yaml.present && (y == yaml.group_trials.end() || y->second != trials)) {
      out << "    note: metadata.yaml says "
          << (y == yaml.group_trials.end() ? std::string("nothing about this group")
                                           : std::to_string(y->second) + " trials")
          << "\n";
    }
  }
  if (ordered.size() > 1)
    out << "widest group: " << max_units << " units (narrower groups are zero-padded)\n";
  if (yaml.present && yaml.count >= 0 && static_cast<size_t>(yaml.count) != entries) {
    out << "note: metadata.yaml says count " << yaml.count << "\n";
  }
  if (bad.empty()) {
    out << "all " << entries << " records decode\n";
  } else {
    out << bad.size() << " of " << entries << " records are bad:\n";
    for (const auto& b : bad) out << "  " << b << "\n";
  }
  return bad;
}

}  // namespace rt::neural
