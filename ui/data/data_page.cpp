#include "ui/data/data_page.h"

#include <QCheckBox>
#include <QComboBox>
#include <QDir>
#include <QDoubleSpinBox>
#include <QFileDialog>
#include <QFileInfo>
#include <QFormLayout>
#include <QGroupBox>
#include <QHBoxLayout>
#include <QLabel>
#include <QLineEdit>
#include <QListWidget>
#include <QPlainTextEdit>
#include <QProgressBar>
#include <QPushButton>
#include <QSignalBlocker>
#include <QSplitter>
#include <QVBoxLayout>
#include <algorithm>
#include <cmath>

#include "engine/config/config.h"
#include "engine/core/tokenizer_names.h"
#include "ui/common/plot_theme.h"
#include "ui/common/project_document.h"
#include "ui/common/qcustomplot_qt.h"
#include "ui/data/prepare_runner.h"
#include "ui/data/samples_loader.h"
#include "ui/model/model_facts.h"

namespace tessera::studio {

namespace {

QString q(const std::string& s) {
    return QString::fromStdString(s);
}

QString count(double n) {
    return q(tessera::format_count(n));
}

QString duration(double s) {
    if (s < 0) return QStringLiteral("–");
    const int t = (int)std::lround(s);
    return t >= 3600 ? QStringLiteral("%1:%2:%3")
                           .arg(t / 3600)
                           .arg(t / 60 % 60, 2, 10, QChar('0'))
                           .arg(t % 60, 2, 10, QChar('0'))
                     : QStringLiteral("%1:%2").arg(t / 60).arg(t % 60, 2, 10, QChar('0'));
}

}  // namespace

DataPage::DataPage(ProjectDocument* doc, QWidget* parent)
    : QWidget(parent),
      m_doc(doc),
      m_runner(new PrepareRunner(this)),
      m_samplesLoader(new SamplesLoader(this)) {
    // ---- inputs and options (left) -------------------------------------------------------
    m_inputs = new QListWidget;
    m_inputs->setObjectName("inputs");
    m_inputs->setSelectionMode(QAbstractItemView::ExtendedSelection);
    m_inputs->setToolTip(
        tr(".txt files (one document each), .jsonl and .jsonl.gz (one document per line), "
           "and folders holding them"));
    m_addFiles = new QPushButton(tr("Add files…"));
    m_addFolder = new QPushButton(tr("Add folder…"));
    m_remove = new QPushButton(tr("Remove"));
    auto* inputButtons = new QHBoxLayout;
    inputButtons->addWidget(m_addFiles);
    inputButtons->addWidget(m_addFolder);
    inputButtons->addWidget(m_remove);
    inputButtons->addStretch(1);

    m_field = new QLineEdit("text");
    m_field->setObjectName("field");
    m_field->setToolTip(tr("The JSONL key holding each document's text"));
    m_tokenizer = new QComboBox;
    m_tokenizer->setObjectName("tokenizer");
    m_tokenizer->addItem(QString(), QString());  // the model's own (text set by refresh)
    m_tokenizer->addItem(tr("bytes (256)"), "bytes");
    m_tokenizer->addItem(tr("gpt2 (50257)"), "gpt2");
    auto* chooseTok = new QPushButton(tr("tokenizer.json…"));
    auto* tokRow = new QHBoxLayout;
    tokRow->addWidget(m_tokenizer, 1);
    tokRow->addWidget(chooseTok);
    m_valFraction = new QDoubleSpinBox;
    m_valFraction->setObjectName("valFraction");
    m_valFraction->setRange(0.0, 0.5);
    m_valFraction->setDecimals(3);
    m_valFraction->setSingleStep(0.01);
    m_valFraction->setValue(0.05);
    m_valFraction->setToolTip(tr("Share of whole documents held out for validation"));
    m_eos = new QCheckBox(tr("end each document with the tokenizer's EOS"));
    m_eos->setChecked(true);
    m_skipBad = new QCheckBox(tr("skip malformed JSONL lines (counted)"));
    m_skipBad->setObjectName("skipBad");
    m_outDir = new QLineEdit;
    m_outDir->setObjectName("outDir");
    m_outDir->setToolTip(
        tr("The prepared folder: train.bin, val.bin, manifest.json (relative to the project)"));
    auto* chooseOut = new QPushButton(tr("…"));
    auto* outRow = new QHBoxLayout;
    outRow->addWidget(m_outDir, 1);
    outRow->addWidget(chooseOut);

    m_order = new QComboBox;
    m_order->setObjectName("order");
    m_order->addItem(tr("random windows"), "random");
    m_order->addItem(tr("each window once per epoch, shuffled"), "epoch");
    m_order->setToolTip(
        tr("data.order: how training reads the prepared tokens (docs/data.md, Reading order)"));

    auto* form = new QFormLayout;
    form->addRow(tr("JSONL field"), m_field);
    form->addRow(tr("Tokenizer"), tokRow);
    form->addRow(tr("Validation"), m_valFraction);
    form->addRow(QString(), m_eos);
    form->addRow(QString(), m_skipBad);
    form->addRow(tr("Output folder"), outRow);
    form->addRow(tr("Reading order"), m_order);

    m_prepare = new QPushButton(tr("Prepare"));
    m_prepare->setObjectName("prepare");
    m_prepare->setDefault(true);
    m_cancel = new QPushButton(tr("Cancel"));
    m_cancel->setObjectName("cancel");
    m_cancel->setEnabled(false);
    m_progress = new QProgressBar;
    m_progress->setRange(0, 1000);
    m_progress->setValue(0);
    m_progress->setTextVisible(true);
    m_progress->setFormat(QString());
    auto* runRow = new QHBoxLayout;
    runRow->addWidget(m_prepare);
    runRow->addWidget(m_cancel);
    runRow->addWidget(m_progress, 1);
    m_status = new QLabel;
    m_status->setObjectName("status");
    m_status->setWordWrap(true);
    m_status->setTextInteractionFlags(Qt::TextSelectableByMouse);

    auto* inputsBox = new QGroupBox(tr("Your text"));
    auto* inputsLayout = new QVBoxLayout(inputsBox);
    inputsLayout->addWidget(m_inputs, 1);
    inputsLayout->addLayout(inputButtons);
    inputsLayout->addLayout(form);
    inputsLayout->addLayout(runRow);
    inputsLayout->addWidget(m_status);

    // ---- the prepared data (right) -------------------------------------------------------
    m_summary = new QLabel(tr("Nothing prepared yet."));
    m_summary->setObjectName("summary");
    m_summary->setWordWrap(true);
    m_summary->setTextInteractionFlags(Qt::TextSelectableByMouse);
    m_hist = new QCustomPlot;
    m_hist->setMinimumHeight(220);
    m_hist->plotLayout()->insertRow(0);
    m_hist->plotLayout()->addElement(0, 0,
                                     new QCPTextElement(m_hist, tr("tokens per document"),
                                                        QFont(font().family(), 10, QFont::Bold)));
    new QCPBars(m_hist->xAxis, m_hist->yAxis);
    m_hist->yAxis->setLabel(tr("documents"));
    m_hist->setVisible(false);  // until there is a prepared folder
    m_samplesView = new QPlainTextEdit;
    m_samplesView->setObjectName("samples");
    m_samplesView->setReadOnly(true);
    m_samplesView->setPlaceholderText(
        tr("A few documents of the prepared train split, decoded with its tokenizer"));
    auto* resultBox = new QGroupBox(tr("Prepared data"));
    auto* resultLayout = new QVBoxLayout(resultBox);
    resultLayout->addWidget(m_summary);
    resultLayout->addWidget(m_hist, 2);
    resultLayout->addWidget(new QLabel(tr("Decoded samples")));
    resultLayout->addWidget(m_samplesView, 1);

    auto* split = new QSplitter;
    split->addWidget(inputsBox);
    split->addWidget(resultBox);
    split->setStretchFactor(0, 1);
    split->setStretchFactor(1, 1);
    auto* root = new QVBoxLayout(this);
    root->addWidget(split);

    // ---- behaviour -------------------------------------------------------------------------
    connect(m_addFiles, &QPushButton::clicked, this, &DataPage::addFiles);
    connect(m_addFolder, &QPushButton::clicked, this, &DataPage::addFolder);
    connect(m_remove, &QPushButton::clicked, this,
            [this] { qDeleteAll(m_inputs->selectedItems()); });
    connect(chooseTok, &QPushButton::clicked, this, &DataPage::chooseTokenizerFile);
    connect(chooseOut, &QPushButton::clicked, this, &DataPage::chooseOutputDir);
    connect(m_prepare, &QPushButton::clicked, this, &DataPage::prepare);
    connect(m_cancel, &QPushButton::clicked, this, &DataPage::cancel);
    connect(m_runner, &PrepareRunner::progressed, this, &DataPage::showProgress);
    connect(m_runner, &PrepareRunner::finished, this, [this](const tessera::PreparedSet& set) {
        setBusy(false);
        m_progress->setValue(m_progress->maximum());
        m_set = set;
        showSet(set, true);
        // the project reads what was just prepared (one undoable edit)
        const std::string train = projectRelative(q(set.train_path)).toStdString();
        const std::string val =
            set.val_tokens > 0 ? projectRelative(q(set.val_path)).toStdString() : std::string();
        const QString tok = m_tokenizerUsed;
        const bool newTokenizer = tok != modelTokenizer();
        const std::string vocab = tessera::tokenizer_is_named(tok.toStdString())
                                      ? tok.toStdString()
                                      : projectRelative(tok).toStdString();
        m_doc->edit(tr("Data from %1").arg(QDir(set.dir.c_str()).dirName()),
                    [=](tessera::RunConfig& c) {
                        c.data.dataset.clear();
                        c.data.train = train;
                        c.data.val = val;
                        if (newTokenizer) c.model.vocab = vocab;
                    });
        Q_EMIT prepareFinished(q(set.dir));
    });
    connect(m_runner, &PrepareRunner::failed, this, [this](const QString& message) {
        setBusy(false);
        showError(message);
        Q_EMIT prepareFailed(message);
    });
    connect(m_runner, &PrepareRunner::cancelled, this, [this] {
        setBusy(false);
        m_progress->setValue(0);
        m_progress->setFormat(QString());
        m_statusText =
            tr("Cancelled: nothing was written (finished inputs are kept for the next run).");
        m_status->setStyleSheet(QString());
        m_status->setText(m_statusText);
        Q_EMIT prepareCancelled();
    });
    connect(m_samplesLoader, &SamplesLoader::loaded, this,
            [this](const QString& dir, const QStringList& samples) { showSamples(dir, samples); });
    connect(m_samplesLoader, &SamplesLoader::failed, this,
            [this](const QString& dir, const QString& message) {
                showSamples(dir, {tr("(no samples: %1)").arg(message)});
            });
    connect(m_order, &QComboBox::activated, this, [this](int i) {
        const std::string order = m_order->itemData(i).toString().toStdString();
        if (order == m_doc->config().data.order) return;
        m_doc->edit(tr("Reading order %1").arg(q(order)),
                    [order](tessera::RunConfig& c) { c.data.order = order; });
    });
    connect(m_doc, &ProjectDocument::configChanged, this, &DataPage::refresh);
    connect(m_doc, &ProjectDocument::opened, this, [this] {
        m_outDir->clear();
        m_set = {};
        m_samples.clear();
        m_samplesLoader->drop();
        m_samplesView->clear();
        refresh();
    });
    refresh();
}

// ---- form -----------------------------------------------------------------------------------

QString DataPage::projectRelative(const QString& path) const {
    const QString abs = QFileInfo(path).absoluteFilePath();
    if (m_doc->projectDir().isEmpty()) return abs;
    const QString r = QDir(m_doc->projectDir()).relativeFilePath(abs);
    return r.startsWith("..") || QDir::isAbsolutePath(r) ? abs : r;
}

QString DataPage::resolved(const QString& path) const {
    if (path.isEmpty() || QDir::isAbsolutePath(path) || m_doc->projectDir().isEmpty()) return path;
    return QDir(m_doc->projectDir()).absoluteFilePath(path);
}

QString DataPage::modelTokenizer() const {
    return m_doc->isOpen() ? q(tessera::config_tokenizer(m_doc->config()))
                           : QStringLiteral("bytes");
}

QString DataPage::tokenizerSpec() const {
    const QString v = m_tokenizer->currentData().toString();
    return v.isEmpty() ? modelTokenizer() : v;
}

tessera::PrepareOptions DataPage::options() const {
    tessera::PrepareOptions o;
    o.tokenizer = tokenizerSpec().toStdString();
    for (int i = 0; i < m_inputs->count(); ++i)
        o.inputs.push_back(resolved(m_inputs->item(i)->text()).toStdString());
    o.field = m_field->text().trimmed().toStdString();
    o.out = resolved(m_outDir->text().trimmed()).toStdString();
    o.val_fraction = m_valFraction->value();
    o.eos = m_eos->isChecked();
    o.skip_bad = m_skipBad->isChecked();
    return o;
}

void DataPage::setInputs(const QStringList& paths) {
    m_inputs->clear();
    m_inputs->addItems(paths);
}
void DataPage::setField(const QString& field) {
    m_field->setText(field);
}
void DataPage::setValFraction(double f) {
    m_valFraction->setValue(f);
}
void DataPage::setOutputDir(const QString& dir) {
    m_outDir->setText(dir);
}

void DataPage::setTokenizer(const QString& spec) {
    if (spec.isEmpty()) return m_tokenizer->setCurrentIndex(0);
    int i = m_tokenizer->findData(spec);
    if (i < 0) {
        m_tokenizer->addItem(QFileInfo(spec).fileName() == "tokenizer.json"
                                 ? QFileInfo(spec).dir().dirName() + "/tokenizer.json"
                                 : spec,
                             spec);
        i = m_tokenizer->count() - 1;
    }
    m_tokenizer->setCurrentIndex(i);
}

void DataPage::addFiles() {
    const QStringList files = QFileDialog::getOpenFileNames(
        this, tr("Add text or JSONL files"), m_doc->projectDir(),
        tr("Text and JSONL (*.txt *.jsonl *.jsonl.gz);;All files (*)"));
    for (const QString& f : files) m_inputs->addItem(projectRelative(f));
}

void DataPage::addFolder() {
    const QString dir = QFileDialog::getExistingDirectory(
        this, tr("Add a folder of .txt / .jsonl files"), m_doc->projectDir());
    if (!dir.isEmpty()) m_inputs->addItem(projectRelative(dir));
}

void DataPage::chooseTokenizerFile() {
    const QString f =
        QFileDialog::getOpenFileName(this, tr("A Hugging Face tokenizer.json"), m_doc->projectDir(),
                                     tr("tokenizer.json (tokenizer.json);;JSON (*.json)"));
    if (!f.isEmpty()) setTokenizer(QFileInfo(f).absoluteFilePath());
}

void DataPage::chooseOutputDir() {
    const QString dir =
        QFileDialog::getExistingDirectory(this, tr("The prepared folder"), m_doc->projectDir());
    if (!dir.isEmpty()) m_outDir->setText(projectRelative(dir));
}

// ---- running --------------------------------------------------------------------------------

bool DataPage::isPreparing() const {
    return m_runner->isRunning();
}
QString DataPage::statusText() const {
    return m_statusText;
}

bool DataPage::prepare() {
    QString problem;
    if (!m_doc->isOpen())
        problem = tr("Open or create a project first.");
    else if (m_runner->isRunning())
        problem = tr("A preparation is already running.");
    else if (m_inputs->count() == 0)
        problem = tr("Add at least one input file or folder.");
    else if (m_outDir->text().trimmed().isEmpty())
        problem = tr("Choose an output folder.");
    else if (m_field->text().trimmed().isEmpty())
        problem = tr("Name the JSONL field holding the text.");
    if (!problem.isEmpty()) {
        showError(problem);
        Q_EMIT prepareFailed(problem);
        return false;
    }
    m_tokenizerUsed = tokenizerSpec();
    setBusy(true);
    m_progress->setValue(0);
    m_progress->setFormat(tr("starting…"));
    m_statusText = tr("Reading the tokenizer and the inputs…");
    m_status->setStyleSheet(QString());
    m_status->setText(m_statusText);
    return m_runner->start(options());
}

void DataPage::cancel() {
    if (!m_runner->isRunning()) return;
    m_runner->cancel();
    m_status->setText(tr("Cancelling…"));
}

void DataPage::setBusy(bool busy) {
    for (QWidget* w :
         {(QWidget*)m_prepare, (QWidget*)m_addFiles, (QWidget*)m_addFolder, (QWidget*)m_remove,
          (QWidget*)m_field, (QWidget*)m_tokenizer, (QWidget*)m_valFraction, (QWidget*)m_outDir,
          (QWidget*)m_eos, (QWidget*)m_skipBad})
        w->setEnabled(!busy);
    m_cancel->setEnabled(busy);
}

void DataPage::showProgress(const tessera::PrepareProgress& p) {
    const double frac = p.bytes_total > 0 ? (double)p.bytes_done / p.bytes_total : 0;
    m_progress->setValue((int)std::lround(frac * m_progress->maximum()));
    m_progress->setFormat(QStringLiteral("%1%").arg(frac * 100, 0, 'f', 0));
    m_statusText = tr("%1 of %2 · input %3 of %4 · %5 documents · %6 tokens · %7 MB/s · %8 left")
                       .arg(q(tessera::format_bytes((double)p.bytes_done)),
                            q(tessera::format_bytes((double)p.bytes_total)))
                       .arg(p.inputs_done)
                       .arg(p.inputs_total)
                       .arg(count((double)p.documents), count((double)p.tokens))
                       .arg(p.mb_per_s(), 0, 'f', 1)
                       .arg(duration(p.eta_seconds()));
    if (p.skipped_lines > 0) m_statusText += tr(" · %1 bad lines skipped").arg(p.skipped_lines);
    m_status->setStyleSheet(QString());
    m_status->setText(m_statusText);
}

void DataPage::showError(const QString& message) {
    m_progress->setValue(0);
    m_progress->setFormat(QString());
    m_statusText = message;
    m_status->setStyleSheet("color: #c62828;");
    m_status->setText(message);
}

// ---- results --------------------------------------------------------------------------------

void DataPage::showSet(const tessera::PreparedSet& set, bool justPrepared) {
    // the samples need the tokenizer (a second for Qwen3): loaded off the GUI thread
    m_samples.clear();
    m_samplesView->setPlainText(tr("loading samples…"));
    m_samplesView->setEnabled(false);
    m_samplesLoader->request(q(set.dir), q(set.tokenizer), 3, 120);
    QString text =
        tr("<b>%1</b> documents (%2 train, %3 validation)<br>%4 train tokens · %5 validation tokens"
           "<br>tokenizer %6 (%7 ids) · from %8 of input")
            .arg(count((double)set.documents), count((double)set.train_documents),
                 count((double)set.val_documents), count((double)set.train_tokens),
                 count((double)set.val_tokens), q(set.tokenizer).toHtmlEscaped())
            .arg(set.vocab_size)
            .arg(q(tessera::format_bytes((double)set.input_bytes)));
    if (set.skipped_lines > 0) text += tr("<br>%1 malformed lines skipped").arg(set.skipped_lines);
    text += tr("<br><i>%1</i>").arg(q(set.dir).toHtmlEscaped());
    m_summary->setText(text);
    if (justPrepared) {
        m_statusText =
            set.up_to_date
                ? tr("Up to date: the inputs and tokenizer are unchanged, nothing was rewritten.")
                : tr("Prepared. The project trains on %1.").arg(projectRelative(q(set.train_path)));
        m_status->setStyleSheet(QString());
        m_status->setText(m_statusText);
    }

    // the bins from the first to the last non-empty one
    auto* bars = qobject_cast<QCPBars*>(m_hist->plottable(0));
    QVector<double> keys, values;
    QSharedPointer<QCPAxisTickerText> ticker(new QCPAxisTickerText);
    int first = 0, last = (int)set.hist_counts.size() - 1;
    while (first <= last && set.hist_counts[first] == 0) ++first;
    while (last >= first && set.hist_counts[last] == 0) --last;
    for (int i = first; i <= last; ++i) {
        const int k = i - first;
        keys << k;
        values << (double)set.hist_counts[i];
        if (i + 1 < (int)set.hist_edges.size())
            ticker->addTick(k, QStringLiteral("%1–%2").arg(
                                   q(tessera::format_count((double)set.hist_edges[i])),
                                   q(tessera::format_count((double)set.hist_edges[i + 1]))));
    }
    const int n = (int)keys.size();
    bars->setData(keys, values);
    bars->setWidth(0.8);
    m_hist->xAxis->setTicker(ticker);
    m_hist->xAxis->setTickLabelRotation(n > 6 ? 45 : 0);
    m_hist->xAxis->setRange(-0.7, std::max(n, 1) - 0.3);
    const double peak = values.isEmpty() ? 1 : *std::max_element(values.begin(), values.end());
    QSharedPointer<QCPAxisTicker> counts(new QCPAxisTicker);
    if (peak < 8) {  // whole documents: no 0.5 ticks
        auto fixed = QSharedPointer<QCPAxisTickerFixed>(new QCPAxisTickerFixed);
        fixed->setTickStep(1);
        counts = fixed;
    }
    m_hist->yAxis->setTicker(counts);
    m_hist->yAxis->setRange(0, peak * 1.15);
    m_hist->setVisible(n > 0);
    setDarkTheme(m_dark);
}

void DataPage::showSamples(const QString& dir, const QStringList& samples) {
    if (dir != q(m_set.dir)) return;  // another folder is shown by now
    m_samples = samples;
    m_samplesView->setEnabled(true);
    m_samplesView->setPlainText(m_samples.join("\n\n――――――――\n\n"));
    Q_EMIT samplesShown(dir);
}

bool DataPage::isLoadingSamples() const {
    return m_samplesLoader->isLoading();
}

void DataPage::refresh() {
    setEnabled(m_doc->isOpen());
    const QString own = modelTokenizer();
    m_tokenizer->setItemText(
        0, tr("the model's: %1")
               .arg(tessera::tokenizer_is_named(own.toStdString()) ? own : projectRelative(own)));
    {
        const QSignalBlocker block(m_order);
        m_order->setCurrentIndex(std::max(0, m_order->findData(q(m_doc->config().data.order))));
    }
    if (!m_doc->isOpen() || m_runner->isRunning()) return;
    const tessera::RunConfig& cfg = m_doc->config();
    const QString train =
        cfg.data.train.empty() ? QString() : q(tessera::config_resolve_path(cfg, cfg.data.train));
    const QString dir = train.isEmpty() ? QString() : QFileInfo(train).absolutePath();
    const bool prepared = !train.isEmpty() && QFileInfo::exists(dir + "/manifest.json");
    // a project that names data not prepared yet (an own-data project as cloned): preparing
    // fills the folder it reads
    const bool unprepared = !train.isEmpty() && !prepared && !QFileInfo::exists(train);
    if (m_outDir->text().isEmpty())
        m_outDir->setText(unprepared ? projectRelative(dir) : QStringLiteral("data/prepared"));
    if (unprepared) {
        m_summary->setText(tr("The project reads %1, which is not prepared yet: add your text "
                              "files or a folder of them, then Prepare into %2.")
                               .arg(q(cfg.data.train), projectRelative(dir)));
        return;
    }
    // the project's data.train in a prepared folder: show that folder
    if (!prepared || dir == q(m_set.dir)) return;
    try {
        m_set = tessera::prepared_read(dir.toStdString());
        showSet(m_set, false);
        // preparing again (after adding files) goes to the same folder, from the same inputs: their
        // common folder when they share one, else the files
        m_outDir->setText(projectRelative(dir));
        if (m_inputs->count() == 0 && !m_set.input_files.empty()) {
            QString common = QFileInfo(q(m_set.input_files.front())).absolutePath();
            for (const std::string& f : m_set.input_files)
                while (!common.isEmpty() && !QFileInfo(q(f)).absolutePath().startsWith(common))
                    common = QFileInfo(common).path();
            if (common.length() > 1) {
                m_inputs->addItem(projectRelative(common));
            } else {
                for (const std::string& f : m_set.input_files)
                    m_inputs->addItem(projectRelative(q(f)));
            }
        }
    } catch (const std::exception& e) {
        m_summary->setText(tr("%1: %2").arg(dir, q(e.what())).toHtmlEscaped());
    }
}

void DataPage::setDarkTheme(bool dark) {
    m_dark = dark;
    plot_apply_theme(m_hist, dark);
    const QColor fg = dark ? QColor(0xdd, 0xdd, 0xdd) : QColor(0x28, 0x28, 0x28);
    if (auto* title = qobject_cast<QCPTextElement*>(m_hist->plotLayout()->element(0, 0)))
        title->setTextColor(fg);
    if (auto* bars = qobject_cast<QCPBars*>(m_hist->plottable(0))) {
        const QColor c = dark ? QColor(120, 190, 120) : QColor(50, 140, 80);
        bars->setPen(QPen(c.darker(120)));
        bars->setBrush(c);
    }
    m_hist->replot();
}

}  // namespace tessera::studio
