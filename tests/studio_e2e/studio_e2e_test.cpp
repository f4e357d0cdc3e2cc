// tessera-studio end to end (offscreen): the window as main.cpp builds it, a real `tessera train`
// launched from the Monitor page, screenshots of Monitor, Timeline and Compare checked non-blank,
// and a rank of a studio-launched 2-rank run killed with SIGKILL: the page reports the failure
// with the rank and the signal, and every row written before it is intact.
#include <dirent.h>
#include <gtest/gtest.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <QAbstractItemModelTester>
#include <QApplication>
#include <QDir>
#include <QFile>
#include <QImage>
#include <QTemporaryDir>
#include <QTest>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <set>

#include "engine/store/run_store.h"
#include "engine/telemetry/metric_names.h"
#include "tests/support/paths.h"
#include "tests/support/ui_paths.h"
#include "ui/common/project_document.h"
#include "ui/common/qcustomplot_qt.h"
#include "ui/compare/compare_page.h"
#include "ui/compare/run_table_model.h"
#include "ui/model/model_page.h"
#include "ui/monitor/monitor_page.h"
#include "ui/plan/plan_page.h"
#include "ui/shell/main_window.h"
#include "ui/timeline/timeline_page.h"

using namespace tessera;
using namespace tessera::studio;

namespace {

struct Studio {
    ProjectDocument doc;
    MainWindow win{&doc};
    MonitorPage* monitor = nullptr;
    TimelinePage* timeline = nullptr;
    ComparePage* compare = nullptr;
    Studio() {
        win.addPage("Model", new ModelPage(&doc, &win));
        win.addPage("Plan", new PlanPage(&doc, &win));
        win.addPage("Monitor", monitor = new MonitorPage(&doc, &win));
        win.addPage("Timeline", timeline = new TimelinePage(&doc, &win));
        win.addPage("Compare", compare = new ComparePage(&doc, &win));
        monitor->setTesseraBinary(QString(TESSERA_BIN_DIR) + "/tessera");
        win.resize(1280, 800);
        win.show();
    }
};

int64_t last_loss_step(const QString& db) {
    if (!QFile::exists(db)) return 0;
    RunStore s = RunStore::open(db.toStdString(), true);
    auto runs = s.runs_list();
    if (runs.empty()) return 0;
    auto m = s.metrics(runs.back().id, metric::train_loss);
    return m.empty() ? 0 : m.back().step;
}

// polls the page (as its timers do) until the run has logged `steps` steps
bool wait_steps(Studio& st, int64_t steps, int timeout_ms) {
    for (int t = 0; t < timeout_ms; t += 200) {
        QTest::qWait(200);
        st.monitor->pollNow();
        if (last_loss_step(st.doc.dbPath()) >= steps) return true;
    }
    return false;
}

// a picture with content: many colours, not one flat fill
bool not_blank(const QString& png) {
    QImage img(png);
    if (img.isNull()) return false;
    std::set<QRgb> colours;
    for (int y = 0; y < img.height(); y += 4)
        for (int x = 0; x < img.width(); x += 4) colours.insert(img.pixel(x, y));
    return colours.size() > 30;
}

std::vector<pid_t> rank_pids(const std::string& needle) {
    std::vector<pid_t> out;
    DIR* d = opendir("/proc");
    while (dirent* e = d ? readdir(d) : nullptr) {
        pid_t pid = std::atoi(e->d_name);
        if (pid <= 0) continue;
        std::ifstream f("/proc/" + std::string(e->d_name) + "/cmdline");
        std::string cmd((std::istreambuf_iterator<char>(f)), {});
        std::replace(cmd.begin(), cmd.end(), '\0', ' ');
        if (cmd.find(" _rank ") != std::string::npos && cmd.find(needle) != std::string::npos)
            out.push_back(pid);
    }
    if (d) closedir(d);
    return out;
}

}  // namespace

TEST(StudioEndToEnd, LaunchWatchStopAndScreenshotEveryPage) {
    QTemporaryDir tmp;
    QString dir = tmp.path() + "/quickstart";
    QDir().mkpath(dir);
    ASSERT_TRUE(QFile::copy(QString(TESSERA_TESTS_DIR) + "/../projects/quickstart/project.yaml",
                            dir + "/project.yaml"));
    Studio st;
    ASSERT_TRUE(st.win.openProject(dir, false)) << st.win.errorText().toStdString();
    st.monitor->launch();
    ASSERT_TRUE(wait_steps(st, 20, 120000)) << st.monitor->statusText().toStdString();
    st.monitor->stop();
    ASSERT_TRUE(st.monitor->controller()->wait(60));
    st.monitor->pollNow();
    st.monitor->replotNow();
    EXPECT_NE(st.monitor->statusText().indexOf("stopped"), -1)
        << st.monitor->statusText().toStdString();
    st.timeline->refresh();
    st.compare->refresh();
    RunStore store = RunStore::open(st.doc.dbPath().toStdString(), true);
    st.compare->setSelectedRuns({store.runs_list().back().id});
    const QString shots = tessera::test_support::screenshot_dir();
    QStringList files = st.win.saveScreenshots(shots, "e2e-quickstart");
    for (const char* page : {"monitor", "timeline", "compare"}) {
        QString f;
        for (const QString& x : files)
            if (x.contains(page)) f = x;
        ASSERT_FALSE(f.isEmpty()) << "no screenshot of " << page;
        EXPECT_TRUE(not_blank(f)) << f.toStdString() << " is blank";
    }
}

