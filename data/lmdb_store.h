// A thin RAII wrapper over one LMDB environment holding one unnamed database — the layout
// RAVE's datasets use (keys "%08d", values serialized AudioExample messages).
//
// Thread safety: one LmdbStore may be shared by many reader threads (MDB_NOTLS: each get()
// opens its own read transaction). Writes go through a Writer, one at a time.
#pragma once

#include <lmdb.h>

#include <cstdint>
#include <filesystem>
#include <functional>
#include <optional>
#include <string>
#include <string_view>

#include "util/error.h"

namespace rt {

// Thrown when a write does not fit in the map (`--max_db_size`). Everything committed before
// the failing transaction stays readable; the failing transaction is aborted.
class MapFullError : public Error {
 public:
  using Error::Error;
};

class LmdbStore {
 public:
  enum class Mode { kReadOnly, kReadWrite };

  // Opens (kReadWrite: creates) the database directory `path`. `map_size_bytes` is the upper
  // bound of the file (a limit, not a reservation: LMDB files are sparse). For read-only
  // opens 0 means "whatever the file holds". Throws rt::Error naming the path.
  LmdbStore(const std::filesystem::path& path, Mode mode, uint64_t map_size_bytes = 0);
  ~LmdbStore();
  LmdbStore(const LmdbStore&) = delete;
  LmdbStore& operator=(const LmdbStore&) = delete;

  const std::filesystem::path& path() const { return path_; }
  uint64_t map_size() const;
  size_t count() const;

  // The value stored under `key`, or nullopt. Thread-safe. Read-only stores check first that
  // data.mdb still holds every page the database uses, and every page its newest meta page
  // names (check_not_shrunk), and read the map inside a SIGBUS guard: a file truncated or
  // rewritten under the reader is an rt::Error naming it, never the SIGBUS of a read past its
  // end (which killed the process with no message).
  std::optional<std::string> get(std::string_view key) const;

  // Calls `fn(key, value)` for every entry in key order (copies of the mapped bytes, valid for
  // the call); stop early by returning false.
  void for_each(const std::function<bool(std::string_view, std::string_view)>& fn) const;

  // Batches puts into one transaction. commit() makes them durable; destruction without
  // commit() aborts. A put or commit that overflows the map throws MapFullError, after which
  // the Writer is dead (only destruction is valid).
  class Writer {
   public:
    explicit Writer(LmdbStore& store);
    ~Writer();
    Writer(const Writer&) = delete;
    Writer& operator=(const Writer&) = delete;
    void put(std::string_view key, std::string_view value);
    void commit();

   private:
    LmdbStore& store_;
    MDB_txn* txn_ = nullptr;
  };

  // Formats an example index as RAVE's key: "%08d".
  static std::string key_for_index(uint64_t index);

 private:
  void check(int rc, const std::string& what) const;
  // Read-only stores: throws rt::Error naming data.mdb when the file is now shorter than the
  // pages the database used when it was opened (truncate -s 0, a copy over it in progress).
  // LMDB maps the file; reading a mapped page past the end of the file raises SIGBUS.
  void check_not_shrunk() const;
  // "LMDB database '<path>' changed under the reader: <what> (…)".
  Error changed_under_reader(const std::string& what) const;
  // What a read that faulted (SIGBUS inside a guarded read, lmdb_store.cpp) saw.
  std::string faulted_text() const;

  std::filesystem::path path_;
  Mode mode_;
  MDB_env* env_ = nullptr;
  MDB_dbi dbi_ = 0;
  int data_fd_ = -1;         // data.mdb, read-only stores: its size is checked before reads
  uint64_t used_bytes_ = 0;  // the pages the database used when opened: (last page + 1) × page size
  uint64_t psize_ = 0;       // the page size
};

}  // namespace rt
