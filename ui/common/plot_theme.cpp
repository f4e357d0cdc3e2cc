#include "ui/common/plot_theme.h"

#include "ui/common/qcustomplot_qt.h"

namespace tessera::studio {

void plot_apply_theme(QCustomPlot* p, bool dark) {
    const QColor bg = dark ? QColor(0x26, 0x26, 0x28) : QColor(Qt::white);
    const QColor fg = dark ? QColor(0xdd, 0xdd, 0xdd) : QColor(0x28, 0x28, 0x28);
    const QColor grid = dark ? QColor(0x48, 0x48, 0x4c) : QColor(0xdd, 0xdd, 0xdd);
    p->setBackground(bg);
    for (QCPAxis* a : {p->xAxis, p->yAxis, p->yAxis2}) {
        a->setBasePen(QPen(fg));
        a->setTickPen(QPen(fg));
        a->setSubTickPen(QPen(fg));
        a->setTickLabelColor(fg);
        a->setLabelColor(fg);
        a->grid()->setPen(QPen(grid, 1, Qt::DotLine));
    }
    p->legend->setBrush(bg);
    p->legend->setTextColor(fg);
}

}  // namespace tessera::studio
