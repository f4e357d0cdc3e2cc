// Parallel coordinates of the Compare page: one vertical axis per numeric config key that differs
// among the runs, then the final metrics (final val loss, median tokens/s, peak memory); one
// polyline per run. Brushing (dragging along an axis) keeps the runs inside every brushed range,
// and the run table shows only those (RunFilterProxy::setAllowedRuns).
// parcoords_build and parcoords_brushed are Qt-widget-free (they take the table's summaries); the
// widget only paints and turns mouse drags into brush ranges.
#pragma once
#include <QSet>
#include <QStringList>
#include <QWidget>
#include <optional>
#include <vector>

#include "ui/compare/run_table_model.h"

namespace tessera::studio {

struct ParCoordsAxis {
    QString name;                                    // "lr", "final val loss", ...
    double lo = 0, hi = 0;                           // the values' range (lo == hi: one value)
    std::optional<std::pair<double, double>> brush;  // kept range, in values
};

struct ParCoords {
    std::vector<ParCoordsAxis> axes;
    std::vector<int64_t> runs;                // run ids, one per line
    std::vector<std::vector<double>> values;  // [line][axis]; NaN where missing
};

// The axes for these runs: numeric differing config keys of `model` (in its column order), then the
// final metrics that at least one run has.
ParCoords parcoords_build(const RunTableModel& model);
// The runs whose value lies in every brushed axis's range (a missing value fails a brushed axis).
QSet<int64_t> parcoords_brushed(const ParCoords& pc);

class ParallelCoordsView : public QWidget {
    Q_OBJECT
  public:
    explicit ParallelCoordsView(QWidget* parent = nullptr);
    void setRuns(const RunTableModel& model);       // rebuilds the axes; brushes cleared
    void setBrush(int axis, double lo, double hi);  // in values; lo > hi swaps
    void clearBrushes();
    const ParCoords& coords() const { return m_pc; }
    QSize sizeHint() const override { return {600, 220}; }

  Q_SIGNALS:
    // The runs inside every brush; std::nullopt when nothing is brushed (every run passes).
    void brushChanged(const std::optional<QSet<int64_t>>& runs);

  protected:
    void paintEvent(QPaintEvent*) override;
    void mousePressEvent(QMouseEvent* e) override;
    void mouseMoveEvent(QMouseEvent* e) override;
    void mouseReleaseEvent(QMouseEvent* e) override;

  private:
    ParCoords m_pc;
    int m_dragAxis = -1;
    double m_dragFrom = 0;
    QRectF plotRect() const;
    double axisX(int axis) const;
    double valueAt(int axis, double y) const;  // pixel y -> value
    double yOf(int axis, double v) const;      // value -> pixel y
    int axisNear(double x) const;              // -1 when no axis within 12 px
    void emitBrush();
};

}  // namespace tessera::studio
