// PlanPage: builds the controls and views, turns each control change into one undoable edit,
// and redraws everything from the config on configChanged(). See plan_page.h.
#include "ui/plan/plan_page.h"

#include <QCheckBox>
#include <QComboBox>
#include <QFormLayout>
#include <QGroupBox>
#include <QHBoxLayout>
#include <QLabel>
#include <QListWidget>
#include <QPushButton>
#include <QSpinBox>
#include <QVBoxLayout>
#include <algorithm>

#include "engine/plan/partitioner.h"
#include "engine/plan/plan_validate.h"
#include "ui/common/project_document.h"
#include "ui/plan/gpu_grid.h"
#include "ui/plan/memory_chart.h"
#include "ui/plan/partition_editor.h"

namespace tessera::studio {

namespace {

constexpr double kGiB = double(1ll << 30);

// How the step time was predicted, and (with measured op costs) the slowest rank's busy time
// in parts.
QString step_parts_text(const tessera::PlanEstimate& e) {
    if (e.step_model != "ops" || e.ranks.empty())
        return QString("<br><span style='color:gray'>step time from FLOPs at %1% of peak (no measured op costs "
                       "for %2 in this precision)</span>").arg(100 * e.device.efficiency, 0, 'f', 0)
            .arg(QString::fromStdString(e.device.name));
    const tessera::RankEstimate* slow = &e.ranks[0];
    for (const auto& r : e.ranks)
        if (r.compute_s > slow->compute_s) slow = &r;
    auto ms = [](double s) { return QString::number(s * 1e3, 'f', 1); };
    return QString("<br><span style='color:gray'>compute per step from the %1's measured op costs: GEMMs %2 ms, "
                   "attention %3 ms, other ops %4 ms, optimizer %5 ms (GPU %6)</span>")
        .arg(QString::fromStdString(e.device.name)).arg(ms(slow->gemm_s)).arg(ms(slow->attention_s))
        .arg(ms(slow->other_ops_s)).arg(ms(slow->optimizer_s)).arg(slow->rank);
}

QString tokens_str(double tok_per_s) {
    if (tok_per_s >= 1e6) return QString("%1 M tok/s").arg(tok_per_s / 1e6, 0, 'f', 2);
    if (tok_per_s >= 1e3) return QString("%1 k tok/s").arg(tok_per_s / 1e3, 0, 'f', 1);
    return QString("%1 tok/s").arg(tok_per_s, 0, 'f', 0);
}

QString bytes_str(double b) {
    if (b >= kGiB) return QString("%1 GiB").arg(b / kGiB, 0, 'f', 2);
    return QString("%1 MiB").arg(b / double(1 << 20), 0, 'f', 1);
}

int64_t capacity_of(const tessera::PlanEstimate& e) {
    return e.device.shared_host ? e.device.memory_bytes / std::max(1, e.world) : e.device.memory_bytes;
}

}  // namespace

PlanPage::PlanPage(ProjectDocument* doc, QWidget* parent) : QWidget(parent), m_doc(doc) {
    setObjectName("planPage");
    buildUi();
    connect(m_doc, &ProjectDocument::configChanged, this, &PlanPage::refresh);
    // a newly opened project picks its device again (device_default_name: cpu for CPU runs, H200
    // for CUDA runs)
    connect(m_doc, &ProjectDocument::opened, this, [this] {
        m_device->setProperty("initialised", QVariant());
        refresh();
    });
    refresh();
}

// ----------------------------------------------------------------------------
// building

QLabel* PlanPage::issueLabel(const QString& key) {
    auto* l = new QLabel(this);
    l->setObjectName("issue:" + key);
    l->setWordWrap(true);
    l->setStyleSheet("color: #c62828; font-size: 11px;");
    l->hide();
    m_issues[key] = l;
    return l;
}

void PlanPage::buildUi() {
    auto spin = [this](int lo, int hi) {
        auto* s = new QSpinBox(this);
        s->setRange(lo, hi);
        s->setKeyboardTracking(false);
        return s;
    };
    // controls (left column)
    m_device = new QComboBox(this);
    for (const auto& n : tessera::device_names()) m_device->addItem(QString::fromStdString(n));
    m_gpus = spin(1, 4096), m_perNode = spin(1, 64), m_dp = spin(1, 4096), m_tp = spin(1, 64);
    m_pp = spin(1, 512), m_virtual = spin(1, 64), m_micro = spin(1, 4096), m_accum = spin(1, 65536);
    m_perNode->setValue(8);
    m_zero = new QComboBox(this);
    m_zero->addItems({"0 — replicated", "1 — optimizer sharded", "2 — + gradients", "3 — + parameters"});
    m_schedule = new QComboBox(this);
    m_schedule->setObjectName("schedule");
    m_schedule->addItems({"1f1b", "gpipe", "interleaved", "zb-h1"});
    m_schedule->setItemData(3, "zero bubble (ZB-H1): each backward split into the input gradient and the "
                               "weight gradients, the latter filling 1F1B's idle time",
                            Qt::ToolTipRole);
    m_precision = new QComboBox(this);
    m_precision->setObjectName("precision");
    m_precision->addItems({"fp32", "bf16", "fp8"});
    m_precision->setItemData(1, "activations and weight copies in bf16, fp32 masters and AdamW", Qt::ToolTipRole);
    m_precision->setItemData(2, "bf16, and the blocks' large GEMMs in FP8 (e4m3/e5m2, per-tensor scaling)",
                             Qt::ToolTipRole);
    m_offloadAct = new QCheckBox("activations", this);
    m_offloadOpt = new QCheckBox("optimizer", this);
    m_recomputeBox = new QWidget(this);
    m_recomputeLayout = new QHBoxLayout(m_recomputeBox);
    m_recomputeLayout->setContentsMargins(0, 0, 0, 0);

    auto* form = new QFormLayout;
    auto row = [&](const QString& label, QWidget* w, const QString& key) {
        form->addRow(label, w);
        if (!key.isEmpty()) form->addRow(QString(), issueLabel(key));
    };
    row("Device", m_device, "");
    row("Precision", m_precision, "runtime.precision");
    row("GPUs available", m_gpus, "");
    row("GPUs per node", m_perNode, "");
    row("Data parallel (dp)", m_dp, "parallel.dp");
    row("Tensor parallel (tp)", m_tp, "parallel.tp");
    row("Pipeline stages (pp)", m_pp, "parallel.pp");
    row("Schedule", m_schedule, "parallel.schedule");
    row("Virtual stages", m_virtual, "parallel.virtual_stages");
    row("ZeRO", m_zero, "parallel.zero");
    row("Recompute per stage", m_recomputeBox, "parallel.recompute");
    auto* off = new QWidget(this);
    auto* offl = new QHBoxLayout(off);
    offl->setContentsMargins(0, 0, 0, 0);
    offl->addWidget(m_offloadAct);
    offl->addWidget(m_offloadOpt);
    row("Offload", off, "");
    row("Micro-batch", m_micro, "train.micro_batch");
    row("Micro-batches (accum)", m_accum, "train.grad_accum");
    form->addRow(QString(), issueLabel("parallel.stages"));

    auto* controls = new QGroupBox("Plan", this);
    controls->setLayout(form);

    m_suggest = new QPushButton("Suggest a plan", this);
    m_suggest->setObjectName("suggestButton");
    m_suggestMsg = new QLabel(this);
    m_suggestMsg->setWordWrap(true);
    m_suggestList = new QListWidget(this);
    m_suggestList->setObjectName("suggestions");
    m_suggestList->setWordWrap(true);
    m_suggestList->setAlternatingRowColors(true);
    m_suggestList->setSpacing(2);
    m_suggestList->setMinimumHeight(160);
    auto* sg = new QGroupBox("Suggestions (fastest plans that fit, click to apply)", this);
    auto* sgl = new QVBoxLayout(sg);
    sgl->addWidget(m_suggest);
    sgl->addWidget(m_suggestMsg);
    sgl->addWidget(m_suggestList, 1);

    auto* left = new QVBoxLayout;
    left->addWidget(controls);
    left->addWidget(sg, 1);

    // views (right column)
    m_valid_label = new QLabel(this);
    m_valid_label->setObjectName("validity");
    m_valid_label->setWordWrap(true);
    m_editor = new PartitionEditor(this);
    m_editor->setMinimumHeight(170);
    m_addStage = new QPushButton("+ stage", this);
    m_removeStage = new QPushButton("− stage", this);
    m_balance = new QPushButton("Balance stages", this);
    m_balance->setObjectName("balanceButton");
    m_balanceMsg = new QLabel(this);
    m_balanceMsg->setObjectName("balanceMessage");
    m_balanceMsg->setWordWrap(true);
    auto* eb = new QHBoxLayout;
    eb->addWidget(m_removeStage);
    eb->addWidget(m_addStage);
    eb->addWidget(m_balance);
    eb->addWidget(m_balanceMsg, 1);
    auto* eg = new QGroupBox("Pipeline partition (drag a boundary to move layers)", this);
    auto* egl = new QVBoxLayout(eg);
    egl->addWidget(m_editor, 1);
    egl->addLayout(eb);

    m_grid = new GpuGrid(this);
    auto* gg = new QGroupBox("GPUs (colour = stage, shade = TP rank; rank order tp, dp, pp)", this);
    auto* ggl = new QVBoxLayout(gg);
    ggl->addWidget(m_grid);

    m_prediction = new QLabel(this);
    m_prediction->setObjectName("prediction");
    m_prediction->setTextInteractionFlags(Qt::TextSelectableByMouse);
    m_prediction->setStyleSheet("font-size: 13px;");
    m_over = new QLabel(this);
    m_over->setObjectName("overCapacity");
    m_over->setWordWrap(true);
    m_over->setStyleSheet("color: #c62828;");
    m_chart = new MemoryChart(this);
    auto* pg = new QGroupBox("Prediction", this);
    auto* pgl = new QVBoxLayout(pg);
    pgl->addWidget(m_prediction);
    pgl->addWidget(m_over);
    pgl->addWidget(m_chart, 1);

    auto* right = new QVBoxLayout;
    right->addWidget(m_valid_label);
    right->addWidget(eg, 2);
    right->addWidget(gg);
    right->addWidget(pg, 3);

    auto* top = new QHBoxLayout(this);
    auto* lw = new QWidget(this);
    lw->setLayout(left);
    lw->setFixedWidth(360);
    top->addWidget(lw);
    top->addLayout(right, 1);

    // wiring: each control is one undoable edit
    auto intEdit = [this](QSpinBox* s, const QString& text, std::function<void(tessera::RunConfig&, int)> f) {
        connect(s, &QSpinBox::valueChanged, this, [this, text, f](int v) {
            if (!m_updating) editParallel(text, [f, v](tessera::RunConfig& c) { f(c, v); });
        });
    };
    intEdit(m_dp, "Set dp", [](tessera::RunConfig& c, int v) { c.parallel.dp = v; });
    intEdit(m_tp, "Set tp", [](tessera::RunConfig& c, int v) { c.parallel.tp = v; });
    intEdit(m_pp, "Set pp", [](tessera::RunConfig& c, int v) {
        c.parallel.pp = v;
        c.parallel.stages.clear();
        if (c.parallel.recompute.size() != 1) c.parallel.recompute = {c.parallel.recompute.at(0)};
    });
    intEdit(m_virtual, "Set virtual stages", [](tessera::RunConfig& c, int v) {
        c.parallel.virtual_stages = v;
        c.parallel.stages.clear();
    });
    intEdit(m_micro, "Set micro-batch", [](tessera::RunConfig& c, int v) { c.train.micro_batch = v; });
    intEdit(m_accum, "Set micro-batches", [](tessera::RunConfig& c, int v) { c.train.grad_accum = v; });
    connect(m_zero, &QComboBox::currentIndexChanged, this, [this](int z) {
        if (!m_updating) editParallel("Set ZeRO", [z](tessera::RunConfig& c) { c.parallel.zero = z; });
    });
    connect(m_precision, &QComboBox::currentTextChanged, this, [this](const QString& p) {
        if (!m_updating)
            m_doc->edit("Set precision", [p](tessera::RunConfig& c) { c.runtime.precision = p.toStdString(); });
    });
    connect(m_schedule, &QComboBox::currentTextChanged, this, [this](const QString& s) {
        if (m_updating) return;
        editParallel("Set schedule", [s](tessera::RunConfig& c) {
            c.parallel.schedule = s.toStdString();
            if (s == "interleaved" && c.parallel.virtual_stages < 2) c.parallel.virtual_stages = 2;
            if (s != "interleaved") c.parallel.virtual_stages = 1;
            c.parallel.stages.clear();
        });
    });
    connect(m_offloadAct, &QCheckBox::toggled, this, [this](bool on) {
        if (!m_updating) editParallel("Offload activations", [on](tessera::RunConfig& c) { c.parallel.offload_activations = on; });
    });
    connect(m_offloadOpt, &QCheckBox::toggled, this, [this](bool on) {
        if (!m_updating) editParallel("Offload optimizer", [on](tessera::RunConfig& c) { c.parallel.offload_optimizer = on; });
    });
    connect(m_device, &QComboBox::currentTextChanged, this, [this] { if (!m_updating) refresh(); });
    connect(m_gpus, &QSpinBox::valueChanged, this, [this] {
        if (m_updating) return;
        m_gpusFollowWorld = false;
        refresh();
    });
    connect(m_perNode, &QSpinBox::valueChanged, this, [this] { if (!m_updating) refresh(); });
    connect(m_addStage, &QPushButton::clicked, this, [this] { m_pp->setValue(m_pp->value() + 1); });
    connect(m_removeStage, &QPushButton::clicked, this, [this] { m_pp->setValue(std::max(1, m_pp->value() - 1)); });
    connect(m_balance, &QPushButton::clicked, this, &PlanPage::balanceStages);
    connect(m_suggest, &QPushButton::clicked, this, &PlanPage::suggestPlans);
    connect(m_suggestList, &QListWidget::itemClicked, this,
            [this](QListWidgetItem* it) { applySuggestion(m_suggestList->row(it)); });
    connect(m_editor, &PartitionEditor::dragStarted, this, [this](int serial) { m_dragMergeId = m_dragMergeBase + serial; });
    connect(m_editor, &PartitionEditor::stagesEdited, this, [this](const std::vector<int>& st) {
        m_doc->edit("Move stage boundary", [st](tessera::RunConfig& c) { c.parallel.stages = st; }, m_dragMergeId);
    });
}

void PlanPage::rebuildRecompute(int pp) {
    if ((int)m_recompute.size() != pp) {
        for (auto* c : m_recompute) delete c;
        m_recompute.clear();
        for (int s = 0; s < pp; ++s) {
            auto* c = new QComboBox(m_recomputeBox);
            c->addItems({"none", "selective", "full"});
            c->setToolTip(QString("stage %1: none keeps every activation; selective recomputes attention "
                                  "scores and GELU; full reruns the block forward").arg(s));
            if (pp > 4) c->setMaximumWidth(64);
            m_recomputeLayout->addWidget(c);
            m_recompute.push_back(c);
            connect(c, &QComboBox::currentTextChanged, this, [this, s](const QString& mode) {
                if (m_updating) return;
                editParallel(QString("Recompute stage %1").arg(s), [s, mode](tessera::RunConfig& c) {
                    auto& r = c.parallel.recompute;
                    std::vector<std::string> v(c.parallel.pp, r.empty() ? "none" : r[0]);
                    if ((int)r.size() == c.parallel.pp) v = r;
                    v[s] = mode.toStdString();
                    bool same = std::all_of(v.begin(), v.end(), [&](const auto& x) { return x == v[0]; });
                    r = same ? std::vector<std::string>{v[0]} : v;
                });
            });
        }
    }
}

void PlanPage::editParallel(const QString& text, const std::function<void(tessera::RunConfig&)>& change) {
    m_doc->edit(text, change);
}

// ----------------------------------------------------------------------------
// state -> widgets

int PlanPage::gpuCount() const {
    const auto& hosts = m_doc->config().cluster.hosts;
    if (hosts.empty()) return m_gpus->value();
    int slots = 0;  // a cluster's GPUs are its hosts' slots
    for (const auto& h : hosts) slots += h.slots;
    return slots;
}

void PlanPage::setDeviceName(const QString& name) { m_device->setCurrentText(name); }

void PlanPage::setDarkTheme(bool dark) { m_chart->setDarkTheme(dark); }

void PlanPage::setGpuCount(int gpus) {
    m_gpusFollowWorld = false;
    m_gpus->setValue(gpus);
    refresh();
}

void PlanPage::refresh() {
    const tessera::RunConfig& cfg = m_doc->config();
    const auto& p = cfg.parallel;
    int world = std::max(1, p.dp * p.tp * p.pp);
    const bool cluster = !cfg.cluster.hosts.empty();
    m_updating = true;
    if (cluster) m_gpus->setValue(gpuCount());
    else if (m_gpusFollowWorld) m_gpus->setValue(world);
    for (QSpinBox* s : {m_gpus, m_perNode}) {  // the Hosts page sets them for a cluster
        s->setEnabled(!cluster);
        s->setToolTip(cluster ? "the cluster's hosts and their slots (Hosts page)" : QString());
    }
    if (m_device->property("initialised").isNull()) {
        m_device->setCurrentText(QString::fromStdString(tessera::device_default_name(cfg)));
        m_device->setProperty("initialised", true);
    }
    m_dp->setValue(p.dp), m_tp->setValue(p.tp), m_pp->setValue(p.pp);
    m_virtual->setValue(p.virtual_stages);
    m_micro->setValue(cfg.train.micro_batch), m_accum->setValue(cfg.train.grad_accum);
    m_zero->setCurrentIndex(std::clamp(p.zero, 0, 3));
    m_precision->setCurrentText(QString::fromStdString(cfg.runtime.precision));
    m_precision->setEnabled(cfg.runtime.device == "cuda");  // CPU ranks compute in fp32
    m_precision->setToolTip(cfg.runtime.device == "cuda" ? QString() : "CPU ranks compute in fp32");
    m_schedule->setCurrentText(QString::fromStdString(p.schedule));
    m_offloadAct->setChecked(p.offload_activations), m_offloadOpt->setChecked(p.offload_optimizer);
    rebuildRecompute(std::max(1, p.pp));
    for (int s = 0; s < (int)m_recompute.size(); ++s) {
        std::string mode = p.recompute.empty() ? "none" : p.recompute.size() == 1 ? p.recompute[0]
                           : s < (int)p.recompute.size() ? p.recompute[s] : "none";
        m_recompute[s]->setCurrentText(QString::fromStdString(mode));
    }
    m_removeStage->setEnabled(p.pp > 1);
    m_addStage->setEnabled(cfg.model.preset != "mlp");  // an MLP is not pipelined
    m_updating = false;

    // issues next to their controls
    // a cluster may have spare slots (hosts past the world stay unused): only too few is an issue
    auto issues = tessera::plan_validate(cfg, cluster ? std::min(world, gpuCount()) : gpuCount());
    for (auto it = m_issues.begin(); it != m_issues.end(); ++it) {
        QString t = QString::fromStdString(tessera::plan_issues_for_key(issues, it.key().toStdString()));
        it.value()->setText(t);
        it.value()->setVisible(!t.isEmpty());
    }
    m_valid = issues.empty();

    m_editor->setConfig(cfg);

    // prediction
    m_hasEstimate = false;
    QString estimateError;
    try {
        m_estimate = tessera::estimate_plan(cfg, tessera::device_spec(m_device->currentText().toStdString()));
        m_hasEstimate = true;
    } catch (const std::exception& e) {
        estimateError = QString::fromUtf8(e.what());
    }
    std::vector<bool> over;
    if (m_hasEstimate) {
        const auto& e = m_estimate;
        int64_t cap = capacity_of(e);
        double comm = 0;
        for (const auto& r : e.ranks) comm += r.comm_dp_bytes + r.comm_tp_bytes + r.comm_pp_bytes + r.comm_embedding_bytes;
        m_prediction->setText(QString("<b>step %1 s</b> &nbsp;|&nbsp; <b>%2</b> &nbsp;|&nbsp; MFU %3% &nbsp;|&nbsp; "
                                      "bubble %4% &nbsp;|&nbsp; comm %5 per step (all GPUs)")
                                  .arg(e.step_s, 0, 'f', e.step_s < 1 ? 3 : 2).arg(tokens_str(e.tokens_per_s))
                                  .arg(100 * e.mfu, 0, 'f', 1).arg(100 * e.bubble_fraction, 0, 'f', 1)
                                  .arg(bytes_str(comm)) +
                              step_parts_text(e));
        QStringList lines;
        for (const auto& r : e.ranks) {
            bool o = r.device_peak_bytes > cap;
            over.push_back(o);
            if (!o || lines.size() >= 4) continue;
            int dom = 0;
            for (int c = 1; c < (int)tessera::MemCategory::host; ++c)
                if (r.peak_bytes[c] > r.peak_bytes[dom]) dom = c;
            lines << QString("GPU %1 (%2) is over capacity by %3; %4 dominates (%5)")
                         .arg(r.rank).arg(QString::fromStdString(tessera::mesh_coord_str(r.coord)))
                         .arg(bytes_str(double(r.device_peak_bytes - cap)))
                         .arg(QString::fromUtf8(tessera::mem_category_name(tessera::MemCategory(dom)).data()))
                         .arg(bytes_str(double(r.peak_bytes[dom])));
        }
        int nOver = (int)std::count(over.begin(), over.end(), true);
        if (nOver > (int)lines.size()) lines << QString("… %1 GPUs over capacity in all").arg(nOver);
        m_over->setText(lines.join("\n"));
        m_over->setVisible(!lines.isEmpty());
        m_chart->setEstimate(e, cap);
    } else {
        m_prediction->setText("No prediction: " + estimateError.toHtmlEscaped());
        m_over->hide();
        m_chart->clear("no prediction for this plan");
    }
    QStringList hostLabels;
    std::vector<int> hostSlots;
    for (const auto& h : cfg.cluster.hosts) {
        hostLabels << QString::fromStdString(h.port == 22 ? h.host : h.host + ":" + std::to_string(h.port));
        hostSlots.push_back(h.slots);
    }
    m_grid->setMesh({p.dp, p.tp, p.pp}, std::max(gpuCount(), 1), m_perNode->value(), over);
    m_grid->setHosts(hostLabels, hostSlots);

    bool fits = m_hasEstimate && m_estimate.fits;
    if (!m_valid)
        m_valid_label->setText(QString("<span style='color:#c62828'>✗ plan is invalid</span>: %1 issue%2, "
                                       "shown next to the controls").arg(issues.size()).arg(issues.size() == 1 ? "" : "s"));
    else if (!fits)
        m_valid_label->setText("<span style='color:#c62828'>✗ plan is valid but does not fit</span>: " +
                               QString::fromStdString(m_hasEstimate ? m_estimate.reason : "").toHtmlEscaped());
    else
        m_valid_label->setText(QString("<span style='color:#2e7d32'>✓ plan is valid</span> — %1 on %2 × %3")
                                   .arg(QString::fromStdString(tessera::plan_summary(cfg)).toHtmlEscaped())
                                   .arg(world).arg(m_device->currentText()));
    m_valid = m_valid && fits;
}

// ----------------------------------------------------------------------------
// actions

void PlanPage::balanceStages() {
    const tessera::RunConfig& cfg = m_doc->config();
    try {
        auto st = tessera::balance_stages(cfg, tessera::device_spec(m_device->currentText().toStdString()));
        QStringList s;
        for (int n : st) s << QString::number(n);
        m_balanceMsg->setText(cfg.parallel.stages == st ? "already balanced: " + s.join(", ")
                                                        : "balanced: " + s.join(", "));
        m_balanceMsg->setStyleSheet("");
        m_doc->edit("Balance stages", [st](tessera::RunConfig& c) { c.parallel.stages = st; });
    } catch (const std::exception& e) {
        m_balanceMsg->setText(QString("no balanced partition: ") + e.what());
        m_balanceMsg->setStyleSheet("color: #c62828;");
    }
}

void PlanPage::suggestPlans() {
    m_suggestList->clear();
    m_suggestions.clear();
    try {
        m_suggestions = tessera::plan_suggest(m_doc->config(),
                                              tessera::device_spec(m_device->currentText().toStdString()),
                                              gpuCount(), 5);
    } catch (const std::exception& e) {
        m_suggestMsg->setText(QString("no suggestions: ") + e.what());
        return;
    }
    m_suggestMsg->setText(m_suggestions.empty()
                              ? QString("nothing fits %1 × %2 at this global batch").arg(gpuCount()).arg(m_device->currentText())
                              : QString("%1 GPUs, global batch kept; fastest first").arg(gpuCount()));
    for (const auto& s : m_suggestions) {
        auto* it = new QListWidgetItem(QString("%1 · %2 headroom\n%3\n%4")
                                           .arg(tokens_str(s.tokens_per_s)).arg(bytes_str(double(s.headroom_bytes)))
                                           .arg(QString::fromStdString(s.summary))
                                           .arg(QString::fromStdString(s.reason)));
        it->setToolTip(QString::fromStdString(s.reason));
        QFont bold = it->font();
        if (m_suggestList->count() == 0) bold.setBold(true);  // the fastest
        it->setFont(bold);
        m_suggestList->addItem(it);
    }
}

void PlanPage::applySuggestion(int row) {
    if (row < 0 || row >= (int)m_suggestions.size()) return;
    tessera::RunConfig next = m_suggestions[row].config;
    m_doc->edit("Apply suggested plan", [next](tessera::RunConfig& c) {
        c.parallel = next.parallel;
        c.train.micro_batch = next.train.micro_batch;
        c.train.grad_accum = next.train.grad_accum;
    });
}

// ----------------------------------------------------------------------------
// read-outs (tests, status bar)

QString PlanPage::predictionText() const {
    if (!m_hasEstimate) return m_prediction->text();
    return QString("step %1 s | %2 | MFU %3% | bubble %4%")
        .arg(m_estimate.step_s, 0, 'f', 4).arg(tokens_str(m_estimate.tokens_per_s))
        .arg(100 * m_estimate.mfu, 0, 'f', 2).arg(100 * m_estimate.bubble_fraction, 0, 'f', 2);
}

QString PlanPage::issueText(const QString& key) const {
    auto it = m_issues.find(key);
    return it == m_issues.end() ? QString() : it.value()->text();
}

QString PlanPage::validityText() const { return m_valid_label->text(); }
QString PlanPage::balanceMessage() const { return m_balanceMsg->text(); }
QString PlanPage::overCapacityText() const { return m_over->text(); }

}  // namespace tessera::studio
