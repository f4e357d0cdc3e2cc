// MemoryChart: stacked QCPBars per memory category, capacity line, over-capacity bands.
#include "ui/plan/memory_chart.h"

#include <QResizeEvent>
#include <QVBoxLayout>
#include <algorithm>
#include <vector>

#include "ui/common/plot_theme.h"
#include "ui/common/qcustomplot_qt.h"

namespace tessera::studio {

namespace {}

MemoryChart::MemoryChart(QWidget* parent) : QWidget(parent), m_plot(new QCustomPlot(this)) {
    setObjectName("memoryChart");
    auto* lay = new QVBoxLayout(this);
    lay->setContentsMargins(0, 0, 0, 0);
    lay->addWidget(m_plot);
    m_plot->setMinimumHeight(150);
    // the legend wraps to the width (fitLegend), so the plot's own minimum (the legend in one
    // row, ~950 px) must not hold the window wide
    m_plot->setMinimumWidth(320);
    m_plot->legend->setFont(QFont(font().family(), 8));
    m_plot->legend->setFillOrder(QCPLegend::foColumnsFirst);
    m_plot->legend->setWrap(7);  // one row above the bars where it fits: fitLegend()
    m_plot->legend->setBrush(QColor(255, 255, 255, 210));
    // the legend gets a row of its own above the plot, so it never covers the bars
    m_plot->axisRect()->insetLayout()->take(m_plot->legend);
    showLegend(true);
    m_plot->legend->setBorderPen(Qt::NoPen);
    m_plot->yAxis->setLabel("GiB per GPU");
    m_plot->yAxis->ticker()->setTickCount(3);  // a short axis when the legend takes rows
    m_plot->xAxis->setLabel("global rank");
}

void MemoryChart::setDarkTheme(bool dark) {
    plot_apply_theme(m_plot, dark);
    m_plot->replot();
}

// The legend's row above the axis rect, or none: an empty legend's grid has no width to give, and
// sharing its column it held the axis rect to ~100 px (a plan without a prediction).
void MemoryChart::showLegend(bool show) {
    QCPLayoutGrid* grid = m_plot->plotLayout();
    const bool in = m_plot->legend->layout() == grid;
    if (show && !in) {
        grid->insertRow(0);
        grid->addElement(0, 0, m_plot->legend);
        grid->setRowStretchFactor(0, 0.001);
    } else if (!show && in) {
        grid->take(m_plot->legend);
        grid->simplify();
    }
    m_plot->legend->setVisible(show);
}

void MemoryChart::clear(const QString& why) {
    m_plot->clearPlottables();
    m_plot->clearItems();
    showLegend(false);
    auto* t = new QCPItemText(m_plot);
    t->position->setType(QCPItemPosition::ptAxisRectRatio);
    t->position->setCoords(0.5, 0.5);
    t->setText(why);
    m_plot->replot();
}

void MemoryChart::setEstimate(const tessera::PlanEstimate& e, int64_t capacity) {
    m_plot->clearPlottables();
    m_plot->clearItems();
    showLegend(true);
    int n = (int)e.ranks.size();
    const int64_t maxPeak = tessera::plan_fullest_bytes(e);
    // a model that uses a sliver of the device: draw in MiB and zoom to the bars
    const bool zoom = maxPeak < capacity / 20;
    const double kGiB = zoom ? double(1 << 20) : double(1ll << 30);
    m_plot->yAxis->setLabel(
        QString("%1 per %2").arg(zoom ? "MiB" : "GiB").arg(tessera::device_rank_noun(e.device)));
    QVector<double> x(n);
    for (int r = 0; r < n; ++r) x[r] = r;
    double width = n > 32 ? 0.9 : 0.7;
    QCPBars* below = nullptr;
    double ymax = zoom ? 0 : capacity / kGiB;
    for (int c = 0; c < (int)tessera::MemCategory::host; ++c) {
        QVector<double> y(n);
        bool any = false;
        for (int r = 0; r < n; ++r) y[r] = e.ranks[r].at_peak_bytes[c] / kGiB, any |= y[r] > 0;
        if (!any) continue;
        auto* bars = new QCPBars(m_plot->xAxis, m_plot->yAxis);
        bars->setName(
            QString::fromUtf8(tessera::mem_category_name(tessera::MemCategory(c)).data()));
        bars->setWidth(width);
        bars->setPen(Qt::NoPen);
        bars->setBrush(mem_category_color(c));
        bars->setData(x, y, true);
        if (below) bars->moveAbove(below);
        below = bars;
    }
    // the peak of the sum: what has to fit
    auto* peak = new QCPGraph(m_plot->xAxis, m_plot->yAxis);
    peak->setName("peak total");
    peak->setLineStyle(QCPGraph::lsNone);
    peak->setScatterStyle(QCPScatterStyle(QCPScatterStyle::ssCross, Qt::black, 7));
    QVector<double> py(n);
    for (int r = 0; r < n; ++r) {
        py[r] = e.ranks[r].device_peak_bytes / kGiB;
        double stacked = 0;
        for (int c = 0; c < (int)tessera::MemCategory::host; ++c)
            stacked += e.ranks[r].at_peak_bytes[c] / kGiB;
        ymax = std::max({ymax, py[r], stacked});
        if (e.ranks[r].device_peak_bytes > capacity) {
            auto* band = new QCPItemRect(m_plot);
            band->topLeft->setCoords(r - width / 2, py[r]);
            band->bottomRight->setCoords(r + width / 2, capacity / kGiB);
            band->setPen(QPen(QColor(220, 20, 20), 2));
            band->setBrush(QColor(220, 20, 20, 90));
        }
    }
    peak->setData(x, py, true);
    // the capacity: a dashed line across the plot, named in the legend's row above the axis rect
    // (a label on the plot sat on the bars whenever a GPU came near or past it)
    const double capGiB = capacity / double(1ll << 30);
    auto* cap = new QCPGraph(m_plot->xAxis, m_plot->yAxis);
    // short: the legend's columns are as wide as their widest entry
    cap->setName(QString("%1 capacity %2 GiB%3")
                     .arg(QString::fromStdString(e.device.name))
                     .arg(capGiB, 0, 'f', capGiB < 10 ? 1 : 0)
                     .arg(zoom ? QString(" (off scale; fullest %1%)")
                                     .arg(100.0 * maxPeak / capacity, 0, 'f', 2)
                               : QString()));
    cap->setPen(QPen(QColor(200, 30, 30), 1.5, Qt::DashLine));
    cap->setData(QVector<double>{-1.0, double(n)},
                 QVector<double>{capacity / kGiB, capacity / kGiB}, true);
    m_plot->xAxis->setRange(-0.6, n - 0.4);
    m_plot->yAxis->setRange(0, ymax * 1.22);
    QSharedPointer<QCPAxisTickerFixed> ticker(new QCPAxisTickerFixed);
    ticker->setTickStep(n <= 16 ? 1 : n <= 64 ? 4 : 16);
    m_plot->xAxis->setTicker(ticker);
    fitLegend(QWidget::width());
    m_plot->replot();
}

void MemoryChart::resizeEvent(QResizeEvent* e) {
    QWidget::resizeEvent(e);
    fitLegend(e->size().width());
    m_plot->replot(QCustomPlot::rpQueuedReplot);
}

// As many legend columns as fit in `w` (columns as wide as their widest entry), at most 7.
void MemoryChart::fitLegend(int w) {
    QCPLegend* lg = m_plot->legend;
    std::vector<int> item;  // the entries' widths (the grid's cells include empty ones)
    for (int i = 0; i < lg->itemCount(); ++i)
        if (QCPAbstractLegendItem* it = lg->item(i))
            item.push_back(it->minimumOuterSizeHint().width());
    const int n = (int)item.size();
    if (n == 0) return;
    int wrap = std::min(n, 7);
    for (; wrap > 1; --wrap) {
        int total = 0;
        for (int c = 0; c < wrap; ++c) {
            int col = 0;
            for (int i = c; i < n; i += wrap) col = std::max(col, item[i]);
            total += col + lg->columnSpacing();
        }
        if (total + 16 <= w) break;
    }
    if (wrap == lg->wrap()) return;
    lg->setWrap(wrap);
    lg->setFillOrder(QCPLegend::foColumnsFirst, true);
}

}  // namespace tessera::studio
