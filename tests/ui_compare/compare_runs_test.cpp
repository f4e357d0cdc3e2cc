// Compare page at the scale of real projects, offscreen, on a runs.db written through engine/store
// (bench/synthetic_runs.h; no training): the run table's columns of differing config keys, the
// default selection of the newest runs, grouping with min–max bands, smoothing, x by wall time,
// tags, notes and archiving. Models under QAbstractItemModelTester; screenshots in
// build/screenshots/.
#include <gtest/gtest.h>

#include <QAbstractItemModelTester>
#include <QApplication>
#include <QDir>
#include <QFile>
#include <QHeaderView>
#include <QLabel>
#include <QSignalSpy>
#include <QSortFilterProxyModel>
#include <QStandardPaths>
#include <QTabWidget>
#include <QTableView>
#include <QTemporaryDir>

#include "bench/synthetic_runs.h"
#include "tests/ui_compare/ui_compare_util.h"
#include "ui/common/project_document.h"
#include "ui/common/qcustomplot_qt.h"
#include "ui/compare/compare_page.h"
#include "ui/compare/parallel_coords.h"
#include "ui/compare/run_table_model.h"

using namespace tessera::studio;
using ui_compare_test::ensure_app;
using ui_compare_test::screenshot_dir;

namespace {

// A project folder in `dir` (no runs.db yet), opened by `doc`.
void open_project(const QTemporaryDir& dir, ProjectDocument& doc) {
    ensure_app();
    ASSERT_TRUE(dir.isValid());
    QFile f(dir.filePath("project.yaml"));
    ASSERT_TRUE(f.open(QIODevice::WriteOnly));
    f.write(tessera::bench::synthetic_config({"proj"}).c_str());
    f.close();
    QString err;
    ASSERT_TRUE(doc.open(dir.path(), &err)) << err.toStdString();
}

// runs #1..#8: lr 1e-3 or 3e-3 (alternating), seeds 0..3 each, dp 1 for the first four, 2 after
class CompareRunsTest : public ::testing::Test {
  protected:
    QTemporaryDir tmp;
    ProjectDocument doc;
    void SetUp() override {
        ASSERT_NO_FATAL_FAILURE(open_project(tmp, doc));
        auto store = tessera::RunStore::open(doc.dbPath().toStdString());
        for (int i = 0; i < 8; ++i) {
            tessera::bench::SyntheticRun r;
            r.lr = i % 2 ? 3e-3 : 1e-3;
            r.seed = i / 2;
            r.dp = i < 4 ? 1 : 2;
            r.name = "lr" + std::string(i % 2 ? "3e-3" : "1e-3") + "-s" + std::to_string(r.seed);
            r.steps = 200;
            r.start_time = 1.7e9 + 1000 * i;
            tessera::bench::synthetic_run_add(store, r);
        }
    }
};

QStringList headers(QAbstractItemModel* m) {
    QStringList out;
    for (int c = 0; c < m->columnCount(); ++c) out << m->headerData(c, Qt::Horizontal).toString();
    return out;
}

}  // namespace

TEST_F(CompareRunsTest, DifferingConfigKeysAreColumns) {
    ComparePage page(&doc);
    QAbstractItemModelTester t1(page.runModel(),
                                QAbstractItemModelTester::FailureReportingMode::Fatal);
    QAbstractItemModelTester t2(page.proxyModel(),
                                QAbstractItemModelTester::FailureReportingMode::Fatal);
    RunTableModel* m = page.runModel();
    ASSERT_EQ(m->rowCount(), 8);
    // lr, seed and the derived global batch differ (dp has its fixed column; name is not config)
    EXPECT_TRUE(m->configKeys().contains("train.lr")) << m->configKeys().join(", ").toStdString();
    EXPECT_TRUE(m->configKeys().contains("train.seed"));
    EXPECT_FALSE(m->configKeys().contains("parallel.dp"));
    EXPECT_FALSE(m->configKeys().contains("train.steps"));  // the same in every run
    EXPECT_EQ(m->columnCount(), RunTableModel::ColumnCount + m->configKeys().size());
    const int lr = m->configColumn("train.lr");
    ASSERT_GE(lr, RunTableModel::ColumnCount);
    EXPECT_TRUE(headers(m).contains("lr"));
    EXPECT_EQ(m->headerData(lr, Qt::Horizontal, Qt::ToolTipRole).toString().left(8), "train.lr");
    EXPECT_EQ(m->index(1, lr).data().toString(), "0.003");
    // shown right after Name and Status
    EXPECT_LE(page.runView()->horizontalHeader()->visualIndex(lr),
              RunTableModel::Status + m->configKeys().size());
    // sorted as numbers
    page.runView()->sortByColumn(lr, Qt::DescendingOrder);
    EXPECT_EQ(page.proxyModel()->index(0, lr).data().toString(), "0.003");
}

