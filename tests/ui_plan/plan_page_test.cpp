// The Plan page offscreen: a stage-boundary drag edits parallel.stages as one undo step and moves
// the prediction; undo/redo restore both; Balance finds a known optimum; an invalid tp shows its
// reason next to the control; a suggestion applies as an undoable edit. Also renders the page to
// PNGs (build dir) for a look. The answers: what fits, the policy advice and the stage-imbalance
// fix (one click, undoable), pinned candidates, suggestions for a global batch with reasons.
#include "ui/plan/plan_page.h"

#include <gtest/gtest.h>

#include <QAbstractItemModelTester>
#include <QApplication>
#include <QComboBox>
#include <QElapsedTimer>
#include <QLabel>
#include <QListWidget>
#include <QPushButton>
#include <QRegularExpression>
#include <QScrollArea>
#include <QStyle>
#include <QStyleOptionComboBox>
#include <QTemporaryDir>
#include <QTest>
#include <QUndoStack>

#include "engine/config/config.h"
#include "engine/core/error.h"
#include "engine/plan/estimator.h"
#include "engine/plan/plan_advice.h"
#include "tests/support/paths.h"
#include "ui/common/project_document.h"
#include "ui/common/qcustomplot_qt.h"
#include "ui/plan/candidates_view.h"
#include "ui/plan/gpu_grid.h"
#include "ui/plan/memory_chart.h"
#include "ui/plan/partition_editor.h"

using namespace tessera;
using namespace tessera::studio;

namespace {

RunConfig gpt_config(const std::string& model, const std::vector<std::string>& sets) {
    return config_parse(
        str_cat("name: t\nmodel: {", model, "}\ndata: {dataset: brown}\nruntime: {device: cuda}\n"),
        "t.yaml", sets);
}

struct Fixture {
    QTemporaryDir dir;
    ProjectDocument doc;
    std::unique_ptr<PlanPage> page;
    explicit Fixture(const RunConfig& cfg) {
        doc.create(dir.path() + "/p", cfg);
        page = std::make_unique<PlanPage>(&doc);
        page->resize(1400, 980);
        page->setDeviceName("H200");
        page->show();
    }
};

// The page's background work (its answers, a plan search) done and shown: events processed
// until nothing is pending (30 s at most).
void settle(PlanPage& page) {
    QElapsedTimer t;
    t.start();
    while ((page.answersPending() || page.searching()) && t.elapsed() < 30000) QTest::qWait(5);
    QApplication::processEvents();
}

void drag(QWidget* w, int x0, const std::vector<int>& xs, int y) {
    QTest::mousePress(w, Qt::LeftButton, Qt::NoModifier, QPoint(x0, y));
    for (int x : xs) QTest::mouseMove(w, QPoint(x, y));
    QTest::mouseRelease(w, Qt::LeftButton, Qt::NoModifier, QPoint(xs.back(), y));
}

}  // namespace

TEST(PlanPage, DragBoundaryIsOneUndoableEditAndMovesThePrediction) {
    Fixture f(gpt_config("preset: gpt2, vocab: gpt2",
                         {"parallel.pp=2", "parallel.stages=[6, 6]", "train.grad_accum=8"}));
    PartitionEditor* ed = f.page->partitionEditor();
    ASSERT_EQ(ed->blocksPerChunk(), (std::vector<int>{6, 6}));
    const QString before = f.page->predictionText();
    ASSERT_TRUE(f.page->hasEstimate());
    const int undo0 = f.doc.undoStack()->count();

    int y = ed->laneCenterY(0);
    drag(ed, ed->boundaryX(0), {ed->blockEdgeX(7), ed->blockEdgeX(8)}, y);
    EXPECT_EQ(f.doc.config().parallel.stages, (std::vector<int>{8, 4}));
    EXPECT_EQ(f.doc.undoStack()->count(), undo0 + 1);  // the whole drag is one step
    const QString after = f.page->predictionText();
    EXPECT_NE(after, before);

    // a second drag is a second step
    drag(ed, ed->boundaryX(0), {ed->blockEdgeX(9)}, y);
    EXPECT_EQ(f.doc.config().parallel.stages, (std::vector<int>{9, 3}));
    EXPECT_EQ(f.doc.undoStack()->count(), undo0 + 2);

    f.doc.undoStack()->undo();
    EXPECT_EQ(f.doc.config().parallel.stages, (std::vector<int>{8, 4}));
    EXPECT_EQ(f.page->predictionText(), after);
    f.doc.undoStack()->undo();
    EXPECT_EQ(f.doc.config().parallel.stages, (std::vector<int>{6, 6}));
    EXPECT_EQ(f.page->predictionText(), before);
    EXPECT_EQ(ed->blocksPerChunk(), (std::vector<int>{6, 6}));
    f.doc.undoStack()->redo();
    EXPECT_EQ(f.doc.config().parallel.stages, (std::vector<int>{8, 4}));
    EXPECT_EQ(f.page->predictionText(), after);
}

