// The Monitor page's system charts and alerts, offscreen, on a runs.db written as the launcher
// writes a 4-rank GPU run on two hosts (gpu_run_fixture.h; no GPU needed): one line per rank on
// the GPU charts and one per host on the host charts, the loss spike marked at its step with its
// rank, the throughput drop below the estimator's prediction marked at its first step, a NaN
// marked with the rank that wrote it first; the memory chart's key beside the axes and the
// prediction band beside each bar. Screenshots in build/screenshots/ (monitor_system_*.png).
#include <gtest/gtest.h>
#include <unistd.h>

#include <QApplication>
#include <QLabel>
#include <QScrollArea>
#include <QTabWidget>
#include <chrono>
#include <cmath>
#include <filesystem>
#include <limits>

#include "engine/config/config.h"
#include "engine/plan/estimator.h"
#include "tests/support/temp_dir.h"
#include "tests/support/ui_paths.h"
#include "tests/ui_monitor/gpu_run_fixture.h"
#include "ui/common/project_document.h"
#include "ui/common/qcustomplot_qt.h"
#include "ui/monitor/monitor_device.h"
#include "ui/monitor/monitor_page.h"
#include "ui/monitor/system_charts.h"

namespace fs = std::filesystem;
using namespace tessera::studio;
namespace metric = tessera::metric;

namespace {

// The estimator's tokens/s for the fixture's plan on the H200 (what the page compares with).
double predicted_tok_per_s() {
    tessera::RunConfig cfg = tessera::config_parse(tessera::fixture::gpu_run_yaml(), "fixture");
    MonitorDevice md =
        monitor_prediction_device(cfg, {tessera::DeviceRecord{0, "node-a", "NVIDIA H200", 1, 0}});
    return tessera::estimate_plan(cfg, md.spec).tokens_per_s;
}

}  // namespace

TEST(MonitorSystem, ChartsAlertsAndMemoryLayout) {
    const double pred = predicted_tok_per_s();
    ASSERT_GT(pred, 0);
    const tessera::test_support::TempDir scratch("monsys_gpu");
    const fs::path& dir = scratch.path();
    const int64_t id = tessera::fixture::write_gpu_run(dir, pred);
    ProjectDocument doc;
    QString err;
    ASSERT_TRUE(doc.open(QString::fromStdString(dir.string()), &err)) << err.toStdString();
    MonitorPage page(&doc);
    page.resize(1400, 1000);
    page.show();
    ASSERT_TRUE(page.selectRun(id));
    page.replotNow();
    QApplication::processEvents();
    EXPECT_NEAR(page.predictedTokPerS(), pred, 1e-9 * pred);

    // system charts: GPU metrics one line per rank, host metrics one per host (ranks 0 and 2)
    SystemCharts* sys = page.systemCharts();
    for (auto m : {metric::gpu_util_percent, metric::gpu_memory_used_bytes, metric::gpu_power_watts,
                   metric::gpu_temperature_c, metric::gpu_sm_clock_mhz}) {
        EXPECT_EQ(sys->lineCount(std::string(m)), 4) << m;
        EXPECT_TRUE(sys->chartVisible(std::string(m))) << m;
    }
    for (auto m : {metric::host_cpu_percent, metric::host_memory_used_bytes}) {
        EXPECT_EQ(sys->lineCount(std::string(m)), 2) << m;
    }
    QCustomPlot* power = sys->chart(std::string(metric::gpu_power_watts));
    ASSERT_NE(power, nullptr);
    ASSERT_EQ(power->graphCount(), 4);
    EXPECT_EQ(power->graph(2)->name(), "r2 · node-b");
    EXPECT_EQ(power->graph(0)->data()->size(), 50);  // every 4th of 200 steps
    QCustomPlot* ram = sys->chart(std::string(metric::host_memory_used_bytes));
    EXPECT_NEAR(ram->graph(0)->data()->at(0)->value, 40.0, 1e-9);  // GiB
    EXPECT_TRUE(sys->emptyText().isEmpty());

    // alerts: the spike at step 120 (rank 0) and the drop from step 150, nothing else
    ASSERT_EQ(page.lossAlerts().size(), 1u);
    EXPECT_EQ(page.lossAlerts()[0].step, 120);
    EXPECT_EQ(page.lossAlerts()[0].rank, 0);
    ASSERT_EQ(page.throughputAlerts().size(), 1u);
    EXPECT_EQ(page.throughputAlerts()[0].step, 150);
    EXPECT_EQ(page.throughputAlerts()[0].steps_below, 20);
    auto* spike = page.lossPlot()->findChild<QCPItemStraightLine*>("lossAlert0");
    ASSERT_NE(spike, nullptr);
    EXPECT_DOUBLE_EQ(spike->point1->coords().x(), 120.0);
    auto* spikeLabel = page.lossPlot()->findChild<QCPItemText*>("lossAlert0Label");
    ASSERT_NE(spikeLabel, nullptr);
    EXPECT_EQ(spikeLabel->text(), "spike · r0");
    auto* drop = page.speedPlot()->findChild<QCPItemText*>("speedAlert0Label");
    ASSERT_NE(drop, nullptr);
    EXPECT_EQ(drop->text(), "below prediction from step 150");
    const QStringList lines = page.alertLines();
    ASSERT_EQ(lines.size(), 2);
    EXPECT_TRUE(lines[0].startsWith("step 120: loss spike")) << lines[0].toStdString();
    auto* label = page.findChild<QLabel*>("monitorAlerts");
    ASSERT_NE(label, nullptr);
    EXPECT_TRUE(label->isVisible());
    // x by tokens: the marks move with the data
    page.setXAxis(MonitorPage::XTokens);
    page.replotNow();
    spike = page.lossPlot()->findChild<QCPItemStraightLine*>("lossAlert0");
    ASSERT_NE(spike, nullptr);
    // the loss chart's own key of step 120 (and of step 4, the first system sample)
    const double key120 = page.trainRawGraph()->data()->at(119)->key;
    EXPECT_GT(key120, 120.0 * 100);
    EXPECT_DOUBLE_EQ(spike->point1->coords().x(), key120);
    EXPECT_DOUBLE_EQ(power->graph(0)->data()->at(0)->key, page.trainRawGraph()->data()->at(3)->key);
    page.setXAxis(MonitorPage::XStep);
    page.replotNow();

    // memory chart: the key in a column right of the axis rect (never over the bars), the
    // prediction band beside each rank's bar, not over it; node labels from the hosts
    QCustomPlot* mem = page.memoryPlot();
    QCPAxisRect* rect = mem->axisRect();
    const QRect key = mem->legend->outerRect();
    EXPECT_GE(key.left(), rect->outerRect().right()) << "legend overlaps the axis rect";
    QCPBars* params = nullptr;
    for (int i = 0; i < mem->plottableCount(); ++i)
        if (mem->plottable(i)->name() == "params")
            params = qobject_cast<QCPBars*>(mem->plottable(i));
    ASSERT_NE(params, nullptr);
    for (int r = 0; r < 4; ++r) {
        auto* band = mem->findChild<QCPItemRect*>(QString("predictionBand%1").arg(r));
        ASSERT_NE(band, nullptr);
        const double bar_right = params->data()->at(r)->key + params->width() / 2;
        EXPECT_GE(band->topLeft->coords().x(), bar_right) << "band over bar " << r;
        EXPECT_LT(band->bottomRight->coords().x(), r + 0.5);  // inside the rank's slot
    }
    auto ticker = qSharedPointerDynamicCast<QCPAxisTickerText>(mem->xAxis->ticker());
    ASSERT_TRUE(ticker);
    EXPECT_TRUE(ticker->ticks().value(2).contains("N1 S1"))
        << ticker->ticks().value(2).toStdString();

    EXPECT_TRUE(
        page.grab().save(tessera::test_support::screenshot_dir() + "/monitor_system_alerts.png"));
    page.showSystemTab();
    QApplication::processEvents();
    page.replotNow();
    EXPECT_TRUE(
        page.grab().save(tessera::test_support::screenshot_dir() + "/monitor_system_charts.png"));
}

