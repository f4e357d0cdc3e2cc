// GpuGrid painting and tooltips. See gpu_grid.h.
#include "ui/plan/gpu_grid.h"

#include <QFontMetrics>
#include <QHelpEvent>
#include <QPainter>
#include <QToolTip>
#include <algorithm>

#include "ui/plan/plan_colors.h"

namespace tessera::studio {

namespace {
constexpr int kLabelW = 56, kCellH = 40, kGap = 4;
constexpr int kMinCellH = 18;  // one line ("12"): rows shrink to this before any is cut off
}  // namespace

GpuGrid::GpuGrid(QWidget* parent) : QWidget(parent) {
    setObjectName("gpuGrid");
    layoutRows();
}

void GpuGrid::setMesh(const tessera::MeshShape& mesh, int gpus, int gpusPerNode,
                      const std::vector<bool>& over) {
    m_mesh = mesh, m_nodeGpus = std::max(1, gpus), m_perNode = std::max(1, gpusPerNode),
    m_over = over;
    layoutRows();
    updateGeometry();
    update();
}

void GpuGrid::setCpuRanks(bool cpu) {
    if (cpu == m_cpu) return;
    m_cpu = cpu;
    update();
}

void GpuGrid::setHosts(const QStringList& labels, const std::vector<int>& slots) {
    m_hostLabels = labels, m_hostSlots = slots;
    m_hostSlots.resize(size_t(labels.size()), 1);
    layoutRows();
    updateGeometry();
    update();
}

void GpuGrid::layoutRows() {
    m_rowStart.clear();
    if (m_hostLabels.isEmpty()) {
        m_gpus = m_nodeGpus;
        for (int g = 0; g < m_gpus; g += m_perNode) m_rowStart.push_back(g);
        return;
    }
    int next = 0;  // hosts in order, each its slots: cluster_place()'s order
    for (int slots : m_hostSlots) {
        m_rowStart.push_back(next);
        next += std::max(1, slots);
    }
    m_gpus = next;
}

int GpuGrid::rowLength(int row) const {
    const int end = row + 1 < rowCount() ? m_rowStart[size_t(row) + 1] : m_gpus;
    return end - m_rowStart[size_t(row)];
}

int GpuGrid::rowOf(int gpu) const {
    auto it = std::upper_bound(m_rowStart.begin(), m_rowStart.end(), gpu);
    return std::max(0, int(it - m_rowStart.begin()) - 1);
}

QString GpuGrid::rowLabel(int row) const {
    if (row < 0 || row >= rowCount()) return {};
    return m_hostLabels.isEmpty() ? QString(m_cpu ? "host %1" : "node %1").arg(row)
                                  : m_hostLabels[row];
}

int GpuGrid::labelW() const {
    if (m_hostLabels.isEmpty()) return kLabelW;
    QFont small = font();
    small.setPointSizeF(font().pointSizeF() * 0.8);
    const QFontMetrics fm(small);
    int w = 0;
    for (const QString& l : m_hostLabels) w = std::max(w, fm.horizontalAdvance(l));
    return std::clamp(w + 12, kLabelW, 180);  // longer names are elided
}

int GpuGrid::cellW() const {
    int cols = 1;
    for (int r = 0; r < rowCount(); ++r) cols = std::max(cols, rowLength(r));
    return std::clamp((width() - labelW() - 4) / cols - kGap, 22, 72);
}

// Rows share the height: each kCellH tall where there is room, down to kMinCellH.
int GpuGrid::cellH() const {
    const int rows = std::max(1, rowCount());
    return std::clamp((height() - 4) / rows - kGap, kMinCellH, kCellH);
}

QSize GpuGrid::minimumSizeHint() const {
    return {200, std::max(60, rowCount() * (kMinCellH + kGap) + 4)};
}

QSize GpuGrid::sizeHint() const {
    int cols = 1;
    for (int r = 0; r < rowCount(); ++r) cols = std::max(cols, rowLength(r));
    return {labelW() + cols * (60 + kGap), rowCount() * (kCellH + kGap) + 4};
}

QRect GpuGrid::cellRect(int gpu) const {
    const int row = rowOf(gpu), local = gpu - m_rowStart[size_t(row)], w = cellW();
    const int h = cellH();
    return QRect(labelW() + local * (w + kGap), 2 + row * (h + kGap), w, h);
}

QString GpuGrid::cellToolTip(int gpu) const {
    const int row = rowOf(gpu), local = gpu - m_rowStart[size_t(row)];
    const QString where =
        m_hostLabels.isEmpty()
            ? QString(m_cpu ? "host %1 rank %2" : "node %1 GPU %2").arg(row).arg(local)
            : QString("host %1 slot %2").arg(m_hostLabels[row]).arg(local);
    if (gpu >= m_mesh.world())
        return QString("%1: idle (the plan uses %2 of %3 %4)")
            .arg(where)
            .arg(m_mesh.world())
            .arg(m_gpus)
            .arg(m_cpu ? "ranks" : "GPUs");
    tessera::MeshCoord c = tessera::mesh_coord(m_mesh, gpu);
    QString s = QString("%1\nglobal rank %2\nstage (pp) %3, TP rank %4, DP rank %5\n[%6]")
                    .arg(where)
                    .arg(gpu)
                    .arg(c.pp)
                    .arg(c.tp)
                    .arg(c.dp)
                    .arg(QString::fromStdString(tessera::mesh_coord_str(c)));
    if (gpu < (int)m_over.size() && m_over[gpu]) s += "\nover memory capacity";
    return s;
}

void GpuGrid::paintEvent(QPaintEvent*) {
    QPainter p(this);
    p.setRenderHint(QPainter::Antialiasing);
    QFont small = font();
    small.setPointSizeF(font().pointSizeF() * 0.8);
    p.setFont(small);
    const int lw = labelW();
    for (int row = 0; row < rowCount(); ++row) {
        QRect first = cellRect(m_rowStart[size_t(row)]);
        p.setPen(palette().text().color());
        p.drawText(QRect(0, first.top(), lw - 6, first.height()), Qt::AlignVCenter | Qt::AlignRight,
                   p.fontMetrics().elidedText(rowLabel(row), Qt::ElideMiddle, lw - 6));
    }
    for (int g = 0; g < m_gpus; ++g) {
        QRect r = cellRect(g);
        if (g >= m_mesh.world()) {
            p.setPen(QPen(palette().mid().color(), 1, Qt::DashLine));
            p.setBrush(palette().window());
            p.drawRoundedRect(r, 4, 4);
            p.drawText(r, Qt::AlignCenter, "idle");
            continue;
        }
        tessera::MeshCoord c = tessera::mesh_coord(m_mesh, g);
        double shade = m_mesh.tp > 1 ? 0.5 * c.tp / (m_mesh.tp - 1) : 0;
        bool over = g < (int)m_over.size() && m_over[g];
        p.setBrush(plan_stage_color(c.pp, shade));
        p.setPen(over ? QPen(QColor(220, 20, 20), 3) : QPen(plan_stage_color(c.pp).darker(160), 1));
        p.drawRoundedRect(r.adjusted(1, 1, -1, -1), 4, 4);
        p.setPen(Qt::white);
        QString label = r.width() >= 44 && r.height() >= 30
                            ? QString("r%1\nS%2 T%3 D%4").arg(g).arg(c.pp).arg(c.tp).arg(c.dp)
                            : QString("%1").arg(g);
        p.drawText(r, Qt::AlignCenter, label);
    }
}

bool GpuGrid::event(QEvent* e) {
    if (e->type() == QEvent::ToolTip) {
        auto* he = static_cast<QHelpEvent*>(e);
        for (int g = 0; g < m_gpus; ++g)
            if (cellRect(g).contains(he->pos())) {
                QToolTip::showText(he->globalPos(), cellToolTip(g), this);
                return true;
            }
        QToolTip::hideText();
        return true;
    }
    return QWidget::event(e);
}

}  // namespace tessera::studio