TEST(PlanPage, DragKeepsEveryStageNonEmpty) {
    Fixture f(gpt_config("preset: gpt2", {"parallel.pp=3", "parallel.stages=[4, 4, 4]"}));
    PartitionEditor* ed = f.page->partitionEditor();
    drag(ed, ed->boundaryX(1), {ed->blockEdgeX(2), ed->blockEdgeX(0), 0}, ed->laneCenterY(1));
    EXPECT_EQ(f.doc.config().parallel.stages, (std::vector<int>{4, 1, 7}));
}

// Dragging a block onto the next stage's lane moves it (and the blocks between it and the
// boundary) there, as one undoable edit; a drop that would empty a stage changes nothing.
TEST(PlanPage, DragBlockOntoAnotherLaneMovesIt) {
    Fixture f(gpt_config("preset: gpt2", {"parallel.pp=2", "parallel.stages=[6, 6]"}));
    PartitionEditor* ed = f.page->partitionEditor();
    const int undo0 = f.doc.undoStack()->count();
    // block 4 (the fifth, in stage 0) dropped on stage 1's lane: blocks 4 and 5 move
    int x = (ed->blockEdgeX(4) + ed->blockEdgeX(5)) / 2;  // blockEdgeX(b): left edge of block b
    QTest::mousePress(ed, Qt::LeftButton, Qt::NoModifier, QPoint(x, ed->laneCenterY(0)));
    QTest::mouseRelease(ed, Qt::LeftButton, Qt::NoModifier, QPoint(x, ed->laneCenterY(1)));
    EXPECT_EQ(f.doc.config().parallel.stages, (std::vector<int>{4, 8}));
    EXPECT_EQ(f.doc.undoStack()->count(), undo0 + 1);
    // block 0 dropped on stage 1 would leave stage 0 empty: refused
    x = (ed->blockEdgeX(0) + ed->blockEdgeX(1)) / 2;
    QTest::mousePress(ed, Qt::LeftButton, Qt::NoModifier, QPoint(x, ed->laneCenterY(0)));
    QTest::mouseRelease(ed, Qt::LeftButton, Qt::NoModifier, QPoint(x, ed->laneCenterY(1)));
    EXPECT_EQ(f.doc.config().parallel.stages, (std::vector<int>{4, 8}));
    f.doc.undoStack()->undo();
    EXPECT_EQ(f.doc.config().parallel.stages, (std::vector<int>{6, 6}));
}

TEST(PlanPage, BalanceFindsTheKnownOptimumAsOneEdit) {
    // gpt2 with the GPT-2 vocabulary: the LM head costs ~4.5 blocks, so the balanced 2-stage
    // split puts 8 blocks before the head's stage: [8, 4] (stage times 8 vs 4 + 4.5 blocks)
    Fixture f(gpt_config("preset: gpt2, vocab: gpt2",
                         {"parallel.pp=2", "parallel.stages=[2, 10]", "train.grad_accum=8"}));
    const int undo0 = f.doc.undoStack()->count();
    f.page->balanceStages();
    EXPECT_EQ(f.doc.config().parallel.stages, (std::vector<int>{8, 4}))
        << f.page->balanceMessage().toStdString();
    EXPECT_EQ(f.doc.undoStack()->count(), undo0 + 1);
    EXPECT_TRUE(f.page->balanceMessage().startsWith("balanced: 8, 4"));
    f.doc.undoStack()->undo();
    EXPECT_EQ(f.doc.config().parallel.stages, (std::vector<int>{2, 10}));
}

TEST(PlanPage, BalanceSaysWhyNothingFits) {
    Fixture f(gpt_config("preset: gpt2-xl", {"parallel.pp=2", "train.micro_batch=64"}));
    f.page->setDeviceName("A100-40GB");
    auto before = f.doc.config();
    f.page->balanceStages();
    EXPECT_EQ(f.doc.config(), before);
    EXPECT_TRUE(f.page->balanceMessage().startsWith("no balanced partition: "))
        << f.page->balanceMessage().toStdString();
    EXPECT_NE(f.page->overCapacityText().indexOf("over capacity by"), -1);
    EXPECT_NE(f.page->overCapacityText().indexOf("dominates"), -1);
    EXPECT_FALSE(f.page->planValid());
}

