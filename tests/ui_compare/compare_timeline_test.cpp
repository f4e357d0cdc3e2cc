// Timeline and Compare pages, offscreen, on a real runs.db: three tiny GPT runs trained by the
// `tessera` binary (a base run, one with another lr, one with pp = 2 and 4 micro-batches).
// Compare: the run model under QAbstractItemModelTester and sorted, the config diff's
// "differences only" toggle, overlaid curves and the hover table, CSV and chart export.
// Timeline: the pp2 run's spans for a chosen step, the ideal schedule, measured and predicted
// bubble, hover text. Both pages are rendered to PNG (build dir: screenshots/).
#include <gtest/gtest.h>

#include <QAbstractItemModelTester>
#include <QApplication>
#include <QDir>
#include <QFile>
#include <QLabel>
#include <QMap>
#include <QProcess>
#include <QSet>
#include <QSortFilterProxyModel>
#include <QStandardPaths>
#include <QTableWidget>
#include <QTemporaryDir>
#include <algorithm>

#include "engine/parallel/schedule.h"
#include "tests/support/paths.h"
#include "tests/ui_compare/ui_compare_util.h"
#include "ui/common/project_document.h"
#include "ui/common/qcustomplot_qt.h"
#include "ui/compare/compare_page.h"
#include "ui/compare/config_diff.h"
#include "ui/compare/run_table_model.h"
#include "ui/timeline/gantt_view.h"
#include "ui/timeline/timeline_page.h"

using namespace tessera::studio;
using ui_compare_test::ensure_app;
using ui_compare_test::screenshot_dir;

namespace {

const char* kProject =
    "name: base\n"
    "model: {preset: gpt-tiny, n_layer: 2, n_head: 2, d_model: 64, seq_len: 32}\n"
    "data: {dataset: brown}\n"
    "train: {steps: 10, micro_batch: 4, eval_every: 5, eval_steps: 2, threads: 1}\n";

void train(const QString& dir, const QStringList& sets) {
    QStringList args{"train", dir + "/project.yaml"};
    for (const QString& s : sets) args << "--set" << s;
    QProcess p;
    p.setWorkingDirectory(dir);
    p.setProcessChannelMode(QProcess::MergedChannels);
    p.start(QString(TESSERA_BIN_DIR) + "/tessera", args);
    ASSERT_TRUE(p.waitForFinished(120000)) << "tessera train did not finish";
    ASSERT_EQ(p.exitCode(), 0) << p.readAll().toStdString();
}

// A project folder with runs.db holding runs #1 base, #2 lr3e-3, #3 pp2.
class PagesTest : public ::testing::Test {
  protected:
    QTemporaryDir tmp;
    ProjectDocument doc;
    void SetUp() override {
        ensure_app();
        ASSERT_TRUE(tmp.isValid());
        QFile f(tmp.filePath("project.yaml"));
        ASSERT_TRUE(f.open(QIODevice::WriteOnly));
        f.write(kProject);
        f.close();
        train(tmp.path(), {});
        train(tmp.path(), {"name=lr3e-3", "train.lr=3e-3"});
        train(tmp.path(), {"name=pp2", "parallel.pp=2", "train.grad_accum=4"});
        QString err;
        ASSERT_TRUE(doc.open(tmp.path(), &err)) << err.toStdString();
        ASSERT_TRUE(QFile::exists(doc.dbPath()));
    }
};

QStringList column(QAbstractItemModel* m, int col) {
    QStringList out;
    for (int r = 0; r < m->rowCount(); ++r) out << m->index(r, col).data().toString();
    return out;
}

}  // namespace

// ----------------------------------------------------------------------------
// Compare

