// Where the studio's tests put what they make: the screenshots folder beside the build's bin/
// (scripts/screenshots.sh and the reviewers read it). Header-only; Qt (the pages save through
// QWidget::grab). Scratch folders: tests/support/temp_dir.h.
#pragma once
#include <QDir>
#include <QString>

#include "tests/support/paths.h"

namespace tessera::test_support {

// <build>/screenshots, made if missing, as an absolute path.
inline QString screenshot_dir() {
    const QString d = QString(TESSERA_BIN_DIR) + "/../screenshots";
    QDir().mkpath(d);
    return QDir(d).absolutePath();
}

}  // namespace tessera::test_support