TEST(PlanPage, InvalidTpShowsItsReasonNextToTheControl) {
    Fixture f(gpt_config("preset: gpt2", {"parallel.tp=2"}));
    EXPECT_TRUE(f.page->planValid()) << f.page->validityText().toStdString();
    EXPECT_TRUE(f.page->issueText("parallel.tp").isEmpty());
    f.doc.edit("Set tp", [](RunConfig& c) { c.parallel.tp = 5; });
    EXPECT_NE(f.page->issueText("parallel.tp").indexOf("does not divide the 12 attention heads"),
              -1)
        << f.page->issueText("parallel.tp").toStdString();
    auto* label = f.page->findChild<QLabel*>("issue:parallel.tp");
    ASSERT_NE(label, nullptr);
    EXPECT_TRUE(label->isVisible());
    EXPECT_FALSE(f.page->planValid());
    EXPECT_NE(f.page->validityText().indexOf("invalid"), -1);
    // the world no longer matches the GPUs shown: that is the dp control's issue
    f.page->setGpuCount(8);
    EXPECT_NE(f.page->issueText("parallel.dp").indexOf("but 8 are available"), -1);
    f.doc.undoStack()->undo();
    f.page->setGpuCount(2);
    EXPECT_TRUE(f.page->issueText("parallel.tp").isEmpty());
    EXPECT_FALSE(label->isVisible());
}

TEST(PlanPage, SuggestionAppliesAsOneUndoableEdit) {
    Fixture f(gpt_config("preset: gpt2-large",
                         {"parallel.dp=16", "train.micro_batch=4", "train.grad_accum=2"}));
    f.page->suggestPlans();
    settle(*f.page);
    QListWidget* list = f.page->suggestionList();
    ASSERT_GE(list->count(), 1);
    EXPECT_LE(list->count(), 5);
    const RunConfig before = f.doc.config();
    f.page->applySuggestion(list->count() - 1);
    const auto& p = f.doc.config().parallel;
    EXPECT_EQ(p.dp * p.tp * p.pp, 16);
    EXPECT_EQ(f.doc.config().train.micro_batch * f.doc.config().train.grad_accum * p.dp, 128);
    EXPECT_TRUE(f.page->planValid()) << f.page->validityText().toStdString();
    f.doc.undoStack()->undo();
    EXPECT_EQ(f.doc.config(), before);
}

TEST(PlanPage, GridFollowsMeshOrder) {
    Fixture f(gpt_config("preset: gpt2", {"parallel.dp=2", "parallel.tp=2", "parallel.pp=2"}));
    // rank = tp + TP (dp + DP pp): GPU 5 is dp0, tp1, stage 1
    QString tip = f.page->gpuGrid()->cellToolTip(5);
    EXPECT_NE(tip.indexOf("global rank 5"), -1);
    EXPECT_NE(tip.indexOf("stage (pp) 1, TP rank 1, DP rank 0"), -1) << tip.toStdString();
}

// The Llama family on the Plan page: Llama 3.1 8B over 8 H200s (tp 4 x pp 2, the shipped
// project) partitions its 32 blocks over two stages and predicts per GPU; moving blocks between
// the stages is one undoable edit that moves the prediction.
TEST(PlanPage, Llama8BOverEightGpusPartitionsAndPredicts) {
    ProjectDocument doc;
    QString err;
    ASSERT_TRUE(doc.open(QString(TESSERA_TESTS_DIR) + "/../projects/llama-3.1-8b-8xh200", &err))
        << err.toStdString();
    PlanPage page(&doc);
    page.resize(1400, 980);
    page.setDeviceName("H200");
    page.show();
    QApplication::processEvents();
    ASSERT_TRUE(page.hasEstimate()) << page.predictionText().toStdString();
    const std::vector<int> chunks = page.partitionEditor()->blocksPerChunk();
    ASSERT_EQ(chunks.size(), 2u);
    EXPECT_EQ(chunks[0] + chunks[1], 32);
    const QString before = page.predictionText();
    EXPECT_FALSE(before.isEmpty());
    const int undo0 = doc.undoStack()->count();
    doc.edit("stages", [](RunConfig& c) { c.parallel.stages = {20, 12}; });
    QApplication::processEvents();
    EXPECT_EQ(page.partitionEditor()->blocksPerChunk(), (std::vector<int>{20, 12}));
    EXPECT_NE(page.predictionText(), before) << "an unbalanced split must change the prediction";
    EXPECT_EQ(doc.undoStack()->count(), undo0 + 1);
    doc.undoStack()->undo();
    QApplication::processEvents();
    EXPECT_EQ(page.predictionText(), before);
    EXPECT_TRUE(page.grab().save(QString(TESSERA_BIN_DIR) + "/../plan_page_llama_8b_8gpu.png"));
}

