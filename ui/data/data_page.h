// The Data page: the user's own text into the project's training data. Pick input files and
// folders (.txt, .jsonl, .jsonl.gz), the JSONL field, the tokenizer (the model's by default), the
// validation fraction and the output folder; Prepare runs the engine's data_prepare off the GUI
// thread with a progress bar and Cancel. When it ends the page shows documents, tokens, the
// tokens-per-document histogram and a few decoded documents (decoded on a worker thread: the
// tokenizer takes a second to load; "loading samples…" until then), and sets the project's
// data.train / data.val (and model.vocab when another tokenizer was chosen) as one undoable edit. A
// bad input is shown on the page with the engine's message (file:line), and nothing is
// half-written. Opening a project whose data.train lies in a prepared folder shows that folder's
// summary. The reading order (data.order: random windows, or each window once per epoch) is set
// here too.
#pragma once
#include <QString>
#include <QStringList>
#include <QWidget>

#include "engine/data/prepare.h"

class QCheckBox;
class QComboBox;
class QDoubleSpinBox;
class QLabel;
class QLineEdit;
class QListWidget;
class QPlainTextEdit;
class QProgressBar;
class QPushButton;
class QCustomPlot;

namespace tessera::studio {

class ProjectDocument;
class PrepareRunner;
class SamplesLoader;

class DataPage : public QWidget {
    Q_OBJECT
  public:
    explicit DataPage(ProjectDocument* doc, QWidget* parent = nullptr);

    // What the form holds, as the engine takes it (tokenizer spec and paths resolved).
    tessera::PrepareOptions options() const;
    void setInputs(const QStringList& paths);
    void setField(const QString& field);
    void setValFraction(double f);
    void setOutputDir(const QString& dir);  // relative paths are against the project folder
    // "" = the model's own tokenizer; else bytes, gpt2 or a tokenizer.json path
    void setTokenizer(const QString& spec);

    bool isPreparing() const;
    QString statusText() const;
    const tessera::PreparedSet& preparedSet() const { return m_set; }
    QStringList sampleTexts() const { return m_samples; }  // empty while they load
    bool isLoadingSamples() const;

  public Q_SLOTS:
    bool prepare();  // false (and prepareFailed) when the form is incomplete or a job runs
    void cancel();
    void setDarkTheme(bool dark);

  Q_SIGNALS:
    void prepareFinished(const QString& dir);
    void prepareFailed(const QString& message);
    void prepareCancelled();
    void samplesShown(const QString& dir);  // the decoded samples of the shown folder (or why none)

  private:
    void refresh();  // project -> defaults and the current prepared folder
    void showSet(const tessera::PreparedSet& set, bool justPrepared);
    void showSamples(const QString& dir, const QStringList& samples);
    void showProgress(const tessera::PrepareProgress& p);
    void showError(const QString& message);
    void setBusy(bool busy);
    void addFiles();
    void addFolder();
    void chooseTokenizerFile();
    void chooseOutputDir();
    QString modelTokenizer() const;  // the project's tokenizer spec, resolved
    QString tokenizerSpec() const;   // what Prepare uses
    QString projectRelative(const QString& path) const;
    QString resolved(const QString& path) const;

    ProjectDocument* m_doc;
    PrepareRunner* m_runner;
    SamplesLoader* m_samplesLoader;
    QListWidget* m_inputs;
    QPushButton *m_addFiles, *m_addFolder, *m_remove;
    QLineEdit* m_field;
    QComboBox* m_tokenizer;
    QDoubleSpinBox* m_valFraction;
    QCheckBox* m_eos;
    QCheckBox* m_skipBad;
    QLineEdit* m_outDir;
    QComboBox* m_order;  // data.order of the project: edited at once (undoable)
    QPushButton *m_prepare, *m_cancel;
    QProgressBar* m_progress;
    QLabel* m_status;
    QLabel* m_summary;
    QCustomPlot* m_hist;
    QPlainTextEdit* m_samplesView;
    tessera::PreparedSet m_set;
    QStringList m_samples;
    QString m_statusText;
    QString m_tokenizerUsed;  // the spec the running job was started with
    bool m_dark = false;
};

}  // namespace tessera::studio
