// The Monitor page offscreen on a runs.db produced by a real short `tessera train`: curves appear,
// smoothing changes the smoothed series and not the raw one, the prediction band is drawn per
// rank, x-axis modes re-key the data; plus the debiased EMA on its own. On a runs.db written by
// hand as GPU runs would write it: the prediction is for the device each run recorded (the default
// only without a record, and the page says so), and the memory chart shows the driver's measured
// use next to the engine's own device total.
#include "ui/monitor/monitor_page.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <QApplication>
#include <QElapsedTimer>
#include <QTest>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>

#include "engine/store/run_store.h"
#include "engine/telemetry/metric_names.h"
#include "tests/support/paths.h"
#include "tests/support/temp_dir.h"
#include "ui/common/project_document.h"
#include "ui/common/qcustomplot_qt.h"
#include "ui/monitor/monitor_device.h"
#include "ui/monitor/monitor_series.h"

namespace fs = std::filesystem;
using namespace tessera::studio;

namespace {

// One tiny project trained once for the whole suite, in the process's folder (removed when it
// exits) with the tests' other projects beside it.
fs::path g_project;

void make_project() {
    static const tessera::test_support::TempDir root("monitor");
    g_project = root.path() / "suite";
    fs::create_directories(g_project);
    std::ofstream(g_project / "project.yaml")
        << "model: {preset: gpt-tiny, n_layer: 2, d_model: 64, n_head: 2, seq_len: 32}\n"
           "data: {dataset: brown}\n"
           "train: {steps: 20, micro_batch: 4, eval_every: 10}\n";
    std::string cmd = std::string(TESSERA_BIN_DIR) + "/tessera train '" +
                      (g_project / "project.yaml").string() + "' --db '" +
                      (g_project / "runs.db").string() + "' > /dev/null 2>&1";
    ASSERT_EQ(std::system(cmd.c_str()), 0) << cmd;
}

// A project whose runs.db holds GPU runs written as the launcher writes them: run 1 recorded
// "NVIDIA H200" with NVML and engine memory figures, run 2 an A100 40GB, run 3 no device (a run
// from before devices were recorded). No GPU is needed: nothing trains.
constexpr double kGiB = 1024.0 * 1024.0 * 1024.0;
fs::path make_gpu_project() {
    fs::path dir = g_project.parent_path() / (g_project.filename().string() + "_gpu");
    fs::create_directories(dir);
    const std::string yaml =
        "model: {preset: gpt-tiny, n_layer: 2, d_model: 64, n_head: 2, seq_len: 32}\n"
        "data: {dataset: brown}\n"
        "train: {steps: 4, micro_batch: 4, eval_every: 0}\n"
        "runtime: {device: cuda, precision: bf16}\n";
    std::ofstream(dir / "project.yaml") << yaml;
    using namespace tessera;
    RunStore s = RunStore::open((dir / "runs.db").string());
    auto run = [&](const char* name, const char* device) {
        int64_t id = s.run_begin(RunStartRecord{name, yaml, "gpu-host", 1, "", 1000});
        std::vector<Record> recs;
        if (device) recs.push_back(DeviceRecord{0, "gpu-host", device, int64_t(140 * kGiB), 1000});
        for (int64_t step = 1; step <= 4; ++step) {
            recs.push_back(
                MetricRecord{step, 0, std::string(metric::train_loss), 5.0 - step, 1000.0 + step});
            recs.push_back(MetricRecord{step, 0, metric::mem_category_bytes(MemCategory::params),
                                        0.5 * kGiB, 1000.0 + step});
            recs.push_back(MetricRecord{step, 0, metric::mem_category_bytes(MemCategory::context),
                                        0.5 * kGiB, 1000.0 + step});
            recs.push_back(MetricRecord{step, 0, std::string(metric::mem_device_bytes), 1.0 * kGiB,
                                        1000.0 + step});
            recs.push_back(MetricRecord{step, 0, std::string(metric::gpu_memory_used_bytes),
                                        1.25 * kGiB, 1000.0 + step});
        }
        recs.push_back(RunEndRecord{std::string(run_status::completed), "", 4, 1010});
        s.append(id, recs);
    };
    run("h200", "NVIDIA H200");
    run("a100", "NVIDIA A100-SXM4-40GB");
    run("before-devices", nullptr);
    return dir;
}

// A project folder beside the suite's, named with `suffix`: the suite's 2-layer gpt-tiny reading
// `data` (a YAML flow map), 4 steps. Returns the folder and the project's text.
std::pair<fs::path, std::string> small_project(const std::string& suffix, const std::string& data) {
    fs::path dir = g_project.parent_path() / (g_project.filename().string() + suffix);
    fs::create_directories(dir);
    const std::string yaml =
        "model: {preset: gpt-tiny, n_layer: 2, d_model: 64, n_head: 2, seq_len: 32}\n"
        "data: " +
        data + "\ntrain: {steps: 4, micro_batch: 4, eval_every: 0}\n";
    std::ofstream(dir / "project.yaml") << yaml;
    return {dir, yaml};
}

QCPAbstractPlottable* plottable_named(QCustomPlot* p, const QString& name) {
    for (int i = 0; i < p->plottableCount(); ++i)
        if (p->plottable(i)->name() == name) return p->plottable(i);
    return nullptr;
}

std::vector<double> values_of(QCPGraph* g) {
    std::vector<double> v;
    for (auto it = g->data()->constBegin(); it != g->data()->constEnd(); ++it)
        v.push_back(it->value);
    return v;
}

std::vector<double> keys_of(QCPGraph* g) {
    std::vector<double> v;
    for (auto it = g->data()->constBegin(); it != g->data()->constEnd(); ++it) v.push_back(it->key);
    return v;
}

}  // namespace

