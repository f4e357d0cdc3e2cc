// Parallel coordinates: axes from the run table, brushing, painting.
#include "ui/compare/parallel_coords.h"

#include <QMouseEvent>
#include <QPainter>
#include <QPainterPath>
#include <algorithm>
#include <cmath>
#include <limits>

namespace tessera::studio {

// ------------------------------------------------------------------------------------------------
// axes and brushing

ParCoords parcoords_build(const RunTableModel& model) {
    ParCoords pc;
    const int n = int(model.runs().size());
    std::vector<std::vector<double>> cols;
    auto add_axis = [&](const QString& name, std::vector<double> v) {
        double lo = INFINITY, hi = -INFINITY;
        for (double x : v)
            if (std::isfinite(x)) lo = std::min(lo, x), hi = std::max(hi, x);
        if (!std::isfinite(lo)) return;  // no run has it
        pc.axes.push_back({name, lo, hi, std::nullopt});
        cols.push_back(std::move(v));
    };
    for (const QString& key : model.configKeys()) {
        const int c = model.configColumn(key);
        std::vector<double> v(size_t(n), NAN);
        bool numeric = true;
        for (int r = 0; r < n && numeric; ++r) {
            bool ok = false;
            const double x = model.index(r, c).data(RunTableModel::kSortRole).toDouble(&ok);
            numeric = ok;
            if (ok && x != std::numeric_limits<double>::max()) v[size_t(r)] = x;
        }
        if (numeric) add_axis(RunTableModel::columnTitle(key), std::move(v));
    }
    auto metric = [&](double RunSummary::*field) {
        std::vector<double> v(size_t(n), NAN);
        for (int r = 0; r < n; ++r) {
            const double x = model.runs()[size_t(r)].*field;
            if (x >= 0) v[size_t(r)] = x;  // -1: not logged
        }
        return v;
    };
    add_axis(QObject::tr("final val loss"), metric(&RunSummary::final_val_loss));
    add_axis(QObject::tr("tokens/s"), metric(&RunSummary::median_tok_per_s));
    add_axis(QObject::tr("peak GiB/GPU"), [&] {
        auto v = metric(&RunSummary::peak_bytes_per_gpu);
        for (double& x : v) x /= 1024.0 * 1024 * 1024;
        return v;
    }());
    for (int r = 0; r < n; ++r) {
        pc.runs.push_back(model.runs()[size_t(r)].id);
        std::vector<double> line;
        for (const auto& col : cols) line.push_back(col[size_t(r)]);
        pc.values.push_back(std::move(line));
    }
    return pc;
}

QSet<int64_t> parcoords_brushed(const ParCoords& pc) {
    QSet<int64_t> out;
    for (size_t l = 0; l < pc.runs.size(); ++l) {
        bool in = true;
        for (size_t a = 0; a < pc.axes.size() && in; ++a) {
            if (!pc.axes[a].brush) continue;
            const double v = pc.values[l][a];
            in = std::isfinite(v) && v >= pc.axes[a].brush->first && v <= pc.axes[a].brush->second;
        }
        if (in) out.insert(pc.runs[l]);
    }
    return out;
}

// ------------------------------------------------------------------------------------------------
// widget

ParallelCoordsView::ParallelCoordsView(QWidget* parent) : QWidget(parent) {
    setObjectName("parallelCoords");
    setMinimumHeight(160);
    setMouseTracking(false);
    setToolTip(
        tr("Drag along an axis to keep the runs in that range (the run table follows); "
           "click an axis to clear its range"));
}

void ParallelCoordsView::setRuns(const RunTableModel& model) {
    const bool had = std::any_of(m_pc.axes.begin(), m_pc.axes.end(),
                                 [](auto& a) { return a.brush.has_value(); });
    m_pc = parcoords_build(model);
    update();
    if (had) Q_EMIT brushChanged(std::nullopt);
}

void ParallelCoordsView::setBrush(int axis, double lo, double hi) {
    if (axis < 0 || axis >= int(m_pc.axes.size())) return;
    if (lo > hi) std::swap(lo, hi);
    m_pc.axes[size_t(axis)].brush = std::make_pair(lo, hi);
    emitBrush();
}

void ParallelCoordsView::clearBrushes() {
    for (auto& a : m_pc.axes) a.brush.reset();
    emitBrush();
}

void ParallelCoordsView::emitBrush() {
    update();
    const bool any = std::any_of(m_pc.axes.begin(), m_pc.axes.end(),
                                 [](auto& a) { return a.brush.has_value(); });
    Q_EMIT brushChanged(any ? std::optional<QSet<int64_t>>(parcoords_brushed(m_pc)) : std::nullopt);
}

QRectF ParallelCoordsView::plotRect() const {
    return QRectF(60, 22, std::max(10, width() - 120), std::max(10, height() - 44));
}

double ParallelCoordsView::axisX(int axis) const {
    const QRectF r = plotRect();
    const int n = int(m_pc.axes.size());
    return n <= 1 ? r.center().x() : r.left() + r.width() * axis / (n - 1);
}

double ParallelCoordsView::yOf(int axis, double v) const {
    const ParCoordsAxis& a = m_pc.axes[size_t(axis)];
    const QRectF r = plotRect();
    const double t = a.hi > a.lo ? (v - a.lo) / (a.hi - a.lo) : 0.5;
    return r.bottom() - t * r.height();
}

double ParallelCoordsView::valueAt(int axis, double y) const {
    const ParCoordsAxis& a = m_pc.axes[size_t(axis)];
    const QRectF r = plotRect();
    const double t = std::clamp((r.bottom() - y) / r.height(), 0.0, 1.0);
    return a.lo + t * (a.hi - a.lo);
}

int ParallelCoordsView::axisNear(double x) const {
    for (int a = 0; a < int(m_pc.axes.size()); ++a)
        if (std::abs(axisX(a) - x) <= 12) return a;
    return -1;
}

void ParallelCoordsView::paintEvent(QPaintEvent*) {
    QPainter p(this);
    p.setRenderHint(QPainter::Antialiasing);
    if (m_pc.axes.empty()) {
        p.drawText(rect(), Qt::AlignCenter, tr("no numeric config keys or metrics to show"));
        return;
    }
    const QSet<int64_t> kept = parcoords_brushed(m_pc);
    const QColor in = palette().color(QPalette::Highlight), out = palette().color(QPalette::Mid);
    for (int pass = 0; pass < 2; ++pass)  // the runs outside the brushes first, faint
        for (size_t l = 0; l < m_pc.runs.size(); ++l) {
            const bool keep = kept.contains(m_pc.runs[l]);
            if (keep != (pass == 1)) continue;
            QPainterPath path;
            bool open = false;
            for (int a = 0; a < int(m_pc.axes.size()); ++a) {
                const double v = m_pc.values[l][size_t(a)];
                if (!std::isfinite(v)) {
                    open = false;
                    continue;
                }
                const QPointF pt(axisX(a), yOf(a, v));
                if (open)
                    path.lineTo(pt);
                else
                    path.moveTo(pt);
                open = true;
            }
            QColor c = keep ? in : out;
            c.setAlpha(keep ? 150 : 50);
            p.setPen(QPen(c, 1));
            p.drawPath(path);
        }
    const QColor fg = palette().color(QPalette::WindowText);
    for (int a = 0; a < int(m_pc.axes.size()); ++a) {
        const ParCoordsAxis& ax = m_pc.axes[size_t(a)];
        const double x = axisX(a);
        p.setPen(QPen(fg, 1));
        p.drawLine(QPointF(x, plotRect().top()), QPointF(x, plotRect().bottom()));
        const QRectF label(x - 60, 2, 120, 18);
        p.drawText(label, Qt::AlignCenter, ax.name);
        p.drawText(QRectF(x - 60, plotRect().bottom() + 2, 120, 18), Qt::AlignCenter,
                   QString::number(ax.lo, 'g', 4));
        p.drawText(QRectF(x + 4, plotRect().top(), 80, 14), Qt::AlignLeft,
                   QString::number(ax.hi, 'g', 4));
        if (ax.brush) {
            const QRectF r = plotRect();  // a range past the axis's values is drawn to its end
            const double y0 = std::max(r.top(), yOf(a, ax.brush->second));
            const double y1 = std::min(r.bottom(), yOf(a, ax.brush->first));
            QColor b = palette().color(QPalette::Highlight);
            b.setAlpha(70);
            p.fillRect(QRectF(x - 6, y0, 12, std::max(2.0, y1 - y0)), b);
        }
    }
}

void ParallelCoordsView::mousePressEvent(QMouseEvent* e) {
    m_dragAxis = axisNear(e->position().x());
    if (m_dragAxis >= 0) m_dragFrom = valueAt(m_dragAxis, e->position().y());
}

void ParallelCoordsView::mouseMoveEvent(QMouseEvent* e) {
    if (m_dragAxis < 0) return;
    m_pc.axes[size_t(m_dragAxis)].brush =
        std::make_pair(std::min(m_dragFrom, valueAt(m_dragAxis, e->position().y())),
                       std::max(m_dragFrom, valueAt(m_dragAxis, e->position().y())));
    update();
}

void ParallelCoordsView::mouseReleaseEvent(QMouseEvent* e) {
    if (m_dragAxis < 0) return;
    const double to = valueAt(m_dragAxis, e->position().y());
    auto& brush = m_pc.axes[size_t(m_dragAxis)].brush;
    if (std::abs(yOf(m_dragAxis, to) - yOf(m_dragAxis, m_dragFrom)) < 3)
        brush.reset();  // a click clears
    else
        brush = std::make_pair(std::min(m_dragFrom, to), std::max(m_dragFrom, to));
    m_dragAxis = -1;
    emitBrush();
}

}  // namespace tessera::studio