TEST_F(CompareRunsTest, OpensWithTheNewestRunsSelected) {
    ComparePage page(&doc);
    QVector<int64_t> ids = page.selectedRunIds();
    std::sort(ids.begin(), ids.end());
    EXPECT_EQ(ids, (QVector<int64_t>{4, 5, 6, 7, 8}));
    // the table first; their curves on the next turn of the event loop
    EXPECT_EQ(page.plot()->graphCount(), 0);
    QApplication::processEvents();
    EXPECT_EQ(page.plot()->graphCount(), 5);
    page.resize(1400, 800);
    page.show();
    QApplication::processEvents();
    EXPECT_TRUE(page.grab().save(screenshot_dir() + "/compare_default.png"));
}

namespace {
QList<QCPGraph*> graphs(QCustomPlot* p, const QString& object) {
    QList<QCPGraph*> out;
    for (int i = 0; i < p->graphCount(); ++i)
        if (p->graph(i)->objectName() == object) out << p->graph(i);
    return out;
}
}  // namespace

TEST_F(CompareRunsTest, GroupsDrawOneMeanLineWithAMinMaxBand) {
    ComparePage page(&doc);
    page.resize(1400, 800);
    page.show();
    QApplication::processEvents();
    page.setSelectedRuns({1, 2, 3, 4, 5, 6, 7, 8});
    page.setGroupKey("train.lr");
    QCustomPlot* p = page.plot();
    const auto means = graphs(p, "mean");
    const auto highs = graphs(p, "bandHigh");
    const auto lows = graphs(p, "bandLow");
    ASSERT_EQ(means.size(), 2);  // lr 0.001 and 0.003
    ASSERT_EQ(highs.size(), 2);
    ASSERT_EQ(lows.size(), 2);
    EXPECT_TRUE(means[0]->name().contains("lr = 0.001 (4 runs)")) << means[0]->name().toStdString();
    EXPECT_EQ(p->legend->itemCount(), 2);  // one entry per group, none for bands
    for (int g = 0; g < 2; ++g) {
        EXPECT_EQ(highs[g]->channelFillGraph(), lows[g]);
        EXPECT_NE(highs[g]->brush().style(), Qt::NoBrush);
        ASSERT_EQ(means[g]->data()->size(), 200);
        for (int i = 0; i < 200; i += 37) {
            const double m = means[g]->data()->at(i)->value;
            EXPECT_LT(lows[g]->data()->at(i)->value, m);  // four noisy seeds: a band with width
            EXPECT_GT(highs[g]->data()->at(i)->value, m);
        }
    }
    // the mean is the mean of the members' values at that step (no smoothing)
    page.setGroupKey("");
    double sum = 0;
    for (int i = 0; i < p->graphCount(); ++i)
        if (p->graph(i)->name().contains("lr1e-3")) sum += p->graph(i)->data()->at(10)->value;
    page.setGroupKey("train.lr");
    EXPECT_NEAR(graphs(p, "mean")[0]->data()->at(10)->value, sum / 4, 1e-9);

    // grouping by seed: four groups of two
    page.setGroupKey("train.seed");
    EXPECT_EQ(graphs(p, "mean").size(), 4);
    // grouping by the plan: runs 1-4 ran dp 1, runs 5-8 dp 2 (tp, pp and ZeRO left at defaults)
    page.setGroupKey(RunSummary::kGroupByPlan);
    const auto plans = graphs(p, "mean");
    ASSERT_EQ(plans.size(), 2);
    EXPECT_EQ(plans[0]->name(), QString("plan = dp1 × tp1 × pp1 (4 runs)"));
    EXPECT_EQ(plans[1]->name(), QString("plan = dp2 × tp1 × pp1 (4 runs)"));
    QApplication::processEvents();
    EXPECT_TRUE(page.grab().save(screenshot_dir() + "/compare_groups_plan.png"));
    page.setGroupKey("train.lr");
    page.setSmoothing(0.9);  // smoothed mean over the faint raw mean
    const auto raw = graphs(p, "raw");
    ASSERT_EQ(raw.size(), 2);
    EXPECT_LT(raw[0]->pen().color().alpha(), 255);
    EXPECT_NE(raw[0]->data()->at(50)->value, graphs(p, "mean")[0]->data()->at(50)->value);
    QApplication::processEvents();
    EXPECT_TRUE(page.grab().save(screenshot_dir() + "/compare_groups.png"));
}