TEST(MonitorEma, DebiasedFirstPointEqualsRaw) {
    std::vector<double> x{3.0, 2.0, 1.0, 1.0};
    for (double beta : {0.0, 0.5, 0.9, 0.99}) {
        auto s = monitor_ema_debiased(x, beta);
        ASSERT_EQ(s.size(), x.size());
        EXPECT_DOUBLE_EQ(s[0], 3.0) << beta;
    }
    auto s = monitor_ema_debiased(x, 0.5);
    // s2 = (0.5*0.5*3 + 0.5*2) / (1 - 0.25) = 1.75 / 0.75
    EXPECT_NEAR(s[1], 1.75 / 0.75, 1e-12);
    EXPECT_EQ(monitor_ema_debiased(x, 0.0), x);  // beta 0: no smoothing
    auto n = monitor_ema_debiased({2.0, NAN, 2.0}, 0.9);
    EXPECT_TRUE(std::isnan(n[1]));
    EXPECT_NEAR(n[2], 2.0, 1e-12);  // a constant stays constant across a NaN
}

TEST(MonitorPageTest, ShowsCurvesOfARealRun) {
    ProjectDocument doc;
    QString err;
    ASSERT_TRUE(doc.open(QString::fromStdString(g_project.string()), &err)) << err.toStdString();
    MonitorPage page(&doc);
    page.resize(1200, 900);
    page.show();
    page.pollNow();
    page.replotNow();
    ASSERT_GT(page.currentRun(), 0);
    EXPECT_EQ(page.trainRawGraph()->data()->size(), 20);
    EXPECT_EQ(page.trainSmoothGraph()->data()->size(), 20);
    EXPECT_GE(page.valGraph()->data()->size(), 2);  // evals (every 10 steps)
    EXPECT_GT(page.speedGraph()->data()->size(), 0);
    EXPECT_TRUE(page.trainRawGraph()->adaptiveSampling());
    EXPECT_NE(page.statusText().indexOf("completed"), -1) << page.statusText().toStdString();
    EXPECT_NE(page.statusText().indexOf("step 20/20"), -1) << page.statusText().toStdString();
    // random order: train/epoch is recorded but is no count of passes, so not shown
    EXPECT_EQ(page.statusText().indexOf("epoch"), -1) << page.statusText().toStdString();

    // smoothing: the smoothed series changes, the raw one does not
    page.setSmoothing(0.0);
    page.replotNow();
    auto raw0 = values_of(page.trainRawGraph());
    auto sm0 = values_of(page.trainSmoothGraph());
    EXPECT_EQ(raw0, sm0);  // beta 0 = raw
    page.setSmoothing(0.9);
    page.replotNow();
    auto raw1 = values_of(page.trainRawGraph());
    auto sm1 = values_of(page.trainSmoothGraph());
    EXPECT_EQ(raw0, raw1);
    EXPECT_NE(sm0, sm1);
    EXPECT_DOUBLE_EQ(sm1.front(), raw1.front());  // debiased

    // x axis: tokens = step * micro_batch * seq_len (4 * 32)
    page.setXAxis(MonitorPage::XTokens);
    page.replotNow();
    auto k = keys_of(page.trainRawGraph());
    ASSERT_EQ(k.size(), 20u);
    EXPECT_DOUBLE_EQ(k.front(), 1 * 128.0);
    EXPECT_DOUBLE_EQ(k.back(), 20 * 128.0);
    page.setXAxis(MonitorPage::XWallTime);
    page.replotNow();
    k = keys_of(page.trainRawGraph());
    ASSERT_EQ(k.size(), 20u);
    EXPECT_GE(k.front(), 0.0);
    EXPECT_LT(k.back(), 600.0);
    page.setLogY(true);
    EXPECT_EQ(page.lossPlot()->yAxis->scaleType(), QCPAxis::stLogarithmic);

    // memory: stacked bars by category for rank 0, and one prediction band per rank, for the
    // device the run recorded (the single-rank trainer: the CPU)
    EXPECT_EQ(page.predictionDevice(), "cpu");
    EXPECT_TRUE(page.predictionFromRecordedDevice());
    EXPECT_EQ(page.predictionBandCount(), 1);
    EXPECT_GT(page.memoryPlot()->plottableCount(), 1);
    QCPBars* params = nullptr;
    for (int i = 0; i < page.memoryPlot()->plottableCount(); ++i)
        if (page.memoryPlot()->plottable(i)->name() == "params")
            params = qobject_cast<QCPBars*>(page.memoryPlot()->plottable(i));
    ASSERT_NE(params, nullptr);
    EXPECT_GT(params->data()->at(0)->value, 0.0);
    auto* band = page.memoryPlot()->findChild<QCPItemRect*>("predictionBand0");
    ASSERT_NE(band, nullptr);
    EXPECT_GT(band->topLeft->coords().y(), band->bottomRight->coords().y());
    EXPECT_GT(band->bottomRight->coords().y(), 0.0);
}

