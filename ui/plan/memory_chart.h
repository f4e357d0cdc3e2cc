// Per-GPU predicted memory: one stacked bar per rank (the peak of each MemoryTracker category on
// the device: params, grads, optimizer, activations, workspace, comm), a marker at the rank's peak
// of the sum (what must fit), and the device capacity as a dashed line. Ranks whose peak exceeds
// the capacity get a red band from the line to their peak. QCustomPlot.
#pragma once
#include <QWidget>

#include "engine/plan/estimator.h"

class QCustomPlot;

namespace tessera::studio {

class MemoryChart : public QWidget {
    Q_OBJECT
  public:
    explicit MemoryChart(QWidget* parent = nullptr);
    void setEstimate(const tessera::PlanEstimate& e, int64_t capacity_bytes);
    void clear(const QString& why);
    QCustomPlot* plot() const { return m_plot; }
    void setDarkTheme(bool dark);  // plot background, axes, grid and legend colours

  protected:
    void resizeEvent(QResizeEvent* e) override;

  private:
    void fitLegend(int width);  // the legend's columns for this width
    void showLegend(bool show);
    QCustomPlot* m_plot;
};

}  // namespace tessera::studio
