// A test's scratch folder, the one kind every test uses: fresh (mkdtemp under the system's
// temporary folder, named tessera_<tag>_XXXXXX, so no other test, run or process shares it) and
// removed with everything in it when the object goes, so a test leaves nothing behind however
// it ends (an ASSERT's early return included). A folder a whole test process shares is a
// function-local `static TempDir`, removed when the process exits normally.
// Only the process that made the folder removes it: a forked child that runs the destructors
// (exit(), not _exit()) leaves it to its parent. TESSERA_KEEP_TEST_DIRS=1 keeps every folder,
// to look at after a failure (each is printed on stderr as it is kept).
#pragma once
#include <stdlib.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <iostream>
#include <stdexcept>
#include <string>
#include <system_error>

namespace tessera::test_support {

class TempDir {
  public:
    explicit TempDir(const std::string& tag = "test") : owner_(::getpid()) {
        std::string tmpl =
            (std::filesystem::temp_directory_path() / ("tessera_" + tag + "_XXXXXX")).string();
        if (!::mkdtemp(tmpl.data()))
            throw std::runtime_error("tests: cannot make a folder from " + tmpl + ": " +
                                     std::strerror(errno));
        path_ = tmpl;
    }
    ~TempDir() {
        if (::getpid() != owner_) return;
        if (const char* keep = std::getenv("TESSERA_KEEP_TEST_DIRS"); keep && *keep == '1') {
            std::cerr << "tests: kept " << path_.string() << "\n";
            return;
        }
        std::error_code ec;
        std::filesystem::remove_all(path_, ec);
    }
    TempDir(const TempDir&) = delete;
    TempDir& operator=(const TempDir&) = delete;

    const std::filesystem::path& path() const { return path_; }
    // path()/name, as a string (what the engine's file APIs and argv lists take)
    std::string file(const std::string& name) const { return (path_ / name).string(); }
    std::string operator/(const std::string& name) const { return file(name); }

  private:
    std::filesystem::path path_;
    pid_t owner_;
};

}  // namespace tessera::test_support