TEST(MonitorDevice, RecordedDeviceElseTheDefault) {
    tessera::RunConfig cuda = tessera::config_parse(
        "model: {preset: gpt-tiny}\ndata: {dataset: brown}\nruntime: {device: cuda}\n", "t");
    tessera::RunConfig cpu =
        tessera::config_parse("model: {preset: gpt-tiny}\ndata: {dataset: brown}\n", "t");
    auto h200 = monitor_prediction_device(cuda, {{0, "h", "NVIDIA H200", int64_t(140 * kGiB), 0}});
    EXPECT_TRUE(h200.recorded);
    EXPECT_EQ(h200.spec.name, "H200");
    EXPECT_NE(h200.text.find("NVIDIA H200 (140.0 GiB)"), std::string::npos) << h200.text;
    auto h100 = monitor_prediction_device(
        cuda, {{0, "h", "NVIDIA H100 80GB HBM3", 1, 0}, {1, "h", "NVIDIA H100 80GB HBM3", 1, 0}});
    EXPECT_EQ(h100.spec.name, "H100");
    EXPECT_NE(h100.text.find("2 × NVIDIA H100"), std::string::npos) << h100.text;
    auto mixed = monitor_prediction_device(
        cuda, {{0, "a", "NVIDIA A100-SXM4-40GB", 1, 0}, {1, "b", "NVIDIA H200", 1, 0}});
    EXPECT_EQ(mixed.spec.name, "A100-40GB");  // rank 0's
    EXPECT_NE(mixed.text.find("the ranks differ"), std::string::npos) << mixed.text;
    auto on_cpu = monitor_prediction_device(cpu, {{0, "vm", "cpu", int64_t(16 * kGiB), 0}});
    EXPECT_TRUE(on_cpu.recorded);
    EXPECT_EQ(on_cpu.spec.name, "cpu");
    // no record: the Plan page's rule, and the text says so
    auto none = monitor_prediction_device(cuda, {});
    EXPECT_FALSE(none.recorded);
    EXPECT_EQ(none.spec.name, "H200");
    EXPECT_NE(none.text.find("not recorded"), std::string::npos) << none.text;
    EXPECT_EQ(monitor_prediction_device(cpu, {}).spec.name, "cpu");
    // a GPU the table does not know: the default stands in, named as such
    auto unknown = monitor_prediction_device(cuda, {{0, "h", "NVIDIA L40S", 1, 0}});
    EXPECT_FALSE(unknown.recorded);
    EXPECT_EQ(unknown.spec.name, "H200");
    EXPECT_NE(unknown.text.find("not in the device table"), std::string::npos) << unknown.text;
}