// The precision is a plan control: fp8 is one undoable edit of runtime.precision, and the
// prediction follows it (Llama-3.2-1B's MLP GEMMs are past the FP8 cut-off).
// zb-h1 in the schedule combo: one undoable edit; the prediction's bubble falls below 1F1B's, and
// the estimate holds more activations (a stage keeps up to pp micro-batches until their W).
TEST(PlanPage, ZbH1ScheduleIsOneUndoableEditAndLowersTheBubble) {
    Fixture f(gpt_config("preset: gpt2",
                         {"runtime.precision=bf16", "parallel.pp=4", "train.grad_accum=8"}));
    auto* combo = f.page->findChild<QComboBox*>("schedule");
    ASSERT_NE(combo, nullptr);
    EXPECT_EQ(combo->currentText(), "1f1b");
    ASSERT_TRUE(f.page->hasEstimate());
    const QString before = f.page->predictionText();
    const double bubble0 = estimate_plan(f.doc.config(), device_spec("H200")).bubble_fraction;
    const int undo0 = f.doc.undoStack()->count();
    combo->setCurrentText("zb-h1");
    QApplication::processEvents();
    EXPECT_EQ(f.doc.config().parallel.schedule, "zb-h1");
    EXPECT_EQ(f.doc.undoStack()->count(), undo0 + 1);
    ASSERT_TRUE(f.page->hasEstimate());
    EXPECT_NE(f.page->predictionText(), before);
    const PlanEstimate zb = estimate_plan(f.doc.config(), device_spec("H200"));
    EXPECT_NEAR(bubble0, 3.0 / 11.0, 1e-9);
    EXPECT_NEAR(zb.bubble_fraction, 3.0 / 27.0, 1e-9);
    f.doc.undoStack()->undo();
    QApplication::processEvents();
    EXPECT_EQ(combo->currentText(), "1f1b");
    EXPECT_EQ(f.page->predictionText(), before);
}

TEST(PlanPage, PrecisionIsOneUndoableEditAndMovesThePrediction) {
    Fixture f(gpt_config("preset: llama-3.2-1b, seq_len: 2048",
                         {"runtime.precision=bf16", "train.micro_batch=8"}));
    auto* combo = f.page->findChild<QComboBox*>("precision");
    ASSERT_NE(combo, nullptr);
    EXPECT_EQ(combo->currentText(), "bf16");
    EXPECT_TRUE(combo->isEnabled());
    ASSERT_TRUE(f.page->hasEstimate());
    const QString before = f.page->predictionText();
    const int undo0 = f.doc.undoStack()->count();
    combo->setCurrentText("fp8");
    QApplication::processEvents();
    EXPECT_EQ(f.doc.config().runtime.precision, "fp8");
    EXPECT_EQ(f.doc.undoStack()->count(), undo0 + 1);
    EXPECT_NE(f.page->predictionText(), before) << "FP8 GEMMs must change the predicted step";
    f.doc.undoStack()->undo();
    QApplication::processEvents();
    EXPECT_EQ(combo->currentText(), "bf16");
    EXPECT_EQ(f.page->predictionText(), before);
    // CPU ranks: fp32 only, the control says why
    f.doc.edit("cpu", [](RunConfig& c) { c.runtime.device = "cpu", c.runtime.precision = "fp32"; });
    QApplication::processEvents();
    EXPECT_FALSE(combo->isEnabled());
}

// CPU ranks are ranks on a host, not GPUs: the controls, the mesh, the prediction and the chart
// say "rank" for device cpu and "GPU" for a GPU.
TEST(PlanPage, CpuRanksAreCalledRanks) {
    Fixture f(config_parse("name: t\nmodel: {preset: gpt-tiny}\ndata: {dataset: brown}\n", "t.yaml",
                           {"parallel.dp=2"}));
    auto labels = [&] {
        QStringList texts;
        for (const QLabel* l : f.page->findChildren<QLabel*>()) texts << l->text();
        return texts;
    };
    f.page->setDeviceName("cpu");
    QApplication::processEvents();
    ASSERT_TRUE(f.page->hasEstimate());
    EXPECT_TRUE(labels().contains("Ranks available"));
    EXPECT_TRUE(labels().contains("Ranks per host"));
    EXPECT_FALSE(labels().contains("GPUs available"));
    EXPECT_EQ(f.page->gpuGrid()->rowLabel(0), "host 0");
    EXPECT_TRUE(f.page->gpuGrid()->cellToolTip(1).startsWith("host 0 rank 1"))
        << f.page->gpuGrid()->cellToolTip(1).toStdString();
    auto* prediction = f.page->findChild<QLabel*>("prediction");
    ASSERT_NE(prediction, nullptr);
    EXPECT_NE(prediction->text().indexOf("per step (all ranks)"), -1)
        << prediction->text().toStdString();
    auto said = [&](const QString& part) {
        for (const QString& t : labels())
            if (t.contains(part)) return true;
        return false;
    };
    EXPECT_TRUE(said("compare their memory per rank and step time"));
    EXPECT_FALSE(said("per GPU"));
    f.page->setDeviceName("H200");
    QApplication::processEvents();
    EXPECT_TRUE(labels().contains("GPUs available"));
    EXPECT_TRUE(labels().contains("GPUs per node"));
    EXPECT_EQ(f.page->gpuGrid()->rowLabel(0), "node 0");
    EXPECT_NE(prediction->text().indexOf("per step (all GPUs)"), -1)
        << prediction->text().toStdString();
    EXPECT_TRUE(said("compare their memory per GPU and step time"));
}

