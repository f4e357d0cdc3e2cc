// Where a test finds the source tree's tests/ folder and the build's binaries. Looked up at run
// time, not compiled in: a test's object file then names no folder of this clone, and ccache
// reuses it in a clone elsewhere (CI's fresh clones; CMakeLists.txt sets ccache's base folder).
//   TESSERA_BIN_DIR    $TESSERA_BIN_DIR, else the folder of the running test executable (every
//                      executable of a build goes to its bin/, tessera with them)
//   TESSERA_TESTS_DIR  $TESSERA_TESTS_DIR, else what tests/CMakeLists.txt wrote to
//                      <bin>/../tessera_tests_dir.txt at configure time
// Both are `const char*` expressions, usable where a string is (std::string(...), QString(...));
// the environment serves the GPU machine, which runs binaries built from another checkout.
#pragma once
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <stdexcept>
#include <string>

namespace tessera::test_support {

inline const std::string& bin_dir() {
    static const std::string dir = [] {
        if (const char* e = std::getenv("TESSERA_BIN_DIR"); e && *e) return std::string(e);
        return std::filesystem::read_symlink("/proc/self/exe").parent_path().string();
    }();
    return dir;
}

inline const std::string& tests_dir() {
    static const std::string dir = [] {
        if (const char* e = std::getenv("TESSERA_TESTS_DIR"); e && *e) return std::string(e);
        const std::string file = bin_dir() + "/../tessera_tests_dir.txt";
        std::ifstream in(file);
        std::string line;
        if (!std::getline(in, line) || line.empty())
            throw std::runtime_error("tests: cannot read the tests folder from " + file +
                                     " (written when CMake configures; or set TESSERA_TESTS_DIR)");
        return line;
    }();
    return dir;
}

}  // namespace tessera::test_support

#define TESSERA_BIN_DIR (::tessera::test_support::bin_dir().c_str())
#define TESSERA_TESTS_DIR (::tessera::test_support::tests_dir().c_str())
