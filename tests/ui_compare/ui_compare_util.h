// Shared by the Compare page's offscreen tests: one QApplication (offscreen, test-mode paths) and
// the folder the screenshots go to (build/screenshots/).
#pragma once
#include <QApplication>
#include <QDir>
#include <QStandardPaths>

#include "tests/support/ui_paths.h"

namespace ui_compare_test {

inline void ensure_app() {
    static int argc = 1;
    static char name[] = "ui_compare_test";
    static char* argv[] = {name, nullptr};
    static QApplication* app = [] {
        qputenv("QT_QPA_PLATFORM", "offscreen");
        QStandardPaths::setTestModeEnabled(true);
        return new QApplication(argc, argv);
    }();
    (void)app;
}

using tessera::test_support::screenshot_dir;

}  // namespace ui_compare_test