// "What fits" next to the controls: the estimator's own limits for the plan, updated after an edit.
TEST(PlanPage, WhatFitsShowsTheEstimatorsLimits) {
    Fixture f(gpt_config("preset: gpt2-large", {"runtime.precision=bf16"}));
    f.page->updateAnswers();
    settle(*f.page);
    const FitLimits lim = plan_fit_limits(f.doc.config(), device_spec("H200"));
    ASSERT_GT(lim.micro_batch, 1);
    const QString t = f.page->fitsText();
    EXPECT_NE(t.indexOf(QString("micro-batch up to <b>%1</b>").arg(lim.micro_batch)), -1)
        << t.toStdString();
    EXPECT_NE(t.indexOf(QString("sequence up to <b>%1</b>").arg(lim.seq_len)), -1)
        << t.toStdString();
    // the label's two lines are not clipped by the form
    QLabel* label = f.page->findChild<QLabel*>("whatFits");
    ASSERT_NE(label, nullptr);
    QApplication::processEvents();
    EXPECT_GE(label->height(), label->sizeHint().height());
    // and the controls' column is not wider than its scroll area (its right edge was cut)
    auto* scroll = f.page->findChild<QScrollArea*>();
    ASSERT_NE(scroll, nullptr);
    EXPECT_LE(scroll->widget()->minimumSizeHint().width(), scroll->viewport()->width());
    f.page->setDeviceName("A100-40GB");
    f.page->updateAnswers();
    settle(*f.page);
    const FitLimits small = plan_fit_limits(f.doc.config(), device_spec("A100-40GB"));
    EXPECT_LT(small.micro_batch, lim.micro_batch);
    EXPECT_NE(f.page->fitsText().indexOf(QString("up to <b>%1</b>").arg(small.micro_batch)), -1);
}

// The cheapest policy that fits, applied with one click as one undoable edit.
TEST(PlanPage, PolicyAdviceAppliesAndUndoes) {
    Fixture f(gpt_config("preset: gpt2-xl", {"parallel.dp=8", "train.micro_batch=16",
                                             "parallel.zero=1", "runtime.precision=bf16"}));
    f.page->setDeviceName("A100-40GB");
    f.page->updateAnswers();
    settle(*f.page);
    ASSERT_FALSE(f.page->estimate().fits);
    ASSERT_TRUE(f.page->policyAdvice().found) << f.page->policyText().toStdString();
    auto* apply = f.page->findChild<QPushButton*>("applyPolicy");
    ASSERT_NE(apply, nullptr);
    EXPECT_TRUE(apply->isVisible());
    const RunConfig before = f.doc.config();
    const int undo0 = f.doc.undoStack()->count();
    apply->click();
    QApplication::processEvents();
    EXPECT_EQ(f.doc.undoStack()->count(), undo0 + 1);
    EXPECT_TRUE(f.page->estimate().fits) << f.page->validityText().toStdString();
    EXPECT_EQ(f.doc.config().parallel.recompute, f.page->policyAdvice().policy.recompute);
    f.page->updateAnswers();
    settle(*f.page);
    EXPECT_FALSE(apply->isVisible()) << "the applied policy is the current plan";
    f.doc.undoStack()->undo();
    EXPECT_EQ(f.doc.config(), before);
}

