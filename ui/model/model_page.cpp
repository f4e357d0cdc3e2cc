// ModelPage: a form over ModelConfig, the layer table and the memory figures (see model_page.h).
#include "ui/model/model_page.h"

#include <QComboBox>
#include <QDir>
#include <QEvent>
#include <QFileDialog>
#include <QFileInfo>
#include <QFormLayout>
#include <QGridLayout>
#include <QGroupBox>
#include <QHBoxLayout>
#include <QHeaderView>
#include <QLabel>
#include <QLineEdit>
#include <QPushButton>
#include <QSpinBox>
#include <QSplitter>
#include <QTableView>
#include <QVBoxLayout>
#include <exception>

#include "engine/core/error.h"
#include "engine/io/safetensors.h"
#include "engine/model/gpt_import.h"
#include "engine/plan/estimator.h"
#include "ui/common/plot_theme.h"
#include "ui/common/project_document.h"
#include "ui/common/qcustomplot_qt.h"
#include "ui/model/layer_table_model.h"
#include "ui/model/model_facts.h"

namespace tessera::studio {

namespace {

// merge ids: consecutive edits of one field are one undo step
enum MergeId {
    kMergeLayers = 100,
    kMergeHeads,
    kMergeDModel,
    kMergeSeqLen,
    kMergeHidden,
    kMergeKvHeads,
    kMergeHeadDim,
    kMergeFfn
};

QSpinBox* make_spin(const char* name, int lo, int hi, int step) {
    auto* s = new QSpinBox;
    s->setObjectName(name);
    s->setRange(lo, hi);
    s->setSingleStep(step);
    s->setKeyboardTracking(false);  // one edit per committed value, not per digit typed
    s->setAlignment(Qt::AlignRight);
    return s;
}

QString q(const std::string& s) {
    return QString::fromStdString(s);
}

// A path or message a word-wrapping label may break after each '/' (a zero-width space there);
// validationText() hands back the text without them.
const QChar kBreak(0x200B);
QString breakable(QString s) {
    return s.replace('/', QString('/') + kBreak);
}

}  // namespace

// ----------------------------------------------------------------------------
// layout

ModelPage::ModelPage(ProjectDocument* doc, QWidget* parent)
    : QWidget(parent), m_doc(doc), m_layers(new LayerTableModel(this)) {
    // architecture form
    auto* arch = new QGroupBox(tr("Architecture"));
    auto* form = new QFormLayout(arch);
    m_family = new QComboBox;
    m_family->setObjectName("family");
    for (const auto& s : tessera::model_series_names()) m_family->addItem(q(s));
    m_family->setToolTip(tr("The model family; picking one switches to its first preset"));
    m_preset = new QComboBox;
    m_preset->setObjectName("preset");
    m_nLayer = make_spin("n_layer", 1, 4096, 1);
    m_nHead = make_spin("n_head", 1, 4096, 1);
    m_nKvHead = make_spin("n_kv_head", 1, 4096, 1);
    m_nKvHead->setProperty("help",
                           tr("Key/value heads (grouped-query attention); must divide n_head"));
    m_dModel = make_spin("d_model", 1, 1 << 16, 64);
    m_headDim = make_spin("head_dim", 2, 4096, 2);
    m_ffn = make_spin("ffn", 1, 1 << 20, 64);
    m_ffn->setProperty("help", tr("Width of the SwiGLU MLP (intermediate_size)"));
    m_seqLen = make_spin("seq_len", 1, 1 << 20, 128);
    m_vocab = new QComboBox;
    m_vocab->setObjectName("vocab");
    m_vocab->addItem(tr("bytes (256)"), "bytes");
    m_vocab->addItem(tr("gpt2 (50257)"), "gpt2");
    m_hidden = new QLineEdit;
    m_hidden->setPlaceholderText(tr("e.g. 512, 256"));
    m_hidden->setToolTip(tr("Hidden layer widths, comma separated (784 inputs, 10 classes)"));
    m_initFrom = new QLabel;
    m_initFrom->setObjectName("init_from");
    m_initFrom->setSizePolicy(QSizePolicy::Ignored, QSizePolicy::Preferred);  // elided to its width
    m_initFrom->installEventFilter(this);
    m_openFolder = new QPushButton(tr("Open model folder…"));
    m_openFolder->setObjectName("open_folder");
    m_openFolder->setToolTip(
        tr("Train from a Hugging Face folder (config.json and safetensors): "
           "its architecture, sizes and weights"));
    m_import = new QPushButton(tr("Import safetensors…"));
    m_import->setToolTip(
        tr("Read n_layer, d_model, seq_len and vocab from a GPT-2 safetensors file"));
    auto* buttons = new QWidget;
    auto* buttonsLayout = new QHBoxLayout(buttons);
    buttonsLayout->setContentsMargins(0, 0, 0, 0);
    buttonsLayout->addWidget(m_openFolder);
    buttonsLayout->addWidget(m_import);
    buttonsLayout->addStretch(1);
    form->addRow(tr("Family"), m_family);
    form->addRow(tr("Preset"), m_preset);
    form->addRow(tr("Layers (n_layer)"), m_nLayer);
    form->addRow(tr("Heads (n_head)"), m_nHead);
    form->addRow(tr("KV heads (n_kv_head)"), m_nKvHead);
    form->addRow(tr("Width (d_model)"), m_dModel);
    form->addRow(tr("Head size (head_dim)"), m_headDim);
    form->addRow(tr("MLP width (ffn)"), m_ffn);
    form->addRow(tr("Sequence (seq_len)"), m_seqLen);
    form->addRow(tr("Vocabulary"), m_vocab);
    form->addRow(tr("Hidden sizes"), m_hidden);
    form->addRow(tr("Weights from"), m_initFrom);
    form->addRow(buttons);
    m_validation = new QLabel;
    m_validation->setWordWrap(true);
    m_validation->setObjectName("validation");
    m_validation->setTextInteractionFlags(Qt::TextSelectableByMouse);
    m_validation->setStyleSheet("QLabel#validation { color: #c62828; font-weight: 600; }");
    form->addRow(m_validation);

    // summary + memory at each precision
    auto* mem = new QGroupBox(tr("Memory of the model (one replica)"));
    auto* grid = new QGridLayout(mem);
    m_summary = new QLabel;
    m_summary->setWordWrap(true);
    grid->addWidget(m_summary, 0, 0, 1, 3);
    grid->addWidget(new QLabel(tr("<b>fp32</b>")), 1, 1, Qt::AlignRight);
    grid->addWidget(new QLabel(tr("<b>bf16</b>")), 1, 2, Qt::AlignRight);
    const char* rows[3] = {QT_TR_NOOP("Weights"), QT_TR_NOOP("Weights + grads"),
                           QT_TR_NOOP("Training (+ AdamW)")};
    for (int r = 0; r < 3; ++r) {
        grid->addWidget(new QLabel(tr(rows[r])), r + 2, 0);
        for (int c = 0; c < 2; ++c) {
            m_memory[r][c] = new QLabel;
            m_memory[r][c]->setAlignment(Qt::AlignRight | Qt::AlignVCenter);
            grid->addWidget(m_memory[r][c], r + 2, c + 1);
        }
    }
    auto* note =
        new QLabel(tr("bf16 training keeps fp32 master weights and AdamW moments: "
                      "16 bytes per parameter either way, before activations."));
    note->setWordWrap(true);
    note->setStyleSheet("color: palette(mid);");
    note->setEnabled(false);
    grid->addWidget(note, 5, 0, 1, 3);
    grid->setColumnStretch(0, 1);

    auto* left = new QWidget;
    auto* leftLayout = new QVBoxLayout(left);
    leftLayout->setContentsMargins(0, 0, 0, 0);
    leftLayout->addWidget(arch);
    leftLayout->addWidget(mem);
    leftLayout->addStretch(1);
    left->setMinimumWidth(340);
    left->setMaximumWidth(420);

    // layer table + parameters-per-layer plot
    m_table = new QTableView;
    m_table->setModel(m_layers);
    m_table->verticalHeader()->setVisible(false);
    m_table->verticalHeader()->setDefaultSectionSize(22);
    m_table->setAlternatingRowColors(true);
    m_table->setSelectionBehavior(QAbstractItemView::SelectRows);
    m_table->setWordWrap(false);
    m_table->setTextElideMode(Qt::ElideRight);  // the Structure tooltip has the whole text
    m_table->horizontalHeader()->setSectionResizeMode(QHeaderView::ResizeToContents);
    m_table->horizontalHeader()->setSectionResizeMode(LayerTableModel::Structure,
                                                      QHeaderView::Stretch);
    m_plot = new QCustomPlot;
    m_plot->setMinimumHeight(200);
    m_plot->plotLayout()->insertRow(0);
    m_plot->plotLayout()->addElement(0, 0,
                                     new QCPTextElement(m_plot, tr("Parameters per layer"),
                                                        QFont(font().family(), 10, QFont::Bold)));
    m_plot->yAxis->setLabel(tr("parameters"));
    new QCPBars(m_plot->xAxis, m_plot->yAxis);
    auto* split = new QSplitter(Qt::Vertical);
    split->addWidget(m_table);
    split->addWidget(m_plot);
    split->setStretchFactor(0, 3);
    split->setStretchFactor(1, 2);

    auto* top = new QHBoxLayout(this);
    top->addWidget(left);
    top->addWidget(split, 1);

    // edits: every change is one doc->edit()
    connect(m_family, &QComboBox::activated, this, [this](int i) {
        const std::string series = m_family->itemText(i).toStdString();
        const tessera::ModelConfig& m = m_doc->config().model;
        if (!m.from_folder && tessera::config_preset_series(m.preset) == series) return;
        const std::vector<std::string> presets = tessera::model_series_presets(series);
        if (!presets.empty()) applyPreset(presets.front());
    });
    connect(m_preset, &QComboBox::activated, this, [this](int i) {
        const std::string preset = m_preset->itemText(i).toStdString();
        const tessera::ModelConfig& m = m_doc->config().model;
        if (preset == m.preset && !m.from_folder) return;
        applyPreset(preset);
    });
    connect(m_nLayer, &QSpinBox::valueChanged, this,
            [this](int v) { editDim("n_layer", kMergeLayers, v); });
    connect(m_nHead, &QSpinBox::valueChanged, this,
            [this](int v) { editDim("n_head", kMergeHeads, v); });
    connect(m_nKvHead, &QSpinBox::valueChanged, this,
            [this](int v) { editDim("n_kv_head", kMergeKvHeads, v); });
    connect(m_dModel, &QSpinBox::valueChanged, this,
            [this](int v) { editDim("d_model", kMergeDModel, v); });
    connect(m_headDim, &QSpinBox::valueChanged, this,
            [this](int v) { editDim("head_dim", kMergeHeadDim, v); });
    connect(m_ffn, &QSpinBox::valueChanged, this, [this](int v) { editDim("ffn", kMergeFfn, v); });
    connect(m_seqLen, &QSpinBox::valueChanged, this,
            [this](int v) { editDim("seq_len", kMergeSeqLen, v); });
    connect(m_vocab, &QComboBox::activated, this, [this](int i) {
        const std::string v = m_vocab->itemData(i).toString().toStdString();
        m_doc->edit(tr("Vocabulary %1").arg(q(v)),
                    [v](tessera::RunConfig& c) { c.model.vocab = v; });
    });
    connect(m_hidden, &QLineEdit::editingFinished, this, [this] {
        std::vector<int> sizes;
        for (const QString& part : m_hidden->text().split(',', Qt::SkipEmptyParts)) {
            bool ok = false;
            const int v = part.trimmed().toInt(&ok);
            if (!ok || v < 1) {
                m_validation->setVisible(true);
                m_validation->setText(tr("Hidden sizes: expected positive integers like 512, 256; "
                                         "found \"%1\"")
                                          .arg(part.trimmed()));
                return;
            }
            sizes.push_back(v);
        }
        if (sizes.empty()) {
            m_validation->setVisible(true);
            m_validation->setText(
                tr("Hidden sizes: expected at least one width like 256; found nothing"));
            return;
        }
        m_doc->edit(
            tr("Hidden sizes"), [sizes](tessera::RunConfig& c) { c.model.hidden = sizes; },
            kMergeHidden);
        refresh();
    });
    connect(m_import, &QPushButton::clicked, this, &ModelPage::chooseSafetensors);
    connect(m_openFolder, &QPushButton::clicked, this, &ModelPage::chooseModelFolder);
    connect(m_doc, &ProjectDocument::configChanged, this, &ModelPage::refresh);
    connect(m_doc, &ProjectDocument::opened, this, [this] { m_importError.clear(); });
    refresh();
}

// ----------------------------------------------------------------------------
// edits

void ModelPage::applyPreset(const std::string& preset) {
    m_importError.clear();  // a new choice: the last refused file is no longer the model
    m_doc->edit(tr("Preset %1").arg(q(preset)),
                [preset](tessera::RunConfig& c) { tessera::model_apply_preset(c, preset); });
    refresh();
}

void ModelPage::editDim(const char* what, int id, int value) {
    const QString name = QString::fromLatin1(what);
    m_doc->edit(
        tr("Change %1").arg(name),
        [name, value](tessera::RunConfig& c) {
            if (name == "n_layer")
                c.model.n_layer = value;
            else if (name == "n_head")
                c.model.n_head = value;
            else if (name == "n_kv_head")
                c.model.n_kv_head = value;
            else if (name == "d_model")
                c.model.d_model = value;
            else if (name == "head_dim")
                c.model.head_dim = value;
            else if (name == "ffn")
                c.model.ffn = value;
            else if (name == "seq_len")
                c.model.seq_len = value;
        },
        id);
}

// init_from relative to the project folder when the path lies inside it (the engine resolves
// config paths against the config file's folder), else absolute
QString ModelPage::projectRelative(const QString& path) const {
    const QString abs = QFileInfo(path).absoluteFilePath();
    if (m_doc->projectDir().isEmpty()) return abs;
    const QString r = QDir(m_doc->projectDir()).relativeFilePath(abs);
    return r.startsWith("..") || QDir::isAbsolutePath(r) ? abs : r;
}

void ModelPage::chooseSafetensors() {
    const QString path = QFileDialog::getOpenFileName(
        this, tr("Import architecture from safetensors"), m_doc->projectDir(),
        tr("safetensors (*.safetensors);;All files (*)"));
    if (!path.isEmpty()) importSafetensors(path);
}

void ModelPage::chooseModelFolder() {
    const QString dir = QFileDialog::getExistingDirectory(
        this, tr("Open a Hugging Face model folder (config.json and safetensors)"),
        m_doc->projectDir());
    if (!dir.isEmpty()) openModelFolder(dir);
}

bool ModelPage::openModelFolder(const QString& dir) {
    const std::string from = projectRelative(dir).toStdString();
    tessera::ModelFolder folder;
    try {
        folder = tessera::model_read_folder(m_doc->config(), from);
    } catch (const std::exception& e) {
        m_importError = q(e.what());
        refresh();
        Q_EMIT modelFolderFailed(m_importError);
        return false;
    }
    m_importError.clear();
    const tessera::ModelConfig model = folder.model;
    m_doc->edit(tr("Open model folder %1").arg(QFileInfo(dir).fileName()),
                [model](tessera::RunConfig& c) { tessera::model_apply_folder(c, model); });
    refresh();
    return true;
}

bool ModelPage::importSafetensors(const QString& path) {
    tessera::GptDims d;
    try {
        const tessera::SafetensorsFile f = tessera::SafetensorsFile::open(path.toStdString());
        d = tessera::gpt_dims_from_safetensors(f);
        if (d.vocab != 256 && d.vocab != 50257)
            throw tessera::InputError(path.toStdString() +
                                      ": wte: expected a vocabulary of 256 "
                                      "(bytes) or 50257 (gpt2) rows, found " +
                                      std::to_string(d.vocab));
    } catch (const std::exception& e) {
        m_importError = QString::fromStdString(e.what());
        refresh();
        Q_EMIT importFailed(m_importError);
        return false;
    }
    m_importError.clear();
    const std::string from = projectRelative(path).toStdString();
    m_doc->edit(tr("Import %1").arg(QFileInfo(path).fileName()), [d, from](tessera::RunConfig& c) {
        if (c.model.preset == "mlp") tessera::model_apply_preset(c, "gpt2");
        for (const auto& p :
             tessera::model_preset_names()) {  // a GPT preset with these dims, if any
            if (tessera::model_family(p) != "gpt") continue;
            tessera::RunConfig t;
            tessera::model_apply_preset(t, p);
            if (t.model.n_layer == d.n_layer && t.model.n_head == d.n_head &&
                t.model.d_model == d.d_model && t.model.seq_len == d.seq_len)
                c.model.preset = p;
        }
        c.model.n_layer = d.n_layer;
        c.model.n_head = d.n_head;
        c.model.d_model = d.d_model;
        c.model.seq_len = d.seq_len;
        c.model.vocab = d.vocab == 50257 ? "gpt2" : "bytes";
        c.model.init_from = from;
    });
    refresh();
    return true;
}

// ----------------------------------------------------------------------------
// config -> widgets

QString ModelPage::validationText() const {
    return m_validation->text().remove(kBreak);
}

// family and preset pickers: the config's preset and its series; a folder's model is neither
void ModelPage::refreshPickers() {
    const tessera::RunConfig& cfg = m_doc->config();
    const tessera::ModelConfig& m = cfg.model;
    const QSignalBlocker b1(m_family), b2(m_preset);
    if (m.from_folder) {
        m_family->setPlaceholderText(tr("Hugging Face folder"));
        m_family->setCurrentIndex(-1);
        const std::string arch = tessera::model_folder_architecture(cfg);
        m_preset->clear();
        m_preset->setPlaceholderText(arch.empty() ? tr("from the folder") : q(arch));
        m_preset->setEnabled(false);
        return;
    }
    const QString series = q(tessera::config_preset_series(m.preset));
    m_family->setCurrentText(series);
    QStringList presets;
    for (const auto& p : tessera::model_series_presets(series.toStdString())) presets << q(p);
    QStringList listed;
    for (int i = 0; i < m_preset->count(); ++i) listed << m_preset->itemText(i);
    if (listed != presets) {
        m_preset->clear();
        m_preset->addItems(presets);
    }
    m_preset->setEnabled(true);
    m_preset->setCurrentText(q(m.preset));
}

void ModelPage::refresh() {
    const tessera::RunConfig& cfg = m_doc->config();
    const tessera::ModelConfig& m = cfg.model;
    const bool mlp = m.preset == "mlp";
    const bool llama = tessera::model_family(m.preset) == "llama";
    setEnabled(m_doc->isOpen());  // nothing to edit without a project (the window says so)
    refreshPickers();
    const QSignalBlocker b1(m_nLayer), b2(m_nHead), b3(m_nKvHead), b4(m_dModel), b5(m_headDim),
        b6(m_ffn), b7(m_seqLen), b8(m_vocab), b9(m_hidden);
    m_nLayer->setValue(m.n_layer);
    m_nHead->setValue(m.n_head);
    m_nKvHead->setValue(m.n_kv_head);
    m_dModel->setValue(m.d_model);
    m_headDim->setValue(m.head_dim);
    m_ffn->setValue(m.ffn);
    m_seqLen->setValue(m.seq_len);
    // another tokenizer (Llama family: llama3, qwen3, llama2 or a tokenizer.json, set on the Data
    // page or by a Hugging Face folder): a third entry naming it
    while (m_vocab->count() > 2) m_vocab->removeItem(2);
    if (m.vocab == "bytes" || m.vocab == "gpt2") {
        m_vocab->setCurrentIndex(m.vocab == "gpt2" ? 1 : 0);
    } else {
        m_vocab->addItem(tr("tokenizer %1").arg(QString::fromStdString(m.vocab)),
                         QString::fromStdString(m.vocab));
        m_vocab->setCurrentIndex(2);
    }
    QStringList hidden;
    for (int h : m.hidden) hidden << QString::number(h);
    if (!m_hidden->hasFocus()) m_hidden->setText(hidden.join(", "));
    if (auto* form = qobject_cast<QFormLayout*>(m_nLayer->parentWidget()->layout())) {
        for (QWidget* w : {(QWidget*)m_nLayer, (QWidget*)m_nHead, (QWidget*)m_dModel,
                           (QWidget*)m_seqLen, (QWidget*)m_vocab, (QWidget*)m_initFrom})
            form->setRowVisible(w, !mlp);
        for (QWidget* w : {(QWidget*)m_nKvHead, (QWidget*)m_headDim, (QWidget*)m_ffn})
            form->setRowVisible(w, llama);
        form->setRowVisible(m_hidden, mlp);
        // GPT: the vocabulary is the tokenizer's; the Llama family's embedding has its own rows
        if (auto* label = qobject_cast<QLabel*>(form->labelForField(m_vocab)))
            label->setText(llama ? tr("Tokenizer (data)") : tr("Vocabulary"));
    }
    m_import->setVisible(!mlp);  // GPT-2 safetensors; a folder may hold any supported family
    // a folder's config.json is the architecture: only seq_len and the tokenizer are the project's
    const QString fromFolder = tr("Set by the folder's config.json");
    for (QSpinBox* s : {m_nLayer, m_nHead, m_nKvHead, m_dModel, m_headDim, m_ffn}) {
        s->setEnabled(!m.from_folder);
        s->setToolTip(m.from_folder ? fromFolder : s->property("help").toString());
    }
    m_initFromText =
        m.init_from.empty() ? tr("random init (seed %1)").arg(cfg.train.seed) : q(m.init_from);
    elideInitFrom();
    QString where =
        m.init_from.empty() ? QString() : q(tessera::config_resolve_path(cfg, m.init_from));
    if (m.from_folder)
        where += "\n" + tr("Hugging Face folder: config.json sets the architecture and sizes");
    m_initFrom->setToolTip(where);

    // validation: the engine's own rules, plus the last refused file or folder
    QString problem = m_importError;
    if (m_doc->isOpen()) {
        const std::string err = tessera::model_check_config(cfg);
        if (!err.empty()) problem = problem.isEmpty() ? q(err) : problem + "\n" + q(err);
    }
    m_validation->setText(breakable(problem));
    m_validation->setVisible(!problem.isEmpty());

    // table, totals, memory
    std::vector<tessera::LayerSpec> specs =
        m_doc->isOpen() ? tessera::model_layer_specs(m) : std::vector<tessera::LayerSpec>{};
    const tessera::LayerTotals t = tessera::model_layer_totals(specs);
    m_layers->setSpecs(specs, tessera::model_layer_structure(m, specs));
    const tessera::ModelMemory mem = tessera::model_memory(t.params);
    const int64_t v[3][2] = {{mem.fp32_weights, mem.bf16_weights},
                             {mem.fp32_weights_grads, mem.bf16_weights_grads},
                             {mem.fp32_training, mem.bf16_training}};
    for (int r = 0; r < 3; ++r)
        for (int c = 0; c < 2; ++c)
            m_memory[r][c]->setText(specs.empty() ? "–"
                                                  : q(tessera::format_bytes((double)v[r][c])));
    if (specs.empty())
        m_summary->setText(tr("No model: fix the sizes above."));
    else
        refreshSummary(t.params, t.flops_per_token, t.activation_bytes);

    // parameters per layer
    auto* bars = qobject_cast<QCPBars*>(m_plot->plottable(0));
    QVector<double> keys, values;
    QSharedPointer<QCPAxisTickerText> ticker(new QCPAxisTickerText);
    const int n = (int)specs.size();
    const int every = n > 24 ? (n + 11) / 12 : 1;  // label at most ~12 bars
    double peak = 0;
    for (const auto& s : specs) peak = std::max(peak, (double)s.params);
    const double scale = peak >= 1e6 ? 1e6 : peak >= 1e3 ? 1e3 : 1;
    m_plot->yAxis->setLabel(scale == 1e6   ? tr("parameters (millions)")
                            : scale == 1e3 ? tr("parameters (thousands)")
                                           : tr("parameters"));
    for (int i = 0; i < n; ++i) {
        keys << i;
        values << (double)specs[i].params / scale;
        if (i % every == 0 || i == n - 1) ticker->addTick(i, q(specs[i].name));
    }
    bars->setData(keys, values);
    bars->setWidth(0.7);
    m_plot->xAxis->setTicker(ticker);
    m_plot->xAxis->setTickLabelRotation(n > 8 ? 45 : 0);
    m_plot->xAxis->setRange(-0.7, std::max(n, 1) - 0.3);
    m_plot->yAxis->setRange(
        0, values.isEmpty() ? 1 : *std::max_element(values.begin(), values.end()) * 1.1);
    setDarkTheme(m_dark);
}

// One short line per fact: a word-wrapped paragraph in the narrow left column wraps mid-phrase.
void ModelPage::refreshSummary(int64_t params, double flops_per_token, int64_t activation_bytes) {
    const tessera::ModelConfig& m = m_doc->config().model;
    const QString count = q(tessera::format_count((double)params));
    const QString cost = tr("%1 forward per token<br>%2 activations per sample (fp32)")
                             .arg(q(tessera::format_flops(flops_per_token)),
                                  q(tessera::format_bytes((double)activation_bytes)));
    if (m.preset == "mlp") {
        QString sizes = "784";
        for (int h : m.hidden) sizes += " → " + QString::number(h);
        m_summary->setText(tr("<b>%1</b> parameters · MLP %2 → 10<br>%3 forward per sample")
                               .arg(count, sizes, q(tessera::format_flops(flops_per_token))));
    } else if (tessera::model_family(m.preset) == "llama") {
        QString rope = tr("rotary θ %1").arg(q(tessera::format_number(m.rope_theta)));
        if (!m.rope_scaling.type.empty())
            rope +=
                tr(" (%1 ×%2)")
                    .arg(q(m.rope_scaling.type), q(tessera::format_number(m.rope_scaling.factor)));
        const QString attention =
            tr("attention %1 heads / %2 kv of %3").arg(m.n_head).arg(m.n_kv_head).arg(m.head_dim) +
            (m.qkv_bias ? tr(", qkv bias") : QString());
        const QString vocab = tr("vocabulary %1, %2 embeddings")
                                  .arg(m.vocab_size)
                                  .arg(m.tie_embeddings ? tr("tied") : tr("untied"));
        m_summary->setText(tr("<b>%1</b> parameters · %2 layers × d_model %3<br>%4<br>"
                              "SwiGLU ffn %5 · RMSNorm<br>%6<br>%7<br>%8")
                               .arg(count)
                               .arg(m.n_layer)
                               .arg(m.d_model)
                               .arg(attention)
                               .arg(m.ffn)
                               .arg(vocab, rope, cost));
    } else {
        m_summary->setText(tr("<b>%1</b> parameters · %2 layers × d_model %3<br>"
                              "%4 heads of %5 · GELU MLP · LayerNorm<br>%6")
                               .arg(count)
                               .arg(m.n_layer)
                               .arg(m.d_model)
                               .arg(m.n_head)
                               .arg(m.n_head ? m.d_model / m.n_head : 0)
                               .arg(cost));
    }
}

bool ModelPage::eventFilter(QObject* watched, QEvent* event) {
    if (watched == m_initFrom && event->type() == QEvent::Resize) elideInitFrom();
    return QWidget::eventFilter(watched, event);
}

// the path elided in the middle to the label's width (the folder's name stays in view; the
// tooltip has the whole path)
void ModelPage::elideInitFrom() {
    const int width = std::max(m_initFrom->contentsRect().width(), 120);
    const QString text =
        m_initFrom->fontMetrics().elidedText(m_initFromText, Qt::ElideMiddle, width);
    if (text != m_initFrom->text()) m_initFrom->setText(text);
}

void ModelPage::setDarkTheme(bool dark) {
    m_dark = dark;
    plot_apply_theme(m_plot, dark);
    const QColor fg = dark ? QColor(0xdd, 0xdd, 0xdd) : QColor(0x28, 0x28, 0x28);
    if (auto* title = qobject_cast<QCPTextElement*>(m_plot->plotLayout()->element(0, 0)))
        title->setTextColor(fg);
    if (auto* bars = qobject_cast<QCPBars*>(m_plot->plottable(0))) {
        const QColor c = dark ? QColor(100, 160, 240) : QColor(40, 110, 200);
        bars->setPen(QPen(c.darker(120)));
        bars->setBrush(c);
    }
    m_plot->replot();
}

}  // namespace tessera::studio
