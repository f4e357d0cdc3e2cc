// QCustomPlot for a studio built with QT_NO_KEYWORDS (ui/CMakeLists.txt: Qt's `slots` macro would
// eat the engine's ClusterHost::slots). qcustomplot.h still writes signals/slots/emit/foreach, so
// they are defined for its declarations only. Include this instead of <qcustomplot.h>.
#pragma once
#define signals Q_SIGNALS
#define slots Q_SLOTS
#define emit Q_EMIT
#define foreach Q_FOREACH
#include <qcustomplot.h>
#undef signals
#undef slots
#undef emit
#undef foreach
