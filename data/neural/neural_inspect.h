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
// foreign metadata) its first record decodes as a neural record. Throws rt::Error when `db`
// cannot be opened as an LMDB database.
bool is_neural_database(const std::filesystem::path& db);

// Prints the database's entry count, spike representation (counts or smoothed with σ), and per
// group: units, behaviour dims, trials (train/eval), bins per trial (range when they vary),
// bin width and total recorded time; compares against metadata.yaml when present. Decodes
// every record; returns "key: reason" for each one that fails, or whose group disagrees with
// the group's first record on units/dims (empty: all good).
std::vector<std::string> inspect_neural_database(const std::filesystem::path& db, std::ostream& out);

}  // namespace rt::neural
