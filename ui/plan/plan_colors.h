// Colours the Plan page's widgets share: one hue per pipeline stage, one per memory category.
#pragma once
#include <QColor>

namespace tessera::studio {

// Stage s's colour (8 hues, repeating); `shade` in [0, 1) darkens for TP ranks within a stage.
inline QColor plan_stage_color(int stage, double shade = 0) {
    static const QColor kStages[] = {QColor(0x4e, 0x79, 0xa7), QColor(0xf2, 0x8e, 0x2b),
                                     QColor(0x59, 0xa1, 0x4f), QColor(0xb0, 0x7a, 0xa1),
                                     QColor(0xed, 0xc9, 0x48), QColor(0x76, 0xb7, 0xb2),
                                     QColor(0xe1, 0x57, 0x59), QColor(0x9c, 0x75, 0x5f)};
    QColor c = kStages[stage % 8];
    return shade > 0 ? c.darker(100 + int(60 * shade)) : c;
}

}  // namespace tessera::studio
