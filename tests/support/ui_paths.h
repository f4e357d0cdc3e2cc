// Where the studio's tests put what they make: the screenshots folder beside the build's bin/
// (scripts/screenshots.sh and the reviewers read it) and fresh temporary folders. Header-only;
// Qt for the screenshots path (the pages save through QWidget::grab), std::filesystem for the rest.
#pragma once
#include <unistd.h>

#include <QDir>
#include <QString>
#include <chrono>
#include <filesystem>
#include <string>

#include "tests/support/paths.h"

namespace tessera::test_support {

// <build>/screenshots, made if missing, as an absolute path.
inline QString screenshot_dir() {
    const QString d = QString(TESSERA_BIN_DIR) + "/../screenshots";
    QDir().mkpath(d);
    return QDir(d).absolutePath();
}

// A path under the system's temporary folder no other test (or run of this one) uses:
// tessera_<tag>_<pid>_<clock ticks>. Not created.
inline std::filesystem::path unique_temp_dir(const std::string& tag) {
    return std::filesystem::temp_directory_path() /
           ("tessera_" + tag + "_" + std::to_string(::getpid()) + "_" +
            std::to_string(std::chrono::steady_clock::now().time_since_epoch().count()));
}

}  // namespace tessera::test_support
