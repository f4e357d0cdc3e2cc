// Shared helpers for the data tests: the data cache must be filled (by scripts/fetch-data.sh).
#pragma once
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <string>

#include "engine/data/cache.h"
#include "tests/support/temp_dir.h"

namespace tessera::test {

// Fails the calling test (does not skip) when `path` is missing from the data cache.
#define TS_REQUIRE_DATA(path)                                                               \
    ASSERT_TRUE(std::filesystem::exists(path))                                              \
        << "data cache is missing " << (path) << " (cache: " << ::tessera::data_cache_dir() \
        << "): run scripts/fetch-data.sh first"

using ::tessera::test_support::TempDir;  // a test's scratch folder (tests/support/temp_dir.h)

}  // namespace tessera::test