// A stage made the outlier by the head is named at the partition, and its fix is one click,
// undoable.
TEST(PlanPage, StageImbalanceFixIsOneUndoableClick) {
    Fixture f(gpt_config("preset: llama-3.2-1b",
                         {"parallel.pp=4", "parallel.stages=[4, 4, 4, 4]", "train.grad_accum=8",
                          "train.micro_batch=2", "runtime.precision=bf16"}));
    f.page->updateAnswers();
    settle(*f.page);
    const StageImbalance& im = f.page->stageImbalance();
    ASSERT_TRUE(im.found) << f.page->imbalanceText().toStdString();
    EXPECT_NE(f.page->imbalanceText().indexOf(QString("stage %1 holds the").arg(im.stage)), -1);
    auto* apply = f.page->findChild<QPushButton*>("applyImbalance");
    ASSERT_NE(apply, nullptr);
    ASSERT_TRUE(apply->isVisible());
    // marked at that stage: its lane in the partition editor carries the tag
    PartitionEditor* editor = f.page->partitionEditor();
    EXPECT_EQ(editor->outlierStage(), im.stage);
    EXPECT_TRUE(editor->outlierTag().startsWith(QString::fromStdString(im.metric) + " +"))
        << editor->outlierTag().toStdString();
    EXPECT_TRUE(editor->outlierTag().contains(QString::fromStdString(im.cause)));
    QApplication::processEvents();
    EXPECT_TRUE(f.page->grab().save(QString(TESSERA_BIN_DIR) + "/../plan_page_imbalance.png"));
    const std::vector<int> fixed = im.stages;
    const int outlier = im.stage;  // im is the page's: it changes with the plan
    apply->click();
    QApplication::processEvents();
    EXPECT_EQ(f.doc.config().parallel.stages, fixed);
    EXPECT_EQ(f.page->partitionEditor()->blocksPerChunk(), fixed);
    f.page->updateAnswers();
    settle(*f.page);
    EXPECT_EQ(editor->outlierStage(), f.page->stageImbalance().stage)
        << "the lane follows the advice (-1: balanced)";
    EXPECT_NE(editor->outlierStage(), outlier) << f.page->imbalanceText().toStdString();
    f.doc.undoStack()->undo();
    QApplication::processEvents();
    EXPECT_EQ(f.doc.config().parallel.stages, (std::vector<int>{4, 4, 4, 4}));
}

// Pinned candidates: at most three, the oldest drops out, each drawn with its own estimate.
TEST(PlanPage, PinnedCandidatesKeepThreeSideBySide) {
    Fixture f(gpt_config("preset: gpt2-large", {"parallel.dp=4", "parallel.pp=2",
                                                "train.grad_accum=8", "runtime.precision=bf16"}));
    auto* pin = f.page->findChild<QPushButton*>("pinPlan");
    ASSERT_NE(pin, nullptr);
    std::vector<double> steps;
    for (int mb : {1, 2, 4, 8}) {
        f.doc.edit("mb", [mb](RunConfig& c) { c.train.micro_batch = mb; });
        QApplication::processEvents();
        steps.push_back(f.page->estimate().step_s);
        pin->click();
    }
    const auto& c = f.page->candidatesView()->candidates();
    ASSERT_EQ(c.size(), 3u);
    EXPECT_TRUE(f.page->candidatesView()->isVisible());
    f.page->updateAnswers();
    settle(*f.page);
    for (int i = 0; i < 3; ++i) {
        EXPECT_DOUBLE_EQ(c[i].estimate.step_s, steps[i + 1]);
        EXPECT_NEAR(c[i].parts.step_s, steps[i + 1], 1e-9 * steps[i + 1]);
        EXPECT_NE(c[i].title.indexOf(QString("mb %1 x").arg(1 << (i + 1))), -1)
            << c[i].title.toStdString();
    }
    QApplication::processEvents();
    EXPECT_TRUE(f.page->grab().save(QString(TESSERA_BIN_DIR) + "/../plan_page_candidates.png"));
}

// The suggestions for a target global batch: the list's model under QAbstractItemModelTester,
// each plan after the first saying why it is slower than the one above.
TEST(PlanPage, SuggestionsForAGlobalBatchSayWhyEachLoses) {
    Fixture f(gpt_config("preset: gpt2-large", {"parallel.dp=16", "train.micro_batch=4",
                                                "train.grad_accum=2", "runtime.precision=bf16"}));
    QAbstractItemModelTester tester(f.page->suggestionList()->model(),
                                    QAbstractItemModelTester::FailureReportingMode::Fatal);
    f.page->setGlobalBatch(256);
    f.page->suggestPlans();
    settle(*f.page);
    QListWidget* list = f.page->suggestionList();
    ASSERT_GE(list->count(), 2);
    for (int i = 1; i < list->count(); ++i)
        EXPECT_NE(list->item(i)->text().indexOf("slower than the one above: "), -1)
            << list->item(i)->text().toStdString();
    EXPECT_EQ(list->item(0)->text().indexOf("slower than"), -1);
    f.page->applySuggestion(0);
    const auto& c = f.doc.config();
    EXPECT_EQ(c.train.micro_batch * c.train.grad_accum * c.parallel.dp, 256);
}

