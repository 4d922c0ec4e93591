#include "data/lmdb_store.h"

#include <gtest/gtest.h>

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

}  // namespace
}  // namespace rt
