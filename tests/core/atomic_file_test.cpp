// file_write_atomic / file_replace_atomic (engine/core/atomic_file.h): the target holds either
// its old or its whole new content, and no temp file is left behind, whether the write succeeds
// or fails.
#include "engine/core/atomic_file.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

#include "engine/core/error.h"
#include "tests/support/temp_dir.h"

namespace fs = std::filesystem;
using tessera::file_parent_dir;
using tessera::file_replace_atomic;
using tessera::file_write_atomic;

namespace {
using tessera::test_support::TempDir;

std::string slurp(const fs::path& p) {
    std::ifstream in(p, std::ios::binary);
    std::stringstream ss;
    ss << in.rdbuf();
    return ss.str();
}

// Every entry of the folder but `keep`: what a failed or finished write must not leave.
std::vector<std::string> others(const fs::path& dir, const std::string& keep) {
    std::vector<std::string> out;
    for (const auto& e : fs::directory_iterator(dir))
        if (e.path().filename() != keep) out.push_back(e.path().filename().string());
    return out;
}

}  // namespace

TEST(AtomicFile, WritesPiecesInOrderAndReplaces) {
    TempDir d;
    const std::string path = (d.path() / "out.bin").string();
    file_write_atomic(path, "old content");
    EXPECT_EQ(slurp(path), "old content");

    const int32_t header[2] = {0x01020304, 7};
    const std::string body = "tokens";
    file_write_atomic(path, {{header, sizeof(header)}, {nullptr, 0}, {body.data(), body.size()}});
    const std::string got = slurp(path);
    ASSERT_EQ(got.size(), sizeof(header) + body.size());
    EXPECT_EQ(got.substr(sizeof(header)), body);
    EXPECT_EQ(std::memcmp(got.data(), header, sizeof(header)), 0);
    EXPECT_TRUE(others(d.path(), "out.bin").empty());
}

TEST(AtomicFile, EmptyContentMakesAnEmptyFile) {
    TempDir d;
    const std::string path = (d.path() / "empty").string();
    file_write_atomic(path, std::string());
    EXPECT_TRUE(fs::exists(path));
    EXPECT_EQ(fs::file_size(path), 0u);
}

TEST(AtomicFile, FailedWriterKeepsOldContentAndRemovesTemp) {
    TempDir d;
    const std::string path = (d.path() / "model.safetensors").string();
    file_write_atomic(path, "old");
    std::string tmp_seen;
    EXPECT_THROW(file_replace_atomic(path,
                                     [&](const std::string& tmp) {
                                         tmp_seen = tmp;
                                         std::ofstream(tmp) << "half a file";
                                         throw std::runtime_error("disk full");
                                     }),
                 std::runtime_error);
    EXPECT_EQ(tmp_seen, path + ".tmp." + std::to_string(::getpid()));  // beside the target
    EXPECT_EQ(slurp(path), "old");
    EXPECT_TRUE(others(d.path(), "model.safetensors").empty());
}

TEST(AtomicFile, FailedRenameRemovesTempAndNamesBothPaths) {
    TempDir d;
    // The target is a non-empty folder: rename(2) of a file over it fails.
    const fs::path target = d.path() / "busy";
    fs::create_directories(target / "inside");
    try {
        file_write_atomic(target.string(), "new");
        FAIL() << "expected an Error";
    } catch (const tessera::Error& e) {
        const std::string what = e.what();
        EXPECT_NE(what.find("cannot rename " + target.string() + ".tmp."), std::string::npos)
            << what;
        EXPECT_NE(what.find(" to " + target.string()), std::string::npos) << what;
    }
    EXPECT_TRUE(others(d.path(), "busy").empty());
}

TEST(AtomicFile, MissingFolderIsAnErrorNamingTheTempFile) {
    TempDir d;
    const std::string path = (d.path() / "no_such_dir" / "manifest.json").string();
    try {
        file_write_atomic(path, "{}");
        FAIL() << "expected an Error";
    } catch (const tessera::Error& e) {
        const std::string what = e.what();
        EXPECT_NE(what.find(path + ".tmp."), std::string::npos) << what;
        EXPECT_NE(what.find("cannot create"), std::string::npos) << what;
    }
    EXPECT_FALSE(fs::exists(d.path() / "no_such_dir"));
}

TEST(AtomicFile, ParentDir) {
    EXPECT_EQ(file_parent_dir("name"), ".");
    EXPECT_EQ(file_parent_dir("/name"), "/");
    EXPECT_EQ(file_parent_dir("a/b/c"), "a/b");
}
