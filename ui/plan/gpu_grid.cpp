// GpuGrid painting and tooltips. See gpu_grid.h.
#include "ui/plan/gpu_grid.h"

#include <QHelpEvent>
#include <QPainter>
#include <QToolTip>
#include <algorithm>

#include "ui/plan/plan_colors.h"

namespace tessera::studio {

namespace {
constexpr int kLabelW = 56, kCellH = 40, kGap = 4;
}

GpuGrid::GpuGrid(QWidget* parent) : QWidget(parent) { setObjectName("gpuGrid"); }

void GpuGrid::setMesh(const tessera::MeshShape& mesh, int gpus, int gpusPerNode, const std::vector<bool>& over) {
    m_mesh = mesh, m_gpus = std::max(1, gpus), m_perNode = std::max(1, gpusPerNode), m_over = over;
    updateGeometry();
    update();
}

int GpuGrid::cellW() const {
    int cols = std::min(m_perNode, m_gpus);
    return std::clamp((width() - kLabelW - 4) / std::max(1, cols) - kGap, 22, 72);
}

QSize GpuGrid::sizeHint() const {
    int nodes = (m_gpus + m_perNode - 1) / m_perNode;
    return {kLabelW + std::min(m_perNode, m_gpus) * (60 + kGap), nodes * (kCellH + kGap) + 4};
}

QRect GpuGrid::cellRect(int gpu) const {
    int node = gpu / m_perNode, local = gpu % m_perNode, w = cellW();
    return QRect(kLabelW + local * (w + kGap), 2 + node * (kCellH + kGap), w, kCellH);
}

QString GpuGrid::cellToolTip(int gpu) const {
    int node = gpu / m_perNode, local = gpu % m_perNode;
    if (gpu >= m_mesh.world())
        return QString("node %1 GPU %2: idle (the plan uses %3 of %4 GPUs)").arg(node).arg(local)
            .arg(m_mesh.world()).arg(m_gpus);
    tessera::MeshCoord c = tessera::mesh_coord(m_mesh, gpu);
    QString s = QString("node %1 GPU %2\nglobal rank %3\nstage (pp) %4, TP rank %5, DP rank %6\n[%7]")
                    .arg(node).arg(local).arg(gpu).arg(c.pp).arg(c.tp).arg(c.dp)
                    .arg(QString::fromStdString(tessera::mesh_coord_str(c)));
    if (gpu < (int)m_over.size() && m_over[gpu]) s += "\nover memory capacity";
    return s;
}

void GpuGrid::paintEvent(QPaintEvent*) {
    QPainter p(this);
    p.setRenderHint(QPainter::Antialiasing);
    int nodes = (m_gpus + m_perNode - 1) / m_perNode;
    QFont small = font();
    small.setPointSizeF(font().pointSizeF() * 0.8);
    p.setFont(small);
    for (int n = 0; n < nodes; ++n) {
        QRect first = cellRect(n * m_perNode);
        p.setPen(palette().text().color());
        p.drawText(QRect(0, first.top(), kLabelW - 6, kCellH), Qt::AlignVCenter | Qt::AlignRight,
                   QString("node %1").arg(n));
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
        QString label = r.width() >= 44 ? QString("r%1\nS%2 T%3 D%4").arg(g).arg(c.pp).arg(c.tp).arg(c.dp)
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