TEST_F(CompareRunsTest, SmoothingAndWallTimeAxis) {
    ComparePage page(&doc);
    page.setSelectedRuns({1, 2});
    QCustomPlot* p = page.plot();
    EXPECT_EQ(graphs(p, "run").size(), 2);
    EXPECT_TRUE(graphs(p, "raw").empty());
    page.setSmoothing(0.8);
    EXPECT_EQ(graphs(p, "raw").size(), 2);
    EXPECT_EQ(graphs(p, "run").size(), 2);
    EXPECT_EQ(p->legend->itemCount(), 2);
    // x by wall time: minutes since the run started (0.5 s a step)
    page.setXAxis(ComparePage::XAxis::WallTime);
    QCPGraph* g = graphs(p, "run")[0];
    EXPECT_NEAR(g->data()->at(0)->key, 0.5 / 60, 1e-9);
    EXPECT_NEAR(g->data()->at(g->data()->size() - 1)->key, 100.0 / 60, 1e-9);
    EXPECT_EQ(p->xAxis->label(), "wall time (min)");
    page.hoverAt(1.0);  // one minute in: step 120
    EXPECT_EQ(page.hoverTable()->item(0, 1)->text(), "120");
}

TEST_F(CompareRunsTest, LongCurvesAreDownsampledKeepingTheSpike) {
    {
        auto store = tessera::RunStore::open(doc.dbPath().toStdString());
        const int64_t id = store.run_begin(
            {"long", tessera::bench::synthetic_config({"long"}), "h", 1, "", 1.7e9});
        std::vector<tessera::Record> rows;
        for (int64_t s = 1; s <= 50000; ++s)
            rows.push_back(tessera::MetricRecord{s, 0, "train/loss",
                                                 s == 31337 ? 40.0 : 3.0 - s * 1e-5, 1.7e9 + s});
        store.append(id, rows);
    }
    ComparePage page(&doc);
    page.resize(1400, 800);
    page.show();
    QApplication::processEvents();
    page.setSelectedRuns({9});
    QCPGraph* g = graphs(page.plot(), "run").at(0);
    EXPECT_LE(g->data()->size(), 5 * page.displayColumns());
    EXPECT_LT(g->data()->size(), 50000);
    double top = 0;
    for (auto it = g->data()->constBegin(); it != g->data()->constEnd(); ++it)
        top = std::max(top, it->value);
    EXPECT_EQ(top, 40.0);
    EXPECT_EQ(g->data()->at(g->data()->size() - 1)->key, 50000.0);
}

// Zooming in downsamples the curve again over the view: 1/50 of a 50,000-step run shows its 1,000
// steps one by one (the whole run's pixel buckets gave it ~4 points per 36 steps), and zooming
// back out returns to the whole run's buckets, the spike still drawn.
TEST_F(CompareRunsTest, ZoomingInShowsTheCurvesDetail) {
    {
        auto store = tessera::RunStore::open(doc.dbPath().toStdString());
        const int64_t id = store.run_begin(
            {"long", tessera::bench::synthetic_config({"long"}), "h", 1, "", 1.7e9});
        std::vector<tessera::Record> rows;
        for (int64_t s = 1; s <= 50000; ++s)
            rows.push_back(tessera::MetricRecord{
                s, 0, "train/loss", s == 31337 ? 40.0 : 3.0 + 0.1 * (s % 7), 1.7e9 + s});
        store.append(id, rows);
    }
    ComparePage page(&doc);
    page.resize(1400, 800);
    page.show();
    QApplication::processEvents();
    page.setSelectedRuns({9});
    auto in_view = [&] {
        const QCPRange r = page.plot()->xAxis->range();
        QCPGraph* g = graphs(page.plot(), "run").at(0);
        int n = 0;
        for (auto it = g->data()->constBegin(); it != g->data()->constEnd(); ++it)
            n += r.contains(it->key);
        return n;
    };
    const int whole = in_view();
    EXPECT_LE(whole, 5 * page.displayColumns());
    page.plot()->xAxis->setRange(20001, 21000);
    QApplication::processEvents();  // the view's downsampling runs on the next turn
    EXPECT_EQ(in_view(), 1000) << "every step in view is drawn (fewer steps than pixel columns)";
    page.plot()->xAxis->setRange(0, 50001);
    QApplication::processEvents();
    EXPECT_LE(in_view(), 5 * page.displayColumns());
    QCPGraph* g = graphs(page.plot(), "run").at(0);
    double top = 0;
    for (auto it = g->data()->constBegin(); it != g->data()->constEnd(); ++it)
        top = std::max(top, it->value);
    EXPECT_EQ(top, 40.0);
}

