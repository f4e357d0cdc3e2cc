// Shared helpers for the data tests: the data cache must be filled (by scripts/fetch-data.sh).
#pragma once
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <string>

#include "engine/data/cache.h"

namespace tessera::test {

// Fails the calling test (does not skip) when `path` is missing from the data cache.
#define TS_REQUIRE_DATA(path)                                                               \
    ASSERT_TRUE(std::filesystem::exists(path))                                              \
        << "data cache is missing " << (path) << " (cache: " << ::tessera::data_cache_dir() \
        << "): run scripts/fetch-data.sh first"

// A fresh empty folder under the system temp dir, removed by the destructor.
struct TempDir {
    std::filesystem::path path;
    TempDir() {
        path =
            std::filesystem::temp_directory_path() /
            ("tessera-data-test-" + std::to_string(::getpid()) + "-" + std::to_string(counter()++));
        std::filesystem::remove_all(path);
        std::filesystem::create_directories(path);
    }
    ~TempDir() { std::filesystem::remove_all(path); }
    std::string file(const std::string& name) const { return (path / name).string(); }
    static int& counter() {
        static int c = 0;
        return c;
    }
};

}  // namespace tessera::test