// A diverged run: ranks 2 and 1 write NaN at step 7 (rank 1 first), the run fails; the mark
// names rank 1. A CPU run has only host metrics: the GPU charts stay hidden.
TEST(MonitorSystem, NanMarkedWithTheFirstRankAndCpuRunShowsHostOnly) {
    const tessera::test_support::TempDir scratch("monsys_nan");
    const fs::path& dir = scratch.path();
    const std::string yaml =
        "model: {preset: gpt-tiny, n_layer: 2, d_model: 64, n_head: 2, seq_len: 32}\n"
        "data: {dataset: brown}\ntrain: {steps: 10, micro_batch: 4, eval_every: 0}\nparallel: {dp: "
        "4}\n";
    std::ofstream(dir / "project.yaml") << yaml;
    int64_t id = 0;
    {
        tessera::RunStore s = tessera::RunStore::open((dir / "runs.db").string());
        id = s.run_begin(tessera::RunStartRecord{"diverged", yaml, "h", 4, "", 100});
        std::vector<tessera::Record> recs;
        for (int r = 0; r < 4; ++r)
            recs.push_back(tessera::DeviceRecord{r, "h", "cpu", 1LL << 34, 100});
        for (int64_t st = 1; st <= 6; ++st)
            recs.push_back(tessera::MetricRecord{st, 0, std::string(metric::train_loss),
                                                 5.0 - 0.1 * st, 100.0 + st});
        const double nan = std::numeric_limits<double>::quiet_NaN();
        recs.push_back(tessera::MetricRecord{7, 2, std::string(metric::train_loss), nan, 107.3});
        recs.push_back(tessera::MetricRecord{7, 1, std::string(metric::train_loss), nan, 107.1});
        for (int64_t st = 2; st <= 6; st += 2)
            recs.push_back(tessera::MetricRecord{st, 0, std::string(metric::host_cpu_percent), 50,
                                                 100.0 + st});
        recs.push_back(tessera::ErrorRecord{1, 0, "step 6: the loss is nan (diverged)", 107.2});
        recs.push_back(
            tessera::RunEndRecord{std::string(tessera::run_status::failed), "diverged", 6, 108});
        s.append(id, recs);
    }
    ProjectDocument doc;
    QString err;
    ASSERT_TRUE(doc.open(QString::fromStdString(dir.string()), &err)) << err.toStdString();
    MonitorPage page(&doc);
    page.resize(1200, 900);
    page.show();
    ASSERT_TRUE(page.selectRun(id));
    page.replotNow();
    ASSERT_EQ(page.lossAlerts().size(), 1u);
    EXPECT_EQ(page.lossAlerts()[0].kind, tessera::LossAlert::Kind::non_finite);
    EXPECT_EQ(page.lossAlerts()[0].step, 7);
    EXPECT_EQ(page.lossAlerts()[0].rank, 1);
    auto* label = page.lossPlot()->findChild<QCPItemText*>("lossAlert0Label");
    ASSERT_NE(label, nullptr);
    EXPECT_EQ(label->text(), "NaN · r1");
    EXPECT_GT(page.lossPlot()->xAxis->range().upper, 7.0);  // the mark is inside the chart
    SystemCharts* sys = page.systemCharts();
    EXPECT_EQ(sys->lineCount(std::string(metric::host_cpu_percent)), 1);
    EXPECT_TRUE(sys->chartVisible(std::string(metric::host_cpu_percent)));
    EXPECT_FALSE(sys->chartVisible(std::string(metric::gpu_power_watts)));
    EXPECT_FALSE(sys->chartVisible(std::string(metric::gpu_util_percent)));
    page.showSystemTab();
    QApplication::processEvents();
    EXPECT_TRUE(
        page.grab().save(tessera::test_support::screenshot_dir() + "/monitor_system_nan_cpu.png"));
}