TEST_F(PagesTest, RunModelPassesTesterAndSorts) {
    ComparePage page(&doc);
    QAbstractItemModelTester t1(page.runModel(),
                                QAbstractItemModelTester::FailureReportingMode::Fatal);
    QAbstractItemModelTester t2(page.proxyModel(),
                                QAbstractItemModelTester::FailureReportingMode::Fatal);
    RunTableModel* m = page.runModel();
    ASSERT_EQ(m->rowCount(), 3);
    // the fixed columns, then the config keys that differ among the three runs (lr is one; pp has
    // its fixed column)
    ASSERT_EQ(m->columnCount(), RunTableModel::ColumnCount + m->configKeys().size());
    EXPECT_TRUE(m->configKeys().contains("train.lr"));
    EXPECT_TRUE(m->configKeys().contains("train.grad_accum"));
    EXPECT_FALSE(m->configKeys().contains("parallel.pp"));
    const RunSummary& pp2 = m->runs()[2];
    EXPECT_EQ(pp2.name, "pp2");
    EXPECT_EQ(pp2.status, "completed");
    EXPECT_EQ(pp2.pp, 2);
    EXPECT_EQ(pp2.micro_batch, 4);
    EXPECT_GT(pp2.final_val_loss, 0);
    EXPECT_LE(pp2.best_val_loss, pp2.final_val_loss);
    EXPECT_GT(pp2.median_tok_per_s, 0);
    EXPECT_GT(pp2.peak_bytes_per_gpu, 0);
    EXPECT_GE(pp2.duration_s, 0);
    EXPECT_EQ(m->runs()[0].pp, 1);

    // sort by PP descending: the pipeline run first
    page.runView()->sortByColumn(RunTableModel::PP, Qt::DescendingOrder);
    EXPECT_EQ(column(page.proxyModel(), RunTableModel::Name).first(), "#3 pp2");
    // sort by name ascending: base, lr3e-3, pp2
    page.runView()->sortByColumn(RunTableModel::Name, Qt::AscendingOrder);
    EXPECT_EQ(column(page.proxyModel(), RunTableModel::Name),
              (QStringList{"#1 base", "#2 lr3e-3", "#3 pp2"}));
    // best val loss sorts numerically (ascending order is non-decreasing)
    page.runView()->sortByColumn(RunTableModel::BestVal, Qt::AscendingOrder);
    double prev = -1;
    for (int r = 0; r < 3; ++r) {
        const double v = page.proxyModel()
                             ->index(r, RunTableModel::BestVal)
                             .data(RunTableModel::kSortRole)
                             .toDouble();
        EXPECT_GE(v, prev);
        prev = v;
    }
    // a refresh keeps the model valid under the testers
    page.refresh();
    EXPECT_EQ(m->rowCount(), 3);
}

TEST_F(PagesTest, DiffShowsOnlyDifferingKeysWhenToggled) {
    ComparePage page(&doc);
    page.setSelectedRuns({1, 2});
    EXPECT_EQ(page.selectedRunIds().size(), 2);
    ConfigDiffView* diff = page.diffView();
    diff->setDifferencesOnly(false);
    const QStringList all = diff->visibleKeys();
    EXPECT_GT(all.size(), 20);
    EXPECT_TRUE(all.contains("parallel.pp"));
    diff->setDifferencesOnly(true);
    EXPECT_EQ(diff->visibleKeys(), QStringList{"train.lr"});

    page.setSelectedRuns({1, 3});
    const QStringList d = diff->visibleKeys();
    EXPECT_TRUE(d.contains("parallel.pp")) << d.join(",").toStdString();
    EXPECT_TRUE(d.contains("train.grad_accum"));
    EXPECT_TRUE(d.contains("parallel.world_size (derived)"));
    EXPECT_FALSE(d.contains("train.lr"));
    EXPECT_FALSE(d.contains("model.d_model"));
    diff->setDifferencesOnly(false);
    EXPECT_GT(diff->visibleKeys().size(), d.size());
}

