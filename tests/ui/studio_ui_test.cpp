// Studio tests, offscreen: project round-trip through ProjectDocument, broken files shown and left
// untouched, undo/redo of model edits, the layer table under QAbstractItemModelTester, the
// window title, safetensors import.
#include <gtest/gtest.h>

#include <QAbstractItemModelTester>
#include <QApplication>
#include <QDir>
#include <QFile>
#include <QSpinBox>
#include <QStandardPaths>
#include <QTemporaryDir>
#include <vector>

#include "engine/config/config.h"
#include "engine/io/safetensors.h"
#include "ui/common/project_document.h"
#include "ui/model/layer_table_model.h"
#include "ui/model/model_facts.h"
#include "ui/model/model_page.h"
#include "ui/shell/main_window.h"

using namespace tessera::studio;

namespace {

void ensure_app() {
    static int argc = 1;
    static char name[] = "studio_ui_test";
    static char* argv[] = {name, nullptr};
    static QApplication* app = [] {
        qputenv("QT_QPA_PLATFORM", "offscreen");
        QStandardPaths::setTestModeEnabled(true);  // QSettings away from the user's
        auto* a = new QApplication(argc, argv);
        QApplication::setOrganizationName("Tessera");
        QApplication::setApplicationName("tessera-studio-test");
        return a;
    }();
    (void)app;
}

QString projects_dir() { return QString(TESSERA_TESTS_DIR) + "/../projects"; }

// The config without where it was read from: what must survive a save.
tessera::RunConfig content(tessera::RunConfig c) {
    c.source_path.clear();
    c.source_text.clear();
    c.base_dir.clear();
    return c;
}

QByteArray read_all(const QString& path) {
    QFile f(path);
    EXPECT_TRUE(f.open(QIODevice::ReadOnly)) << path.toStdString();
    return f.readAll();
}

void write_all(const QString& path, const QByteArray& bytes) {
    QFile f(path);
    ASSERT_TRUE(f.open(QIODevice::WriteOnly));
    f.write(bytes);
}

// A copy of projects/quickstart/project.yaml in a temp dir.
QString copy_quickstart(const QTemporaryDir& tmp) {
    const QString dir = tmp.filePath("quickstart");
    QDir().mkpath(dir);
    write_all(dir + "/project.yaml", read_all(projects_dir() + "/quickstart/project.yaml"));
    return dir;
}

class StudioTest : public ::testing::Test {
protected:
    void SetUp() override { ensure_app(); }
};

}  // namespace

// ----------------------------------------------------------------------------
// ProjectDocument

TEST_F(StudioTest, EveryExampleProjectRoundTripsThroughSave) {
    const QStringList names = QDir(projects_dir()).entryList(QDir::Dirs | QDir::NoDotAndDotDot);
    int checked = 0;
    for (const QString& name : names) {
        const QString yaml = projects_dir() + "/" + name + "/project.yaml";
        if (!QFile::exists(yaml)) continue;
        SCOPED_TRACE(name.toStdString());
        const QByteArray original_bytes = read_all(yaml);
        ProjectDocument doc;
        QString error;
        ASSERT_TRUE(doc.open(projects_dir() + "/" + name, &error)) << error.toStdString();
        QTemporaryDir tmp;
        ASSERT_TRUE(doc.saveAs(tmp.filePath(name), &error)) << error.toStdString();
        EXPECT_FALSE(doc.isModified());
        const auto original = tessera::config_load(yaml.toStdString());
        const auto saved = tessera::config_load(tmp.filePath(name + "/project.yaml").toStdString());
        EXPECT_TRUE(content(saved) == content(original)) << tessera::config_to_yaml(saved);
        EXPECT_EQ(read_all(yaml), original_bytes);  // the example itself is untouched
        ++checked;
    }
    EXPECT_GE(checked, 2);
}

TEST_F(StudioTest, BrokenYamlShowsItsErrorAndIsLeftUntouched) {
    QTemporaryDir tmp;
    const QString good = copy_quickstart(tmp);
    const QString bad = tmp.filePath("broken");
    QDir().mkpath(bad);
    const QByteArray text = "name: broken\nmodel:\n  preset: gpt2\n  n_head: three\n";
    write_all(bad + "/project.yaml", text);

    ProjectDocument doc;
    MainWindow win(&doc);
    win.addPage("Model", new ModelPage(&doc, &win));
    ASSERT_TRUE(win.openProject(good, false));
    EXPECT_TRUE(win.errorText().isEmpty());

    QString error;
    EXPECT_FALSE(doc.open(bad, &error));
    EXPECT_TRUE(error.contains("project.yaml:4:")) << error.toStdString();
    EXPECT_TRUE(error.contains("model.n_head")) << error.toStdString();
    EXPECT_TRUE(win.errorText().contains("model.n_head")) << win.errorText().toStdString();
    EXPECT_TRUE(win.errorText().contains("project.yaml:4:"));
    EXPECT_FALSE(win.openProject(bad, false));
    // the open project stays, nothing is written
    EXPECT_EQ(doc.projectDir(), QDir(good).absolutePath());
    EXPECT_EQ(read_all(bad + "/project.yaml"), text);
    QStringList files = QDir(bad).entryList(QDir::Files);
    EXPECT_EQ(files, QStringList{"project.yaml"});
    // a later good open clears the banner
    ASSERT_TRUE(win.openProject(good, false));
    EXPECT_TRUE(win.errorText().isEmpty());
}