// The window a user gets (tessera-studio itself, no saved geometry) keeps its default 1280 x 800 on
// every page of every example project: no page's minimum pushes it wider or taller than a laptop
// screen (the Plan page's one-line prediction and one-row legend once held it 1,568 px wide, and
// a project whose open fails adds an error banner). A page that needs more scrolls inside.
TEST(StudioEndToEnd, EveryPageOfEveryExampleFitsTheDefaultWindow) {
    const QString projects = QString(TESSERA_TESTS_DIR) + "/../projects";
    const QStringList names = QDir(projects).entryList(QDir::Dirs | QDir::NoDotAndDotDot);
    int checked = 0;
    for (const QString& name : names) {
        if (!QFile::exists(projects + "/" + name + "/project.yaml")) continue;
        SCOPED_TRACE(name.toStdString());
        QTemporaryDir tmp;
        const QString cmd = QString(
                                "XDG_CONFIG_HOME='%1/config' QT_QPA_PLATFORM=offscreen "
                                "'%2/tessera-studio' --screenshot '%1/shots' '%3/%4' "
                                "> '%1/log' 2>&1")
                                .arg(tmp.path(), QString(TESSERA_BIN_DIR), projects, name);
        std::system(cmd.toStdString().c_str());  // a project that needs preparing fails to open
        const QStringList shots = QDir(tmp.path() + "/shots").entryList({"*.png"}, QDir::Files);
        ASSERT_GE(shots.size(), 8) << "pages rendered; log: " << cmd.toStdString();
        for (const QString& f : shots) {
            const QImage img(tmp.path() + "/shots/" + f);
            EXPECT_LE(img.width(), 1280) << f.toStdString();
            EXPECT_LE(img.height(), 800) << f.toStdString();
        }
        ++checked;
    }
    EXPECT_GE(checked, 8);
}

// The dark theme reaches every chart a page shows: the shell finds each page's setDarkTheme(bool)
// slot by name, and the Compare page's, a plain method, was never called (its chart stayed white).
TEST(StudioEndToEnd, EveryVisibleChartFollowsTheDarkTheme) {
    QTemporaryDir tmp;
    const QString dir = tmp.path() + "/quickstart";
    QDir().mkpath(dir);
    ASSERT_TRUE(QFile::copy(QString(TESSERA_TESTS_DIR) + "/../projects/quickstart/project.yaml",
                            dir + "/project.yaml"));
    Studio st;
    ASSERT_TRUE(st.win.openProject(dir, false)) << st.win.errorText().toStdString();
    st.win.setDarkTheme(true);
    int checked = 0;
    for (int i = 0; i < st.win.pageCount(); ++i) {
        st.win.setCurrentPage(i);
        QApplication::processEvents();
        for (QCustomPlot* p : st.win.findChildren<QCustomPlot*>()) {
            if (!p->isVisible()) continue;
            EXPECT_EQ(p->xAxis->tickLabelColor(), QColor(0xdd, 0xdd, 0xdd))
                << st.win.pageTitle(i).toStdString() << ": " << p->objectName().toStdString();
            ++checked;
        }
    }
    EXPECT_GE(checked, 4);  // Plan's memory chart, the Monitor's three, Compare's
}

TEST(StudioEndToEnd, KilledRankShowsTheFailureAndKeepsTheRows) {
    QTemporaryDir tmp;
    QString dir = tmp.path() + "/two-ranks";
    QDir().mkpath(dir);
    std::ofstream(QString(dir + "/project.yaml").toStdString()) << R"(name: two-ranks
model: {preset: gpt-tiny, n_layer: 2, n_head: 2, d_model: 64, seq_len: 32}
data: {dataset: brown}
train: {steps: 100000, micro_batch: 4, grad_accum: 1, eval_every: 0}
parallel: {dp: 2}
log: {db: runs.db, every: 1}
)";
    Studio st;
    ASSERT_TRUE(st.win.openProject(dir, false)) << st.win.errorText().toStdString();
    st.monitor->launch();
    ASSERT_TRUE(wait_steps(st, 3, 60000)) << st.monitor->statusText().toStdString();
    auto pids = rank_pids(dir.toStdString());
    ASSERT_EQ(pids.size(), 2u);
    ASSERT_EQ(::kill(pids[1], SIGKILL), 0);
    ASSERT_TRUE(st.monitor->controller()->wait(30));
    for (int i = 0; i < 10; ++i) QTest::qWait(100), st.monitor->pollNow();
    const std::string status = st.monitor->statusText().toStdString();
    EXPECT_NE(status.find("failed"), std::string::npos) << status;
    EXPECT_NE(status.find("rank 1"), std::string::npos) << status;
    EXPECT_NE(status.find("SIGKILL"), std::string::npos) << status;
    RunStore store = RunStore::open(st.doc.dbPath().toStdString(), true);
    EXPECT_EQ(store.integrity_check(), "ok");
    auto losses = store.metrics(store.runs_list().back().id, metric::train_loss);
    ASSERT_GE(losses.size(), 3u);
    for (size_t i = 0; i < losses.size(); ++i) EXPECT_EQ(losses[i].step, (int64_t)i + 1);
}

