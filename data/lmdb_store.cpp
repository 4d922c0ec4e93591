#include "data/lmdb_store.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>

#include "data/mapped_read.h"

namespace rt {

LmdbStore::LmdbStore(const std::filesystem::path& path, Mode mode, uint64_t map_size_bytes)
    : path_(path), mode_(mode) {
  namespace fs = std::filesystem;
  if (mode == Mode::kReadOnly) {
    if (!fs::is_directory(path) || !fs::exists(path / "data.mdb")) {
      throw Error("'" + path.string() + "' is not an LMDB database (expected a folder with data.mdb)");
    }
  } else {
    std::error_code ec;
    fs::create_directories(path, ec);
    if (ec) throw Error("cannot create database folder '" + path.string() + "': " + ec.message());
  }
  check(mdb_env_create(&env_), "mdb_env_create");
  if (map_size_bytes > 0) check(mdb_env_set_mapsize(env_, map_size_bytes), "set map size");
  unsigned flags = MDB_NOTLS;
  if (mode == Mode::kReadOnly) flags |= MDB_RDONLY | MDB_NOLOCK;
  int rc = mdb_env_open(env_, path.c_str(), flags, 0664);
  if (rc != 0) {
    mdb_env_close(env_);
    env_ = nullptr;
    throw Error("cannot open LMDB database '" + path.string() + "': " + mdb_strerror(rc));
  }
  MDB_txn* txn = nullptr;
  check(mdb_txn_begin(env_, nullptr, mode == Mode::kReadOnly ? MDB_RDONLY : 0, &txn), "begin");
  rc = mdb_dbi_open(txn, nullptr, 0, &dbi_);
  if (rc != 0) {
    mdb_txn_abort(txn);
    check(rc, "open database");
  }
  check(mdb_txn_commit(txn), "commit");
  if (mode == Mode::kReadOnly) {
    MDB_envinfo info{};
    MDB_stat stat{};
    mdb_env_info(env_, &info);
    mdb_env_stat(env_, &stat);
    used_bytes_ = (static_cast<uint64_t>(info.me_last_pgno) + 1) * stat.ms_psize;
    psize_ = stat.ms_psize;
    install_mapped_read_guard();
    data_fd_ = ::open((path / "data.mdb").c_str(), O_RDONLY | O_CLOEXEC);
    if (data_fd_ < 0)
      throw Error("cannot open '" + (path / "data.mdb").string() + "': " + std::strerror(errno));
    check_not_shrunk();
  }
}

LmdbStore::~LmdbStore() {
  if (env_ != nullptr) mdb_env_close(env_);
  if (data_fd_ >= 0) ::close(data_fd_);
}

void LmdbStore::check_not_shrunk() const {
  if (data_fd_ < 0) return;
  struct stat st {};
  if (::fstat(data_fd_, &st) != 0) {
    throw Error("cannot stat '" + (path_ / "data.mdb").string() + "': " + std::strerror(errno));
  }
  const auto size = static_cast<uint64_t>(st.st_size);
  if (size < used_bytes_) {
    throw changed_under_reader("data.mdb is now " + std::to_string(size) + " bytes, but the database uses " +
                               std::to_string(used_bytes_));
  }
  // The file may keep its size and still no longer hold the database: rewritten in place (a
  // preprocess into the same folder, a copy over it) and cut back to its old size. Each read
  // transaction starts from the newest meta page, so its last page must lie inside the file.
  MDB_envinfo info{};
  if (!run_guarded([&] { mdb_env_info(env_, &info); })) throw changed_under_reader(faulted_text());
  const uint64_t last = (static_cast<uint64_t>(info.me_last_pgno) + 1) * psize_;
  if (last > size) {
    throw changed_under_reader("its newest meta page names page " + std::to_string(info.me_last_pgno) +
                               ", past the end of data.mdb (" + std::to_string(size) + " bytes)");
  }
  // Nobody writes a database a reader opened read-only: a newest meta page that names another
  // last page is another database, caught while it is still being copied over this one (before
  // any cut back), before a read follows its tree into records that are not this dataset's.
  if (last != used_bytes_) {
    throw changed_under_reader("its newest meta page names page " + std::to_string(info.me_last_pgno) +
                               ", where it named page " + std::to_string(used_bytes_ / psize_ - 1) +
                               " when the reader opened it");
  }
}

Error LmdbStore::changed_under_reader(const std::string& what) const {
  return Error("LMDB database '" + path_.string() + "' changed under the reader: " + what +
               " (truncated, or being rewritten, while it was open); restore the database (or rerun "
               "preprocess) and resume with --ckpt last");
}

std::string LmdbStore::faulted_text() const {
  struct stat st {};
  const bool sized = data_fd_ >= 0 && ::fstat(data_fd_, &st) == 0;
  return "a read of data.mdb (" +
         (sized ? std::to_string(st.st_size) + " bytes" : std::string("size unknown")) +
         ") hit a page the file no longer holds (SIGBUS)";
}

void LmdbStore::check(int rc, const std::string& what) const {
  if (rc == 0) return;
  if (rc == MDB_MAP_FULL) {
    throw MapFullError("LMDB database '" + path_.string() + "' is full (map size " +
                       std::to_string(env_ != nullptr ? map_size() : 0) + " bytes) during " + what);
  }
  throw Error("LMDB error on '" + path_.string() + "' during " + what + ": " + mdb_strerror(rc));
}

uint64_t LmdbStore::map_size() const {
  MDB_envinfo info{};
  mdb_env_info(env_, &info);
  return info.me_mapsize;
}

size_t LmdbStore::count() const {
  check_not_shrunk();
  MDB_txn* txn = nullptr;
  int rc = 0;
  MDB_stat stat{};
  if (!run_guarded([&] {
        rc = mdb_txn_begin(env_, nullptr, MDB_RDONLY, &txn);
        if (rc == 0) rc = mdb_stat(txn, dbi_, &stat);
      })) {
    if (txn != nullptr) mdb_txn_abort(txn);
    throw changed_under_reader(faulted_text());
  }
  if (txn != nullptr) mdb_txn_abort(txn);
  check_not_shrunk();  // as in get: a rewrite during the read
  check(rc, "stat");
  return stat.ms_entries;
}

std::optional<std::string> LmdbStore::get(std::string_view key) const {
  check_not_shrunk();
  MDB_txn* txn = nullptr;
  MDB_val k{key.size(), const_cast<char*>(key.data())};
  MDB_val v{};
  int rc = 0;
  std::optional<std::string> out;
  bool ok = run_guarded([&] {
    rc = mdb_txn_begin(env_, nullptr, MDB_RDONLY, &txn);
    if (rc == 0) rc = mdb_get(txn, dbi_, &k, &v);
  });
  if (ok && rc == 0) {
    out.emplace(v.mv_size, '\0');  // allocated outside the guard; the bytes copied inside it
    char* dst = out->data();
    ok = run_guarded([&] { std::memcpy(dst, v.mv_data, v.mv_size); });
  }
  if (txn != nullptr) mdb_txn_abort(txn);
  if (!ok) throw changed_under_reader(faulted_text());
  // The check before the read cannot see a rewrite that starts during it: the read may then
  // follow the new meta page into the other database (its record, no record, an LMDB error).
  // A copy over the file writes it from its start, meta pages first, so if they still name
  // this database now, every page the read touched was still this database's.
  check_not_shrunk();
  if (rc != 0 && rc != MDB_NOTFOUND) check(rc, "get '" + std::string(key) + "'");
  if (rc != 0) out.reset();
  return out;
}

void LmdbStore::for_each(const std::function<bool(std::string_view, std::string_view)>& fn) const {
  check_not_shrunk();
  MDB_txn* txn = nullptr;
  MDB_cursor* cur = nullptr;
  int rc = 0;
  auto close = [&] {
    if (cur != nullptr) mdb_cursor_close(cur);
    if (txn != nullptr) mdb_txn_abort(txn);
  };
  if (!run_guarded([&] {
        rc = mdb_txn_begin(env_, nullptr, MDB_RDONLY, &txn);
        if (rc == 0) rc = mdb_cursor_open(txn, dbi_, &cur);
      })) {
    close();
    throw changed_under_reader(faulted_text());
  }
  if (rc != 0) {
    close();
    check(rc, "open cursor");
  }
  // The callback sees copies: it runs outside the guard, and must not touch the map.
  MDB_val k{}, v{};
  std::string key, value;
  MDB_cursor_op op = MDB_FIRST;
  try {
    for (;;) {
      if (!run_guarded([&] { rc = mdb_cursor_get(cur, &k, &v, op); }))
        throw changed_under_reader(faulted_text());
      if (rc != 0) break;
      key.resize(k.mv_size);
      value.resize(v.mv_size);
      char *kd = key.data(), *vd = value.data();
      if (!run_guarded([&] {
            std::memcpy(kd, k.mv_data, k.mv_size);
            std::memcpy(vd, v.mv_data, v.mv_size);
          }))
        throw changed_under_reader(faulted_text());
      check_not_shrunk();  // as in get: what the step read is this database's only if it still is
      if (!fn(key, value)) break;
      op = MDB_NEXT;
    }
  } catch (...) {
    close();
    throw;
  }
  close();
  check_not_shrunk();  // the end (or an error) of the walk, read while it was still this database
  if (rc != 0 && rc != MDB_NOTFOUND) check(rc, "read");
}

std::string LmdbStore::key_for_index(uint64_t index) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%08llu", static_cast<unsigned long long>(index));
  return buf;
}