TEST_F(StudioTest, MissingProjectFileIsAnErrorNotACrash) {
    QTemporaryDir tmp;
    ProjectDocument doc;
    QString error;
    EXPECT_FALSE(doc.open(tmp.path(), &error));
    EXPECT_TRUE(error.contains("project.yaml")) << error.toStdString();
    EXPECT_FALSE(doc.isOpen());
}

TEST_F(StudioTest, SaveRefusesAConfigTheEngineRejectsAndKeepsTheFile) {
    QTemporaryDir tmp;
    const QString dir = copy_quickstart(tmp);
    const QByteArray before = read_all(dir + "/project.yaml");
    ProjectDocument doc;
    QString error;
    ASSERT_TRUE(doc.open(dir, &error));
    doc.edit("heads", [](tessera::RunConfig& c) { c.model.n_head = 3; });  // 128 % 3 != 0
    EXPECT_FALSE(doc.save(&error));
    EXPECT_TRUE(error.contains("d_model")) << error.toStdString();
    EXPECT_TRUE(doc.isModified());
    EXPECT_EQ(read_all(dir + "/project.yaml"), before);
}

TEST_F(StudioTest, UndoRedoOfAModelEditRestoresConfigAndModifiedFlag) {
    QTemporaryDir tmp;
    const QString dir = copy_quickstart(tmp);
    ProjectDocument doc;
    QString error;
    ASSERT_TRUE(doc.open(dir, &error));
    ModelPage page(&doc);
    const tessera::RunConfig original = doc.config();
    int modified_signals = 0;
    QObject::connect(&doc, &ProjectDocument::modifiedChanged, [&](bool) { ++modified_signals; });

    auto* layers = page.findChild<QSpinBox*>("n_layer");
    ASSERT_NE(layers, nullptr);
    layers->setValue(6);  // the page's own widget: goes through doc->edit()
    layers->setValue(8);  // same field: merges into one undo step
    EXPECT_EQ(doc.config().model.n_layer, 8);
    EXPECT_TRUE(doc.isModified());
    EXPECT_EQ(doc.undoStack()->count(), 1);
    EXPECT_GE(modified_signals, 1);

    doc.undoStack()->undo();
    EXPECT_TRUE(doc.config() == original);
    EXPECT_FALSE(doc.isModified());
    EXPECT_EQ(layers->value(), 4);  // the widget follows the document

    doc.undoStack()->redo();
    EXPECT_EQ(doc.config().model.n_layer, 8);
    EXPECT_TRUE(doc.isModified());

    ASSERT_TRUE(doc.save(&error)) << error.toStdString();
    EXPECT_FALSE(doc.isModified());
    EXPECT_EQ(tessera::config_load((dir + "/project.yaml").toStdString()).model.n_layer, 8);
}

TEST_F(StudioTest, PresetSwitchToMlpKeepsTheConfigValid) {
    QTemporaryDir tmp;
    ProjectDocument doc;
    QString error;
    ASSERT_TRUE(doc.open(copy_quickstart(tmp), &error));
    doc.edit("preset", [](tessera::RunConfig& c) { tessera::model_apply_preset(c, "mlp"); });
    EXPECT_EQ(doc.config().model.preset, "mlp");
    EXPECT_EQ(tessera::model_check_config(doc.config()), "");
    doc.edit("preset", [](tessera::RunConfig& c) { tessera::model_apply_preset(c, "gpt2"); });
    EXPECT_EQ(doc.config().model.n_layer, 12);
    EXPECT_EQ(doc.config().model.vocab, "gpt2");
    EXPECT_EQ(tessera::model_check_config(doc.config()), "");
    EXPECT_EQ(doc.undoStack()->count(), 2);
}

TEST_F(StudioTest, PresetSwitchKeepsATensorSplitTheKvHeadsAllow) {
    QTemporaryDir tmp;
    ProjectDocument doc;
    QString error;
    ASSERT_TRUE(doc.open(copy_quickstart(tmp), &error));
    doc.edit("gpt2-medium, tp 16", [](tessera::RunConfig& c) {
        tessera::model_apply_preset(c, "gpt2-medium");  // 16 heads
        c.parallel.tp = 16;
    });
    ASSERT_EQ(tessera::model_check_config(doc.config()), "");
    // 32 heads split 16 ways, but each TP rank holds whole kv heads: 8 of them
    doc.edit("preset", [](tessera::RunConfig& c) { tessera::model_apply_preset(c, "mistral-7b"); });
    EXPECT_EQ(doc.config().parallel.tp, 8);
    EXPECT_EQ(tessera::model_check_config(doc.config()), "");
    doc.edit("preset", [](tessera::RunConfig& c) { tessera::model_apply_preset(c, "smollm-135m"); });
    EXPECT_EQ(doc.config().parallel.tp, 1);  // 9 heads / 3 kv: no even split
    EXPECT_EQ(tessera::model_check_config(doc.config()), "");
}