// The Compare page's run model stays consistent (QAbstractItemModelTester, fatal mode) while a
// writer appends runs and metrics to the project's runs.db and the page re-reads it.
TEST(StudioEndToEnd, RunModelStaysConsistentWhileRowsAreAppended) {
    QTemporaryDir tmp;
    QString dir = tmp.path() + "/appending";
    QDir().mkpath(dir);
    std::ofstream(QString(dir + "/project.yaml").toStdString()) << R"(name: appending
model: {preset: gpt-tiny, n_layer: 2, n_head: 2, d_model: 64, seq_len: 32}
data: {dataset: brown}
log: {db: runs.db, every: 1}
)";
    Studio st;
    ASSERT_TRUE(st.win.openProject(dir, false));
    RunStore writer = RunStore::open(st.doc.dbPath().toStdString());
    st.compare->refresh();
    QAbstractItemModelTester tester(st.compare->runModel(),
                                    QAbstractItemModelTester::FailureReportingMode::Fatal);
    for (int r = 0; r < 5; ++r) {
        RunStartRecord start;
        start.name = "run" + std::to_string(r);
        {
            QFile f(dir + "/project.yaml");
            f.open(QIODevice::ReadOnly);
            start.config_text = f.readAll().toStdString();
        }
        start.world_size = 1;
        start.wall_time = telemetry_now();
        int64_t id = writer.run_begin(start);
        for (int step = 1; step <= 20; ++step) {
            writer.append(id, {MetricRecord{step, 0, std::string(metric::train_loss),
                                            5.0 - 0.1 * step, telemetry_now()},
                               MetricRecord{step, 0, std::string(metric::perf_tok_per_s),
                                            1000.0 + r, telemetry_now()}});
            if (step % 5 == 0) st.compare->refresh();  // the page re-reads while runs grow
        }
        if (r % 2 == 0) writer.run_finish(id, run_status::completed, "", 20);
        st.compare->refresh();
        EXPECT_EQ(st.compare->runModel()->rowCount(), r + 1);
    }
}

// Under a real X server when one can be had: Xvfb on a display it picks itself (as a user's
// desktop, xcb platform); otherwise Qt's offscreen platform. -displayfd: the server takes a free
// display and writes its number once it accepts connections, so two of these tests starting
// together (ctest -j) never pick one display (each once saw the other's server and used it).
static pid_t start_xvfb() {
    if (std::getenv("DISPLAY") || ::access("/usr/bin/Xvfb", X_OK) != 0) return 0;
    int fds[2];
    if (::pipe(fds) != 0) return 0;
    pid_t pid = ::fork();
    if (pid == 0) {
        ::close(fds[0]);
        const std::string fd = std::to_string(fds[1]);
        ::execl("/usr/bin/Xvfb", "Xvfb", "-displayfd", fd.c_str(), "-screen", "0", "1600x1000x24",
                "-nolisten", "tcp", (char*)nullptr);
        ::_exit(127);
    }
    ::close(fds[1]);
    std::string number;
    pollfd p{fds[0], POLLIN, 0};
    char c = 0;
    while (::poll(&p, 1, 10000) == 1 && ::read(fds[0], &c, 1) == 1 && c != '\n') number += c;
    ::close(fds[0]);
    if (pid < 0) return 0;
    if (number.empty() || c != '\n') {  // no display within 10 s
        ::kill(pid, SIGKILL);
        ::waitpid(pid, nullptr, 0);
        return 0;
    }
    ::setenv("DISPLAY", (":" + number).c_str(), 1);
    ::setenv("QT_QPA_PLATFORM", "xcb", 1);
    return pid;
}

int main(int argc, char** argv) {
    pid_t xvfb = start_xvfb();
    if (!xvfb) qputenv("QT_QPA_PLATFORM", "offscreen");
    std::printf("studio e2e: %s\n", xvfb ? "under Xvfb (xcb)" : "offscreen platform");
    int rc = 0;
    {
        QApplication app(argc, argv);
        ::testing::InitGoogleTest(&argc, argv);
        rc = RUN_ALL_TESTS();
    }
    if (xvfb) {
        ::kill(xvfb, SIGTERM);
        ::waitpid(xvfb, nullptr, 0);
    }
    return rc;
}
