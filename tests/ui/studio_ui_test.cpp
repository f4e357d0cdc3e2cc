// Studio tests, offscreen: project round-trip through ProjectDocument, broken files shown and left
// untouched, undo/redo of model edits, the layer table under QAbstractItemModelTester, the
// window title, safetensors import; the Model page's family and preset pickers and Hugging Face
// folders (good ones shown, bad ones refused with the engine's message), with screenshots in
// build/screenshots/.
#include <gtest/gtest.h>

#include <QAbstractItemModelTester>
#include <QAbstractItemView>
#include <QApplication>
#include <QComboBox>
#include <QDir>
#include <QFile>
#include <QPushButton>
#include <QSignalSpy>
#include <QSpinBox>
#include <QStandardPaths>
#include <QTemporaryDir>
#include <QTest>
#include <cstdlib>
#include <vector>

#include "engine/config/config.h"
#include "engine/io/safetensors.h"
#include "tests/support/paths.h"
#include "tests/support/ui_paths.h"
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

QString projects_dir() {
    return QString(TESSERA_TESTS_DIR) + "/../projects";
}

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

QString hf_fixture(const char* name) {
    return QString(TESSERA_TESTS_DIR) + "/model/data/hf/" + name;
}

// Picks `text` in a combo box as a user does: open the popup, click the item.
void choose(QComboBox* combo, const QString& text) {
    const int i = combo->findText(text);
    ASSERT_GE(i, 0) << text.toStdString() << " is not offered";
    combo->showPopup();
    QAbstractItemView* view = combo->view();
    const QModelIndex item = view->model()->index(i, 0);
    view->scrollTo(item);
    QTest::mouseClick(view->viewport(), Qt::LeftButton, {}, view->visualRect(item).center());
    QApplication::processEvents();
    ASSERT_EQ(combo->currentText(), text);
}

QStringList items(const QComboBox* combo) {
    QStringList out;
    for (int i = 0; i < combo->count(); ++i) out << combo->itemText(i);
    return out;
}