TEST(MonitorPageTest, PredictsForTheRecordedDeviceAndShowsTheDriversFigure) {
    fs::path dir = make_gpu_project();
    ProjectDocument doc;
    QString err;
    ASSERT_TRUE(doc.open(QString::fromStdString(dir.string()), &err)) << err.toStdString();
    MonitorPage page(&doc);
    page.resize(1200, 900);
    page.show();
    page.pollNow();

    ASSERT_TRUE(page.selectRun(1));
    page.replotNow();
    EXPECT_EQ(page.predictionDevice(), "H200");
    EXPECT_TRUE(page.predictionFromRecordedDevice());
    EXPECT_NE(page.deviceText().indexOf("NVIDIA H200"), -1) << page.deviceText().toStdString();
    EXPECT_EQ(page.predictionBandCount(), 1);
    EXPECT_NE(plottable_named(page.memoryPlot(), "predicted ±5 %"), nullptr);
    // the driver's measured use beside the engine's device total, each with a legend entry
    auto* nvml = page.memoryPlot()->findChild<QCPItemLine*>("nvmlUsed0");
    auto* engine = page.memoryPlot()->findChild<QCPItemLine*>("engineDevice0");
    ASSERT_NE(nvml, nullptr);
    ASSERT_NE(engine, nullptr);
    EXPECT_DOUBLE_EQ(nvml->start->coords().y(), 1.25);
    EXPECT_DOUBLE_EQ(engine->start->coords().y(), 1.0);
    EXPECT_NE(plottable_named(page.memoryPlot(), "measured (driver)"), nullptr);
    EXPECT_NE(plottable_named(page.memoryPlot(), "engine accounting"), nullptr);

    ASSERT_TRUE(page.selectRun(2));  // an A100 40GB: its own entry, not the default
    page.replotNow();
    EXPECT_EQ(page.predictionDevice(), "A100-40GB");
    EXPECT_TRUE(page.predictionFromRecordedDevice());

    ASSERT_TRUE(page.selectRun(3));  // no device recorded: the Plan page's default, said so
    page.replotNow();
    EXPECT_EQ(page.predictionDevice(), "H200");
    EXPECT_FALSE(page.predictionFromRecordedDevice());
    EXPECT_NE(page.deviceText().indexOf("not recorded"), -1) << page.deviceText().toStdString();

    // a live run whose rank records its device after the page picked the run: the next poll
    // predicts for it
    tessera::RunStore writer = tessera::RunStore::open((dir / "runs.db").string());
    const int64_t live = writer.run_begin(
        tessera::RunStartRecord{"live", writer.run_get(1)->config_text, "gpu-host", 1, "", 2000});
    page.pollNow();
    ASSERT_TRUE(page.selectRun(live));
    EXPECT_FALSE(page.predictionFromRecordedDevice());
    writer.append(live, {tessera::DeviceRecord{0, "gpu-host", "NVIDIA A100-SXM4-40GB", 1, 2001}});
    page.pollNow();
    EXPECT_EQ(page.predictionDevice(), "A100-40GB");
    EXPECT_TRUE(page.predictionFromRecordedDevice());
    std::error_code ec;
    fs::remove_all(dir, ec);
}

