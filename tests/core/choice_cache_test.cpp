// ChoiceCache (engine/core/choice_cache.h): a choice is made once, kept in the file, read by a
// later process (a fresh cache on the same file), and made by one of several processes that ask
// at once; lines that do not parse are ignored; a file that cannot be written still answers.
#include "engine/core/choice_cache.h"

#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>

#include "engine/core/error.h"
#include "tests/support/temp_dir.h"

namespace fs = std::filesystem;
using tessera::ChoiceCache;
using tessera::device_file_slug;

namespace {

std::string slurp(const fs::path& p) {
    std::ifstream in(p);
    std::stringstream ss;
    ss << in.rdbuf();
    return ss.str();
}

}  // namespace

TEST(ChoiceCache, AChoiceIsMadeOnceAndALaterProcessReadsIt) {
    const tessera::test_support::TempDir scratch("choice_once");
    const fs::path& d = scratch.path();
    const std::string file = (d / "sub" / "choices.txt").string();  // folders made as needed
    int calls = 0;
    {
        ChoiceCache c(file);
        EXPECT_EQ(c.get_or_choose("gemm_a", [&] { return ++calls, 3; }), 3);
        EXPECT_EQ(c.get_or_choose("gemm_a", [&] { return ++calls, 5; }), 3);
        EXPECT_EQ(c.get_or_choose("gemm_b", [&] { return ++calls, 0; }), 0);
    }
    EXPECT_EQ(calls, 2);
    EXPECT_EQ(slurp(file), "gemm_a 3\ngemm_b 0\n");
    ChoiceCache later(file);
    EXPECT_EQ(later.get_or_choose("gemm_a", [&] { return ++calls, 7; }), 3);
    EXPECT_EQ(calls, 2);
}

TEST(ChoiceCache, LinesThatDoNotParseAreIgnoredAndTheChoiceMadeAgain) {
    const tessera::test_support::TempDir scratch("choice_bad");
    const fs::path& d = scratch.path();
    const std::string file = (d / "choices.txt").string();
    std::ofstream(file) << "gemm_a\nnot a line at all\ngemm_b x\n\ngemm_c 4\ngemm_c 9\n";
    ChoiceCache c(file);
    EXPECT_EQ(c.get_or_choose("gemm_c", [] { return 1; }), 4);  // the first line of a key
    EXPECT_EQ(c.get_or_choose("gemm_a", [] { return 2; }), 2);
    EXPECT_EQ(c.get_or_choose("gemm_b", [] { return 6; }), 6);
    EXPECT_THROW((void)c.get_or_choose("two words", [] { return 0; }), tessera::Error);
    EXPECT_THROW((void)c.get_or_choose("", [] { return 0; }), tessera::Error);
}

TEST(ChoiceCache, ProcessesAskingAtOnceAllGetTheFirstChoice) {
    const tessera::test_support::TempDir scratch("choice_race");
    const fs::path& d = scratch.path();
    const std::string file = (d / "choices.txt").string();
    std::vector<pid_t> kids;
    for (int i = 0; i < 6; ++i) {
        pid_t pid = fork();
        ASSERT_GE(pid, 0);
        if (pid == 0) {  // each child chooses its own number, slowly, and reports what it got
            ChoiceCache c(file);
            const int got = c.get_or_choose("gemm_x", [&] {
                usleep(20000);
                return 100 + i;
            });
            std::ofstream((d / ("got" + std::to_string(i))).string()) << got;
            _exit(0);
        }
        kids.push_back(pid);
    }
    for (pid_t k : kids) {
        int st = 0;
        waitpid(k, &st, 0);
        ASSERT_TRUE(WIFEXITED(st) && WEXITSTATUS(st) == 0);
    }
    std::set<std::string> got;
    for (int i = 0; i < 6; ++i) got.insert(slurp(d / ("got" + std::to_string(i))));
    ASSERT_EQ(got.size(), 1u) << "processes disagreed";
    EXPECT_EQ(slurp(file), "gemm_x " + *got.begin() + "\n");  // chosen once
}

TEST(ChoiceCache, AFileThatCannotBeWrittenStillAnswers) {
    ChoiceCache c("/proc/tessera_no_such_dir/choices.txt");
    int calls = 0;
    EXPECT_EQ(c.get_or_choose("k", [&] { return ++calls, 2; }), 2);
    EXPECT_EQ(c.get_or_choose("k", [&] { return ++calls, 3; }), 2);  // kept in memory
    EXPECT_EQ(calls, 1);
}

TEST(DeviceFileSlug, LowerCasesAndJoinsAlphanumericRunsWithOneDash) {
    EXPECT_EQ(device_file_slug("NVIDIA H100 80GB HBM3"), "nvidia-h100-80gb-hbm3");
    EXPECT_EQ(device_file_slug("  AMD EPYC 9654 96-Core Processor  "),
              "amd-epyc-9654-96-core-processor");
    EXPECT_EQ(device_file_slug("Intel(R) Xeon(R) CPU @ 2.20GHz"), "intel-r-xeon-r-cpu-2-20ghz");
    EXPECT_EQ(device_file_slug("---"), "");
}