TEST_F(PagesTest, CurvesHoverAndExport) {
    ComparePage page(&doc);
    page.setSelectedRuns({1, 3});
    ASSERT_EQ(page.plot()->graphCount(), 2);
    EXPECT_EQ(page.plot()->graph(0)->data()->size(), 10);  // train/loss at steps 1..10
    EXPECT_DOUBLE_EQ(page.plot()->graph(0)->data()->at(9)->key, 10.0);
    // by tokens: step × micro_batch × grad_accum × dp × seq_len
    page.setXByTokens(true);
    EXPECT_DOUBLE_EQ(page.plot()->graph(0)->data()->at(9)->key, 10.0 * 4 * 32);
    EXPECT_DOUBLE_EQ(page.plot()->graph(1)->data()->at(9)->key, 10.0 * 4 * 4 * 32);
    page.setXByTokens(false);
    page.setMetric("mem/total_bytes");  // any logged metric: per-rank ones from the lowest rank
    EXPECT_EQ(page.plot()->graph(1)->data()->size(), 10);
    EXPECT_GT(page.plot()->graph(1)->data()->at(0)->value, 0);
    page.setMetric("train/loss");
    page.hoverAt(5.5);
    QTableWidget* h = page.hoverTable();
    ASSERT_EQ(h->rowCount(), 2);
    EXPECT_EQ(h->item(0, 1)->text(), "5");
    EXPECT_NE(h->item(0, 3)->text(), "–");  // train/loss
    EXPECT_NE(h->item(1, 4)->text(), "–");  // val/loss at step 5

    const QString csv = tmp.filePath("runs.csv");
    QString err;
    ASSERT_TRUE(page.exportCsv(csv, &err)) << err.toStdString();
    QFile f(csv);
    ASSERT_TRUE(f.open(QIODevice::ReadOnly));
    const QStringList lines = QString::fromUtf8(f.readAll()).split('\n', Qt::SkipEmptyParts);
    ASSERT_GT(lines.size(), 10);
    EXPECT_EQ(lines[0], "run,step,rank,name,value,wall_time");
    QSet<QString> runs;
    for (int i = 1; i < lines.size(); ++i) runs.insert(lines[i].section(',', 0, 0));
    EXPECT_EQ(runs, (QSet<QString>{"1", "3"}));

    ASSERT_TRUE(page.exportChart(tmp.filePath("c.png"), &err)) << err.toStdString();
    ASSERT_TRUE(page.exportChart(tmp.filePath("c.pdf"), &err)) << err.toStdString();
    EXPECT_GT(QFileInfo(tmp.filePath("c.png")).size(), 1000);
    EXPECT_GT(QFileInfo(tmp.filePath("c.pdf")).size(), 1000);
    EXPECT_FALSE(page.exportChart(tmp.filePath("c.bmp"), &err));
    EXPECT_TRUE(err.contains(".png or .pdf")) << err.toStdString();

    page.setSelectedRuns({});
    EXPECT_FALSE(page.exportCsv(csv, &err));
    EXPECT_TRUE(err.contains("select")) << err.toStdString();

    // screenshot: two runs selected, the differences only
    page.setSelectedRuns({1, 2, 3});
    page.diffView()->setDifferencesOnly(true);
    page.resize(1280, 820);
    page.show();
    QApplication::processEvents();
    page.hoverAt(7);
    QApplication::processEvents();
    EXPECT_TRUE(page.grab().save(screenshot_dir() + "/compare_page.png"));
}

TEST_F(PagesTest, CompareWithoutDatabase) {
    QTemporaryDir empty;
    QFile f(empty.filePath("project.yaml"));
    ASSERT_TRUE(f.open(QIODevice::WriteOnly));
    f.write(kProject);
    f.close();
    ProjectDocument d;
    QString err;
    ASSERT_TRUE(d.open(empty.path(), &err));
    ComparePage page(&d);
    TimelinePage tl(&d);
    EXPECT_EQ(page.runModel()->rowCount(), 0);
    EXPECT_EQ(tl.currentRun(), -1);
    EXPECT_TRUE(tl.statusText().contains("does not exist")) << tl.statusText().toStdString();
    EXPECT_FALSE(page.exportCsv(empty.filePath("x.csv"), &err));
}

