// The Monitor page's system charts. See system_charts.h.
#include "ui/monitor/system_charts.h"

#include <QGridLayout>
#include <QLabel>
#include <QResizeEvent>
#include <QScrollArea>
#include <QScrollBar>
#include <QVBoxLayout>
#include <algorithm>
#include <cmath>

#include "engine/telemetry/metric_names.h"
#include "ui/common/plot_theme.h"
#include "ui/common/qcustomplot_qt.h"

namespace tessera::studio {

namespace {
constexpr int kMinChartWidth = 250;   // a readable step axis and a key of four ranks
constexpr int kMinChartHeight = 110;  // a title, three value ticks and the step axis
constexpr double kGiB = 1024.0 * 1024.0 * 1024.0;

struct ChartSpec {
    std::string_view metric;
    const char* title;
    double scale;
};
const ChartSpec kCharts[] = {
    {metric::gpu_util_percent, "GPU utilisation (%)", 1},
    {metric::gpu_memory_used_bytes, "GPU memory used (GiB)", 1 / kGiB},
    {metric::gpu_power_watts, "GPU power (W)", 1},
    {metric::gpu_temperature_c, "GPU temperature (°C)", 1},
    {metric::gpu_sm_clock_mhz, "SM clock (MHz)", 1},
    {metric::host_cpu_percent, "host CPU (%)", 1},
    {metric::host_memory_used_bytes, "host RAM used (GiB)", 1 / kGiB},
};

QColor line_color(int i) {
    static const QColor c[] = {QColor(0x4e, 0x79, 0xa7), QColor(0xf2, 0x8e, 0x2b),
                               QColor(0xe1, 0x57, 0x59), QColor(0x76, 0xb7, 0xb2),
                               QColor(0x59, 0xa1, 0x4f), QColor(0xed, 0xc9, 0x48),
                               QColor(0xb0, 0x7a, 0xa1), QColor(0x9c, 0x75, 0x5f)};
    return c[i % 8];
}
}  // namespace

SystemCharts::SystemCharts(QWidget* parent) : QWidget(parent), m_empty(new QLabel(this)) {
    setObjectName("monitorSystem");
    // The charts that have points, in as many columns as fit (each at least kMinChartWidth wide),
    // the rows sharing the height (each at least kMinChartHeight): at the default window all seven
    // show at once; a smaller tab scrolls rather than clipping them (relayout()).
    auto* scroll = new QScrollArea(this);
    m_scroll = scroll;
    scroll->setObjectName("monitorSystemScroll");
    scroll->setFrameShape(QFrame::NoFrame);
    scroll->setWidgetResizable(true);
    scroll->setHorizontalScrollBarPolicy(Qt::ScrollBarAlwaysOff);
    auto* charts = new QWidget(scroll);
    auto* grid = new QGridLayout(charts);
    m_grid = grid;
    grid->setContentsMargins(0, 0, 0, 0);
    grid->setSpacing(4);
    for (const ChartSpec& s : kCharts) {
        Chart c;
        c.metric = std::string(s.metric);
        c.scale = s.scale;
        c.title = s.title;
        c.plot = new QCustomPlot(charts);
        c.plot->setObjectName(QString("system:%1").arg(QString::fromStdString(c.metric)));
        // room for a key of four ranks and a readable value axis; the tab scrolls below that
        c.plot->setMinimumHeight(kMinChartHeight);
        c.plot->setMinimumWidth(kMinChartWidth);
        c.plot->yAxis->ticker()->setTickCount(3);
        if (s.metric == metric::gpu_util_percent || s.metric == metric::host_cpu_percent) {
            QSharedPointer<QCPAxisTickerFixed> percent(new QCPAxisTickerFixed);
            percent->setTickStep(50);  // 0, 50, 100: five labels crowd a short chart
            c.plot->yAxis->setTicker(percent);
        }
        c.plot->plotLayout()->insertRow(0);
        auto* title = new QCPTextElement(c.plot, s.title, QFont(font().family(), 9, QFont::Bold));
        c.plot->plotLayout()->addElement(0, 0, title);
        c.plot->legend->setVisible(true);
        c.plot->legend->setFont(QFont(font().family(), 7));
        c.plot->legend->setRowSpacing(0);
        // the key in its own column right of the axes: never over the lines
        c.plot->plotLayout()->addElement(1, 1, c.plot->legend);
        c.plot->plotLayout()->setColumnStretchFactor(1, 0.001);
        c.plot->setNoAntialiasingOnDrag(true);
        c.plot->hide();
        m_charts.push_back(std::move(c));
    }
    m_empty->setObjectName("monitorSystemEmpty");
    m_empty->setAlignment(Qt::AlignCenter);
    m_empty->setWordWrap(true);
    auto* lay = new QVBoxLayout(this);
    lay->setContentsMargins(0, 0, 0, 0);
    lay->addWidget(m_empty);
    scroll->setWidget(charts);
    lay->addWidget(scroll, 1);
    clear();
}

SystemCharts::Chart* SystemCharts::find(const std::string& metric) {
    for (Chart& c : m_charts)
        if (c.metric == metric) return &c;
    return nullptr;
}
const SystemCharts::Chart* SystemCharts::find(const std::string& metric) const {
    for (const Chart& c : m_charts)
        if (c.metric == metric) return &c;
    return nullptr;
}

void SystemCharts::resizeEvent(QResizeEvent* e) {
    QWidget::resizeEvent(e);
    relayout();
}

// The shown charts in reading order, in as many columns as the tab's width holds.
void SystemCharts::relayout() {
    std::vector<QCustomPlot*> shown;
    for (Chart& c : m_charts)
        if (!c.lines.empty()) shown.push_back(c.plot);
    const int n = (int)shown.size();
    // this widget's width (the scroll area's viewport has none until the tab is first shown),
    // less a vertical scroll bar's room
    const int width = QWidget::width() - m_scroll->verticalScrollBar()->sizeHint().width();
    const int cols =
        std::clamp(width / (kMinChartWidth + m_grid->horizontalSpacing()), 1, std::max(1, n));
    if (cols == m_cols && n == m_shown) return;
    m_cols = cols;
    m_shown = n;
    for (Chart& c : m_charts) m_grid->removeWidget(c.plot);
    for (int i = 0; i < n; ++i) m_grid->addWidget(shown[i], i / cols, i % cols);
    // the grid keeps its old rows and columns: only the used ones stretch
    for (int c = 0; c < m_grid->columnCount(); ++c) m_grid->setColumnStretch(c, c < cols ? 1 : 0);
    const int rows = (n + cols - 1) / cols;
    for (int r = 0; r < m_grid->rowCount(); ++r) m_grid->setRowStretch(r, r < rows ? 1 : 0);
}

void SystemCharts::clear() {
    for (Chart& c : m_charts) {
        c.plot->clearGraphs();
        c.lines.clear();
        c.plot->hide();
    }
    relayout();
    m_rankLabel.clear();
    m_empty->setText(
        tr("No system metrics in this run (runs before they were sampled, or none yet)."));
    m_empty->show();
    m_dirty = false;
}

void SystemCharts::setDevices(const std::vector<tessera::DeviceRecord>& devices) {
    for (const auto& d : devices)
        m_rankLabel[d.rank] = QString("r%1 · %2").arg(d.rank).arg(QString::fromStdString(d.host));
    m_rebuild = true;
}

bool SystemCharts::add(const tessera::MetricRow& r) {
    Chart* c = find(r.name);
    if (!c) return false;
    if (!std::isfinite(r.value)) return true;
    Line& l = c->lines[r.rank];
    l.step.push_back((double)r.step);
    l.wall.push_back(r.wall_time);
    l.value.push_back(r.value * c->scale);
    m_dirty = true;
    return true;
}

void SystemCharts::setXAxis(int mode, double t0_s, double tokens_per_step) {
    m_xMode = mode;
    m_t0 = t0_s;
    m_tokens = tokens_per_step;
    m_rebuild = true;
}

double SystemCharts::keyOf(const Line& l, size_t i) const {
    if (m_xMode == 1) return l.wall[i] - (m_t0 > 0 ? m_t0 : l.wall.front());
    if (m_xMode == 2) return l.step[i] * m_tokens;
    return l.step[i];
}

void SystemCharts::replot() {
    if (!m_dirty && !m_rebuild) return;
    bool any = false;
    const QString xl = m_xMode == 1   ? tr("wall time (s)")
                       : m_xMode == 2 ? tr("tokens")
                                      : tr("step");
    for (Chart& c : m_charts) {
        if (c.lines.empty()) continue;
        any = true;
        for (auto& [rank, l] : c.lines) {
            if (!l.graph || m_rebuild) {
                if (!l.graph) {
                    l.graph = c.plot->addGraph();
                    // by rank, so a rank has one colour on every chart
                    l.graph->setPen(QPen(line_color(rank), 1.5));
                    l.graph->setAdaptiveSampling(true);
                }
                l.graph->data()->clear();
                l.plotted = 0;
                l.graph->setName(m_rankLabel.count(rank) ? m_rankLabel[rank]
                                                         : QString("r%1").arg(rank));
            }
            QVector<double> k, v;
            for (size_t i = l.plotted; i < l.value.size(); ++i) {
                k.push_back(keyOf(l, i));
                v.push_back(l.value[i]);
            }
            l.graph->addData(k, v, true);
            l.plotted = l.value.size();
        }
        c.plot->xAxis->setLabel(xl);
        // one line (one rank) needs no key: its rank stands in the title and the axes get the room
        const bool keyed = c.lines.size() > 1;
        QCPLayoutGrid* grid = c.plot->plotLayout();
        if (keyed && !c.plot->legend->layout()) {
            grid->addElement(1, 1, c.plot->legend);
            grid->setColumnStretchFactor(1, 0.001);
        } else if (!keyed && c.plot->legend->layout()) {
            grid->take(c.plot->legend);
            grid->simplify();
        }
        c.plot->legend->setVisible(keyed);
        if (auto* title = qobject_cast<QCPTextElement*>(c.plot->plotLayout()->element(0, 0))) {
            title->setText(keyed ? c.title : c.title + "  ·  " + c.plot->graph(0)->name());
        }
        c.plot->rescaleAxes();
        // percentages on their whole scale; the rest from zero with headroom
        if (c.metric == metric::gpu_util_percent || c.metric == metric::host_cpu_percent) {
            c.plot->yAxis->setRange(0, 105);
        } else {
            const QCPRange r = c.plot->yAxis->range();
            c.plot->yAxis->setRange(0, r.upper > 0 ? r.upper * 1.15 : 1);
        }
        plot_apply_theme(c.plot, m_dark);
        c.plot->show();
        c.plot->replot(QCustomPlot::rpQueuedReplot);
    }
    m_empty->setVisible(!any);
    relayout();
    m_dirty = m_rebuild = false;
}

void SystemCharts::setDarkTheme(bool dark) {
    m_dark = dark;
    m_rebuild = true;
    replot();
}

QCustomPlot* SystemCharts::chart(const std::string& metric) const {
    const Chart* c = find(metric);
    return c ? c->plot : nullptr;
}

int SystemCharts::lineCount(const std::string& metric) const {
    const Chart* c = find(metric);
    return c ? (int)c->lines.size() : 0;
}

bool SystemCharts::chartVisible(const std::string& metric) const {
    const Chart* c = find(metric);
    return c && !c->plot->isHidden();
}

QString SystemCharts::emptyText() const {
    return m_empty->isHidden() ? QString() : m_empty->text();
}

}  // namespace tessera::studio
