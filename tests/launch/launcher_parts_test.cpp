// The launcher's parts on their own: how pipe output becomes lines, the node protocol's lines, and
// which failure a job reports when several come moments apart (the clock is passed in).
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <csignal>
#include <string>
#include <vector>

#include "engine/launch/child_process.h"
#include "engine/launch/failure_cause.h"
#include "engine/launch/node_protocol.h"

using namespace tessera;

namespace {
// A waitpid status: exited with `code`, or killed by `sig`.
int exited(int code) {
    return code << 8;
}
int killed(int sig) {
    return sig;
}
}  // namespace

TEST(LauncherLines, SplitsChunksIntoLinesAndKeepsTheRest) {
    std::string buf;
    std::vector<std::string> got;
    auto on = [&](const std::string& l) { got.push_back(l); };
    const std::string a = "step 1\nstep", b = " 2\n\nlast";
    lines_feed(buf, a.data(), a.size(), 1 << 20, on);
    EXPECT_EQ(got, std::vector<std::string>{"step 1"});
    EXPECT_EQ(buf, "step");
    lines_feed(buf, b.data(), b.size(), 1 << 20, on);
    EXPECT_EQ(got, (std::vector<std::string>{"step 1", "step 2", ""}));
    lines_finish(buf, on);  // EOF: the unterminated rest is a line too
    EXPECT_EQ(got.back(), "last");
    EXPECT_TRUE(buf.empty());
    lines_finish(buf, on);  // nothing left: no empty line
    EXPECT_EQ(got.size(), 4u);
}

TEST(LauncherLines, ARunawayLineIsHandedOnAtTheCap) {
    std::string buf;
    std::vector<std::string> got;
    const std::string chunk(10, 'x');
    for (int i = 0; i < 3; ++i)
        lines_feed(buf, chunk.data(), chunk.size(), 25,
                   [&](const std::string& l) { got.push_back(l); });
    ASSERT_EQ(got.size(), 1u);  // at 30 bytes > 25, without a newline
    EXPECT_EQ(got[0].size(), 30u);
    EXPECT_TRUE(buf.empty());
}

TEST(NodeProtocol, LinesRoundTripAndForeignLinesAreNotOurs) {
    auto t = node_line_parse(node_line('t', 3, R"({"type":"metric"})"), 4);
    ASSERT_TRUE(t);
    EXPECT_EQ(t->kind, 't');
    EXPECT_EQ(t->rank, 3);
    EXPECT_EQ(t->text, R"({"type":"metric"})");
    auto x =
        node_line_parse(node_line('x', 1, "rank 1 (dp1.tp0.pp0) exited with code 1 at step 4"), 4);
    ASSERT_TRUE(x);
    EXPECT_EQ(x->rank, 1);
    EXPECT_EQ(x->text, "rank 1 (dp1.tp0.pp0) exited with code 1 at step 4");
    auto o = node_line_parse(node_line('o', "[dp0.tp0.pp0] step 1 | loss 5.5"), 4);
    ASSERT_TRUE(o);
    EXPECT_EQ(o->text, "[dp0.tp0.pp0] step 1 | loss 5.5");
    EXPECT_EQ(node_line_parse(node_line('d', "completed"), 4)->text, "completed");
    EXPECT_EQ(node_line_parse("t 9 {}", 4)->rank, -1) << "a rank outside the world";
    EXPECT_EQ(node_line_parse("t 2", 4)->text, "");
    for (const char* foreign :
         {"", "W", "Warning: Permanently added 'gpu-a' to the list of known hosts.", "q 1 what",
          "ox"})
        EXPECT_FALSE(node_line_parse(foreign, 4)) << foreign;
}

TEST(FailureCause, ExitTexts) {
    EXPECT_EQ(exit_text(exited(3)), "exited with code 3");
    EXPECT_EQ(exit_text(killed(SIGKILL)), "killed by signal 9 (SIGKILL)");
    EXPECT_EQ(death_message(3, killed(SIGSEGV), 12, "", MeshShape{2, 2, 1}),
              "rank 3 (dp1.tp1.pp0) killed by signal 11 (SIGSEGV) at step 12");
    EXPECT_EQ(death_message(0, exited(1), 4, "the loss is nan", MeshShape{2, 1, 1}),
              "rank 0 (dp0.tp0.pp0) exited with code 1 at step 4: the loss is nan");
}

TEST(FailureCause, ASignalSoonAfterARanksOwnExitIsTheCause) {
    const auto t0 = LaunchClock::now();
    const MeshShape mesh{4, 1, 1};
    const std::string exit1 = death_message(1, exited(1), 7, "gloo: connection reset", mesh);
    const std::string kill2 = death_message(2, killed(SIGKILL), 7, "", mesh);
    FailureCause c;
    EXPECT_FALSE(c.failed());
    c.first(1, exit1, false, t0);
    EXPECT_TRUE(c.failed());
    EXPECT_EQ(c.rank, 1);
    EXPECT_TRUE(c.is_root_cause(kill2, false, t0 + std::chrono::milliseconds(500)));
    EXPECT_FALSE(c.is_root_cause(kill2, true, t0)) << "after our own SIGKILL";
    EXPECT_FALSE(c.is_root_cause(kill2, false, t0 + kRootCauseWindow)) << "too late";
    EXPECT_FALSE(c.is_root_cause(death_message(2, killed(SIGTERM), 7, "", mesh), false, t0))
        << "ours";
    EXPECT_FALSE(c.is_root_cause(death_message(2, exited(1), 7, "", mesh), false, t0))
        << "not a signal";
    c.take_cause(2, kill2);
    EXPECT_EQ(c.rank, 2);
    EXPECT_EQ(c.message, kill2 + " (then " + exit1 + ")");
    EXPECT_FALSE(c.is_root_cause(kill2, false, t0)) << "one cause replaces the first, once";
}

TEST(FailureCause, AFirstSignalStaysAndALostHostIsTheCause) {
    const auto t0 = LaunchClock::now();
    const MeshShape mesh{2, 1, 1};
    FailureCause c;
    c.first(0, death_message(0, killed(SIGKILL), 3, "", mesh), false, t0);
    EXPECT_FALSE(c.is_root_cause(death_message(1, killed(SIGKILL), 3, "", mesh), false, t0));
    // a node launcher that exits without "done" moments later: the lost host explains the ranks
    EXPECT_FALSE(c.node_is_cause(true, t0)) << "it reported done";
    EXPECT_FALSE(c.node_is_cause(false, t0 + kRootCauseWindow));
    ASSERT_TRUE(c.node_is_cause(false, t0 + std::chrono::milliseconds(100)));
    c.take_node_cause("host gpu-b: the ssh connection was lost");
    EXPECT_EQ(c.message.rfind("host gpu-b: the ssh connection was lost (then rank 0", 0), 0u)
        << c.message;
    EXPECT_EQ(c.rank, 0);
    EXPECT_FALSE(c.node_is_cause(false, t0)) << "a host is already the cause";
    // a host as the first failure reports rank 0
    FailureCause h;
    h.first(-1, "host gpu-a: node launcher exited with code 255", true, t0);
    EXPECT_EQ(h.rank, 0);
    EXPECT_FALSE(h.is_root_cause(death_message(1, killed(SIGKILL), 3, "", mesh), false, t0));
}
