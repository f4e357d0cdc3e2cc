// The Compare page's Qt-free curve helpers: min/max-per-column downsampling (a spike survives,
// endpoints kept, output bounded, the drawn envelope unchanged) and group bands (mean, min, max
// over members, ranges that do not overlap, NaN skipped).
#include "ui/compare/curve_math.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>

using namespace tessera::studio;

namespace {
Curve noisy(size_t n, unsigned seed) {
    Curve c;
    std::mt19937 rng(seed);
    std::normal_distribution<double> noise(0, 0.05);
    for (size_t i = 0; i < n; ++i) {
        c.x.push_back(double(i));
        c.y.push_back(3.0 * std::exp(-double(i) / double(n)) + noise(rng));
    }
    return c;
}
}  // namespace

TEST(CurveDownsample, SpikeSurvivesAndEndpointsKept) {
    Curve c = noisy(100000, 1);
    c.y[31337] = 50.0;   // a one-step loss spike
    c.y[70001] = -20.0;  // and a dip
    const Curve d = curve_downsample_minmax(c.x, c.y, 800);
    ASSERT_LT(d.size(), c.size());
    EXPECT_EQ(*std::max_element(d.y.begin(), d.y.end()), 50.0);
    EXPECT_EQ(*std::min_element(d.y.begin(), d.y.end()), -20.0);
    EXPECT_NE(std::find(d.x.begin(), d.x.end(), 31337.0), d.x.end());
    EXPECT_EQ(d.x.front(), c.x.front());
    EXPECT_EQ(d.y.front(), c.y.front());
    EXPECT_EQ(d.x.back(), c.x.back());
    EXPECT_EQ(d.y.back(), c.y.back());
    EXPECT_TRUE(std::is_sorted(d.x.begin(), d.x.end()));
}

TEST(CurveDownsample, OutputBoundedByColumns) {
    const Curve c = noisy(100000, 2);
    for (int cols : {1, 10, 500, 2000}) {
        const Curve d = curve_downsample_minmax(c.x, c.y, cols);
        EXPECT_LE(d.size(), size_t(cols) * 4) << cols;
        EXPECT_GE(d.size(), std::min<size_t>(2, c.size())) << cols;
    }
}

TEST(CurveDownsample, EveryColumnKeepsItsExtremes) {
    // the drawn envelope: per column, the min and max of the kept points equal the input's
    const Curve c = noisy(20000, 3);
    const int cols = 100;
    const Curve d = curve_downsample_minmax(c.x, c.y, cols);
    auto col = [&](double x) { return std::min(cols - 1, int(x / c.x.back() * cols)); };
    std::vector<double> in_lo(cols, INFINITY), in_hi(cols, -INFINITY), out_lo = in_lo,
                                                                       out_hi = in_hi;
    for (size_t i = 0; i < c.size(); ++i) {
        in_lo[col(c.x[i])] = std::min(in_lo[col(c.x[i])], c.y[i]);
        in_hi[col(c.x[i])] = std::max(in_hi[col(c.x[i])], c.y[i]);
    }
    for (size_t i = 0; i < d.size(); ++i) {
        out_lo[col(d.x[i])] = std::min(out_lo[col(d.x[i])], d.y[i]);
        out_hi[col(d.x[i])] = std::max(out_hi[col(d.x[i])], d.y[i]);
    }
    EXPECT_EQ(in_lo, out_lo);
    EXPECT_EQ(in_hi, out_hi);
}

TEST(CurveDownsample, ShortInputUnchangedAndNanKept) {
    Curve c = noisy(50, 4);
    const Curve same = curve_downsample_minmax(c.x, c.y, 100);
    EXPECT_EQ(same.x, c.x);
    EXPECT_EQ(same.y, c.y);
    Curve big = noisy(10000, 5);
    big.y[4321] = NAN;
    const Curve d = curve_downsample_minmax(big.x, big.y, 50);
    EXPECT_LE(d.size(), 50u * 5);
    EXPECT_TRUE(std::any_of(d.y.begin(), d.y.end(), [](double v) { return std::isnan(v); }));
    EXPECT_TRUE(curve_downsample_minmax({}, {}, 10).x.empty());
}

TEST(CurveGroupBand, MeanMinMaxOverMembers) {
    Curve a{{0, 1, 2, 3}, {1, 2, 3, 4}};
    Curve b{{0, 1, 2}, {3, 4, 5}};
    Curve c{{0, 1, 2, 3}, {2, NAN, 1, 2}};
    const CurveBand band = curve_group_band({a, b, c});
    ASSERT_EQ(band.x, (std::vector<double>{0, 1, 2, 3}));
    EXPECT_DOUBLE_EQ(band.mean[0], 2.0);
    EXPECT_EQ(band.lo[0], 1.0);
    EXPECT_EQ(band.hi[0], 3.0);
    EXPECT_EQ(band.count[1], 2);  // c's NaN skipped
    EXPECT_DOUBLE_EQ(band.mean[1], 3.0);
    EXPECT_EQ(band.count[3], 2);  // b ended at x = 2
    EXPECT_DOUBLE_EQ(band.mean[3], 3.0);
    EXPECT_EQ(band.lo[3], 2.0);
    EXPECT_EQ(band.hi[3], 4.0);
}

TEST(CurveGroupBand, InterpolatesBetweenAMembersPoints) {
    Curve a{{0, 10}, {0, 10}};
    Curve b{{5}, {1}};
    const CurveBand band = curve_group_band({a, b});
    ASSERT_EQ(band.x, (std::vector<double>{0, 5, 10}));
    EXPECT_EQ(band.count, (std::vector<int>{1, 2, 1}));
    EXPECT_DOUBLE_EQ(band.mean[1], 3.0);  // a interpolated to 5, b is 1
    EXPECT_EQ(band.lo[1], 1.0);
    EXPECT_EQ(band.hi[1], 5.0);
}
