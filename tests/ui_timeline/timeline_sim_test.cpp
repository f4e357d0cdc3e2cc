// The Timeline page's simulated schedule, offscreen: from a run's measured per-stage times
// (gpu_run_fixture.h: pp 2, 1F1B, 4 micro-batches, stage 1 the slower), with the critical path
// and the bubbles; from the estimator's predicted times before any run; a broken runs.db gives
// one clear message and no crash. Screenshots in build/screenshots/ (timeline_simulated_*.png).
#include <gtest/gtest.h>
#include <unistd.h>

#include <QApplication>
#include <QDir>
#include <QSignalSpy>
#include <algorithm>
#include <chrono>
#include <filesystem>
#include <fstream>

#include "engine/parallel/schedule_sim.h"
#include "tests/support/ui_paths.h"
#include "tests/ui_monitor/gpu_run_fixture.h"
#include "ui/common/project_document.h"
#include "ui/timeline/gantt_view.h"
#include "ui/timeline/timeline_data.h"
#include "ui/timeline/timeline_page.h"

namespace fs = std::filesystem;
using namespace tessera::studio;

namespace {}  // namespace

TEST(TimelineSim, MeasuredTimesPerStageTheSlowestRank) {
    tessera::RunConfig cfg = tessera::config_parse(tessera::fixture::gpu_run_yaml(), "fixture");
    std::vector<tessera::SpanRecord> spans{
        {0, 0, 0, 0, "forward", 0.0, 0.001},   {0, 1, 0, 0, "forward", 0.0, 0.0012},
        {0, 0, 0, 0, "backward", 0.01, 0.012}, {0, 1, 0, 0, "backward", 0.01, 0.0121},
        {0, 2, 1, 0, "forward", 0.0, 0.003},   {0, 2, 1, 0, "backward", 0.0, 0.006},
        {0, 2, 1, 0, "recv", 0.0, 0.5},  // a wait: not compute
    };
    auto t = timeline_measured_times(cfg, spans);
    ASSERT_TRUE(t.has_value());
    ASSERT_EQ(t->forward_s.size(), 2u);
    EXPECT_NEAR(t->forward_s[0], 0.0012, 1e-12);  // rank 1, the slower of stage 0
    EXPECT_NEAR(t->backward_s[0], 0.0021, 1e-12);
    EXPECT_NEAR(t->forward_s[1], 0.003, 1e-12);
    EXPECT_NEAR(t->backward_s[1], 0.006, 1e-12);
    spans.resize(4);  // stage 1 without compute spans: no measured times
    EXPECT_FALSE(timeline_measured_times(cfg, spans).has_value());
}

