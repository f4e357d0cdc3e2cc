// Curve helpers: min/max-per-column downsampling and group bands.
#include "ui/compare/curve_math.h"

#include <algorithm>
#include <cmath>
#include <iterator>

namespace tessera::studio {

// ------------------------------------------------------------------------------------------------
// downsampling

Curve curve_downsample_minmax(std::span<const double> x, std::span<const double> y, int columns) {
    const size_t n = std::min(x.size(), y.size());
    Curve out;
    if (columns < 1) columns = 1;
    if (n <= size_t(columns) * 4) {
        out.x.assign(x.begin(), x.begin() + n);
        out.y.assign(y.begin(), y.begin() + n);
        return out;
    }
    out.x.reserve(size_t(columns) * 5);
    out.y.reserve(size_t(columns) * 5);
    const double x0 = x[0], span = x[n - 1] - x[0];
    const double per_col = span > 0 ? columns / span : 0;
    auto column = [&](size_t k) { return std::min(columns - 1, int((x[k] - x0) * per_col)); };
    size_t i = 0;
    while (i < n) {
        const int col = column(i);  // one bucket: [i, end); x ascends, so column() does too and
        // the bucket's end is a binary search away, not a column() per point
        const size_t end =
            size_t(std::partition_point(
                       x.begin() + std::ptrdiff_t(i) + 1, x.begin() + std::ptrdiff_t(n),
                       [&](const double& xv) { return column(size_t(&xv - x.data())) == col; }) -
                   x.begin());
        size_t lo = n, hi = n, gap = n;
        double ylo = 0, yhi = 0;
        for (size_t k = i; k < end; ++k) {
            const double v = y[k];
            if (!std::isfinite(v)) {
                if (gap == n) gap = k;
                continue;
            }
            if (lo == n || v < ylo) lo = k, ylo = v;
            if (hi == n || v > yhi) hi = k, yhi = v;
        }
        size_t keep[5] = {i, lo, hi, gap, end - 1};
        std::sort(std::begin(keep), std::end(keep));
        for (int j = 0; j < 5 && keep[j] < n; ++j) {
            if (j > 0 && keep[j] == keep[j - 1]) continue;
            out.x.push_back(x[keep[j]]);
            out.y.push_back(y[keep[j]]);
        }
        i = end;
    }
    return out;
}

// ------------------------------------------------------------------------------------------------
// group band

namespace {
// A member's value at xq by linear interpolation; NaN outside its range or across a NaN.
double value_at(const Curve& c, double xq) {
    if (c.x.empty() || xq < c.x.front() || xq > c.x.back()) return NAN;
    auto it = std::lower_bound(c.x.begin(), c.x.end(), xq);
    const size_t j = size_t(it - c.x.begin());
    if (c.x[j] == xq || j == 0) return c.y[j];
    const double x0 = c.x[j - 1], x1 = c.x[j], t = (xq - x0) / (x1 - x0);
    return c.y[j - 1] + t * (c.y[j] - c.y[j - 1]);
}
}  // namespace

CurveBand curve_group_band(const std::vector<Curve>& members) {
    CurveBand b;
    for (const Curve& c : members) b.x.insert(b.x.end(), c.x.begin(), c.x.end());
    std::sort(b.x.begin(), b.x.end());
    b.x.erase(std::unique(b.x.begin(), b.x.end()), b.x.end());
    b.mean.reserve(b.x.size());
    std::vector<size_t> cursor(members.size(), 0);
    std::vector<double> kept_x;
    for (double xq : b.x) {
        double sum = 0, lo = INFINITY, hi = -INFINITY;
        int n = 0;
        for (size_t m = 0; m < members.size(); ++m) {
            const Curve& c = members[m];
            // fast path: members sampled at the same x (the usual case: same steps)
            size_t& k = cursor[m];
            while (k < c.x.size() && c.x[k] < xq) ++k;
            const double v = (k < c.x.size() && c.x[k] == xq) ? c.y[k] : value_at(c, xq);
            if (!std::isfinite(v)) continue;
            sum += v;
            lo = std::min(lo, v);
            hi = std::max(hi, v);
            ++n;
        }
        if (n == 0) continue;  // no member has a finite value here
        kept_x.push_back(xq);
        b.mean.push_back(sum / n);
        b.lo.push_back(lo);
        b.hi.push_back(hi);
        b.count.push_back(n);
    }
    b.x = std::move(kept_x);
    return b;
}

}  // namespace tessera::studio
