#include "data/lmdb_store.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <csignal>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "data/mapped_read.h"
#include "support/test_support.h"

namespace rt {
namespace {

TEST(LmdbStore, KeysAreRaveStyleEightDigitIndices) {
  EXPECT_EQ(LmdbStore::key_for_index(0), "00000000");
  EXPECT_EQ(LmdbStore::key_for_index(1234), "00001234");
}

TEST(LmdbStore, WritesAreVisibleOnlyAfterCommitAndReadInKeyOrder) {
  testing::ScratchDir dir;
  {
    LmdbStore store(dir / "db", LmdbStore::Mode::kReadWrite, 1 << 20);
    {
      LmdbStore::Writer w(store);
      w.put("00000001", "b");
      w.put("00000000", "a");
      // Destroyed without commit: aborted.
    }
    EXPECT_EQ(store.count(), 0u);
    LmdbStore::Writer w(store);
    w.put("00000001", "b");
    w.put("00000000", "a");
    w.commit();
  }
  LmdbStore ro(dir / "db", LmdbStore::Mode::kReadOnly);
  EXPECT_EQ(ro.count(), 2u);
  EXPECT_EQ(ro.get("00000000").value(), "a");
  EXPECT_FALSE(ro.get("00000009").has_value());
  std::string order;
  ro.for_each([&](std::string_view, std::string_view v) {
    order += v;
    return true;
  });
  EXPECT_EQ(order, "ab");
}

TEST(LmdbStore, MapFullIsReportedAndEarlierCommitsSurvive) {
  testing::ScratchDir dir;
  LmdbStore store(dir / "db", LmdbStore::Mode::kReadWrite, 256 * 1024);
  const std::string value(16 * 1024, 'x');
  size_t committed = 0;
  bool full = false;
  for (int i = 0; i < 100 && !full; ++i) {
    try {
      LmdbStore::Writer w(store);
      w.put(LmdbStore::key_for_index(i), value);
      w.commit();
      ++committed;
    } catch (const MapFullError& e) {
      full = true;
      EXPECT_NE(std::string(e.what()).find("is full"), std::string::npos);
    }
  }
  ASSERT_TRUE(full);
  EXPECT_GT(committed, 0u);
  EXPECT_EQ(store.count(), committed);
  EXPECT_EQ(store.get(LmdbStore::key_for_index(0)).value(), value);
}

TEST(LmdbStore, OpeningSomethingElseNamesThePath) {
  testing::ScratchDir dir;
  try {
    LmdbStore ro(dir / "missing", LmdbStore::Mode::kReadOnly);
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("missing"), std::string::npos);
  }
}

// A database at `db` of `entries` records of 64 KiB of `fill` each (overflow pages, well past
// the file's first pages).
void make_db(const std::filesystem::path& db, int entries, char fill) {
  LmdbStore rw(db, LmdbStore::Mode::kReadWrite, 32 << 20);
  LmdbStore::Writer w(rw);
  for (int i = 0; i < entries; ++i) w.put(LmdbStore::key_for_index(i), std::string(64 * 1024, fill));
  w.commit();
}

// get, count and for_each of `ro` each throw rt::Error naming `db` as changed under the reader,
// with `detail` in the message.
void expect_every_read_refused(const LmdbStore& ro, const std::filesystem::path& db,
                               const std::string& detail) {
  for (const auto& read : std::vector<std::function<void()>>{
           [&] { ro.get(LmdbStore::key_for_index(7)); }, [&] { ro.count(); },
           [&] { ro.for_each([](std::string_view, std::string_view) { return true; }); }}) {
    try {
      read();
      ADD_FAILURE() << "a read of the changed database went through";
    } catch (const Error& e) {
      const std::string what = e.what();
      EXPECT_NE(what.find("'" + db.string() + "' changed under the reader"), std::string::npos) << what;
      EXPECT_NE(what.find(detail), std::string::npos) << what;
    }
  }
}

// A database truncated under its reader (truncate -s 0 DB/data.mdb while training) is an error
// naming it. Before: the next read of a mapped page past the file's end raised SIGBUS (rc 135).
TEST(LmdbStore, ADatabaseTruncatedUnderTheReaderIsAnErrorNamingIt) {
  testing::ScratchDir dir;
  const std::string value(64 * 1024, 'v');  // overflow pages, well past the file's first pages
  {
    LmdbStore rw(dir / "db", LmdbStore::Mode::kReadWrite, 16 << 20);
    LmdbStore::Writer w(rw);
    for (int i = 0; i < 8; ++i) w.put(LmdbStore::key_for_index(i), value);
    w.commit();
  }
  LmdbStore ro(dir / "db", LmdbStore::Mode::kReadOnly);
  ASSERT_EQ(ro.get(LmdbStore::key_for_index(7)).value(), value);
  std::filesystem::resize_file(dir / "db" / "data.mdb", 0);
  expect_every_read_refused(ro, dir / "db", "data.mdb is now 0 bytes");
  // Opening it now is refused the same way, or by LMDB itself, naming the database.
  try {
    LmdbStore again(dir / "db", LmdbStore::Mode::kReadOnly);
    ADD_FAILURE() << "the empty database opened";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find((dir / "db").string()), std::string::npos) << e.what();
  }
}

