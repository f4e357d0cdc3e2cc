// GanttView: a painted Gantt chart of GanttData — one lane per row, bars coloured by kind with
// the micro-batch number inside, a time axis in ms. Wheel zooms around the cursor (Ctrl-free),
// dragging pans, double-click resets; hovering a bar shows stage, micro-batch, kind, duration.
#pragma once
#include <QWidget>

#include "ui/timeline/timeline_data.h"

namespace tessera::studio {

class GanttView : public QWidget {
    Q_OBJECT
  public:
    explicit GanttView(QWidget* parent = nullptr);

    void setData(const GanttData& data, const QString& title);
    void setEmptyText(const QString& text);  // shown instead of bars (and clears them)
    const GanttData& data() const { return m_data; }
    void setTimeRange(double t0_ms, double t1_ms);  // shared zoom with a sibling view
    double viewStart() const { return m_t0; }
    double viewEnd() const { return m_t1; }
    void zoomAt(double factor, double anchor_ms);  // factor < 1 zooms in
    void resetZoom();
    int barAt(const QPoint& pos) const;       // index into data().bars, or -1
    QPoint barCenter(int index) const;        // where bar `index` is drawn now
    QString barDescription(int index) const;  // the hover text of a bar
    QString title() const { return m_title; }
    static QColor kindColor(const QString& kind);

  Q_SIGNALS:
    void timeRangeChanged(double t0_ms, double t1_ms);

  protected:
    void paintEvent(QPaintEvent*) override;
    void wheelEvent(QWheelEvent*) override;
    void mousePressEvent(QMouseEvent*) override;
    void mouseMoveEvent(QMouseEvent*) override;
    void mouseReleaseEvent(QMouseEvent*) override;
    void mouseDoubleClickEvent(QMouseEvent*) override;
    bool event(QEvent*) override;  // tooltips
    QSize sizeHint() const override;
    QSize minimumSizeHint() const override;

  private:
    GanttData m_data;
    QString m_title, m_empty;
    double m_t0 = 0, m_t1 = 1;  // visible time range, ms
    bool m_dragging = false;
    int m_dragX = 0;

    QRect plotRect() const;
    double xOf(double t_ms) const;
    double tOf(double x) const;
    QRectF barRect(const GanttBar& b) const;
};

}  // namespace tessera::studio
