// One look for every QCustomPlot in the studio: background, axes, grid and legend colours for the
// light or the dark theme. Pages call it from their setDarkTheme(bool) slot.
#pragma once

#include <QColor>

class QCustomPlot;

namespace tessera::studio {

// The colour of memory category c (tessera::MemCategory) in every memory chart.
QColor mem_category_color(int c);

// Styles p's axes (x, y, and y2 when visible), grid, background, legend and the text elements of
// its layout (titles); does not replot.
void plot_apply_theme(QCustomPlot* p, bool dark);

}  // namespace tessera::studio
