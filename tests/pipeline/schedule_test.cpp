// The pipeline schedules as data (engine/parallel/schedule.h), ZB-H1 above all: its op order per
// stage (every micro-batch's F, B and W once, in dependency order; the W's deferred into what
// 1F1B leaves idle), freedom from deadlock for pp 2..8 and 1..16 micro-batches, the activation
// memory it holds, and its bubble against the theory's (pp − 1)(f + b − w) per stage.
#include "engine/parallel/schedule.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <map>

#include "engine/core/error.h"

using namespace tessera;

namespace {

using K = PipeAction;

int count(const StageSchedule& s, PipeAction::Kind k) {
    return (int)std::count_if(s.begin(), s.end(), [&](const PipeAction& a) { return a.kind == k; });
}

// The most micro-batches a stage holds activations for: from a forward to its backward or W.
int max_held(const StageSchedule& s) {
    int held = 0, most = 0;
    for (const PipeAction& a : s) {
        if (a.kind == K::forward) most = std::max(most, ++held);
        if (a.kind == K::backward || a.kind == K::backward_weight) --held;
    }
    return most;
}

}  // namespace

TEST(Schedule, ParsesAndNamesZbH1) {
    EXPECT_EQ(schedule_kind_parse("zb-h1"), ScheduleKind::zb_h1);
    EXPECT_STREQ(schedule_kind_name(ScheduleKind::zb_h1), "zb-h1");
    EXPECT_THROW(schedule_kind_parse("zb-h2"), InputError);
    EXPECT_THROW(schedule_build(ScheduleKind::zb_h1, 2, 4, 2), InputError);  // one chunk per stage
}

TEST(Schedule, ZbH1RunsEveryMicroBatchOnceInDependencyOrder) {
    for (int p = 2; p <= 8; ++p)
        for (int m = 1; m <= 16; ++m) {
            auto sched = schedule_build(ScheduleKind::zb_h1, p, m, 1);
            ASSERT_EQ((int)sched.size(), p);
            for (int s = 0; s < p; ++s) {
                const StageSchedule& st = sched[s];
                SCOPED_TRACE(testing::Message() << "pp " << p << " m " << m << " stage " << s);
                EXPECT_EQ(count(st, K::forward), m);
                EXPECT_EQ(count(st, K::backward_input), m);
                EXPECT_EQ(count(st, K::backward_weight), m);
                EXPECT_EQ(count(st, K::backward), 0);
                // F, B, W of a micro-batch in that order; each kind in micro-batch order
                std::map<int, int> next_of_kind;
                std::map<int, int> phase;  // micro -> 0 none, 1 F, 2 B, 3 W
                for (const PipeAction& a : st) {
                    EXPECT_EQ(a.chunk, 0);
                    EXPECT_EQ(a.micro, next_of_kind[a.kind]++);
                    const int want = a.kind == K::forward ? 0 : a.kind == K::backward_input ? 1 : 2;
                    EXPECT_EQ(phase[a.micro], want) << "micro-batch " << a.micro;
                    phase[a.micro] = want + 1;
                }
            }
        }
}

TEST(Schedule, ZbH1IsDeadlockFreeAndBelowOneFOneB) {
    for (int p = 2; p <= 8; ++p)
        for (int m = 1; m <= 16; ++m) {
            SCOPED_TRACE(testing::Message() << "pp " << p << " m " << m);
            auto zb = schedule_build(ScheduleKind::zb_h1, p, m, 1);
            auto f1b = schedule_build(ScheduleKind::one_f_one_b, p, m, 1);
            // the simulation throws on a schedule whose stages wait on each other
            double bz = 0, b1 = 0;
            ASSERT_NO_THROW(bz = schedule_bubble_fraction(zb, p, 1, 1, 1));
            ASSERT_NO_THROW(b1 = schedule_bubble_fraction(f1b, p, 1, 1, 1));
            EXPECT_NEAR(b1, (p - 1.0) / (m + p - 1.0), 1e-12);  // 1F1B's (p-1)/(m+p-1)
            EXPECT_LT(bz, b1);
            // uneven op times too (B heavier than W, as attention makes it)
            EXPECT_LT(schedule_bubble_fraction(zb, p, 1, 1.3, 0.7),
                      schedule_bubble_fraction(f1b, p, 1, 1.3, 0.7));
        }
}

TEST(Schedule, ZbH1MeetsItsTheory) {
    EXPECT_NEAR(schedule_zb_h1_bubble_theory(4, 8, 1, 1, 1), 3.0 / 27.0, 1e-15);
    for (int p = 2; p <= 8; ++p)
        for (int m = p; m <= 16; ++m) {
            auto zb = schedule_build(ScheduleKind::zb_h1, p, m, 1);
            EXPECT_NEAR(schedule_bubble_fraction(zb, p, 1, 1, 1),
                        schedule_zb_h1_bubble_theory(p, m, 1, 1, 1), 1e-12)
                << "pp " << p << " m " << m;
            // a third of 1F1B's idle time per stage when f = b = w
            const double idle_zb = (p - 1) * 1.0, idle_1f1b = (p - 1) * 3.0;
            EXPECT_NEAR(schedule_zb_h1_bubble_theory(p, m, 1, 1, 1), idle_zb / (3 * m + idle_zb),
                        1e-15);
            EXPECT_NEAR((p - 1.0) / (m + p - 1.0), idle_1f1b / (3 * m + idle_1f1b), 1e-15);
        }
}

TEST(Schedule, ZbH1FillsTheCoolDownWithWeightGradients) {
    // pp 4, m 8: the last stage runs F B in lockstep and leaves every W it can to the end, where
    // 1F1B's last stage idles; the first stage defers none
    auto zb = schedule_build(ScheduleKind::zb_h1, 4, 8, 1);
    auto str = [](const StageSchedule& s) {
        std::string o;
        for (const PipeAction& a : s)
            o += (a.kind == K::forward          ? "F"
                  : a.kind == K::backward_input ? "B"
                                                : "W") +
                 std::to_string(a.micro) + " ";
        return o;
    };
    EXPECT_EQ(str(zb[0]),
              "F0 F1 F2 F3 B0 W0 F4 B1 W1 F5 B2 W2 F6 B3 W3 F7 B4 W4 B5 W5 B6 W6 B7 W7 ");
    EXPECT_EQ(str(zb[3]),
              "F0 B0 F1 B1 F2 B2 F3 B3 W0 F4 B4 W1 F5 B5 W2 F6 B6 W3 F7 B7 W4 W5 W6 W7 ");
    for (int p = 2; p <= 8; ++p)
        for (int m = p; m <= 16; ++m) {
            auto sched = schedule_build(ScheduleKind::zb_h1, p, m, 1);
            auto f1b = schedule_build(ScheduleKind::one_f_one_b, p, m, 1);
            for (int s = 0; s < p; ++s) {
                const StageSchedule& st = sched[s];
                // after the stage's last B: its own W and the s it deferred
                auto last_b = std::find_if(st.rbegin(), st.rend(), [](const PipeAction& a) {
                    return a.kind == K::backward_input;
                });
                EXPECT_EQ(last_b - st.rbegin(), s + 1)
                    << "pp " << p << " m " << m << " stage " << s;
                // activations of at most pp micro-batches at once (1F1B's first stage's peak)
                EXPECT_LE(max_held(st), p);
                EXPECT_GE(max_held(st), max_held(f1b[s]));
            }
            EXPECT_EQ(max_held(sched[0]), max_held(f1b[0]));
        }
}
