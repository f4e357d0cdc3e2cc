// The schedule simulated with times: start/end of each action, the critical path and the
// bubbles, on schedules small enough to work out by hand.
#include "engine/parallel/schedule_sim.h"

#include <gtest/gtest.h>

#include "engine/core/error.h"

using namespace tessera;

TEST(ScheduleSim, GpipeTwoStagesByHand) {
    // gpipe, pp 2, 2 micro-batches; stage 0: f 1, b 2; stage 1: f 3, b 4 (the slow stage)
    auto s = schedule_build(ScheduleKind::gpipe, 2, 2, 1);
    ScheduleTimes t{{1, 3}, {2, 4}, 0};
    ScheduleSim sim = schedule_simulate(s, 2, t);
    // s0: F0 0-1, F1 1-2; s1: F0 1-4, F1 4-7, B0 7-11, B1 11-15; s0: B0 11-13, B1 15-17
    EXPECT_DOUBLE_EQ(sim.makespan_s, 17);
    ASSERT_EQ(sim.actions.size(), 8u);
    // critical path: s0 F0 -> s1 F0, F1, B0, B1 -> s0 B1 (1 + 3 + 3 + 4 + 4 + 2 = 17)
    double crit = 0;
    int n_crit = 0;
    for (const SimAction& a : sim.actions)
        if (a.critical) crit += a.end_s - a.start_s, ++n_crit;
    EXPECT_DOUBLE_EQ(crit, 17);
    EXPECT_DOUBLE_EQ(sim.critical_busy_s, 17);
    EXPECT_EQ(n_crit, 6);
    for (const SimAction& a : sim.actions) {
        if (a.stage == 0 && a.kind == PipeAction::forward && a.micro == 1) EXPECT_FALSE(a.critical);
        if (a.stage == 0 && a.kind == PipeAction::backward && a.micro == 0) {
            EXPECT_FALSE(a.critical);
            EXPECT_DOUBLE_EQ(a.start_s, 11);
        }
    }
    // bubbles: s0 idle 2-11, 13-15; s1 idle 0-1, 15-17 => 9 + 2 + 1 + 2 = 14 of 34
    EXPECT_NEAR(sim.bubble_fraction, 14.0 / 34.0, 1e-12);
    ASSERT_EQ(sim.bubbles.size(), 4u);
    EXPECT_EQ(sim.bubbles[0].stage, 0);
    EXPECT_DOUBLE_EQ(sim.bubbles[0].start_s, 2);
    EXPECT_DOUBLE_EQ(sim.bubbles[0].end_s, 11);
}

TEST(ScheduleSim, UnitTimesMatchTheEstimatorsBubble) {
    for (auto [kind, pp, m, v] :
         {std::tuple{ScheduleKind::one_f_one_b, 4, 8, 1}, std::tuple{ScheduleKind::gpipe, 3, 5, 1},
          std::tuple{ScheduleKind::interleaved, 2, 4, 2}}) {
        auto s = schedule_build(kind, pp, m, v);
        ScheduleTimes t{std::vector<double>(size_t(pp * v), 1.0),
                        std::vector<double>(size_t(pp * v), 2.0), 0};
        ScheduleSim sim = schedule_simulate(s, pp, t);
        EXPECT_NEAR(sim.bubble_fraction, schedule_bubble_fraction(s, pp, 1.0, 2.0), 1e-12)
            << pp << " " << m;
        // the critical path's busy time plus nothing (no p2p) is the makespan
        EXPECT_NEAR(sim.critical_busy_s, sim.makespan_s, 1e-12);
    }
}

TEST(ScheduleSim, P2pDelaysTheReceiverAndIsOnThePath) {
    auto s = schedule_build(ScheduleKind::one_f_one_b, 2, 1, 1);
    ScheduleTimes t{{1, 1}, {2, 2}, 0.5};
    ScheduleSim sim = schedule_simulate(s, 2, t);
    // s0 F 0-1, s1 F 1.5-2.5, s1 B 2.5-4.5, s0 B 5-7
    EXPECT_DOUBLE_EQ(sim.makespan_s, 7);
    EXPECT_DOUBLE_EQ(sim.critical_busy_s, 6);
}

TEST(ScheduleSim, WrongTimesAreAnError) {
    auto s = schedule_build(ScheduleKind::gpipe, 2, 2, 1);
    EXPECT_THROW(schedule_simulate(s, 2, ScheduleTimes{{1}, {2}, 0}), Error);
}

// A zb-h1 run's spans: per stage the forward, and B and W apart; the measured times keep W's own
// part of the backward (it was taken as half of it), so the simulation of the run's schedule
// places each W as long as it ran.
TEST(ScheduleSim, MeasuredTimesKeepZbH1sWeightGradient) {
    std::vector<SpanRecord> spans;
    for (int stage = 0; stage < 2; ++stage)
        for (int micro = 0; micro < 2; ++micro) {
            const double at = 10.0 * micro;
            spans.push_back({1, stage, stage, micro, "forward", at, at + 1.0});
            spans.push_back({1, stage, stage, micro, "backward_input", at + 1, at + 4.0});
            spans.push_back({1, stage, stage, micro, "backward_weight", at + 4, at + 5.0});
        }
    std::optional<ScheduleTimes> t = schedule_times_measured(spans, 2, 1);
    ASSERT_TRUE(t.has_value());
    EXPECT_EQ(t->forward_s, (std::vector<double>{1, 1}));
    EXPECT_EQ(t->backward_s, (std::vector<double>{4, 4}));
    EXPECT_EQ(t->weight_s, (std::vector<double>{1, 1}));
    ScheduleSim sim = schedule_simulate(schedule_build(ScheduleKind::zb_h1, 2, 2, 1), 2, *t);
    for (const SimAction& a : sim.actions) {
        if (a.kind == PipeAction::backward_weight) EXPECT_DOUBLE_EQ(a.end_s - a.start_s, 1);
        if (a.kind == PipeAction::backward_input) EXPECT_DOUBLE_EQ(a.end_s - a.start_s, 3);
    }
}
