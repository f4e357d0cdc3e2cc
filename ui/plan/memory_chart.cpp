// MemoryChart: stacked QCPBars per memory category, capacity line, over-capacity bands.
#include "ui/plan/memory_chart.h"

#include <QVBoxLayout>

#include "ui/common/plot_theme.h"
#include "ui/common/qcustomplot_qt.h"

namespace tessera::studio {

namespace {}

MemoryChart::MemoryChart(QWidget* parent) : QWidget(parent), m_plot(new QCustomPlot(this)) {
    setObjectName("memoryChart");
    auto* lay = new QVBoxLayout(this);
    lay->setContentsMargins(0, 0, 0, 0);
    lay->addWidget(m_plot);
    m_plot->setMinimumHeight(180);
    m_plot->legend->setVisible(true);
    m_plot->legend->setFont(QFont(font().family(), 8));
    m_plot->legend->setFillOrder(QCPLegend::foColumnsFirst);
    m_plot->legend->setWrap(7);  // one row above the bars
    m_plot->legend->setBrush(QColor(255, 255, 255, 210));
    // the legend gets a row of its own above the plot, so it never covers the bars
    m_plot->axisRect()->insetLayout()->take(m_plot->legend);
    m_plot->plotLayout()->insertRow(0);
    m_plot->plotLayout()->addElement(0, 0, m_plot->legend);
    m_plot->plotLayout()->setRowStretchFactor(0, 0.001);
    m_plot->legend->setBorderPen(Qt::NoPen);
    m_plot->yAxis->setLabel("GiB per GPU");
    m_plot->xAxis->setLabel("global rank");
}

void MemoryChart::setDarkTheme(bool dark) {
    plot_apply_theme(m_plot, dark);
    m_plot->replot();
}

void MemoryChart::clear(const QString& why) {
    m_plot->clearPlottables();
    m_plot->clearItems();
    auto* t = new QCPItemText(m_plot);
    t->position->setType(QCPItemPosition::ptAxisRectRatio);
    t->position->setCoords(0.5, 0.5);
    t->setText(why);
    m_plot->replot();
}

void MemoryChart::setEstimate(const tessera::PlanEstimate& e, int64_t capacity) {
    m_plot->clearPlottables();
    m_plot->clearItems();
    int n = (int)e.ranks.size();
    int64_t maxPeak = 0;
    for (const auto& r : e.ranks) maxPeak = std::max(maxPeak, r.device_peak_bytes);
    // a model that uses a sliver of the device: draw in MiB and zoom to the bars
    const bool zoom = maxPeak < capacity / 20;
    const double kGiB = zoom ? double(1 << 20) : double(1ll << 30);
    m_plot->yAxis->setLabel(zoom ? "MiB per GPU" : "GiB per GPU");
    QVector<double> x(n);
    for (int r = 0; r < n; ++r) x[r] = r;
    double width = n > 32 ? 0.9 : 0.7;
    QCPBars* below = nullptr;
    double ymax = zoom ? 0 : capacity / kGiB;
    for (int c = 0; c < (int)tessera::MemCategory::host; ++c) {
        QVector<double> y(n);
        bool any = false;
        for (int r = 0; r < n; ++r) y[r] = e.ranks[r].peak_bytes[c] / kGiB, any |= y[r] > 0;
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
            stacked += e.ranks[r].peak_bytes[c] / kGiB;
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
    cap->setName(QString("%1 capacity %2 GiB%3")
                     .arg(QString::fromStdString(e.device.name))
                     .arg(capGiB, 0, 'f', capGiB < 10 ? 1 : 0)
                     .arg(zoom ? QString(" (off scale: the fullest GPU uses %1%)")
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
    m_plot->replot();
}

}  // namespace tessera::studio