// The sibling of a truncation: the file rewritten in place under the reader (a preprocess into
// the same folder, a bigger database copied over it) and cut back to the size it had when the
// reader opened it. Its size check passed, the next read transaction started from the new meta
// page, whose tree lies past the file's end: SIGBUS, no message, the summary left "running".
TEST(LmdbStore, ADatabaseRewrittenAndCutBackToItsSizeIsAnErrorNamingIt) {
  testing::ScratchDir dir;
  const std::string value(64 * 1024, 'v');
  make_db(dir / "db", 8, 'v');
  make_db(dir / "bigger", 40, 'w');
  const auto data = dir / "db" / "data.mdb";
  const auto size = std::filesystem::file_size(data);
  LmdbStore ro(dir / "db", LmdbStore::Mode::kReadOnly);
  ASSERT_EQ(ro.get(LmdbStore::key_for_index(7)).value(), value);
  // In place (the same inode, as the reader's map sees it), then back to the old size.
  std::filesystem::copy_file(dir / "bigger" / "data.mdb", data,
                             std::filesystem::copy_options::overwrite_existing);
  std::filesystem::resize_file(data, size);
  ASSERT_EQ(std::filesystem::file_size(data), size);
  expect_every_read_refused(ro, dir / "db", "past the end of data.mdb");
}

// The same rewrite caught before the cut back: while the bigger database lies over this one
// (its size check and its pages' bounds both pass), the newest meta page names another last
// page than the reader opened. Before: the read followed the new tree and returned the other
// database's records (a training run failed on "record … has no buffer 'waveform'").
TEST(LmdbStore, ADatabaseRewrittenInPlaceIsAnErrorBeforeItIsCutBack) {
  testing::ScratchDir dir;
  make_db(dir / "db", 8, 'v');
  make_db(dir / "bigger", 40, 'w');
  LmdbStore ro(dir / "db", LmdbStore::Mode::kReadOnly);
  ASSERT_EQ(ro.get(LmdbStore::key_for_index(7)).value(), std::string(64 * 1024, 'v'));
  std::filesystem::copy_file(dir / "bigger" / "data.mdb", dir / "db" / "data.mdb",
                             std::filesystem::copy_options::overwrite_existing);
  expect_every_read_refused(ro, dir / "db", "when the reader opened it");
}