// A search over 16 GPUs takes seconds: it runs off the GUI thread (the call returns with the
// search going, the button offering to stop it, the message counting layouts), and Stop ends it
// without a list; the answers beside the controls are worked out off the GUI thread too, the
// ones shown greyed until the new ones arrive.
TEST(PlanPage, LongSearchesRunOffTheGuiThreadAndStop) {
    Fixture f(gpt_config("preset: gpt2-large", {"parallel.dp=16", "train.micro_batch=4",
                                                "train.grad_accum=2", "runtime.precision=bf16"}));
    settle(*f.page);
    auto* button = f.page->findChild<QPushButton*>("suggestButton");
    ASSERT_NE(button, nullptr);
    f.page->setGlobalBatch(256);
    f.page->suggestPlans();
    EXPECT_TRUE(f.page->searching());
    EXPECT_EQ(button->text(), "Stop");
    EXPECT_EQ(f.page->suggestionList()->count(), 0);
    QTest::qWait(300);
    EXPECT_TRUE(f.page->suggestionMessage().startsWith("searching"))
        << f.page->suggestionMessage().toStdString();
    f.page->suggestPlans();  // Stop
    settle(*f.page);
    EXPECT_FALSE(f.page->searching());
    EXPECT_EQ(f.page->suggestionMessage(), "search stopped");
    EXPECT_EQ(f.page->suggestionList()->count(), 0);
    EXPECT_EQ(button->text(), "Suggest plans");

    auto* fits = f.page->findChild<QLabel*>("whatFits");
    ASSERT_NE(fits, nullptr);
    const QString before = f.page->fitsText();
    f.page->setGlobalBatch(256);
    f.doc.edit("micro-batch", [](RunConfig& c) { c.train.micro_batch = 8; });
    f.page->updateAnswers();
    EXPECT_TRUE(f.page->answersPending());
    EXPECT_FALSE(fits->isEnabled()) << "the shown answers are greyed while the new ones come";
    settle(*f.page);
    EXPECT_TRUE(fits->isEnabled());
    EXPECT_NE(f.page->fitsText().indexOf("(at micro-batch 8)"), -1)
        << f.page->fitsText().toStdString();
    EXPECT_NE(f.page->fitsText(), before);
}

// Opening another project while a search runs stops it: no list for the project before.
TEST(PlanPage, OpeningAnotherProjectStopsTheSearch) {
    Fixture f(gpt_config("preset: gpt2-large", {"parallel.dp=16", "train.micro_batch=4",
                                                "train.grad_accum=2", "runtime.precision=bf16"}));
    settle(*f.page);
    QString err;
    ASSERT_TRUE(f.doc.save(&err)) << err.toStdString();
    f.page->setGlobalBatch(256);
    f.page->suggestPlans();
    ASSERT_TRUE(f.page->searching());
    ASSERT_TRUE(f.doc.open(QString(TESSERA_TESTS_DIR) + "/../projects/quickstart", &err))
        << err.toStdString();
    settle(*f.page);
    EXPECT_FALSE(f.page->searching());
    EXPECT_EQ(f.page->suggestionList()->count(), 0);
    EXPECT_EQ(f.page->findChild<QPushButton*>("suggestButton")->text(), "Suggest plans");
}

// Fixes from the screenshots: eight per-stage recompute combos were cut to "se"; the capacity
// label sat on the bars.
TEST(PlanPage, RecomputeCombosShowTheirTextAndCapacityLabelClearsTheBars) {
    Fixture f(gpt_config("preset: gpt2-large",
                         {"parallel.pp=8", "train.grad_accum=16", "runtime.precision=bf16",
                          "parallel.recompute=[none, selective, full, none, selective, "
                          "full, none, selective]"}));
    QApplication::processEvents();
    auto combos = f.page->findChildren<QComboBox*>(QRegularExpression("^recompute\\d+$"));
    ASSERT_EQ(combos.size(), 8);
    for (QComboBox* c : combos) {
        QStyleOptionComboBox opt;
        opt.initFrom(c);
        const QRect text =
            c->style()->subControlRect(QStyle::CC_ComboBox, &opt, QStyle::SC_ComboBoxEditField, c);
        EXPECT_GE(text.width(), c->fontMetrics().horizontalAdvance("selective"))
            << c->objectName().toStdString();
    }
    f.page->updateAnswers();
    settle(*f.page);
    QApplication::processEvents();
    auto* scroll = f.page->findChild<QScrollArea*>();
    ASSERT_NE(scroll, nullptr);
    EXPECT_LE(scroll->widget()->minimumSizeHint().width(), scroll->viewport()->width())
        << "the controls are cut";
    // the capacity is named in the legend's row above the axis rect, not on the plot
    MemoryChart* chart = f.page->findChild<MemoryChart*>();
    ASSERT_NE(chart, nullptr);
    QCustomPlot* plot = chart->plot();
    plot->replot();
    QCPAbstractPlottable* cap = nullptr;
    for (int i = 0; i < plot->plottableCount(); ++i)
        if (plot->plottable(i)->name().startsWith("H200 capacity 141 GiB"))
            cap = plot->plottable(i);
    ASSERT_NE(cap, nullptr);
    EXPECT_TRUE(plot->legend->hasItemWithPlottable(cap));
    EXPECT_LE(plot->legend->outerRect().bottom(), plot->axisRect()->outerRect().top() + 1);
    for (int i = 0; i < plot->itemCount(); ++i)
        EXPECT_EQ(qobject_cast<QCPItemText*>(plot->item(i)), nullptr)
            << "no text items over the bars";
    f.page->updateAnswers();
    settle(*f.page);
    QApplication::processEvents();
    EXPECT_TRUE(f.page->grab().save(QString(TESSERA_BIN_DIR) + "/../plan_page_pp8_recompute.png"));
}

