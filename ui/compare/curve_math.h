// Compare page curve helpers (Qt-free): display downsampling that keeps a curve's shape, and the
// per-group aggregate (mean with a min–max band) of several runs' curves. Smoothing is the
// Monitor page's debiased EMA (ui/monitor/monitor_series.h), the one EMA of the studio.
#pragma once
#include <cstddef>
#include <span>
#include <vector>

namespace tessera::studio {

struct Curve {
    std::vector<double> x, y;  // x ascending
    size_t size() const { return x.size(); }
};

// Min/max per pixel column (the M4 rule): the x range [x.front(), x.back()] is cut into `columns`
// equal buckets and each bucket keeps its first, lowest, highest and last point, in x order. A
// line drawn through the result covers the same pixels as one drawn through every point, so no
// spike is ever dropped; the first and last points are always kept. A bucket also keeps its first
// non-finite point (QCustomPlot draws NaN as a gap, so a NaN stays visible), hence at most
// 5 * columns points; the input comes back unchanged when it has no more than 4 * columns.
// x must be ascending.
Curve curve_downsample_minmax(std::span<const double> x, std::span<const double> y, int columns);

// Aggregate of several curves sampled on the union of their x values: at each x, the mean, min
// and max over the members whose x range covers it (linear interpolation between a member's own
// points; non-finite values skipped). `count` says how many members contributed.
struct CurveBand {
    std::vector<double> x, mean, lo, hi;
    std::vector<int> count;
};
CurveBand curve_group_band(const std::vector<Curve>& members);

}  // namespace tessera::studio
