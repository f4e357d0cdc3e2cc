// tessera-studio: the desktop studio. Builds the window, adds the pages (Welcome, Model, Plan,
// Hosts, Monitor, Timeline, Compare), opens the project named on the command line, and with
// --screenshot renders every page to PNG files and exits (scripts/screenshots.sh).
#include <QApplication>
#include <QCommandLineParser>
#include <QDir>
#include <QFileInfo>
#include <QStandardPaths>
#include <QTimer>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "ui/common/project_document.h"
#include "ui/compare/compare_page.h"
#include "ui/data/data_page.h"
#include "ui/hosts/hosts_page.h"
#include "ui/model/model_page.h"
#include "ui/monitor/monitor_page.h"
#include "ui/plan/plan_page.h"
#include "ui/shell/main_window.h"
#include "ui/timeline/timeline_page.h"
#include "ui/welcome/welcome_page.h"

namespace {

const char* kUsage =
    "Usage: tessera-studio [options] [PROJECT_DIR]\n"
    "Tessera Studio " TESSERA_VERSION
    " — design, plan and watch training runs\n"
    "\n"
    "Options:\n"
    "  -h, --help           Show this help and exit.\n"
    "  -v, --version        Show the version and exit.\n"
    "  --screenshot DIR     Render every page to DIR/<project>-<page>.png and exit\n"
    "                       (no display needed: uses the offscreen platform without one).\n"
    "  --dark               Use the dark theme (with --screenshot).\n"
    "  --launch             Start a run of the opened project and watch it on the Monitor page.\n"
    "\n"
    "Arguments:\n"
    "  PROJECT_DIR          Project folder (or its project.yaml) to open.\n";

}  // namespace

int main(int argc, char** argv) {
    // --help / --version and --screenshot work without a display: handled before Qt picks a
    // platform
    bool screenshot_arg = false;
    for (int i = 1; i < argc; ++i) {
        if (!std::strcmp(argv[i], "--help") || !std::strcmp(argv[i], "-h")) {
            std::fputs(kUsage, stdout);
            return 0;
        }
        if (!std::strcmp(argv[i], "--version") || !std::strcmp(argv[i], "-v")) {
            std::printf("tessera-studio %s\n", TESSERA_VERSION);
            return 0;
        }
        if (!std::strncmp(argv[i], "--screenshot", 12)) screenshot_arg = true;
    }
    if (screenshot_arg && !std::getenv("DISPLAY") && !std::getenv("WAYLAND_DISPLAY") &&
        !std::getenv("QT_QPA_PLATFORM"))
        setenv("QT_QPA_PLATFORM", "offscreen", 1);

    QApplication app(argc, argv);
    QApplication::setOrganizationName("Tessera");
    QApplication::setApplicationName("tessera-studio");
    QApplication::setApplicationVersion(TESSERA_VERSION);

    QCommandLineParser parser;
    parser.setApplicationDescription("Tessera Studio — design, plan and watch training runs");
    QCommandLineOption shot("screenshot", "Render every page to DIR/<project>-<page>.png and exit.",
                            "DIR");
    QCommandLineOption dark("dark", "Use the dark theme (with --screenshot).");
    QCommandLineOption launch("launch",
                              "Start a training run of the opened project right away and "
                              "show it on the Monitor page.");
    parser.addOption(shot);
    parser.addOption(dark);
    parser.addOption(launch);
    parser.addPositionalArgument("PROJECT_DIR", "Project folder (or its project.yaml) to open.");
    parser.process(app);  // an unknown option prints the error and exits 1

    const bool screenshot = parser.isSet(shot);
    if (screenshot) QStandardPaths::setTestModeEnabled(true);  // leave the user's settings alone

    tessera::studio::ProjectDocument doc;
    tessera::studio::MainWindow win(&doc);
    win.addPage(QObject::tr("Welcome"), new tessera::studio::WelcomePage(&win, &doc, &win));
    win.addPage(QObject::tr("Model"), new tessera::studio::ModelPage(&doc, &win));
    win.addPage(QObject::tr("Data"), new tessera::studio::DataPage(&doc, &win));
    win.addPage(QObject::tr("Plan"), new tessera::studio::PlanPage(&doc, &win));
    win.addPage(QObject::tr("Hosts"), new tessera::studio::HostsPage(&doc, &win));
    auto* monitor = new tessera::studio::MonitorPage(&doc, &win);
    win.addPage(QObject::tr("Monitor"), monitor);
    win.addPage(QObject::tr("Timeline"), new tessera::studio::TimelinePage(&doc, &win));
    win.addPage(QObject::tr("Compare"), new tessera::studio::ComparePage(&doc, &win));
    win.setDarkTheme(screenshot ? parser.isSet(dark) : win.isDarkTheme());

    const QStringList args = parser.positionalArguments();
    // a project on the command line opens on its Model page; without one the Welcome page shows
    if (!args.isEmpty() &&
        win.openProject(QDir::cleanPath(QFileInfo(args.first()).absoluteFilePath()), false)) {
        win.setCurrentPage(1);
        if (parser.isSet(launch) && !screenshot) {  // a live run, as README's main job shows it
            for (int i = 0; i < win.pageCount(); ++i)
                if (win.page(i) == monitor) win.setCurrentPage(i);
            QTimer::singleShot(0, monitor, &tessera::studio::MonitorPage::launch);
        }
    }

    if (screenshot) {
        win.resize(1280, 800);
        win.show();
        QApplication::processEvents();
        // named after the folder asked for, also when it failed to open (the banner shows why)
        QString name;
        if (!args.isEmpty()) {
            const QFileInfo info(QDir::cleanPath(QFileInfo(args.first()).absoluteFilePath()));
            name = info.isDir() ? info.fileName() : info.dir().dirName();
        }
        const QStringList files = win.saveScreenshots(parser.value(shot), name);
        for (const QString& f : files) std::printf("%s\n", qPrintable(f));
        std::fflush(stdout);
        return files.isEmpty() ? 1 : (doc.isOpen() ? 0 : 2);
    }
    win.show();
    return app.exec();
}
