// The Monitor page's system charts: one small chart per metric the ranks sample (system_metrics.h)
// — GPU utilisation, memory used, power, temperature, SM clock, host CPU and host RAM — with one
// line per rank for the GPU metrics (ranks sharing a GPU each show theirs) and one per host for
// the host metrics. A chart no rank reported for is hidden (a CPU run shows the host charts
// only). Rows arrive through add(); replot() hands the new points to the graphs.
#pragma once
#include <QString>
#include <QWidget>
#include <map>
#include <string>
#include <vector>

#include "engine/store/run_store.h"

class QCustomPlot;
class QCPGraph;
class QGridLayout;
class QLabel;
class QScrollArea;

namespace tessera::studio {

class SystemCharts : public QWidget {
    Q_OBJECT
  public:
    explicit SystemCharts(QWidget* parent = nullptr);

    void clear();
    // Where each rank runs (RunStore::devices): the line labels ("r2 · node-b").
    void setDevices(const std::vector<tessera::DeviceRecord>& devices);
    // Takes a row of a system metric; false for any other name.
    bool add(const tessera::MetricRow& r);
    // x: 0 step, 1 wall time since t0_s, 2 tokens (step x tokens_per_step)
    void setXAxis(int mode, double t0_s, double tokens_per_step);
    void replot();
    void setDarkTheme(bool dark);

    // ---- for tests ----
    QCustomPlot* chart(const std::string& metric) const;  // null if not a system metric
    int lineCount(const std::string& metric) const;       // ranks (or hosts) with points
    bool chartVisible(const std::string& metric) const;
    QString emptyText() const;

  protected:
    void resizeEvent(QResizeEvent* e) override;

  private:
    struct Line {
        std::vector<double> step, wall, value;
        QCPGraph* graph = nullptr;
        size_t plotted = 0;
    };
    struct Chart {
        std::string metric;
        double scale = 1;  // value -> shown unit (bytes -> GiB)
        QString title;
        QCustomPlot* plot = nullptr;
        std::map<int, Line> lines;  // by rank
    };
    std::vector<Chart> m_charts;
    std::map<int, QString> m_rankLabel;
    QLabel* m_empty;
    QScrollArea* m_scroll = nullptr;
    QGridLayout* m_grid = nullptr;
    int m_cols = 0, m_shown = -1;  // the grid's current shape (relayout)
    int m_xMode = 0;
    double m_t0 = 0, m_tokens = 0;
    bool m_dirty = false, m_rebuild = false, m_dark = false;

    Chart* find(const std::string& metric);
    const Chart* find(const std::string& metric) const;
    double keyOf(const Line& l, size_t i) const;
    void relayout();
};

}  // namespace tessera::studio