TEST_F(CompareRunsTest, TagsNotesFilterAndArchive) {
    ComparePage page(&doc);
    QString err;
    ASSERT_TRUE(page.annotate({1, 2}, QStringList{"baseline", "sweep-a"}, QString("first sweep"),
                              std::nullopt, &err))
        << err.toStdString();
    QAbstractItemModelTester t(page.proxyModel(),
                               QAbstractItemModelTester::FailureReportingMode::Fatal);
    RunTableModel* m = page.runModel();
    EXPECT_EQ(m->runs()[0].tags, (QStringList{"baseline", "sweep-a"}));
    EXPECT_EQ(m->index(0, RunTableModel::Tags).data().toString(), "baseline, sweep-a");
    EXPECT_EQ(m->index(1, RunTableModel::Note).data().toString(), "first sweep");
    QSortFilterProxyModel* proxy = page.proxyModel();
    page.setFilterText("tag:baseline");
    EXPECT_EQ(proxy->rowCount(), 2);
    page.setFilterText("tag:base");  // tag: wants the whole tag
    EXPECT_EQ(proxy->rowCount(), 0);
    page.setFilterText("SWEEP");  // a word of the note or a tag, any case
    EXPECT_EQ(proxy->rowCount(), 2);
    page.setFilterText("0.003");  // a differing config value (train.lr)
    EXPECT_EQ(proxy->rowCount(), 4);
    page.setFilterText("0.003 s1");  // every word must match
    EXPECT_EQ(proxy->rowCount(), 1);
    page.setFilterText("");
    EXPECT_EQ(proxy->rowCount(), 8);

    // archive: hidden unless shown, kept in runs.db, not selected by default
    ASSERT_TRUE(page.annotate({2, 8}, std::nullopt, std::nullopt, true, &err)) << err.toStdString();
    EXPECT_EQ(proxy->rowCount(), 6);
    page.setShowArchived(true);
    EXPECT_EQ(proxy->rowCount(), 8);
    EXPECT_TRUE(m->runs()[1].archived);
    EXPECT_EQ(m->runs()[1].note, "first sweep");  // archiving kept the other fields
    EXPECT_EQ(m->runs()[1].tags, (QStringList{"baseline", "sweep-a"}));
    EXPECT_FALSE(m->runs()[0].archived);

    ComparePage reopened(&doc);
    EXPECT_EQ(reopened.proxyModel()->rowCount(), 6);
    QVector<int64_t> ids = reopened.selectedRunIds();
    std::sort(ids.begin(), ids.end());
    EXPECT_EQ(ids, (QVector<int64_t>{3, 4, 5, 6, 7}));
    EXPECT_EQ(reopened.runModel()->runs()[0].tags, (QStringList{"baseline", "sweep-a"}));
    // group by tags: the tagged run and the untagged one
    reopened.setSelectedRuns({1, 3});
    reopened.setGroupKey(RunSummary::kGroupByTags);
    EXPECT_EQ(graphs(reopened.plot(), "mean").size(), 2);

    // a bad tag is refused with a message, nothing written, no crash
    QSignalSpy failed(&page, &ComparePage::annotateFailed);
    EXPECT_FALSE(page.annotate({1}, QStringList{"two\nlines"}, std::nullopt, std::nullopt, &err));
    EXPECT_TRUE(err.contains("tag")) << err.toStdString();
    EXPECT_EQ(failed.count(), 1);
    EXPECT_EQ(page.runModel()->runs()[0].tags, (QStringList{"baseline", "sweep-a"}));
}

TEST(CompareRunsBadFile, NotADatabaseIsReportedNotFatal) {
    QTemporaryDir tmp;
    ProjectDocument doc;
    ASSERT_NO_FATAL_FAILURE(open_project(tmp, doc));
    QString err;
    QFile db(doc.dbPath());
    ASSERT_TRUE(db.open(QIODevice::WriteOnly));
    db.write("this is not sqlite, just text long enough to be read as a header......");
    db.close();
    ComparePage page(&doc);
    EXPECT_EQ(page.runModel()->rowCount(), 0);
    EXPECT_FALSE(page.annotate({1}, QStringList{"x"}, std::nullopt, std::nullopt, &err));
    EXPECT_TRUE(err.contains(doc.dbPath())) << err.toStdString();
}

