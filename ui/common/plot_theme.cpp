#include "ui/common/plot_theme.h"

#include <iterator>

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
    // titles and other text elements of the layout (a chart's title row)
    for (QCPLayoutElement* e : p->plotLayout()->elements(true))
        if (auto* t = qobject_cast<QCPTextElement*>(e)) t->setTextColor(fg);
}

QColor mem_category_color(int c) {
    static const QColor colors[] = {QColor(0x4e, 0x79, 0xa7), QColor(0xa0, 0xcb, 0xe8),
                                    QColor(0xf2, 0x8e, 0x2b), QColor(0x59, 0xa1, 0x4f),
                                    QColor(0xb0, 0x7a, 0xa1), QColor(0x9c, 0x75, 0x5f),
                                    QColor(0x79, 0x79, 0x79), QColor(0xba, 0xb0, 0xac),
                                    QColor(0xd7, 0xd2, 0xcb), QColor(0xed, 0xc9, 0x48)};
    return colors[c % std::size(colors)];
}

}  // namespace tessera::studio