// Before any project is open (or when opening one failed) there is nothing to plan: the page says
// so and is disabled, instead of validating the empty default config (it listed "pp 1 is more
// stages than the model's 0 layers"), and its empty chart keeps the chart's width (an empty
// legend sharing the axis rect's column held it to ~100 px).
TEST(PlanPage, WithoutAProjectThePageSaysSoAndTheEmptyChartKeepsItsWidth) {
    ProjectDocument doc;
    PlanPage page(&doc);
    page.resize(1100, 800);
    page.show();
    QApplication::processEvents();
    EXPECT_FALSE(page.isEnabled());
    EXPECT_TRUE(page.validityText().contains("No project is open"))
        << page.validityText().toStdString();
    EXPECT_TRUE(page.predictionText().isEmpty()) << page.predictionText().toStdString();
    // the partition editor does not speak of an MLP the user never chose
    const QString editor = page.findChild<PartitionEditor*>()->emptyMessage();
    EXPECT_EQ(editor, "No model to partition.") << editor.toStdString();
    QCustomPlot* plot = page.findChild<MemoryChart*>()->plot();
    plot->replot();
    EXPECT_GT(plot->axisRect()->outerRect().width(), plot->width() / 2)
        << "axis rect " << plot->axisRect()->outerRect().width() << " of " << plot->width();
}

TEST(PlanPage, AnMlpsPartitionEditorSaysItIsNotPipelined) {
    ProjectDocument doc;
    QString err;
    ASSERT_TRUE(doc.open(QString(TESSERA_TESTS_DIR) + "/../projects/mlp-fashion-mnist", &err))
        << err.toStdString();
    PlanPage page(&doc);
    page.show();
    QApplication::processEvents();
    EXPECT_TRUE(page.partitionEditor()->emptyMessage().startsWith("An MLP is not pipelined"))
        << page.partitionEditor()->emptyMessage().toStdString();
}

TEST(PlanPage, RenderScreenshots) {
    const QString out = QString(TESSERA_BIN_DIR) + "/..";
    {
        ProjectDocument doc;
        QString err;
        ASSERT_TRUE(doc.open(QString(TESSERA_TESTS_DIR) + "/../projects/quickstart", &err))
            << err.toStdString();
        PlanPage page(&doc);
        page.resize(1400, 980);
        page.show();
        page.suggestPlans();
        settle(page);
        page.updateAnswers();
        settle(page);
        QApplication::processEvents();
        EXPECT_TRUE(page.grab().save(out + "/plan_page_quickstart.png"));
    }
    {
        Fixture f(gpt_config("preset: gpt2-large, vocab: gpt2",
                             {"parallel.dp=4", "parallel.tp=2", "parallel.pp=2",
                              "train.micro_batch=8", "train.grad_accum=8", "parallel.zero=1"}));
        f.page->suggestPlans();
        settle(*f.page);
        f.page->updateAnswers();
        settle(*f.page);
        QApplication::processEvents();
        EXPECT_TRUE(f.page->grab().save(out + "/plan_page_gpt2_large_16.png"));
        {  // one GPU: its gradients split, the bars (each category at the device's peak) reach
           // the peak's cross
            Fixture one(gpt_config(
                "preset: gpt2-xl, vocab: gpt2",
                {"runtime.precision=bf16", "train.micro_batch=8", "train.grad_accum=1"}));
            one.page->updateAnswers();
            settle(*one.page);
            QApplication::processEvents();
            EXPECT_TRUE(one.page->grab().save(out + "/plan_page_gpt2_xl_1gpu.png"));
        }
        // the same on a small GPU: over capacity in red
        f.page->setDeviceName("A100-40GB");
        f.doc.edit("mb", [](RunConfig& c) {
            c.train.micro_batch = 32;
            c.train.grad_accum = 2;
        });
        QApplication::processEvents();
        f.page->updateAnswers();
        settle(*f.page);
        EXPECT_EQ(f.page->suggestionList()->count(), 0)
            << "the H200's suggestions dropped for the A100";
        f.page->suggestPlans();
        settle(*f.page);
        QApplication::processEvents();
        EXPECT_TRUE(f.page->grab().save(out + "/plan_page_gpt2_large_16_over.png"));
    }
}

int main(int argc, char** argv) {
    qputenv("QT_QPA_PLATFORM", "offscreen");
    QApplication app(argc, argv);
    ::testing::InitGoogleTest(&argc, argv);
    return RUN_ALL_TESTS();
}