// At the studio's default window size (1280 x 800: about 1280 x 720 for the page) the System tab
// fits in the page and all seven charts keep their height: those below the tab's fold scroll
// into view rather than being cut off at the window's edge.
TEST(MonitorSystem, EveryChartIsWholeAtTheDefaultWindowSize) {
    const tessera::test_support::TempDir scratch("monsys_fit");
    const fs::path& dir = scratch.path();
    const int64_t id = tessera::fixture::write_gpu_run(dir, 1e5);
    ProjectDocument doc;
    QString err;
    ASSERT_TRUE(doc.open(QString::fromStdString(dir.string()), &err)) << err.toStdString();
    MonitorPage page(&doc);
    page.resize(1280, 720);
    page.show();
    ASSERT_TRUE(page.selectRun(id));
    page.showSystemTab();
    page.replotNow();
    QApplication::processEvents();
    EXPECT_LE(page.height(), 720) << "the page's layout needs more height than the window gives";
    SystemCharts* sys = page.systemCharts();
    const QRect tab(sys->mapTo(&page, QPoint(0, 0)), sys->size());
    EXPECT_TRUE(page.rect().contains(tab))
        << "the System tab reaches past the page: " << tab.bottom() << " > " << page.height();
    auto* scroll = sys->findChild<QScrollArea*>("monitorSystemScroll");
    int visible = 0;
    for (auto m : {metric::gpu_util_percent, metric::gpu_memory_used_bytes, metric::gpu_power_watts,
                   metric::gpu_temperature_c, metric::gpu_sm_clock_mhz, metric::host_cpu_percent,
                   metric::host_memory_used_bytes}) {
        QCustomPlot* c = sys->chart(std::string(m));
        ASSERT_NE(c, nullptr) << m;
        if (!c->isVisible()) continue;
        ++visible;
        EXPECT_GE(c->height(), c->minimumHeight()) << m;
        if (scroll) {
            scroll->ensureWidgetVisible(c, 0, 0);
            QApplication::processEvents();
        }
        // what the tab shows of the chart (scrolled to it where the tab scrolls)
        const QRect shown(c->mapTo(sys, QPoint(0, 0)), c->size());
        const QRect area =
            scroll ? QRect(scroll->viewport()->mapTo(sys, QPoint(0, 0)), scroll->viewport()->size())
                   : sys->rect();
        EXPECT_TRUE(area.contains(shown)) << m << ": cut off at y " << area.bottom() << " (chart "
                                          << shown.top() << ".." << shown.bottom() << ")";
    }
    EXPECT_EQ(visible, 7);
    if (scroll)
        scroll->ensureWidgetVisible(sys->chart(std::string(metric::gpu_util_percent)), 0, 0);
    QApplication::processEvents();
    EXPECT_TRUE(
        page.grab().save(tessera::test_support::screenshot_dir() + "/monitor_system_1280x720.png"));
}

int main(int argc, char** argv) {
    qputenv("QT_QPA_PLATFORM", "offscreen");
    QApplication app(argc, argv);
    ::testing::InitGoogleTest(&argc, argv);
    return RUN_ALL_TESTS();
}