// A project whose config names its data by a relative path that is not there (data not
// prepared yet, or moved since its runs): the studio opens it, and the Monitor page still reads
// its runs' configs (resolved against runs.db's folder, files not required): the prediction band
// is there. A run that logged one point shows it as a dot.
TEST(MonitorPageTest, RunsOfAProjectWhoseDataIsNotThereKeepTheirPrediction) {
    const auto [dir, yaml] =
        small_project("_own_data", "{train: data/train.bin, val: data/val.bin}");
    {
        using namespace tessera;
        RunStore s = RunStore::open((dir / "runs.db").string());
        const int64_t id = s.run_begin(RunStartRecord{"own", yaml, "host", 1, "", 1000});
        std::vector<Record> recs;
        for (int64_t step = 1; step <= 3; ++step)
            recs.push_back(
                MetricRecord{step, 0, std::string(metric::train_loss), 5.0 - step, 1000.0 + step});
        recs.push_back(RunEndRecord{std::string(run_status::completed), "", 3, 1010});
        s.append(id, recs);
        // a two-step smoke run that logged its last step only
        const int64_t smoke = s.run_begin(RunStartRecord{"smoke", yaml, "host", 1, "", 2000});
        s.append(smoke, {MetricRecord{2, 0, std::string(metric::train_loss), 4.5, 2002.0},
                         RunEndRecord{std::string(run_status::completed), "", 2, 2003}});
    }
    ProjectDocument doc;
    QString err;
    ASSERT_TRUE(doc.open(QString::fromStdString(dir.string()), &err)) << err.toStdString();
    MonitorPage page(&doc);
    page.resize(1200, 900);
    page.show();
    page.pollNow();
    ASSERT_TRUE(page.selectRun(1));
    page.replotNow();
    EXPECT_EQ(page.deviceText().indexOf("no prediction"), -1) << page.deviceText().toStdString();
    EXPECT_EQ(page.predictionBandCount(), 1);
    EXPECT_EQ(page.trainRawGraph()->scatterStyle().shape(), QCPScatterStyle::ssNone);
    // one logged point is drawn as a dot (a line through it draws nothing), until a second comes
    ASSERT_TRUE(page.selectRun(2));
    page.replotNow();
    EXPECT_EQ(page.trainRawGraph()->dataCount(), 1);
    EXPECT_EQ(page.trainRawGraph()->scatterStyle().shape(), QCPScatterStyle::ssDisc);
    ASSERT_TRUE(page.selectRun(1));
    page.replotNow();
    EXPECT_EQ(page.trainRawGraph()->scatterStyle().shape(), QCPScatterStyle::ssNone);

    std::error_code ec;
    fs::remove_all(dir, ec);
}

// data.order: epoch: the status line says which epoch the run is in (its latest train/epoch)
TEST(MonitorPageTest, StatusShowsTheEpochOfAnEpochOrderRun) {
    const auto [dir, yaml] = small_project("_epoch", "{dataset: brown, order: epoch}");
    {
        using namespace tessera;
        RunStore s = RunStore::open((dir / "runs.db").string());
        int64_t id = s.run_begin(RunStartRecord{"epochs", yaml, "host", 1, "", 1000});
        std::vector<Record> recs;
        for (int64_t step = 1; step <= 3; ++step) {
            recs.push_back(
                MetricRecord{step, 0, std::string(metric::train_loss), 5.0 - step, 1000.0 + step});
            recs.push_back(MetricRecord{step, 0, std::string(metric::train_epoch), 0.625 * step,
                                        1000.0 + step});
        }
        s.append(id, recs);
    }
    ProjectDocument doc;
    QString err;
    ASSERT_TRUE(doc.open(QString::fromStdString(dir.string()), &err)) << err.toStdString();
    MonitorPage page(&doc);
    page.pollNow();
    ASSERT_TRUE(page.selectRun(1));
    page.pollNow();
    EXPECT_NE(page.statusText().indexOf("step 3/4 · epoch 1.88"), -1)
        << page.statusText().toStdString();
    std::error_code ec;
    fs::remove_all(dir, ec);
}

TEST(MonitorPageTest, IncrementalPollAddsOnlyNewRows) {
    ProjectDocument doc;
    QString err;
    ASSERT_TRUE(doc.open(QString::fromStdString(g_project.string()), &err)) << err.toStdString();
    MonitorPage page(&doc);
    page.pollNow();
    page.replotNow();
    int n = page.trainRawGraph()->data()->size();
    page.pollNow();  // nothing new in the db
    page.replotNow();
    EXPECT_EQ(page.trainRawGraph()->data()->size(), n);
}

TEST(MonitorPageTest, LaunchRunsTesseraAndFollowsTheNewRun) {
    ProjectDocument doc;
    QString err;
    ASSERT_TRUE(doc.open(QString::fromStdString(g_project.string()), &err)) << err.toStdString();
    MonitorPage page(&doc);
    page.setTesseraBinary(QString(TESSERA_BIN_DIR) + "/tessera");
    page.pollNow();
    int64_t before = page.currentRun();
    page.launch();
    QElapsedTimer t;
    t.start();
    while (t.elapsed() < 60000 && page.controller()->state() != tessera::RunState::finished &&
           page.controller()->state() != tessera::RunState::failed)
        QTest::qWait(50);
    QTest::qWait(300);  // the queued state change and a poll
    page.pollNow();
    page.replotNow();
    EXPECT_EQ(page.controller()->state(), tessera::RunState::finished)
        << page.controller()->message();
    EXPECT_GT(page.currentRun(), before);
    EXPECT_EQ(page.trainRawGraph()->data()->size(), 20);
    auto* console = page.findChild<QPlainTextEdit*>("monitorConsole");
    ASSERT_NE(console, nullptr);
    EXPECT_NE(console->toPlainText().indexOf("step "), -1);
}

