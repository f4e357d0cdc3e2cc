// ModelPage: a form over ModelConfig, the layer table and the memory figures (see model_page.h).
#include "ui/model/model_page.h"
#include "ui/common/plot_theme.h"

#include <QComboBox>
#include <QFileDialog>
#include <QFileInfo>
#include <QDir>
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
#include "ui/common/qcustomplot_qt.h"

#include "engine/core/error.h"
#include "engine/io/safetensors.h"
#include "engine/model/gpt_import.h"
#include "engine/plan/estimator.h"
#include "ui/common/project_document.h"
#include "ui/model/layer_table_model.h"
#include "ui/model/model_facts.h"

namespace tessera::studio {

namespace {

// merge ids: consecutive edits of one field are one undo step
enum MergeId { kMergeLayers = 100, kMergeHeads, kMergeDModel, kMergeSeqLen, kMergeHidden };

QSpinBox* make_spin(const char* name, int lo, int hi, int step) {
    auto* s = new QSpinBox;
    s->setObjectName(name);
    s->setRange(lo, hi);
    s->setSingleStep(step);
    s->setKeyboardTracking(false);  // one edit per committed value, not per digit typed
    s->setAlignment(Qt::AlignRight);
    return s;
}

QString q(const std::string& s) { return QString::fromStdString(s); }

}  // namespace

// ----------------------------------------------------------------------------
// layout

ModelPage::ModelPage(ProjectDocument* doc, QWidget* parent)
    : QWidget(parent), m_doc(doc), m_layers(new LayerTableModel(this)) {
    // architecture form
    auto* arch = new QGroupBox(tr("Architecture"));
    auto* form = new QFormLayout(arch);
    m_preset = new QComboBox;
    for (const auto& p : tessera::model_preset_names()) m_preset->addItem(q(p));
    m_nLayer = make_spin("n_layer", 1, 4096, 1);
    m_nHead = make_spin("n_head", 1, 4096, 1);
    m_dModel = make_spin("d_model", 1, 1 << 16, 64);
    m_seqLen = make_spin("seq_len", 1, 1 << 20, 128);
    m_vocab = new QComboBox;
    m_vocab->addItem(tr("bytes (256)"), "bytes");
    m_vocab->addItem(tr("gpt2 (50257)"), "gpt2");
    m_hidden = new QLineEdit;
    m_hidden->setPlaceholderText(tr("e.g. 512, 256"));
    m_hidden->setToolTip(tr("Hidden layer widths, comma separated (784 inputs, 10 classes)"));
    m_initFrom = new QLabel;
    m_initFrom->setTextInteractionFlags(Qt::TextSelectableByMouse);
    m_initFrom->setWordWrap(true);
    m_import = new QPushButton(tr("Import safetensors…"));
    m_import->setToolTip(tr("Read n_layer, d_model, seq_len and vocab from a GPT-2 safetensors file"));
    form->addRow(tr("Preset"), m_preset);
    form->addRow(tr("Layers (n_layer)"), m_nLayer);
    form->addRow(tr("Heads (n_head)"), m_nHead);
    form->addRow(tr("Width (d_model)"), m_dModel);
    form->addRow(tr("Sequence (seq_len)"), m_seqLen);
    form->addRow(tr("Vocabulary"), m_vocab);
    form->addRow(tr("Hidden sizes"), m_hidden);
    form->addRow(tr("Weights from"), m_initFrom);
    form->addRow(QString(), m_import);
    m_validation = new QLabel;
    m_validation->setWordWrap(true);
    m_validation->setObjectName("validation");
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
    auto* note = new QLabel(tr("bf16 training keeps fp32 master weights and AdamW moments: "
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
    m_table->horizontalHeader()->setSectionResizeMode(QHeaderView::Stretch);
    m_table->horizontalHeader()->setSectionResizeMode(0, QHeaderView::ResizeToContents);
    m_plot = new QCustomPlot;
    m_plot->setMinimumHeight(200);
    m_plot->plotLayout()->insertRow(0);
    m_plot->plotLayout()->addElement(0, 0, new QCPTextElement(m_plot, tr("Parameters per layer"),
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
    connect(m_preset, &QComboBox::activated, this, [this](int i) {
        const std::string preset = m_preset->itemText(i).toStdString();
        if (preset == m_doc->config().model.preset) return;
        m_doc->edit(tr("Preset %1").arg(q(preset)),
                    [preset](tessera::RunConfig& c) { tessera::model_apply_preset(c, preset); });
    });
    connect(m_nLayer, &QSpinBox::valueChanged, this, [this](int v) { editDim("n_layer", kMergeLayers, v); });
    connect(m_nHead, &QSpinBox::valueChanged, this, [this](int v) { editDim("n_head", kMergeHeads, v); });
    connect(m_dModel, &QSpinBox::valueChanged, this, [this](int v) { editDim("d_model", kMergeDModel, v); });
    connect(m_seqLen, &QSpinBox::valueChanged, this, [this](int v) { editDim("seq_len", kMergeSeqLen, v); });
    connect(m_vocab, &QComboBox::activated, this, [this](int i) {
        const std::string v = m_vocab->itemData(i).toString().toStdString();
        m_doc->edit(tr("Vocabulary %1").arg(q(v)), [v](tessera::RunConfig& c) { c.model.vocab = v; });
    });
    connect(m_hidden, &QLineEdit::editingFinished, this, [this] {
        std::vector<int> sizes;
        for (const QString& part : m_hidden->text().split(',', Qt::SkipEmptyParts)) {
            bool ok = false;
            const int v = part.trimmed().toInt(&ok);
            if (!ok || v < 1) {
                m_validation->setVisible(true);
                m_validation->setText(tr("Hidden sizes: expected positive integers like 512, 256; "
                                         "found \"%1\"").arg(part.trimmed()));
                return;
            }
            sizes.push_back(v);
        }
        if (sizes.empty()) {
            m_validation->setVisible(true);
            m_validation->setText(tr("Hidden sizes: expected at least one width like 256; found nothing"));
            return;
        }
        m_doc->edit(tr("Hidden sizes"), [sizes](tessera::RunConfig& c) { c.model.hidden = sizes; },
                    kMergeHidden);
        refresh();
    });
    connect(m_import, &QPushButton::clicked, this, &ModelPage::chooseSafetensors);
    connect(m_doc, &ProjectDocument::configChanged, this, &ModelPage::refresh);
    connect(m_doc, &ProjectDocument::opened, this, [this] { m_importError.clear(); });
    refresh();
}

// ----------------------------------------------------------------------------
// edits

void ModelPage::editDim(const char* what, int id, int value) {
    const QString name = QString::fromLatin1(what);
    m_doc->edit(tr("Change %1").arg(name), [name, value](tessera::RunConfig& c) {
        if (name == "n_layer") c.model.n_layer = value;
        else if (name == "n_head") c.model.n_head = value;
        else if (name == "d_model") c.model.d_model = value;
        else if (name == "seq_len") c.model.seq_len = value;
    }, id);
}

void ModelPage::chooseSafetensors() {
    const QString path = QFileDialog::getOpenFileName(this, tr("Import architecture from safetensors"),
                                                      m_doc->projectDir(),
                                                      tr("safetensors (*.safetensors);;All files (*)"));
    if (!path.isEmpty()) importSafetensors(path);
}

bool ModelPage::importSafetensors(const QString& path) {
    tessera::GptDims d;
    try {
        const tessera::SafetensorsFile f = tessera::SafetensorsFile::open(path.toStdString());
        d = tessera::gpt_dims_from_safetensors(f);
        if (d.vocab != 256 && d.vocab != 50257)
            throw tessera::InputError(path.toStdString() + ": wte: expected a vocabulary of 256 "
                                      "(bytes) or 50257 (gpt2) rows, found " + std::to_string(d.vocab));
    } catch (const std::exception& e) {
        m_importError = QString::fromStdString(e.what());
        refresh();
        Q_EMIT importFailed(m_importError);
        return false;
    }
    m_importError.clear();
    // init_from relative to the project folder when the file lies inside it
    QString rel = path;
    if (!m_doc->projectDir().isEmpty()) {
        const QString r = QDir(m_doc->projectDir()).relativeFilePath(QFileInfo(path).absoluteFilePath());
        if (!r.startsWith("..")) rel = r;
    }
    const std::string from = rel.toStdString();
    m_doc->edit(tr("Import %1").arg(QFileInfo(path).fileName()), [d, from](tessera::RunConfig& c) {
        if (c.model.preset == "mlp") tessera::model_apply_preset(c, "gpt2");
        for (const auto& p : tessera::model_preset_names()) {  // a GPT preset with these dims, if any
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

QString ModelPage::validationText() const { return m_validation->text(); }

void ModelPage::refresh() {
    const tessera::RunConfig& cfg = m_doc->config();
    const tessera::ModelConfig& m = cfg.model;
    const bool mlp = m.preset == "mlp";
    setEnabled(m_doc->isOpen());  // nothing to edit without a project (the window says so)
    const QSignalBlocker b1(m_preset), b2(m_nLayer), b3(m_nHead), b4(m_dModel), b5(m_seqLen),
        b6(m_vocab), b7(m_hidden);
    m_preset->setCurrentText(q(m.preset));
    m_nLayer->setValue(m.n_layer);
    m_nHead->setValue(m.n_head);
    m_dModel->setValue(m.d_model);
    m_seqLen->setValue(m.seq_len);
    m_vocab->setCurrentIndex(m.vocab == "gpt2" ? 1 : 0);
    QStringList hidden;
    for (int h : m.hidden) hidden << QString::number(h);
    if (!m_hidden->hasFocus()) m_hidden->setText(hidden.join(", "));
    if (auto* form = qobject_cast<QFormLayout*>(m_nLayer->parentWidget()->layout())) {
        for (QWidget* w : {(QWidget*)m_nLayer, (QWidget*)m_nHead, (QWidget*)m_dModel,
                           (QWidget*)m_seqLen, (QWidget*)m_vocab, (QWidget*)m_initFrom,
                           (QWidget*)m_import})
            form->setRowVisible(w, !mlp);
        form->setRowVisible(m_hidden, mlp);
    }
    m_initFrom->setText(m.init_from.empty() ? tr("random init (seed %1)").arg(cfg.train.seed)
                                            : q(m.init_from));

    // validation: the engine's own rules, plus the last import error
    QString problem = m_importError;
    if (m_doc->isOpen()) {
        const std::string err = tessera::model_check_config(cfg);
        if (!err.empty()) problem = problem.isEmpty() ? q(err) : problem + "\n" + q(err);
    }
    m_validation->setText(problem);
    m_validation->setVisible(!problem.isEmpty());

    // table, totals, memory
    std::vector<tessera::LayerSpec> specs = m_doc->isOpen() ? tessera::model_layer_specs(m)
                                                             : std::vector<tessera::LayerSpec>{};
    const tessera::LayerTotals t = tessera::model_layer_totals(specs);
    m_layers->setSpecs(specs);
    const tessera::ModelMemory mem = tessera::model_memory(t.params);
    const int64_t v[3][2] = {{mem.fp32_weights, mem.bf16_weights},
                             {mem.fp32_weights_grads, mem.bf16_weights_grads},
                             {mem.fp32_training, mem.bf16_training}};
    for (int r = 0; r < 3; ++r)
        for (int c = 0; c < 2; ++c)
            m_memory[r][c]->setText(specs.empty() ? "–" : q(tessera::format_bytes((double)v[r][c])));
    if (specs.empty()) {
        m_summary->setText(tr("No model: fix the sizes above."));
    } else if (mlp) {
        QString sizes = "784";
        for (int h : m.hidden) sizes += " → " + QString::number(h);
        m_summary->setText(tr("<b>%1</b> parameters · MLP %2 → 10<br>%3 forward per sample")
                               .arg(q(tessera::format_count((double)t.params)), sizes,
                                    q(tessera::format_flops(t.flops_per_token))));
    } else {
        m_summary->setText(tr("<b>%1</b> parameters · %2 layers × d_model %3, %4 heads of %5<br>"
                              "%6 forward per token · %7 activations per sample (fp32)")
                               .arg(q(tessera::format_count((double)t.params)))
                               .arg(m.n_layer).arg(m.d_model).arg(m.n_head)
                               .arg(m.n_head ? m.d_model / m.n_head : 0)
                               .arg(q(tessera::format_flops(t.flops_per_token)),
                                    q(tessera::format_bytes((double)t.activation_bytes))));
    }

    // parameters per layer
    auto* bars = qobject_cast<QCPBars*>(m_plot->plottable(0));
    QVector<double> keys, values;
    QSharedPointer<QCPAxisTickerText> ticker(new QCPAxisTickerText);
    const int n = (int)specs.size();
    const int every = n > 24 ? (n + 11) / 12 : 1;  // label at most ~12 bars
    double peak = 0;
    for (const auto& s : specs) peak = std::max(peak, (double)s.params);
    const double scale = peak >= 1e6 ? 1e6 : peak >= 1e3 ? 1e3 : 1;
    m_plot->yAxis->setLabel(scale == 1e6 ? tr("parameters (millions)")
                            : scale == 1e3 ? tr("parameters (thousands)") : tr("parameters"));
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
    m_plot->yAxis->setRange(0, values.isEmpty() ? 1 : *std::max_element(values.begin(), values.end()) * 1.1);
    setDarkTheme(m_dark);
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