// ----------------------------------------------------------------------------
// Model page pieces

TEST_F(StudioTest, LayerTableModelPassesTheModelTesterAndTotalsGpt2) {
    LayerTableModel model;
    QAbstractItemModelTester tester(&model, QAbstractItemModelTester::FailureReportingMode::Fatal);
    tessera::RunConfig cfg;
    tessera::model_apply_preset(cfg, "gpt2");
    model.setSpecs(tessera::model_layer_specs(cfg.model));
    const int n_specs = (int)model.specs().size();
    ASSERT_EQ(model.rowCount(), n_specs + 1);  // + totals
    int blocks = 0;
    for (int r = 0; r < n_specs; ++r) blocks += model.index(r, LayerTableModel::Kind).data() == "block";
    EXPECT_EQ(blocks, 12);
    const int total_row = model.rowCount() - 1;
    EXPECT_TRUE(model.isTotalsRow(total_row));
    const qlonglong total = model.index(total_row, LayerTableModel::Params).data(Qt::UserRole).toLongLong();
    EXPECT_EQ(total, 124439808);  // GPT-2 small, tied head
    EXPECT_EQ(model.index(total_row, LayerTableModel::Params).data().toString(), "124.44 M");
    model.setSpecs({});
    EXPECT_EQ(model.rowCount(), 0);
    tessera::model_apply_preset(cfg, "mlp");
    model.setSpecs(tessera::model_layer_specs(cfg.model));
    EXPECT_EQ(model.rowCount(), 2 + 1);
}

TEST_F(StudioTest, ImportSafetensorsSetsArchitectureAndReportsBadFiles) {
    QTemporaryDir tmp;
    ProjectDocument doc;
    QString error;
    const QString dir = copy_quickstart(tmp);
    ASSERT_TRUE(doc.open(dir, &error));
    ModelPage page(&doc);

    const QString junk = tmp.filePath("junk.safetensors");
    write_all(junk, "this is not a safetensors file");
    QString failed;
    QObject::connect(&page, &ModelPage::importFailed, [&](const QString& m) { failed = m; });
    EXPECT_FALSE(page.importSafetensors(junk));
    EXPECT_TRUE(failed.contains("junk.safetensors")) << failed.toStdString();
    EXPECT_TRUE(page.validationText().contains("junk.safetensors"));
    EXPECT_FALSE(doc.isModified());

    std::vector<float> wte(256 * 64), wpe(32 * 64), ln(64);
    const std::string path = (dir + "/tiny.safetensors").toStdString();
    tessera::safetensors_write(path, {{"wte.weight", tessera::DType::f32, {256, 64}, wte.data()},
                                      {"wpe.weight", tessera::DType::f32, {32, 64}, wpe.data()},
                                      {"h.0.ln_1.weight", tessera::DType::f32, {64}, ln.data()},
                                      {"h.1.ln_1.weight", tessera::DType::f32, {64}, ln.data()}},
                               {{"n_head", "2"}});
    ASSERT_TRUE(page.importSafetensors(QString::fromStdString(path)));
    const auto& m = doc.config().model;
    EXPECT_EQ(m.n_layer, 2);
    EXPECT_EQ(m.n_head, 2);
    EXPECT_EQ(m.d_model, 64);
    EXPECT_EQ(m.seq_len, 32);
    EXPECT_EQ(m.vocab, "bytes");
    EXPECT_EQ(m.init_from, "tiny.safetensors");
    EXPECT_TRUE(page.validationText().isEmpty()) << page.validationText().toStdString();
    doc.undoStack()->undo();
    EXPECT_EQ(doc.config().model.n_layer, 4);
}

// ----------------------------------------------------------------------------
// the window

TEST_F(StudioTest, WindowTitleShowsProjectNameAndModifiedMarker) {
    QTemporaryDir tmp;
    ProjectDocument doc;
    MainWindow win(&doc);
    EXPECT_EQ(win.addPage("Model", new ModelPage(&doc, &win)), 0);
    EXPECT_EQ(win.pageCount(), 1);
    EXPECT_EQ(win.pageTitle(0), "Model");
    ASSERT_TRUE(win.openProject(copy_quickstart(tmp), false));
    EXPECT_TRUE(win.windowTitle().contains("quickstart[*]")) << win.windowTitle().toStdString();
    EXPECT_FALSE(win.isWindowModified());
    doc.edit("steps", [](tessera::RunConfig& c) { c.train.steps = 7; });
    EXPECT_TRUE(win.isWindowModified());
    doc.undoStack()->undo();
    EXPECT_FALSE(win.isWindowModified());

    bool dark_seen = false;
    QObject::connect(&win, &MainWindow::themeChanged, [&](bool d) { dark_seen = d; });
    win.setDarkTheme(true);
    EXPECT_TRUE(dark_seen);
    EXPECT_TRUE(win.isDarkTheme());
    win.setDarkTheme(false);
    EXPECT_TRUE(win.recentProjects().contains(doc.projectDir()));
}
