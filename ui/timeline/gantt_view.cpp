// GanttView: lanes, kind-coloured bars with micro-batch numbers, a ms axis, zoom/pan, tooltips.
#include "ui/timeline/gantt_view.h"

#include <QHelpEvent>
#include <QMouseEvent>
#include <QPainter>
#include <QToolTip>
#include <QWheelEvent>
#include <algorithm>
#include <cmath>

namespace tessera::studio {

namespace {
constexpr int kLabelW = 120;  // row labels, px
constexpr int kTitleH = 20;
constexpr int kAxisH = 22;
constexpr int kLaneH = 26;

// A "nice" tick step (1, 2, 5 × 10^k) giving about `target` ticks over `span`.
double nice_step(double span, int target) {
    const double raw = span / std::max(1, target);
    const double p = std::pow(10.0, std::floor(std::log10(raw)));
    for (double m : {1.0, 2.0, 5.0, 10.0})
        if (raw <= m * p) return m * p;
    return 10 * p;
}
}  // namespace

GanttView::GanttView(QWidget* parent) : QWidget(parent) {
    setMouseTracking(true);
    setAttribute(Qt::WA_OpaquePaintEvent);
    setSizePolicy(QSizePolicy::Expanding,
                  QSizePolicy::Maximum);  // lanes never stretch thin bars tall
}

QColor GanttView::kindColor(const QString& kind) {
    if (kind == "forward") return QColor(0x4e, 0x79, 0xa7);
    if (kind == "backward") return QColor(0xf2, 0x8e, 0x2b);
    // a split backward (zb-h1): B in the backward's red-orange family, W in green
    if (kind == "backward_input") return QColor(0xe1, 0x57, 0x59);
    if (kind == "backward_weight") return QColor(0x59, 0xa1, 0x4f);
    if (kind == "forward_backward") return QColor(0x76, 0xb7, 0xb2);
    if (kind == "recv") return QColor(0xba, 0xb0, 0xac);
    if (kind == "send") return QColor(0x9c, 0x75, 0x5f);
    if (kind == "optimizer") return QColor(0xb0, 0x7a, 0xa1);
    return QColor(0x88, 0x88, 0x88);
}

void GanttView::setData(const GanttData& data, const QString& title) {
    m_data = data;
    m_title = title;
    m_empty.clear();
    resetZoom();
    updateGeometry();
}

void GanttView::setEmptyText(const QString& text) {
    m_data = GanttData{};
    m_empty = text;
    updateGeometry();
    update();
}

void GanttView::resetZoom() {
    setTimeRange(0, std::max(m_data.length_ms, 1e-3));
}

void GanttView::setTimeRange(double t0, double t1) {
    if (!(t1 > t0)) return;
    if (t0 == m_t0 && t1 == m_t1) return;
    m_t0 = t0;
    m_t1 = t1;
    update();
    Q_EMIT timeRangeChanged(t0, t1);
}

void GanttView::zoomAt(double factor, double anchor) {
    const double full = std::max(m_data.length_ms, 1e-3);
    double span = std::clamp((m_t1 - m_t0) * factor, full * 1e-4, full);
    double t0 = anchor - (anchor - m_t0) * span / (m_t1 - m_t0);
    t0 = std::clamp(t0, 0.0, full - span);
    setTimeRange(t0, t0 + span);
}

QSize GanttView::sizeHint() const {
    return {600,
            kTitleH + kAxisH + 8 + int(kLaneH * 1.6) * std::max<int>(2, m_data.rowLabels.size())};
}
QSize GanttView::minimumSizeHint() const {
    return {300, kTitleH + kAxisH + 8 + kLaneH * 2};
}

QRect GanttView::plotRect() const {
    return QRect(kLabelW, kTitleH, std::max(10, width() - kLabelW - 12),
                 std::max(10, height() - kTitleH - kAxisH));
}

double GanttView::xOf(double t) const {
    const QRect r = plotRect();
    return r.left() + (t - m_t0) / (m_t1 - m_t0) * r.width();
}

double GanttView::tOf(double x) const {
    const QRect r = plotRect();
    return m_t0 + (x - r.left()) / double(r.width()) * (m_t1 - m_t0);
}

QRectF GanttView::barRect(const GanttBar& b) const {
    const QRect r = plotRect();
    const int rows = std::max<int>(1, m_data.rowLabels.size());
    const double laneH = std::min<double>(kLaneH * 1.6, r.height() / double(rows));
    const double y = r.top() + b.row * laneH + 3;
    const double x0 = xOf(b.start_ms), x1 = xOf(b.end_ms);
    return QRectF(x0, y, std::max(1.0, x1 - x0), laneH - 6);
}

int GanttView::barAt(const QPoint& pos) const {
    if (!plotRect().contains(pos)) return -1;  // bars scrolled out of view are clipped
    // topmost (last painted) first
    for (int i = m_data.bars.size() - 1; i >= 0; --i)
        if (barRect(m_data.bars[i]).adjusted(-1, 0, 1, 0).contains(pos)) return i;
    return -1;
}

QPoint GanttView::barCenter(int i) const {
    if (i < 0 || i >= m_data.bars.size()) return {-1, -1};
    return barRect(m_data.bars[i]).center().toPoint();
}

QString GanttView::barDescription(int i) const {
    if (i < 0 || i >= m_data.bars.size()) return {};
    const GanttBar& b = m_data.bars[i];
    QString micro = b.micro >= 0 ? QString::number(b.micro) : QStringLiteral("–");
    return QString("stage %1 (rank %2)\nmicro-batch %3\n%4\n%5 ms (at %6 ms)")
               .arg(b.stage)
               .arg(b.rank)
               .arg(micro)
               .arg(b.kind)
               .arg(b.duration_ms(), 0, 'f', 3)
               .arg(b.start_ms, 0, 'f', 3) +
           (b.critical ? QStringLiteral("\non the critical path") : QString());
}

void GanttView::paintEvent(QPaintEvent*) {
    QPainter p(this);
    p.setRenderHint(QPainter::Antialiasing, false);
    const QPalette pal = palette();
    p.fillRect(rect(), pal.color(QPalette::Base));
    const QColor fg = pal.color(QPalette::Text);
    QColor grid = fg;
    grid.setAlpha(40);

    QFont bold = font();
    bold.setBold(true);
    p.setFont(bold);
    p.setPen(fg);
    p.drawText(QRect(6, 0, width() - 12, kTitleH), Qt::AlignVCenter | Qt::AlignLeft, m_title);
    p.setFont(font());
    if (!m_empty.isEmpty() || m_data.bars.isEmpty()) {
        p.drawText(rect().adjusted(0, kTitleH, 0, 0), Qt::AlignCenter,
                   m_empty.isEmpty() ? QStringLiteral("no spans") : m_empty);
        return;
    }

    const QRect r = plotRect();
    const int rows = std::max<int>(1, m_data.rowLabels.size());
    const double laneH = std::min<double>(kLaneH * 1.6, r.height() / double(rows));
    // lanes and labels
    for (int i = 0; i < m_data.rowLabels.size(); ++i) {
        const QRectF lane(r.left(), r.top() + i * laneH, r.width(), laneH);
        if (i % 2) p.fillRect(lane, QColor(grid.red(), grid.green(), grid.blue(), 14));
        p.setPen(fg);
        p.drawText(QRectF(4, lane.top(), kLabelW - 10, laneH), Qt::AlignVCenter | Qt::AlignRight,
                   m_data.rowLabels[i]);
    }
    // time axis and grid
    const double axisY = r.top() + rows * laneH + 2;
    const double step = nice_step(m_t1 - m_t0, std::max(2, r.width() / 90));
    p.setPen(QPen(fg));
    p.drawLine(QPointF(r.left(), axisY), QPointF(r.right(), axisY));
    for (double t = std::ceil(m_t0 / step) * step; t <= m_t1 + 1e-12; t += step) {
        const double x = xOf(t);
        p.setPen(QPen(grid, 1, Qt::DotLine));
        p.drawLine(QPointF(x, r.top()), QPointF(x, axisY));
        p.setPen(fg);
        p.drawLine(QPointF(x, axisY), QPointF(x, axisY + 4));
        const int prec = step >= 1 ? 0 : int(std::ceil(-std::log10(step)));
        p.drawText(
            QRectF(x - 40, axisY + 4, 80, 16), Qt::AlignHCenter | Qt::AlignTop,
            QString::number(t, 'f', prec) + (t == std::ceil(m_t0 / step) * step ? " ms" : ""));
    }
    // bars
    p.setClipRect(QRectF(r.left(), r.top(), r.width(), axisY - r.top()));
    QFont small = font();
    small.setPointSizeF(std::max(6.0, font().pointSizeF() - 1));
    p.setFont(small);
    // bubbles (simulated schedules): the lane's idle intervals, hatched red
    for (const GanttGap& g : m_data.gaps) {
        const QRectF gr(xOf(g.start_ms), r.top() + g.row * laneH + 3,
                        xOf(g.end_ms) - xOf(g.start_ms), laneH - 6);
        p.fillRect(gr, QColor(0xe1, 0x57, 0x59, 40));
        p.fillRect(gr, QBrush(QColor(0xe1, 0x57, 0x59, 150), Qt::BDiagPattern));
    }
    const QColor critical_pen = pal.color(QPalette::Text);
    for (const GanttBar& b : m_data.bars) {
        QRectF br = barRect(b);
        br.setTop(r.top() + b.row * laneH + 3);
        br.setHeight(laneH - 6);
        const QColor c = kindColor(b.kind);
        if (b.kind == "recv") {
            p.fillRect(br, QBrush(c, Qt::BDiagPattern));
            p.setPen(QPen(c.darker(120)));
        } else {
            p.fillRect(br, c);
            p.setPen(QPen(c.darker(150)));
        }
        p.drawRect(br);
        if (b.critical) {  // the critical path: a thick outline
            p.setPen(QPen(critical_pen, 3));
            p.drawRect(br.adjusted(1, 1, -1, -1));
        }
        if (b.micro >= 0 && b.kind != "recv" && br.width() >= 12) {
            p.setPen(Qt::white);
            p.drawText(br, Qt::AlignCenter, QString::number(b.micro));
        }
    }
}

void GanttView::wheelEvent(QWheelEvent* e) {
    if (m_data.bars.isEmpty()) return;
    const double steps = e->angleDelta().y() / 120.0;
    zoomAt(std::pow(0.8, steps), tOf(e->position().x()));
    e->accept();
}

void GanttView::mousePressEvent(QMouseEvent* e) {
    if (e->button() == Qt::LeftButton) {
        m_dragging = true;
        m_dragX = e->position().x();
    }
}

void GanttView::mouseMoveEvent(QMouseEvent* e) {
    if (!m_dragging) return;
    const int x = e->position().x();
    const double dt = tOf(m_dragX) - tOf(x);
    m_dragX = x;
    const double full = std::max(m_data.length_ms, 1e-3), span = m_t1 - m_t0;
    const double t0 = std::clamp(m_t0 + dt, 0.0, std::max(0.0, full - span));
    setTimeRange(t0, t0 + span);
}

void GanttView::mouseReleaseEvent(QMouseEvent*) {
    m_dragging = false;
}
void GanttView::mouseDoubleClickEvent(QMouseEvent*) {
    resetZoom();
}

bool GanttView::event(QEvent* e) {
    if (e->type() == QEvent::ToolTip) {
        auto* he = static_cast<QHelpEvent*>(e);
        const int i = barAt(he->pos());
        if (i >= 0)
            QToolTip::showText(he->globalPos(), barDescription(i), this);
        else
            QToolTip::hideText();
        return true;
    }
    return QWidget::event(e);
}

}  // namespace tessera::studio
