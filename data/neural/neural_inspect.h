// `preprocess --inspect DB` for neural databases (neural_record.h): what `inspect_database`
// (data/preprocess.h) prints for audio, in the neural vocabulary — groups, units, behaviour
// dims, trials, bins per trial, bin width, smoothing — and a decode check of every record.
#pragma once

#include <filesystem>
#include <ostream>
#include <string>
#include <vector>

namespace rt::neural {

// True when `db` holds a neural database: its metadata.yaml says `kind: neural`, or (no or
// foreign metadata) its first record has a "spikes" buffer. Throws rt::Error when `db`
// cannot be opened as an LMDB database.
bool is_neural_database(const std::filesystem::path& db);

// Prints the database's entry count, spike representation (counts or smoothed with σ), and per
// group: units, behaviour dims, trials (train/eval), bins per trial (range when they vary),
// bin width and total recorded time. Applies the loader's checks (NeuralDatabaseCheck) to every
// record and to the whole database; returns "key: reason" for each record that fails and
// "database: reason" when the database does (no records, no or disagreeing metadata.yaml);
// empty: training accepts it.
std::vector<std::string> inspect_neural_database(const std::filesystem::path& db, std::ostream& out);

}  // namespace rt::neural
