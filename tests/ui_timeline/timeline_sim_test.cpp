// The Timeline page's simulated schedule, offscreen: from a run's measured per-stage times
// (gpu_run_fixture.h: pp 2, 1F1B, 4 micro-batches, stage 1 the slower), with the critical path
// and the bubbles; from the estimator's predicted times before any run; a broken runs.db gives
// one clear message and no crash. Screenshots in build/screenshots/ (timeline_simulated_*.png).
#include <gtest/gtest.h>
#include <unistd.h>

#include <QApplication>
#include <QComboBox>
#include <QDir>
#include <QSignalSpy>
#include <algorithm>
#include <chrono>
#include <filesystem>
#include <fstream>

#include "engine/parallel/schedule.h"
#include "engine/parallel/schedule_sim.h"
#include "tests/support/temp_dir.h"
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
    const tessera::test_support::TempDir scratch("tlsim_run");
    const fs::path& dir = scratch.path();
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
}

// The fixture's last step again, with each layer's measured times (LayerTimeRecord, step 199 as
// spans count): stage 0 holds the embedding (f 0.1, b 0.2 ms) and blocks 1-2, stage 1 blocks
// 3-4 and the head (f 0.6, b 1.2 ms); a block takes f 0.45, b 0.9 ms. Per stage that is the
// fixture's spans: f 1 / b 2 and f 1.5 / b 3 ms.
static void add_layer_times(const fs::path& dir, int64_t id) {
    tessera::RunStore s = tessera::RunStore::open((dir / "runs.db").string());
    std::vector<tessera::Record> recs;
    const double f[6] = {0.1, 0.45, 0.45, 0.45, 0.45, 0.6};
    for (int dp = 0; dp < 2; ++dp)
        for (int l = 0; l < 6; ++l) {
            const int stage = l < 3 ? 0 : 1;
            const double slow = dp == 1 ? 1.0 : 0.9;  // the second DP replica is the slower
            recs.push_back(tessera::LayerTimeRecord{199, stage * 2 + dp, stage, l,
                                                    slow * f[l] * 1e-3, slow * 2 * f[l] * 1e-3});
        }
    s.append(id, recs);
}

TEST(TimelineSim, LayerTimesSumOverAnotherPartitionsChunks) {
    tessera::RunConfig cfg = tessera::config_parse(tessera::fixture::gpu_run_yaml(), "fixture");
    cfg.parallel.stages = {3, 1};
    std::vector<tessera::LayerTimeRecord> layers;
    for (int l = 0; l < 6; ++l)
        for (int r : {0, 1})  // two ranks hold each layer: the slower counts
            layers.push_back({199, r, 0, l, (l + 1) * (r + 1) * 1e-3, 2e-3});
    auto t = timeline_layer_schedule_times(cfg, layers);
    ASSERT_TRUE(t.has_value());
    ASSERT_EQ(t->forward_s.size(), 2u);
    EXPECT_NEAR(t->forward_s[0], 2 * (1 + 2 + 3 + 4) * 1e-3, 1e-12);  // embedding + 3 blocks
    EXPECT_NEAR(t->forward_s[1], 2 * (5 + 6) * 1e-3, 1e-12);          // 1 block + head
    EXPECT_NEAR(t->backward_s[0], 8e-3, 1e-12);
    EXPECT_NEAR(t->backward_s[1], 4e-3, 1e-12);
    layers.erase(layers.begin() + 4, layers.begin() + 6);  // layer 2 unmeasured
    EXPECT_FALSE(timeline_layer_schedule_times(cfg, layers).has_value());

    // what may differ (the partition, pp, dp, ZeRO, the schedule) and what may not
    tessera::RunConfig run = tessera::config_parse(tessera::fixture::gpu_run_yaml(), "fixture");
    EXPECT_TRUE(timeline_layer_times_mismatch(run, cfg).isEmpty());
    tessera::RunConfig other = cfg;
    other.parallel.pp = 3, other.parallel.stages = {}, other.parallel.dp = 1;
    other.parallel.zero = 3, other.parallel.schedule = "zb-h1";
    EXPECT_TRUE(timeline_layer_times_mismatch(run, other).isEmpty());
    other = cfg;
    other.train.micro_batch = 8;
    EXPECT_EQ(timeline_layer_times_mismatch(run, other),
              "train.micro_batch is 8 in the plan but 4 in the run");
    other = cfg;
    other.parallel.tp = 2;
    EXPECT_EQ(timeline_layer_times_mismatch(run, other),
              "parallel.tp is 2 in the plan but 1 in the run");
    other = cfg;
    other.parallel.recompute = {"none", "full"};
    EXPECT_EQ(timeline_layer_times_mismatch(run, other),
              "layer 4's recompute is full in the plan but none in the run");
    other = cfg;
    other.model.n_layer = 6, other.parallel.stages = {};
    EXPECT_EQ(timeline_layer_times_mismatch(run, other), "the model differs from the run's");
}