LmdbStore::Writer::Writer(LmdbStore& store) : store_(store) {
  if (store.mode_ != Mode::kReadWrite) throw Error("'" + store.path_.string() + "' is open read-only");
  store_.check(mdb_txn_begin(store_.env_, nullptr, 0, &txn_), "begin write");
}

LmdbStore::Writer::~Writer() {
  if (txn_ != nullptr) mdb_txn_abort(txn_);
}

void LmdbStore::Writer::put(std::string_view key, std::string_view value) {
  if (txn_ == nullptr)
    throw Error("write to '" + store_.path_.string() + "' after a failed or committed transaction");
  MDB_val k{key.size(), const_cast<char*>(key.data())};
  MDB_val v{value.size(), const_cast<char*>(value.data())};
  int rc = mdb_put(txn_, store_.dbi_, &k, &v, 0);
  if (rc != 0) {
    mdb_txn_abort(txn_);
    txn_ = nullptr;
    store_.check(rc, "put '" + std::string(key) + "'");
  }
}

void LmdbStore::Writer::commit() {
  if (txn_ == nullptr)
    throw Error("commit to '" + store_.path_.string() + "' after a failed or committed transaction");
  int rc = mdb_txn_commit(txn_);
  txn_ = nullptr;  // mdb_txn_commit frees the transaction even on failure.
  store_.check(rc, "commit");
}

}  // namespace rt