// ----------------------------------------------------------------------------
// Timeline

TEST_F(PagesTest, TimelineShowsPipelineSpansAndBubbles) {
    TimelinePage page(&doc);
    EXPECT_EQ(page.currentRun(), 3);  // the last run by default
    ASSERT_TRUE(page.selectRun(3));
    page.setStep(5);
    EXPECT_EQ(page.currentStep(), 5);

    const GanttData& m = page.measuredView()->data();
    ASSERT_EQ(m.rowLabels.size(), 2);
    QSet<QString> kinds;
    QSet<int> micros;
    for (const GanttBar& b : m.bars) {
        kinds.insert(b.kind);
        if (b.micro >= 0) micros.insert(b.micro);
        EXPECT_GE(b.end_ms, b.start_ms);
        EXPECT_EQ(b.row, b.stage);
    }
    EXPECT_EQ(kinds, (QSet<QString>{"forward", "backward", "recv", "optimizer"}));
    EXPECT_EQ(micros, (QSet<int>{0, 1, 2, 3}));

    // simulated from this step's measured times: 2 stages × 4 micro-batches × (forward,
    // backward), a critical path and bubbles (the simulation itself: schedule_sim_test)
    const GanttData& ideal = page.idealView()->data();
    EXPECT_EQ(ideal.bars.size(), 16);
    EXPECT_GT(ideal.length_ms, 0);
    EXPECT_TRUE(page.simulatedFromMeasured());
    EXPECT_TRUE(std::any_of(ideal.bars.begin(), ideal.bars.end(),
                            [](const GanttBar& b) { return b.critical; }));
    EXPECT_FALSE(ideal.gaps.isEmpty());
    EXPECT_GT(page.simulatedBubble(), 0.0);

    auto sched = tessera::schedule_build(tessera::ScheduleKind::one_f_one_b, 2, 4, 1);
    EXPECT_NEAR(page.predictedBubble(), tessera::schedule_bubble_fraction(sched, 2, 1, 2), 1e-12);
    EXPECT_GT(page.predictedBubble(), 0.05);
    EXPECT_GT(page.measuredBubble(), 0.0);
    EXPECT_LT(page.measuredBubble(), 1.0);
    EXPECT_GE(page.loggedRankIdle(), 0.0);  // the runtime's own pipeline/rank_idle metric

    // hover: the centre of a forward bar names its stage, micro-batch, kind and duration
    page.resize(1200, 640);
    page.show();
    QApplication::processEvents();
    GanttView* v = page.measuredView();
    int fwd = -1;
    for (int i = 0; i < m.bars.size(); ++i)
        if (m.bars[i].kind == "forward" && m.bars[i].stage == 1) fwd = i;
    ASSERT_GE(fwd, 0);
    const GanttBar& b = m.bars[fwd];
    // zoom on the bar so it is wide enough to hit
    v->setTimeRange(b.start_ms - b.duration_ms(), b.end_ms + b.duration_ms());
    const QPoint pos = v->barCenter(fwd);
    EXPECT_EQ(v->barAt(QPoint(5, pos.y())), -1);  // the label column holds no bar
    const int hit = v->barAt(pos);
    ASSERT_EQ(hit, fwd);
    const QString text = v->barDescription(hit);
    EXPECT_TRUE(text.contains("stage 1")) << text.toStdString();
    EXPECT_TRUE(text.contains("forward")) << text.toStdString();
    EXPECT_TRUE(text.contains(QString("micro-batch %1").arg(b.micro))) << text.toStdString();
    EXPECT_TRUE(text.contains("ms"));

    // wheel zoom in keeps the anchor inside and narrows the range
    v->resetZoom();
    const double span0 = v->viewEnd() - v->viewStart();
    v->zoomAt(0.5, m.length_ms / 2);
    EXPECT_NEAR(v->viewEnd() - v->viewStart(), span0 / 2, 1e-9);
    EXPECT_NEAR(page.idealView()->viewEnd() - page.idealView()->viewStart(), span0 / 2, 1e-9);
    v->resetZoom();
    QApplication::processEvents();
    EXPECT_TRUE(page.grab().save(screenshot_dir() + "/timeline_page.png"));

    // a single-rank run: no pipeline, no predicted bubble
    ASSERT_TRUE(page.selectRun(1));
    page.setStep(3);
    EXPECT_FALSE(page.measuredView()->data().bars.isEmpty());
    EXPECT_DOUBLE_EQ(page.predictedBubble(), 0.0);
}