// The layer table's text at (row, column).
QString cell(const LayerTableModel* m, int row, int column) {
    return m->index(row, column).data().toString();
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
        QString dir = projects_dir() + "/" + name;
        if (!QFile::exists(dir + "/project.yaml")) continue;
        SCOPED_TRACE(name.toStdString());
        // a project whose data is made from text (prepare.sh) opens once prepared, as its README
        // says
        QTemporaryDir prepared;
        if (QFile::exists(dir + "/prepare.sh")) {
            const QString copy = prepared.filePath(name);
            ASSERT_EQ(std::system(("cp -r '" + dir + "' '" + copy + "' && TESSERA='" +
                                   QString(TESSERA_BIN_DIR) + "/tessera' bash '" + copy +
                                   "/prepare.sh' > /dev/null 2>&1")
                                      .toStdString()
                                      .c_str()),
                      0);
            dir = copy;
        }
        const QString yaml = dir + "/project.yaml";
        const QByteArray original_bytes = read_all(yaml);
        ProjectDocument doc;
        QString error;
        ASSERT_TRUE(doc.open(dir, &error)) << error.toStdString();
        QTemporaryDir tmp;
        if (dir !=
            projects_dir() + "/" + name)  // its prepared data goes along (relative data.train)
            ASSERT_EQ(std::system(("mkdir -p '" + tmp.filePath(name) + "' && cp -r '" + dir +
                                   "/data' '" + tmp.filePath(name) + "/data'")
                                      .toStdString()
                                      .c_str()),
                      0);
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
    doc.edit("preset",
             [](tessera::RunConfig& c) { tessera::model_apply_preset(c, "smollm-135m"); });
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
    for (int r = 0; r < n_specs; ++r)
        blocks += model.index(r, LayerTableModel::Kind).data() == "block";
    EXPECT_EQ(blocks, 12);
    const int total_row = model.rowCount() - 1;
    EXPECT_TRUE(model.isTotalsRow(total_row));
    const qlonglong total =
        model.index(total_row, LayerTableModel::Params).data(Qt::UserRole).toLongLong();
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
    tessera::safetensors_write(path,
                               {{"wte.weight", tessera::DType::f32, {256, 64}, wte.data()},
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

TEST_F(StudioTest, FamilyAndPresetPickersSwitchModelsAndTheTableShowsTheirParts) {
    QTemporaryDir tmp;
    ProjectDocument doc;
    QString error;
    ASSERT_TRUE(doc.open(copy_quickstart(tmp), &error)) << error.toStdString();
    ModelPage page(&doc);
    page.resize(1500, 920);
    page.show();
    QApplication::processEvents();
    QAbstractItemModelTester tester(page.layerModel(),
                                    QAbstractItemModelTester::FailureReportingMode::Fatal);
    auto* family = page.findChild<QComboBox*>("family");
    auto* preset = page.findChild<QComboBox*>("preset");
    auto* kv = page.findChild<QSpinBox*>("n_kv_head");
    ASSERT_TRUE(family && preset && kv);
    const LayerTableModel* table = page.layerModel();
    using C = LayerTableModel;

    // the engine's table, grouped: the project's gpt-tiny is a GPT-2
    EXPECT_EQ(items(family), (QStringList{"GPT-2", "Llama 3", "SmolLM", "Qwen2.5", "Qwen3",
                                          "TinyLlama", "Mistral", "MLP"}));
    EXPECT_EQ(family->currentText(), "GPT-2");
    EXPECT_EQ(items(preset),
              (QStringList{"gpt-tiny", "gpt2", "gpt2-medium", "gpt2-large", "gpt2-xl"}));
    EXPECT_EQ(preset->currentText(), "gpt-tiny");
    EXPECT_FALSE(kv->isVisibleTo(&page));  // GPT-2 has no kv heads

    // a family switches to its first preset; the preset list follows
    choose(family, "SmolLM");
    EXPECT_EQ(doc.config().model.preset, "smollm-135m");
    EXPECT_EQ(items(preset), (QStringList{"smollm-135m", "smollm2-360m"}));
    EXPECT_EQ(preset->currentText(), "smollm-135m");
    EXPECT_TRUE(kv->isVisibleTo(&page));
    EXPECT_EQ(kv->value(), 3);
    EXPECT_EQ(doc.undoStack()->count(), 1);
    EXPECT_EQ(page.validationText(), "");
    ASSERT_EQ(table->rowCount(), 1 + 30 + 1 + 1);  // embedding, blocks, head, totals
    EXPECT_EQ(cell(table, 0, C::Structure),
              "tokens 49152 × 576, tied to the head · positions: rotary θ 10000");
    EXPECT_EQ(cell(table, 1, C::Structure),
              "RMSNorm · attention 9 heads / 3 kv, head_dim 64 · RMSNorm · SwiGLU ffn 1536");
    EXPECT_EQ(cell(table, 31, C::Structure), "RMSNorm · tied to the embedding (49152 × 576)");
    const QString tip = table->index(1, C::Structure).data(Qt::ToolTipRole).toString();
    EXPECT_TRUE(
        tip.contains("attention: q 576 × 576, k and v 192 × 576 each, o 576 × 576 = 884.7 K"))
        << tip.toStdString();
    EXPECT_TRUE(
        tip.contains("MLP (SwiGLU): gate and up 1536 × 576 each, down 576 × 1536 = 2.65 M"));
    EXPECT_TRUE(tip.contains("RMSNorm × 2: 1152"));
    EXPECT_EQ(table->index(1, C::Params).data(Qt::UserRole).toLongLong(), 3540096);
    EXPECT_GT(table->index(1, C::ActivationBytes).data(Qt::UserRole).toLongLong(), 0);
    EXPECT_EQ(table->index(32, C::Params).data(Qt::UserRole).toLongLong(),
              134515008);  // SmolLM-135M
    EXPECT_EQ(cell(table, 32, C::Params), "134.52 M");
    QApplication::processEvents();  // the layout settles, as on screen
    EXPECT_TRUE(
        page.grab().save(tessera::test_support::screenshot_dir() + "/model_page_smollm_135m.png"));

    choose(preset, "smollm2-360m");
    EXPECT_EQ(doc.config().model.preset, "smollm2-360m");
    EXPECT_EQ(family->currentText(), "SmolLM");
    EXPECT_EQ(cell(table, 1, C::Structure),
              "RMSNorm · attention 15 heads / 5 kv, head_dim 64 · RMSNorm · SwiGLU ffn 2560");

    // untied embeddings: the head has its own lm_head
    choose(family, "Mistral");
    EXPECT_EQ(doc.config().model.preset, "mistral-7b");
    EXPECT_EQ(cell(table, 0, C::Structure),
              "tokens 32000 × 4096, untied (own lm_head) · positions: rotary θ 10000");
    EXPECT_EQ(cell(table, 33, C::Structure), "RMSNorm · lm_head 32000 × 4096");
    EXPECT_EQ(table->index(34, C::Params).data(Qt::UserRole).toLongLong(),
              7241732096);  // Mistral-7B

    // Qwen2.5: biases on q, k, v
    choose(family, "Qwen2.5");
    EXPECT_EQ(doc.config().model.preset, "qwen2.5-0.5b");
    EXPECT_EQ(
        cell(table, 1, C::Structure),
        "RMSNorm · attention 14 heads / 2 kv, head_dim 64, qkv bias · RMSNorm · SwiGLU ffn 4864");
    EXPECT_EQ(table->index(table->rowCount() - 1, C::Params).data(Qt::UserRole).toLongLong(),
              494032768);

    // Qwen3: q/k norm, head_dim 128 wider than hidden / heads (1024 / 16)
    choose(family, "Qwen3");
    EXPECT_EQ(doc.config().model.preset, "qwen3-0.6b");
    EXPECT_EQ(
        cell(table, 1, C::Structure),
        "RMSNorm · attention 16 heads / 8 kv, head_dim 128, q/k norm · RMSNorm · SwiGLU ffn 3072");
    // the published Qwen3-0.6B: 0.44B non-embedding parameters, 151936 × 1024 tied embedding
    EXPECT_EQ(table->index(table->rowCount() - 1, C::Params).data(Qt::UserRole).toLongLong(),
              596049920);

    // Llama 3.2: llama3 rotary scaling in the embedding row
    choose(family, "Llama 3");
    choose(preset, "llama-3.2-1b");
    EXPECT_EQ(cell(table, 0, C::Structure),
              "tokens 128256 × 2048, tied to the head · positions: rotary θ 500000, llama3 ×32");
    EXPECT_EQ(page.validationText(), "");

    // and back to GPT-2: the page's GPT figures as before
    choose(family, "GPT-2");
    choose(preset, "gpt2");
    EXPECT_EQ(doc.config().model.preset, "gpt2");
    EXPECT_FALSE(kv->isVisibleTo(&page));
    EXPECT_EQ(cell(table, 1, C::Structure),
              "LayerNorm · attention 12 heads, head_dim 64 · LayerNorm · GELU MLP 3072");
    EXPECT_EQ(cell(table, 0, C::Structure), "wte 50257 × 768, tied to the head · wpe 1024 × 768");
    EXPECT_EQ(cell(table, table->rowCount() - 1, C::Params), "124.44 M");
    EXPECT_EQ(tessera::model_check_config(doc.config()), "");

    // every pick was one undo step
    EXPECT_EQ(doc.undoStack()->count(), 9);
    while (doc.undoStack()->canUndo()) doc.undoStack()->undo();
    EXPECT_EQ(doc.config().model.preset, "gpt-tiny");
    EXPECT_EQ(family->currentText(), "GPT-2");
    EXPECT_FALSE(doc.isModified());
}

TEST_F(StudioTest, OpenModelFolderRefusesBadFoldersWithTheEngineMessageAndKeepsTheProject) {
    QTemporaryDir tmp;
    ProjectDocument doc;
    QString error;
    const QString dir = copy_quickstart(tmp);
    ASSERT_TRUE(doc.open(dir, &error)) << error.toStdString();
    ModelPage page(&doc);
    page.resize(1500, 920);
    page.show();
    QSignalSpy failed(&page, &ModelPage::modelFolderFailed);
    doc.edit("steps", [](tessera::RunConfig& c) { c.train.steps = 7; });  // unsaved work to keep
    const tessera::RunConfig before = doc.config();
    const QByteArray yaml = read_all(dir + "/project.yaml");

    struct Bad {
        const char* name;
        QByteArray config;
        const char* says;
    };
    const QByteArray llama = read_all(hf_fixture("llama3_tied") + "/config.json");
    QByteArray bert = llama;
    bert.replace("LlamaForCausalLM", "BertForMaskedLM");
    for (const Bad& b :
         {Bad{"no_config", "",
              "config.json: model.init_from is a folder, expected its config.json"},
          Bad{"not_json", "{\"architectures\": [\"LlamaForCausalLM\",",
              "config.json: not valid JSON"},
          Bad{"bert", bert,
              "architectures: expected one of LlamaForCausalLM, MistralForCausalLM, "
              "Qwen2ForCausalLM, Qwen3ForCausalLM, GPT2LMHeadModel, found BertForMaskedLM"},
          Bad{"no_weights", llama, "expected model.safetensors in the model folder"}}) {
        SCOPED_TRACE(b.name);
        const QString bad = tmp.filePath(b.name);
        QDir().mkpath(bad);
        if (!b.config.isEmpty()) write_all(bad + "/config.json", b.config);
        EXPECT_FALSE(page.openModelFolder(bad));
        ASSERT_FALSE(failed.isEmpty());
        const QString message = failed.takeLast().at(0).toString();
        EXPECT_TRUE(message.contains(b.says)) << message.toStdString();
        EXPECT_TRUE(message.contains(bad))
            << message.toStdString();  // names the folder or its file
        EXPECT_TRUE(page.validationText().contains(message)) << page.validationText().toStdString();
        EXPECT_TRUE(doc.config() == before);
        EXPECT_EQ(doc.undoStack()->count(), 1);
    }
    EXPECT_FALSE(page.openModelFolder(tmp.filePath("nowhere")));
    EXPECT_TRUE(
        failed.takeLast().at(0).toString().contains("expected a Hugging Face model folder"));
    // the unsupported architecture's message, as the page shows it
    EXPECT_FALSE(page.openModelFolder(tmp.filePath("bert")));
    QApplication::processEvents();  // the layout settles, as on screen
    EXPECT_TRUE(
        page.grab().save(tessera::test_support::screenshot_dir() + "/model_page_bad_folder.png"));
    EXPECT_TRUE(doc.config() == before);
    EXPECT_TRUE(doc.isModified());  // the user's own edit, still there
    EXPECT_EQ(read_all(dir + "/project.yaml"), yaml);

    // a later good folder clears the message
    ASSERT_TRUE(page.openModelFolder(hf_fixture("llama3_tied")));
    EXPECT_EQ(page.validationText(), "");
    EXPECT_EQ(doc.config().train.steps, 7);
}

TEST_F(StudioTest, OpenModelFolderShowsTheFolderModelAndSavesARelativeInitFrom) {
    QTemporaryDir tmp;
    ProjectDocument doc;
    QString error;
    const QString dir = copy_quickstart(tmp);
    ASSERT_TRUE(doc.open(dir, &error)) << error.toStdString();
    ModelPage page(&doc);
    page.resize(1500, 920);
    page.show();
    QAbstractItemModelTester tester(page.layerModel(),
                                    QAbstractItemModelTester::FailureReportingMode::Fatal);
    auto* family = page.findChild<QComboBox*>("family");
    auto* preset = page.findChild<QComboBox*>("preset");
    auto* layers = page.findChild<QSpinBox*>("n_layer");
    auto* seq = page.findChild<QSpinBox*>("seq_len");
    ASSERT_TRUE(family && preset && layers && seq);
    const LayerTableModel* table = page.layerModel();
    using C = LayerTableModel;

    // outside the project: an absolute init_from
    const QString llama = QDir(hf_fixture("llama3_tied")).absolutePath();
    ASSERT_TRUE(page.openModelFolder(llama)) << page.validationText().toStdString();
    const tessera::ModelConfig& m = doc.config().model;
    EXPECT_EQ(m.init_from, llama.toStdString());
    EXPECT_TRUE(m.from_folder);
    EXPECT_EQ(m.preset, "llama");
    EXPECT_EQ(m.n_layer, 2);
    EXPECT_EQ(m.n_head, 4);
    EXPECT_EQ(m.n_kv_head, 2);
    EXPECT_EQ(m.head_dim, 8);
    EXPECT_EQ(m.ffn, 48);
    EXPECT_EQ(m.vocab_size, 96);
    EXPECT_EQ(m.seq_len, 64);  // the folder's max_position_embeddings
    EXPECT_EQ(page.validationText(), "");
    EXPECT_EQ(family->currentIndex(), -1);
    EXPECT_EQ(family->placeholderText(), "Hugging Face folder");
    EXPECT_EQ(preset->placeholderText(), "LlamaForCausalLM");
    EXPECT_FALSE(layers->isEnabled());  // config.json sets it
    EXPECT_TRUE(seq->isEnabled());
    ASSERT_EQ(table->rowCount(), 1 + 2 + 1 + 1);
    EXPECT_EQ(cell(table, 0, C::Structure),
              "tokens 96 × 32, tied to the head · positions: rotary θ 500, llama3 ×8");
    EXPECT_EQ(cell(table, 1, C::Structure),
              "RMSNorm · attention 4 heads / 2 kv, head_dim 8 · RMSNorm · SwiGLU ffn 48");
    EXPECT_EQ(cell(table, 3, C::Structure), "RMSNorm · tied to the embedding (96 × 32)");
    // 96·32 embedding + 2 blocks of (2·32 + 64·32 + 32·32 + 3·48·32) + the final norm's 32
    EXPECT_EQ(table->index(4, C::Params).data(Qt::UserRole).toLongLong(), 3072 + 2 * 7744 + 32);
    QApplication::processEvents();  // the layout settles, as on screen
    EXPECT_TRUE(page.grab().save(tessera::test_support::screenshot_dir() +
                                 "/model_page_hf_llama3_tied.png"));

    // inside the project: relative to project.yaml, as the engine resolves it
    const QString qwen = dir + "/models/qwen2_bias";
    QDir().mkpath(qwen);
    for (const QString& f : QDir(hf_fixture("qwen2_bias")).entryList(QDir::Files))
        ASSERT_TRUE(QFile::copy(hf_fixture("qwen2_bias") + "/" + f, qwen + "/" + f));
    ASSERT_TRUE(page.openModelFolder(qwen)) << page.validationText().toStdString();
    EXPECT_EQ(doc.config().model.init_from, "models/qwen2_bias");
    EXPECT_EQ(preset->placeholderText(), "Qwen2ForCausalLM");
    EXPECT_EQ(cell(table, 1, C::Structure),
              "RMSNorm · attention 4 heads / 1 kv, head_dim 8, qkv bias · RMSNorm · SwiGLU ffn 48");
    seq->setValue(32);  // the one size the project keeps beside a folder
    EXPECT_EQ(doc.config().model.seq_len, 32);
    const tessera::RunConfig edited = doc.config();
    ASSERT_TRUE(doc.save(&error)) << error.toStdString();
    const tessera::RunConfig saved = tessera::config_load((dir + "/project.yaml").toStdString());
    EXPECT_TRUE(saved.model.from_folder);
    EXPECT_EQ(saved.model.init_from, "models/qwen2_bias");
    EXPECT_EQ(saved.model.seq_len, 32);
    EXPECT_TRUE(content(saved) == content(edited)) << tessera::config_to_yaml(saved);

    // a family leaves the folder for its first preset; undo comes back to it
    choose(family, "TinyLlama");
    EXPECT_EQ(doc.config().model.preset, "tinyllama-1.1b");
    EXPECT_TRUE(doc.config().model.init_from.empty());
    EXPECT_FALSE(doc.config().model.from_folder);
    EXPECT_TRUE(layers->isEnabled());
    EXPECT_EQ(cell(table, table->rowCount() - 2, C::Structure), "RMSNorm · lm_head 32000 × 2048");
    doc.undoStack()->undo();
    EXPECT_EQ(doc.config().model.init_from, "models/qwen2_bias");
    EXPECT_EQ(family->currentIndex(), -1);
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
