// The .deb end to end: builds it with cpack from the current build dir (into a temp folder, so a
// build's own _CPack_Packages is not touched), unpacks it with `dpkg -x` into a temp root and runs
// what a user runs after installing it: tessera --version, tessera check on every installed
// example project, three steps of the quickstart, tessera-studio --version (offscreen), and
// lintian on the .deb, which must report no error (E:).
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "tests/support/commands.h"
#include "tests/support/temp_dir.h"

namespace fs = std::filesystem;
using tessera::test_support::CommandResult;
using tessera::test_support::run_command;
using tessera::test_support::TempDir;

namespace {

std::string quote(const fs::path& p) {
    return "'" + p.string() + "'";
}

bool on_path(const char* program) {
    return run_command(std::string("command -v ") + program + " >/dev/null").exit_code == 0;
}

class PackageTest : public ::testing::Test {
  protected:
    static inline std::optional<TempDir> scratch_;  // this suite's folder
    static inline fs::path tmp_;
    static inline fs::path deb_;   // the .deb that cpack wrote
    static inline fs::path root_;  // dpkg -x of it
    static inline std::string setup_error_;

    static void SetUpTestSuite() {
        scratch_.emplace("package");
        tmp_ = scratch_->path();
        root_ = tmp_ / "root";
        const fs::path build = TESSERA_BUILD_DIR;
        CommandResult pack =
            run_command(str_cmd({CPACK_COMMAND, "-G", "DEB", "-B", quote(tmp_ / "pkg"), "--config",
                                 quote(build / "CPackConfig.cmake")}));
        if (pack.exit_code != 0) {
            setup_error_ = "cpack failed:\n" + pack.output;
            return;
        }
        for (const auto& e : fs::directory_iterator(tmp_ / "pkg"))
            if (e.path().extension() == ".deb") deb_ = e.path();
        if (deb_.empty()) {
            setup_error_ =
                "cpack wrote no .deb into " + (tmp_ / "pkg").string() + ":\n" + pack.output;
            return;
        }
        CommandResult x = run_command("dpkg -x " + quote(deb_) + " " + quote(root_));
        if (x.exit_code != 0) setup_error_ = "dpkg -x failed:\n" + x.output;
    }

    static void TearDownTestSuite() { scratch_.reset(); }  // TESSERA_KEEP_TEST_DIRS=1 keeps it

    static std::string str_cmd(std::initializer_list<std::string> parts) {
        std::string s;
        for (const auto& p : parts) s += (s.empty() ? "" : " ") + p;
        return s;
    }

    void SetUp() override { ASSERT_TRUE(setup_error_.empty()) << setup_error_; }