// zb-h1 on two CPU ranks: the measured step shows B and W spans of their own (no whole backward),
// drawn in colours of their own with legend entries, the ideal schedule has F, B and W bars, and
// the predicted bubble is the schedule's, below 1F1B's on the same plan.
TEST(TimelineZbH1, ShowsBAndWSpans) {
    ensure_app();
    QTemporaryDir tmp;
    ASSERT_TRUE(tmp.isValid());
    QFile f(tmp.filePath("project.yaml"));
    ASSERT_TRUE(f.open(QIODevice::WriteOnly));
    f.write(kProject);
    f.close();
    train(tmp.path(),
          {"name=zb", "parallel.pp=2", "train.grad_accum=4", "parallel.schedule=zb-h1"});
    ProjectDocument doc;
    QString err;
    ASSERT_TRUE(doc.open(tmp.path(), &err)) << err.toStdString();
    TimelinePage page(&doc);
    ASSERT_TRUE(page.selectRun(1));
    page.setStep(5);
    const GanttData& m = page.measuredView()->data();
    ASSERT_EQ(m.rowLabels.size(), 2);
    QMap<QString, int> kinds;
    for (const GanttBar& b : m.bars) kinds[b.kind]++;
    EXPECT_EQ(kinds.value("forward"), 8);
    EXPECT_EQ(kinds.value("backward_input"), 8);
    EXPECT_EQ(kinds.value("backward_weight"), 8);
    EXPECT_EQ(kinds.value("backward"), 0);
    const GanttData& ideal = page.idealView()->data();
    EXPECT_EQ(ideal.bars.size(), 24);  // 2 stages × 4 micro-batches × (F, B, W)
    auto zb = tessera::schedule_build(tessera::ScheduleKind::zb_h1, 2, 4, 1);
    auto f1b = tessera::schedule_build(tessera::ScheduleKind::one_f_one_b, 2, 4, 1);
    EXPECT_NEAR(page.predictedBubble(), tessera::schedule_bubble_fraction(zb, 2, 1, 1, 1), 1e-12);
    EXPECT_LT(page.predictedBubble(), tessera::schedule_bubble_fraction(f1b, 2, 1, 1, 1));
    EXPECT_GT(page.measuredBubble(), 0.0);
    // distinct colours, and the legend names both
    const QColor bc = GanttView::kindColor("backward_input"),
                 wc = GanttView::kindColor("backward_weight");
    EXPECT_NE(bc, wc);
    EXPECT_NE(bc, GanttView::kindColor("backward"));
    EXPECT_NE(wc, GanttView::kindColor("forward"));
    EXPECT_NE(bc, GanttView::kindColor("other"));  // not the fallback grey
    EXPECT_NE(wc, GanttView::kindColor("other"));
    QStringList legend;
    for (QLabel* l : page.findChildren<QLabel*>()) legend << l->text();
    EXPECT_TRUE(legend.contains("backward input")) << legend.join(", ").toStdString();
    EXPECT_TRUE(legend.contains("backward weight")) << legend.join(", ").toStdString();
    page.resize(1200, 640);
    page.show();
    QApplication::processEvents();
    EXPECT_TRUE(page.grab().save(screenshot_dir() + "/timeline_page_zb_h1.png"));
}
