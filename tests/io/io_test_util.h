// Helpers shared by the io tests: a scratch folder and raw file access.
#pragma once
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>

#include "engine/core/error.h"
#include "tests/support/temp_dir.h"

namespace tessera::test {

using test_support::TempDir;  // a test's scratch folder (tests/support/temp_dir.h)

inline std::string read_bytes(const std::string& path) {
    std::ifstream f(path, std::ios::binary);
    return std::string(std::istreambuf_iterator<char>(f), {});
}

inline void write_bytes(const std::string& path, const std::string& bytes) {
    std::ofstream f(path, std::ios::binary | std::ios::trunc);
    f.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
}

// Runs `fn`, expects an InputError (exit code 2) whose message contains every fragment.
template <typename Fn>
void expect_input_error(Fn fn, std::initializer_list<std::string> fragments) {
    try {
        fn();
        ADD_FAILURE() << "expected an InputError containing '" << *fragments.begin() << "'";
    } catch (const InputError& e) {
        EXPECT_EQ(e.exit_code(), 2);
        std::string msg = e.what();
        for (const std::string& f : fragments)
            EXPECT_NE(msg.find(f), std::string::npos) << "message: " << msg << "\nmissing: " << f;
    }
}

}  // namespace tessera::test