TEST_F(CompareRunsTest, ParallelCoordinatesBrushFiltersTheTable) {
    ComparePage page(&doc);
    ParallelCoordsView* pc = page.parallelView();
    const ParCoords& c = pc->coords();
    QStringList names;
    for (const auto& a : c.axes) names << a.name;
    // numeric differing keys, then the final metrics
    EXPECT_TRUE(names.contains("lr")) << names.join(", ").toStdString();
    EXPECT_TRUE(names.contains("seed"));
    EXPECT_EQ(names.mid(names.size() - 3),
              (QStringList{"final val loss", "tokens/s", "peak GiB/GPU"}));
    ASSERT_EQ(c.runs.size(), 8u);
    const int lr = int(names.indexOf("lr"));
    EXPECT_DOUBLE_EQ(c.axes[size_t(lr)].lo, 0.001);
    EXPECT_DOUBLE_EQ(c.axes[size_t(lr)].hi, 0.003);

    QSignalSpy brushed(pc, &ParallelCoordsView::brushChanged);
    pc->setBrush(lr, 0.002, 0.01);  // the lr 3e-3 runs: #2, #4, #6, #8
    ASSERT_EQ(brushed.count(), 1);
    EXPECT_EQ(parcoords_brushed(pc->coords()), (QSet<int64_t>{2, 4, 6, 8}));
    EXPECT_EQ(page.proxyModel()->rowCount(), 4);
    const int seed = int(names.indexOf("seed"));
    pc->setBrush(seed, 2.5, 0);  // and seed <= 2.5 (a reversed range is swapped)
    EXPECT_EQ(page.proxyModel()->rowCount(), 3);
    EXPECT_TRUE(page.findChild<QLabel*>("compareStatus")->text().startsWith("3 of 8 runs"));
    page.resize(1400, 800);
    page.show();
    page.findChild<QTabWidget*>("compareTabs")->setCurrentWidget(pc);
    QApplication::processEvents();
    EXPECT_TRUE(page.grab().save(screenshot_dir() + "/compare_parallel.png"));
    pc->clearBrushes();
    EXPECT_EQ(page.proxyModel()->rowCount(), 8);
    // a brush on a metric: the runs with the lowest final val loss
    const int val = int(names.indexOf("final val loss"));
    pc->setBrush(val, c.axes[size_t(val)].lo, c.axes[size_t(val)].lo + 1e-12);
    EXPECT_EQ(page.proxyModel()->rowCount(), 1);
}

// The plan a run groups under: its dp × tp × pp from the stored config (a key left out is 1), and
// its ZeRO stage when on.
TEST(RunSummaryPlan, GroupsByDpTpPpAndZero) {
    RunSummary r;
    EXPECT_EQ(r.groupValue(RunSummary::kGroupByPlan), QString("dp1 × tp1 × pp1"));
    r.config = {{"parallel", "parallel.dp", "4"},
                {"parallel", "parallel.pp", "2"},
                {"parallel", "parallel.zero", "3"}};
    EXPECT_EQ(r.groupValue(RunSummary::kGroupByPlan), QString("dp4 × tp1 × pp2, ZeRO-3"));
    r.config[2].value = "0";
    EXPECT_EQ(r.groupValue(RunSummary::kGroupByPlan), QString("dp4 × tp1 × pp2"));
}

// A run whose config names its data by a relative path no longer there (moved since the run, or
// a project whose data is prepared elsewhere): its summary still has its plan columns — the
// stored config resolved against runs.db's folder, its files not required.
TEST(RunSummaryConfig, AStoredConfigWhoseDataIsGoneStillParses) {
    ensure_app();
    QTemporaryDir tmp;
    ASSERT_TRUE(tmp.isValid());
    const std::string yaml =
        "model: {preset: gpt-tiny, n_layer: 2, d_model: 64, n_head: 2, seq_len: 32}\n"
        "data: {train: data/train.bin}\n"
        "train: {steps: 4, micro_batch: 4, grad_accum: 2, eval_every: 0}\n"
        "parallel: {dp: 2}\n";
    auto store = tessera::RunStore::open(tmp.filePath("runs.db").toStdString());
    store.run_begin(tessera::RunStartRecord{"moved", yaml, "host", 2, "", 1000});
    const RunSummary s = compare_summarize_run(store, *store.run_get(1));
    EXPECT_TRUE(s.config_ok);
    EXPECT_EQ(s.micro_batch, 4);
    EXPECT_EQ(s.grad_accum, 2);
    EXPECT_EQ(s.dp, 2);
}