// With per-layer times the page simulates, when picked, the project's plan as edited after the
// run (here: blocks 3 + 1 instead of the run's 2 + 2) and says when it cannot (another
// micro-batch); the edit re-simulates at once.
TEST(TimelineSim, PageSimulatesTheEditedPlanFromTheRunsLayerTimes) {
    const tessera::test_support::TempDir scratch("tlsim_layers");
    const fs::path& dir = scratch.path();
    const int64_t id = tessera::fixture::write_gpu_run(dir, 50000);
    add_layer_times(dir, id);
    ProjectDocument doc;
    QString err;
    ASSERT_TRUE(doc.open(QString::fromStdString(dir.string()), &err)) << err.toStdString();
    TimelinePage page(&doc);
    page.resize(1300, 700);
    page.show();
    ASSERT_TRUE(page.selectRun(id));
    page.setStep(200);
    // the project is the run's plan: its own partition from the layer times, the same 21 ms
    // as from the per-stage spans (the slower DP replica's times equal the spans)
    EXPECT_TRUE(page.simulatedFromLayers());
    EXPECT_FALSE(page.simulatesProject());
    EXPECT_NEAR(page.idealView()->data().length_ms, 21.0, 1e-6);

    doc.edit("partition", [](tessera::RunConfig& c) { c.parallel.stages = {3, 1}; });
    EXPECT_FALSE(page.simulatesProject()) << "the run's plan until the project's is picked";
    EXPECT_NEAR(page.idealView()->data().length_ms, 21.0, 1e-6);
    auto* pick = page.findChild<QComboBox*>("timelineSimPlan");
    ASSERT_NE(pick, nullptr);
    EXPECT_TRUE(pick->isEnabled());
    pick->setCurrentIndex(1);  // as a user picks "the project's plan"
    EXPECT_TRUE(page.simulatesProject()) << page.statusText().toStdString();
    // stage 0: f 0.1 + 3 × 0.45 = 1.45, b 2.9; stage 1: f 0.45 + 0.6 = 1.05, b 2.1 ms
    tessera::ScheduleTimes t;
    t.forward_s = {1.45e-3, 1.05e-3};
    t.backward_s = {2.9e-3, 2.1e-3};
    tessera::ScheduleSim want = tessera::schedule_simulate(
        tessera::schedule_build(tessera::ScheduleKind::one_f_one_b, 2, 4, 1), 2, t);
    EXPECT_NEAR(page.idealView()->data().length_ms, want.makespan_s * 1e3, 1e-6);
    EXPECT_LT(page.idealView()->data().length_ms, 21.0) << "the heavier stage got lighter";
    EXPECT_NEAR(page.simulatedBubble(), want.bubble_fraction, 1e-9);
    EXPECT_TRUE(page.idealView()->title().contains("the project's plan"))
        << page.idealView()->title().toStdString();
    QApplication::processEvents();
    EXPECT_TRUE(page.grab().save(tessera::test_support::screenshot_dir() +
                                 "/timeline_simulated_project_plan.png"));

    doc.edit("micro-batch", [](tessera::RunConfig& c) { c.train.micro_batch = 8; });
    EXPECT_FALSE(page.simulatesProject());
    EXPECT_TRUE(page.simulatedFromLayers());
    EXPECT_NEAR(page.idealView()->data().length_ms, 21.0, 1e-6) << "the run's own plan";
    EXPECT_TRUE(page.statusText().contains(
        "the project's plan is not simulated: train.micro_batch is 8 in the plan but 4 in the run"))
        << page.statusText().toStdString();
}

TEST(TimelineSim, BeforeAnyRunThePredictedTimesAndABrokenDbIsOneMessage) {
    const tessera::test_support::TempDir scratch("tlsim_norun");
    const fs::path& dir = scratch.path();
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
    {
        TimelinePage bare(nullptr);  // no project: only a run's own plan can be simulated
        auto* pick = bare.findChild<QComboBox*>("timelineSimPlan");
        ASSERT_NE(pick, nullptr);
        EXPECT_FALSE(pick->isEnabled());
    }
    QApplication::processEvents();
    EXPECT_TRUE(page.grab().save(tessera::test_support::screenshot_dir() +
                                 "/timeline_simulated_predicted.png"));

    // a runs.db that is not a database: one message naming the problem, no crash
    std::ofstream(dir / "runs.db") << "this is not sqlite";
    QSignalSpy failed(&page, &TimelinePage::loadFailed);
    page.refresh();
    EXPECT_EQ(failed.count(), 1);
    EXPECT_FALSE(page.statusText().isEmpty());
}

int main(int argc, char** argv) {
    qputenv("QT_QPA_PLATFORM", "offscreen");
    QApplication app(argc, argv);
    ::testing::InitGoogleTest(&argc, argv);
    return RUN_ALL_TESTS();
}