// What a user does when a run ended short of what they wanted: Continue (train --resume) picks up
// the newest checkpoint; Launch starts a new run from step 0 and keeps the earlier checkpoints in
// ck/earlier/ (before, the new run saved over them and rotated them away).
TEST(MonitorPageTest, ContinueResumesTheNewestCheckpointAndLaunchKeepsIt) {
    auto [dir, yaml] = small_project("_continue", "{dataset: brown}");
    std::ofstream(dir / "project.yaml", std::ios::app)
        << "checkpoint: {dir: ck, every: 2, keep: 2}\n";
    ProjectDocument doc;
    QString err;
    ASSERT_TRUE(doc.open(QString::fromStdString(dir.string()), &err)) << err.toStdString();
    MonitorPage page(&doc);
    page.setTesseraBinary(QString(TESSERA_BIN_DIR) + "/tessera");
    auto* cont = page.findChild<QPushButton*>("monitorContinue");
    ASSERT_NE(cont, nullptr);
    EXPECT_FALSE(cont->isEnabled()) << "no checkpoint yet";
    auto run_to_end = [&](const std::function<void()>& start) {
        start();
        QElapsedTimer t;
        t.start();
        while (t.elapsed() < 60000 && page.controller()->state() != tessera::RunState::finished &&
               page.controller()->state() != tessera::RunState::failed)
            QTest::qWait(50);
        QTest::qWait(300);  // the queued state change
        EXPECT_EQ(page.controller()->state(), tessera::RunState::finished)
            << page.controller()->message();
    };
    run_to_end([&] { page.launch(); });
    EXPECT_TRUE(cont->isEnabled());
    EXPECT_EQ(cont->text(), "Continue from step 4");
    EXPECT_EQ(page.resumableStep(), 4);

    doc.edit("steps", [](tessera::RunConfig& c) { c.train.steps = 6; });
    ASSERT_TRUE(doc.save(&err)) << err.toStdString();
    run_to_end([&] { page.continueRun(); });
    EXPECT_EQ(cont->text(), "Continue from step 6");
    EXPECT_FALSE(fs::exists(dir / "ck/earlier")) << "a continued run moves nothing";
    {
        tessera::RunStore s = tessera::RunStore::open((dir / "runs.db").string(), true);
        auto runs = s.runs_list();
        ASSERT_EQ(runs.size(), 2u);
        auto rows = s.metrics(runs[1].id, tessera::metric::train_loss);
        ASSERT_EQ(rows.size(), 2u) << "steps 5 and 6 only";
        EXPECT_EQ(rows[0].step, 5);
    }

    run_to_end([&] { page.launch(); });
    auto* console = page.findChild<QPlainTextEdit*>("monitorConsole");
    ASSERT_NE(console, nullptr);
    EXPECT_NE(console->toPlainText().indexOf("of an earlier run (step 4 to 6): moved to"), -1)
        << console->toPlainText().toStdString();
    int earlier = 0;
    for (const auto& e : fs::directory_iterator(dir / "ck/earlier")) {
        ++earlier;
        EXPECT_TRUE(fs::exists(e.path() / "step_00000006/model.safetensors"));
        EXPECT_TRUE(fs::exists(e.path() / "step_00000004/model.safetensors"));
    }
    EXPECT_EQ(earlier, 1);
    EXPECT_EQ(cont->text(), "Continue from step 6") << "the new run's own step 6";
}

int main(int argc, char** argv) {
    qputenv("QT_QPA_PLATFORM", "offscreen");
    QApplication app(argc, argv);
    ::testing::InitGoogleTest(&argc, argv);
    if (::testing::GTEST_FLAG(list_tests)) return RUN_ALL_TESTS();  // ctest discovery: no training
    make_project();
    if (::testing::Test::HasFatalFailure()) return 1;
    return RUN_ALL_TESTS();
}