// The rewrite racing a read: a bigger database copied over this one (and cut back) while `get`
// runs. Every read either returns this database's record or is refused as changed under the
// reader; none returns the other database's bytes or another error. Before: the check ran only
// before the read, so a read that began before the copy and followed the new meta page returned
// the other database's record or an LMDB error (a training run failed on "record … vanished" or
// a decoding error instead of naming the change, about one run in thirty under load).
TEST(LmdbStore, ADatabaseRewrittenWhileAReadRunsIsRefusedNeverReadAcross) {
  testing::ScratchDir dir;
  make_db(dir / "original", 8, 'v');
  make_db(dir / "bigger", 40, 'w');
  const std::string value(64 * 1024, 'v');
  const auto size = std::filesystem::file_size(dir / "original" / "data.mdb");
  std::mt19937 rng(7);
  int refused = 0, reads = 0;
  for (int round = 0; round < 300; ++round) {
    const auto db = dir / "db";
    std::filesystem::remove_all(db);
    std::filesystem::copy(dir / "original", db);
    LmdbStore ro(db, LmdbStore::Mode::kReadOnly);
    std::atomic<bool> go{false};
    const int delay_us = static_cast<int>(rng() % 300);
    std::thread writer([&] {
      while (!go.load()) std::this_thread::yield();
      std::this_thread::sleep_for(std::chrono::microseconds(delay_us));
      std::filesystem::copy_file(dir / "bigger" / "data.mdb", db / "data.mdb",
                                 std::filesystem::copy_options::overwrite_existing);
      std::filesystem::resize_file(db / "data.mdb", size);
    });
    go.store(true);
    std::string wrong;  // what a read returned that it must not have
    try {
      for (int i = 0; wrong.empty(); ++i) {
        const auto got = ro.get(LmdbStore::key_for_index(i % 8));
        ++reads;
        if (!got)
          wrong = "record " + std::to_string(i % 8) + " vanished";
        else if (*got != value)
          wrong = "the other database's record came back";
      }
    } catch (const Error& e) {
      const std::string what = e.what();
      if (what.find("'" + db.string() + "' changed under the reader") == std::string::npos) wrong = what;
      ++refused;
    }
    writer.join();
    ASSERT_TRUE(wrong.empty()) << "round " << round << ": " << wrong;
  }
  EXPECT_EQ(refused, 300);
  EXPECT_GT(reads, 300);
}

// The guard itself: a read of a mapped page the file no longer holds returns false inside
// run_guarded (whatever the check before it missed), and the same read outside a guard still
// ends the process by SIGBUS (the disposition it had).
TEST(MappedRead, AFaultInsideAGuardIsReportedAndOutsideItKeepsItsDisposition) {
  install_mapped_read_guard();
  testing::ScratchDir dir;
  const auto file = dir / "mapped";
  const long page = ::sysconf(_SC_PAGESIZE);
  std::ofstream(file).put('x');
  std::filesystem::resize_file(file, 2 * page);
  const int fd = ::open(file.c_str(), O_RDWR | O_CLOEXEC);
  ASSERT_GE(fd, 0);
  void* map = ::mmap(nullptr, 2 * page, PROT_READ, MAP_SHARED, fd, 0);
  ASSERT_NE(map, MAP_FAILED);
  char sink[16];
  EXPECT_TRUE(run_guarded([&] { std::memcpy(sink, static_cast<char*>(map) + page, sizeof sink); }));
  ASSERT_EQ(::ftruncate(fd, 0), 0);
  EXPECT_FALSE(run_guarded([&] { std::memcpy(sink, static_cast<char*>(map) + page, sizeof sink); }));
  EXPECT_FALSE(run_guarded([&] { std::memcpy(sink, map, sizeof sink); }));  // again: the guard rearms
  const pid_t child = ::fork();
  if (child == 0) {
    volatile char c = *(static_cast<volatile char*>(map) + page);
    (void)c;
    ::_exit(0);
  }
  int status = 0;
  ASSERT_EQ(::waitpid(child, &status, 0), child);
  EXPECT_TRUE(WIFSIGNALED(status) && WTERMSIG(status) == SIGBUS) << "status " << status;
  ASSERT_EQ(::ftruncate(fd, 2 * page), 0);
  EXPECT_TRUE(run_guarded([&] { std::memcpy(sink, static_cast<char*>(map) + page, sizeof sink); }));
  ::munmap(map, 2 * page);
  ::close(fd);
}

}  // namespace
}  // namespace rt
