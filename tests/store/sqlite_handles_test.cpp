// The store's SQLite handles (detail::SqlitePtr, detail::StmtPtr in engine/store/run_store.h):
// a connection is closed and a statement finalized exactly when its owner goes.
#include <gtest/gtest.h>
#include <sqlite3.h>
#include <unistd.h>

#include <cstdio>
#include <string>

#include "engine/store/run_store.h"

using tessera::detail::SqlitePtr;
using tessera::detail::StmtPtr;

namespace {

SqlitePtr open_db(const std::string& path) {
    sqlite3* raw = nullptr;
    int rc =
        sqlite3_open_v2(path.c_str(), &raw, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE, nullptr);
    SqlitePtr db(raw);  // owned even when opening failed (sqlite3 hands out a handle to close)
    EXPECT_EQ(rc, SQLITE_OK) << path;
    return db;
}

int exec(sqlite3* db, const char* sql) {
    return sqlite3_exec(db, sql, nullptr, nullptr, nullptr);
}

}  // namespace

TEST(SqliteHandles, ClosingTheConnectionReleasesItsLock) {
    const std::string path =
        ::testing::TempDir() + "sqlite_handles_" + std::to_string(::getpid()) + ".db";
    std::remove(path.c_str());
    SqlitePtr other = open_db(path);
    sqlite3_busy_timeout(other.get(), 0);
    {
        SqlitePtr holder = open_db(path);
        ASSERT_EQ(exec(holder.get(),
                       "PRAGMA locking_mode=EXCLUSIVE; CREATE TABLE t(x);"
                       "INSERT INTO t VALUES (1);"),
                  SQLITE_OK);
        // the exclusive lock is held as long as the connection is open
        EXPECT_EQ(exec(other.get(), "INSERT INTO t VALUES (2);"), SQLITE_BUSY);
    }
    EXPECT_EQ(exec(other.get(), "INSERT INTO t VALUES (2);"), SQLITE_OK)
        << sqlite3_errmsg(other.get());
    other.reset();
    std::remove(path.c_str());
}

TEST(SqliteHandles, StatementsAreFinalizedWithTheirOwner) {
    SqlitePtr db = open_db(":memory:");
    sqlite3_stmt* raw = nullptr;
    ASSERT_EQ(sqlite3_prepare_v2(db.get(), "SELECT 1", -1, &raw, nullptr), SQLITE_OK);
    {
        StmtPtr st(raw);
        EXPECT_EQ(sqlite3_next_stmt(db.get(), nullptr), st.get());  // alive on the connection
        StmtPtr moved = std::move(st);
        EXPECT_EQ(st.get(), nullptr);  // NOLINT(bugprone-use-after-move)
        EXPECT_EQ(sqlite3_next_stmt(db.get(), nullptr), moved.get());
    }
    EXPECT_EQ(sqlite3_next_stmt(db.get(), nullptr), nullptr);  // finalized: none left
}
