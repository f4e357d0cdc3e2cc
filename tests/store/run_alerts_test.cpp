// The alert rules on synthetic series: loss spikes (the stated tolerances: median of the last 20,
// 6 robust sigmas and 25 % above it), non-finite losses with the rank that saw them first, and
// throughput below the prediction (20 % below for 3 points after 3 warm-up points).
#include "engine/telemetry/run_alerts.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>

using namespace tessera;

namespace {

// A decaying loss with deterministic noise of amplitude `noise` (relative), steps 1..n, rank 0.
std::vector<AlertPoint> loss_curve(int n, double noise) {
    std::vector<AlertPoint> v;
    for (int i = 1; i <= n; ++i) {
        const double base = 2.0 + 3.0 * std::exp(-i / 50.0);
        const double wiggle = noise * std::sin(i * 1.7) * base;
        v.push_back({i, 0, base + wiggle, 1000.0 + i});
    }
    return v;
}

}  // namespace

TEST(RunAlerts, SmoothNoisyCurveHasNoSpike) {
    EXPECT_TRUE(alerts_loss(loss_curve(500, 0.05)).empty());  // ±5 % noise: below 25 %
}

TEST(RunAlerts, SpikeIsReportedAtItsStepOnce) {
    auto v = loss_curve(300, 0.02);
    v[149].value *= 1.6;  // step 150: 60 % above
    v[150].value *= 1.5;  // step 151: still up (same episode)
    v[219].value *= 1.2;  // step 220: 20 % above, under the 25 % tolerance
    auto a = alerts_loss(v);
    ASSERT_EQ(a.size(), 1u);
    EXPECT_EQ(a[0].kind, LossAlert::Kind::spike);
    EXPECT_EQ(a[0].step, 150);
    EXPECT_EQ(a[0].rank, 0);
    EXPECT_NEAR(a[0].baseline, 2.0 + 3.0 * std::exp(-150 / 50.0), 0.2);
    // a tighter rule sees the 20 % one too
    LossSpikeRule tight;
    tight.rel = 0.1;
    auto b = alerts_loss(v, tight);
    ASSERT_EQ(b.size(), 2u);
    EXPECT_EQ(b[1].step, 220);
}

TEST(RunAlerts, NoSpikeBeforeEnoughHistory) {
    std::vector<AlertPoint> v{{1, 0, 10, 1}, {2, 0, 9, 2}, {3, 0, 30, 3}, {4, 0, 8, 4}};
    EXPECT_TRUE(alerts_loss(v).empty());  // 3 points < min_history 5
}

TEST(RunAlerts, NonFiniteNamesTheRankThatSawItFirst) {
    auto v = loss_curve(40, 0.01);
    const double nan = std::numeric_limits<double>::quiet_NaN();
    // step 41: ranks 3, 1 and 2 report NaN; rank 1's row is the earliest
    v.push_back({41, 3, nan, 2000.5});
    v.push_back({41, 1, nan, 2000.1});
    v.push_back({41, 2, nan, 2000.3});
    v.push_back({42, 0, std::numeric_limits<double>::infinity(), 2001.0});
    auto a = alerts_loss(v);
    ASSERT_EQ(a.size(), 2u);
    EXPECT_EQ(a[0].kind, LossAlert::Kind::non_finite);
    EXPECT_EQ(a[0].step, 41);
    EXPECT_EQ(a[0].rank, 1);
    EXPECT_TRUE(std::isnan(a[0].value));
    EXPECT_EQ(a[1].step, 42);
    EXPECT_TRUE(std::isinf(a[1].value));
    EXPECT_NE(alert_describe(a[0]).find("NaN, first seen on rank 1"), std::string::npos)
        << alert_describe(a[0]);
    // a finite row of the same step does not hide the NaN
    v.push_back({43, 0, 2.0, 2002.0});
    v.push_back({43, 4, nan, 2002.5});
    auto c = alerts_loss(v);
    ASSERT_EQ(c.size(), 3u);
    EXPECT_EQ(c[2].step, 43);
    EXPECT_EQ(c[2].rank, 4);
}

TEST(RunAlerts, ThroughputDropFlaggedWithItsFirstStep) {
    std::vector<AlertPoint> v;
    for (int i = 1; i <= 60; ++i) {
        double tps = 1000;
        if (i <= 3) tps = 200;              // warm-up: not flagged
        if (i >= 20 && i < 30) tps = 700;   // 30 % below: flagged from 20
        if (i == 40 || i == 41) tps = 500;  // two points: under `sustain` 3
        if (i >= 50 && i <= 55) tps = 850;  // 15 % below: inside the 20 % tolerance
        v.push_back({i, 0, tps, 1000.0 + i});
    }
    auto a = alerts_throughput(v, 1000);
    ASSERT_EQ(a.size(), 1u);
    EXPECT_EQ(a[0].step, 20);
    EXPECT_EQ(a[0].steps_below, 10);
    EXPECT_DOUBLE_EQ(a[0].tok_per_s, 700);
    EXPECT_TRUE(alerts_throughput(v, 0).empty());  // no prediction: nothing to compare with
    EXPECT_TRUE(alerts_throughput(v, NAN).empty());
    ThroughputRule loose;
    loose.tol = 0.1;
    auto b = alerts_throughput(v, 1000, loose);
    ASSERT_EQ(b.size(), 2u);
    EXPECT_EQ(b[1].step, 50);
    // a drop running to the end of the series is reported too
    v.back().value = 100;
    v[58].value = 100;
    v[57].value = 100;
    EXPECT_EQ(alerts_throughput(v, 1000).back().step, 58);
}