    fs::path bin(const char* name) const { return root_ / "usr/bin" / name; }
    fs::path projects() const { return root_ / "usr/share/tessera/projects"; }
};

TEST_F(PackageTest, InstallsProgramsDocsAndDesktopFiles) {
    for (const char* f :
         {"usr/bin/tessera", "usr/bin/tessera-fetch-data", "usr/share/man/man1/tessera.1.gz",
          "usr/share/doc/tessera/copyright", "usr/share/doc/tessera/changelog.gz",
          "usr/share/tessera/projects/quickstart/project.yaml"})
        EXPECT_TRUE(fs::exists(root_ / f)) << f << " is not in " << deb_;
    if (fs::exists(bin("tessera-studio"))) {
        for (const char* f : {"usr/share/applications/tessera-studio.desktop",
                              "usr/share/metainfo/io.github.tessera.studio.metainfo.xml",
                              "usr/share/icons/hicolor/16x16/apps/tessera-studio.png",
                              "usr/share/icons/hicolor/512x512/apps/tessera-studio.png",
                              "usr/share/icons/hicolor/scalable/apps/tessera-studio.svg"})
            EXPECT_TRUE(fs::exists(root_ / f)) << f << " is not in " << deb_;
    }
    // example projects ship without the source tree's runs and checkpoints
    for (const auto& e : fs::recursive_directory_iterator(projects())) {
        const std::string name = e.path().filename().string();
        EXPECT_TRUE(name.rfind("runs.db", 0) != 0 && name != "checkpoints")
            << e.path() << " was packaged";
    }
}

TEST_F(PackageTest, TesseraVersion) {
    CommandResult r = run_command(quote(bin("tessera")) + " --version");
    EXPECT_EQ(r.exit_code, 0) << r.output;
    EXPECT_NE(r.output.find("tessera " TESSERA_VERSION), std::string::npos) << r.output;
}

TEST_F(PackageTest, CheckEveryInstalledExampleProject) {
    int checked = 0;
    for (const auto& e : fs::directory_iterator(projects())) {
        fs::path yaml = e.path() / "project.yaml";
        if (!fs::exists(yaml)) continue;
        if (fs::exists(e.path() /
                       "prepare.sh")) {  // its data is made from text: prepared in a copy first
            const fs::path copy = fs::path(tmp_) / e.path().filename();
            CommandResult p = run_command("cp -r " + quote(e.path()) + " " + quote(copy) +
                                          " && TESSERA=" + quote(bin("tessera")) + " bash " +
                                          quote(copy / "prepare.sh"));
            ASSERT_EQ(p.exit_code, 0) << p.output;
            yaml = copy / "project.yaml";
        }
        CommandResult r = run_command(quote(bin("tessera")) + " check " + quote(yaml));
        EXPECT_EQ(r.exit_code, 0) << yaml << ":\n" << r.output;
        checked++;
    }
    EXPECT_GE(checked, 2) << "expected the example projects under " << projects();
}

TEST_F(PackageTest, QuickstartRunsThreeStepsHeadless) {
    const fs::path db = tmp_ / "quickstart-runs.db";
    CommandResult r = run_command(quote(bin("tessera")) + " train " +
                                  quote(projects() / "quickstart/project.yaml") +
                                  " --steps 3 --set checkpoint.dir= --db " + quote(db));
    ASSERT_EQ(r.exit_code, 0) << r.output;
    EXPECT_NE(r.output.find("completed after 3 steps"), std::string::npos) << r.output;
    EXPECT_TRUE(fs::exists(db));
    EXPECT_FALSE(fs::exists(projects() / "quickstart/checkpoints")) << "checkpoints were written";
}

TEST_F(PackageTest, MissingDataErrorSaysWhereTheCacheIsAndHowToFillIt) {
    const fs::path empty_cache = tmp_ / "empty-cache";
    fs::create_directories(empty_cache);
    CommandResult r = run_command("TESSERA_DATA_DIR=" + quote(empty_cache) + " " +
                                  quote(bin("tessera")) + " data prepare brown");
    EXPECT_EQ(r.exit_code, 2) << r.output;
    EXPECT_NE(r.output.find("the data cache is " + empty_cache.string()), std::string::npos)
        << r.output;
    EXPECT_NE(r.output.find("tessera-fetch-data"), std::string::npos) << r.output;
    // and `tessera data where` names the same folder
    r = run_command("TESSERA_DATA_DIR=" + quote(empty_cache) + " " + quote(bin("tessera")) +
                    " data where");
    EXPECT_EQ(r.exit_code, 0) << r.output;
    EXPECT_NE(r.output.find("data cache: " + empty_cache.string()), std::string::npos) << r.output;
}

TEST_F(PackageTest, StudioVersionOffscreen) {
    if (!fs::exists(bin("tessera-studio"))) GTEST_SKIP() << "this build has no tessera-studio";
    CommandResult r =
        run_command("QT_QPA_PLATFORM=offscreen " + quote(bin("tessera-studio")) + " --version");
    EXPECT_EQ(r.exit_code, 0) << r.output;
    EXPECT_NE(r.output.find("tessera-studio " TESSERA_VERSION), std::string::npos) << r.output;
}

TEST_F(PackageTest, LintianReportsNoErrors) {
    if (!on_path("lintian"))
        GTEST_SKIP() << "lintian is not installed (scripts/setup.sh installs it)";
    CommandResult r = run_command("lintian " + quote(deb_));
    std::string errors;
    size_t pos = 0;
    while (pos < r.output.size()) {
        size_t end = r.output.find('\n', pos);
        if (end == std::string::npos) end = r.output.size();
        std::string line = r.output.substr(pos, end - pos);
        if (line.rfind("E:", 0) == 0) errors += line + "\n";
        pos = end + 1;
    }
    EXPECT_TRUE(errors.empty()) << "lintian errors for " << deb_ << ":\n" << errors;
    EXPECT_EQ(r.output.find("is not a readable file"), std::string::npos) << r.output;
}

}  // namespace
