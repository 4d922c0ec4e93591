#include "data/lmdb_store.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>

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
  if (static_cast<uint64_t>(st.st_size) >= used_bytes_) return;
  throw Error(
      "LMDB database '" + path_.string() + "' changed under the reader: data.mdb is now " +
      std::to_string(st.st_size) + " bytes, but the database uses " + std::to_string(used_bytes_) +
      " (truncated, or being rewritten, while it was open); restore the database (or rerun preprocess) "
      "and resume with --ckpt last");
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
  check(mdb_txn_begin(env_, nullptr, MDB_RDONLY, &txn), "begin read");
  MDB_stat stat{};
  int rc = mdb_stat(txn, dbi_, &stat);
  mdb_txn_abort(txn);
  check(rc, "stat");
  return stat.ms_entries;
}

std::optional<std::string> LmdbStore::get(std::string_view key) const {
  check_not_shrunk();
  MDB_txn* txn = nullptr;
  check(mdb_txn_begin(env_, nullptr, MDB_RDONLY, &txn), "begin read");
  MDB_val k{key.size(), const_cast<char*>(key.data())};
  MDB_val v{};
  int rc = mdb_get(txn, dbi_, &k, &v);
  std::optional<std::string> out;
  if (rc == 0) out.emplace(static_cast<const char*>(v.mv_data), v.mv_size);
  mdb_txn_abort(txn);
  if (rc != 0 && rc != MDB_NOTFOUND) check(rc, "get '" + std::string(key) + "'");
  return out;
}

void LmdbStore::for_each(const std::function<bool(std::string_view, std::string_view)>& fn) const {
  check_not_shrunk();
  MDB_txn* txn = nullptr;
  check(mdb_txn_begin(env_, nullptr, MDB_RDONLY, &txn), "begin read");
  MDB_cursor* cur = nullptr;
  int rc = mdb_cursor_open(txn, dbi_, &cur);
  if (rc != 0) {
    mdb_txn_abort(txn);
    check(rc, "open cursor");
  }
  MDB_val k{}, v{};
  try {
    for (rc = mdb_cursor_get(cur, &k, &v, MDB_FIRST); rc == 0; rc = mdb_cursor_get(cur, &k, &v, MDB_NEXT)) {
      if (!fn({static_cast<const char*>(k.mv_data), k.mv_size},
              {static_cast<const char*>(v.mv_data), v.mv_size}))
        break;
      check_not_shrunk();  // before the cursor reads its next page
    }
  } catch (...) {
    mdb_cursor_close(cur);
    mdb_txn_abort(txn);
    throw;
  }
  mdb_cursor_close(cur);
  mdb_txn_abort(txn);
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