TEST(TimelineSim, PageSimulatesTheMeasuredStepWithCriticalPathAndBubbles) {
    fs::path dir = tessera::test_support::unique_temp_dir("tlsim_run");
    const int64_t id = tessera::fixture::write_gpu_run(dir, 50000);
    ProjectDocument doc;
    QString err;
    ASSERT_TRUE(doc.open(QString::fromStdString(dir.string()), &err)) << err.toStdString();
    TimelinePage page(&doc);
    page.resize(1300, 700);
    page.show();
    ASSERT_TRUE(page.selectRun(id));
    page.setStep(200);
    EXPECT_EQ(page.measuredView()->data().rowLabels.size(), 4);
    EXPECT_TRUE(page.simulatedFromMeasured());
    const GanttData& sim = page.idealView()->data();
    ASSERT_EQ(sim.bars.size(), 16);
    // stage 0: f 1, b 2 ms; stage 1: f 1.5, b 3 ms (the fixture's spans); free p2p:
    // 1F1B makespan = f0 + 4 (f1 + b1) + b0 = 1 + 18 + 2 = 21 ms, stage 1 busy end to end
    EXPECT_NEAR(sim.length_ms, 21.0, 1e-6);
    double crit = 0;
    for (const GanttBar& b : sim.bars)
        if (b.critical) crit += b.duration_ms();
    EXPECT_NEAR(crit, 21.0, 1e-6);  // the critical path fills the makespan
    for (const GanttBar& b : sim.bars)
        if (b.stage == 1) EXPECT_TRUE(b.critical) << "stage 1 is the bottleneck";
    EXPECT_FALSE(sim.gaps.isEmpty());
    // bubble: stage 0 busy 12 of 21, stage 1 18 of 21 => 12 / 42
    EXPECT_NEAR(page.simulatedBubble(), 12.0 / 42.0, 1e-9);
    EXPECT_GT(page.measuredBubble(), page.simulatedBubble() - 1e-9);  // measured waits include p2p
    const int crit_bar = int(std::find_if(sim.bars.begin(), sim.bars.end(),
                                          [](const GanttBar& b) { return b.critical; }) -
                             sim.bars.begin());
    EXPECT_TRUE(page.idealView()->barDescription(crit_bar).contains("critical path"));
    // one time axis for both views, showing the whole of the longer one (the measured step,
    // with its optimizer, is longer than the simulated schedule: its end was cut off)
    const double whole = std::max(page.measuredView()->data().length_ms, sim.length_ms);
    EXPECT_GT(page.measuredView()->data().length_ms, sim.length_ms);
    EXPECT_NEAR(page.measuredView()->viewStart(), 0.0, 1e-9);
    EXPECT_NEAR(page.measuredView()->viewEnd(), whole, 1e-9);
    EXPECT_NEAR(page.idealView()->viewEnd(), whole, 1e-9);
    QApplication::processEvents();
    EXPECT_TRUE(page.grab().save(tessera::test_support::screenshot_dir() +
                                 "/timeline_simulated_measured.png"));
    std::error_code ec;
    fs::remove_all(dir, ec);
}

TEST(TimelineSim, BeforeAnyRunThePredictedTimesAndABrokenDbIsOneMessage) {
    fs::path dir = tessera::test_support::unique_temp_dir("tlsim_norun");
    fs::create_directories(dir);
    std::ofstream(dir / "project.yaml") << tessera::fixture::gpu_run_yaml();
    ProjectDocument doc;
    QString err;
    ASSERT_TRUE(doc.open(QString::fromStdString(dir.string()), &err)) << err.toStdString();
    TimelinePage page(&doc);
    page.resize(1300, 600);
    page.show();
    EXPECT_EQ(page.currentRun(), -1);
    EXPECT_FALSE(page.simulatedFromMeasured());
    const GanttData& sim = page.idealView()->data();
    ASSERT_EQ(sim.bars.size(), 16);
    EXPECT_GT(sim.length_ms, 0);
    EXPECT_TRUE(std::any_of(sim.bars.begin(), sim.bars.end(),
                            [](const GanttBar& b) { return b.critical; }));
    EXPECT_GT(page.simulatedBubble(), 0.0);
    EXPECT_TRUE(page.statusText().contains("No runs yet")) << page.statusText().toStdString();
    QApplication::processEvents();
    EXPECT_TRUE(page.grab().save(tessera::test_support::screenshot_dir() +
                                 "/timeline_simulated_predicted.png"));

    // a runs.db that is not a database: one message naming the problem, no crash
    std::ofstream(dir / "runs.db") << "this is not sqlite";
    QSignalSpy failed(&page, &TimelinePage::loadFailed);
    page.refresh();
    EXPECT_EQ(failed.count(), 1);
    EXPECT_FALSE(page.statusText().isEmpty());
    std::error_code ec;
    fs::remove_all(dir, ec);
}

int main(int argc, char** argv) {
    qputenv("QT_QPA_PLATFORM", "offscreen");
    QApplication app(argc, argv);
    ::testing::InitGoogleTest(&argc, argv);
    return RUN_ALL_TESTS();
}
