// PlanPage: builds the controls and views, turns each control change into one undoable edit,
// and redraws everything from the config on configChanged(). See plan_page.h.
#include "ui/plan/plan_page.h"

#include <QCheckBox>
#include <QComboBox>
#include <QFormLayout>
#include <QGridLayout>
#include <QGroupBox>
#include <QHBoxLayout>
#include <QLabel>
#include <QListWidget>
#include <QPushButton>
#include <QScrollArea>
#include <QSpinBox>
#include <QVBoxLayout>
#include <algorithm>

#include "engine/plan/partitioner.h"
#include "engine/plan/plan_validate.h"
#include "ui/common/project_document.h"
#include "ui/plan/candidates_view.h"
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
        return QString(
                   "<br><span style='color:gray'>step time from FLOPs at %1% of peak (no measured "
                   "op costs "
                   "for %2 in this precision)</span>")
            .arg(100 * e.device.efficiency, 0, 'f', 0)
            .arg(QString::fromStdString(e.device.name));
    const tessera::RankEstimate* slow = &e.ranks[0];
    for (const auto& r : e.ranks)
        if (r.compute_s > slow->compute_s) slow = &r;
    auto ms = [](double s) { return QString::number(s * 1e3, 'f', 1); };
    return QString(
               "<br><span style='color:gray'>compute per step from the %1's measured op costs: "
               "GEMMs %2 ms, "
               "attention %3 ms, other ops %4 ms, optimizer %5 ms (%6 %7)</span>")
        .arg(QString::fromStdString(e.device.name))
        .arg(ms(slow->gemm_s))
        .arg(ms(slow->attention_s))
        .arg(ms(slow->other_ops_s))
        .arg(ms(slow->optimizer_s))
        .arg(tessera::device_rank_noun(e.device))
        .arg(slow->rank);
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

}  // namespace

PlanPage::PlanPage(ProjectDocument* doc, QWidget* parent)
    : QWidget(parent),
      m_doc(doc),
      m_answersJob(new LatestJob(this)),
      m_searchJob(new LatestJob(this)) {
    setObjectName("planPage");
    buildUi();
    m_searchProgress.setInterval(100);
    connect(&m_searchProgress, &QTimer::timeout, this, [this] {
        if (m_search)
            m_suggestMsg->setText(QString("searching: %1 of %2 layouts")
                                      .arg(m_search->done.load())
                                      .arg(m_search->total.load()));
    });
    // a search ends by its result (showSuggestions) or, stopped, with its result dropped
    connect(m_searchJob, &LatestJob::idle, this, [this] {
        if (!m_search) return;
        searchEnded();
        m_suggestMsg->setText("search stopped");
    });
    connect(m_doc, &ProjectDocument::configChanged, this, &PlanPage::refresh);
    // a newly opened project picks its device again (device_default_name: cpu for CPU runs, H200
    // for CUDA runs)
    connect(m_doc, &ProjectDocument::opened, this, [this] {
        // another project: a search still running was for the one before
        stopSearch();
        m_suggestList->clear();
        m_suggestions.clear();
        m_suggestMsg->clear();
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
    m_zero->addItems(
        {"0 — replicated", "1 — optimizer sharded", "2 — + gradients", "3 — + parameters"});
    m_schedule = new QComboBox(this);
    m_schedule->setObjectName("schedule");
    m_schedule->addItems({"1f1b", "gpipe", "interleaved", "zb-h1"});
    m_schedule->setItemData(
        3,
        "zero bubble (ZB-H1): each backward split into the input gradient and the "
        "weight gradients, the latter filling 1F1B's idle time",
        Qt::ToolTipRole);
    m_precision = new QComboBox(this);
    m_precision->setObjectName("precision");
    m_precision->addItems({"fp32", "bf16", "fp8"});
    m_precision->setItemData(1, "activations and weight copies in bf16, fp32 masters and AdamW",
                             Qt::ToolTipRole);
    m_precision->setItemData(
        2, "bf16, and the blocks' large GEMMs in FP8 (e4m3/e5m2, per-tensor scaling)",
        Qt::ToolTipRole);
    m_offloadAct = new QCheckBox("activations", this);
    m_offloadOpt = new QCheckBox("optimizer", this);
    m_recomputeBox = new QWidget(this);
    m_recomputeLayout = new QGridLayout(m_recomputeBox);
    m_recomputeLayout->setContentsMargins(0, 0, 0, 0);
    m_recomputeLayout->setHorizontalSpacing(4);
    m_recomputeLayout->setVerticalSpacing(2);

    auto* form = new QFormLayout;
    auto row = [&](const QString& label, QWidget* w, const QString& key) {
        form->addRow(label, w);
        if (!key.isEmpty()) form->addRow(QString(), issueLabel(key));
    };
    row("Device", m_device, "");
    row("Precision", m_precision, "runtime.precision");
    row("GPUs available", m_gpus, "");
    row("GPUs per node", m_perNode, "");
    m_gpusLabel = qobject_cast<QLabel*>(form->labelForField(m_gpus));
    m_perNodeLabel = qobject_cast<QLabel*>(form->labelForField(m_perNode));
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
    // the cheapest recompute/offload policy that fits, with one click to apply it
    m_policyLabel = new QLabel(this);
    m_policyLabel->setObjectName("policyAdvice");
    m_policyLabel->setWordWrap(true);
    m_policyLabel->setStyleSheet("font-size: 11px;");
    m_applyPolicy = new QPushButton("Apply policy", this);
    m_applyPolicy->setObjectName("applyPolicy");
    m_applyPolicy->setVisible(false);
    auto* pol = new QWidget(this);
    auto* poll = new QVBoxLayout(pol);
    poll->setContentsMargins(0, 0, 0, 0);
    poll->setSpacing(2);
    poll->addWidget(m_policyLabel);
    poll->addWidget(m_applyPolicy, 0, Qt::AlignLeft);
    form->addRow("Memory advice", pol);
    row("Micro-batch", m_micro, "train.micro_batch");
    row("Micro-batches (accum)", m_accum, "train.grad_accum");
    form->addRow(QString(), issueLabel("parallel.stages"));
    m_fitsLabel = new QLabel(this);
    m_fitsLabel->setObjectName("whatFits");
    m_fitsLabel->setWordWrap(false);  // two set lines: a wrapped label here was clipped by the form
    m_fitsLabel->setStyleSheet("font-size: 11px;");
    m_fitsLabel->setToolTip(
        "the largest micro-batch, and the longest sequence at this micro-batch, that fit this "
        "plan on the device (the estimator's answer)");
    form->addRow("What fits", m_fitsLabel);

    auto* controls = new QGroupBox("Plan", this);
    controls->setLayout(form);

    m_suggest = new QPushButton("Suggest plans", this);
    m_suggest->setObjectName("suggestButton");
    m_globalBatch = new QSpinBox(this);
    m_globalBatch->setObjectName("globalBatch");
    m_globalBatch->setRange(1, 1 << 24);
    m_globalBatch->setKeyboardTracking(false);
    m_globalBatch->setToolTip(
        "samples per optimizer step the suggested plans keep (micro-batch x micro-batches x dp)");
    auto* gbRow = new QHBoxLayout;
    gbRow->addWidget(new QLabel("Global batch", this));
    gbRow->addWidget(m_globalBatch, 1);
    gbRow->addWidget(m_suggest);
    m_suggestMsg = new QLabel(this);
    m_suggestMsg->setWordWrap(true);
    m_suggestList = new QListWidget(this);
    m_suggestList->setObjectName("suggestions");
    m_suggestList->setWordWrap(true);
    m_suggestList->setAlternatingRowColors(true);
    m_suggestList->setSpacing(2);
    m_suggestList->setMinimumHeight(160);
    auto* sg = new QGroupBox("Plans that fit, fastest first (click to apply)", this);
    auto* sgl = new QVBoxLayout(sg);
    sgl->addLayout(gbRow);
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
    m_editor->setMinimumHeight(130);
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
    m_imbalanceLabel = new QLabel(this);
    m_imbalanceLabel->setObjectName("stageImbalance");
    m_imbalanceLabel->setWordWrap(true);
    m_imbalanceLabel->setStyleSheet("color: #b26a00;");
    m_imbalanceLabel->hide();
    m_applyImbalance = new QPushButton("Move blocks", this);
    m_applyImbalance->setObjectName("applyImbalance");
    m_applyImbalance->hide();
    auto* ib = new QHBoxLayout;
    ib->addWidget(m_imbalanceLabel, 1);
    ib->addWidget(m_applyImbalance, 0, Qt::AlignTop);
    auto* eg = new QGroupBox("Pipeline partition (drag a boundary to move layers)", this);
    auto* egl = new QVBoxLayout(eg);
    egl->addWidget(m_editor, 1);
    egl->addLayout(eb);
    egl->addLayout(ib);

    m_grid = new GpuGrid(this);
    auto* gg = new QGroupBox("GPUs (colour = stage, shade = TP rank; rank order tp, dp, pp)", this);
    m_gridBox = gg;
    auto* ggl = new QVBoxLayout(gg);
    ggl->addWidget(m_grid);

    m_prediction = new QLabel(this);
    m_prediction->setObjectName("prediction");
    m_prediction->setTextInteractionFlags(Qt::TextSelectableByMouse);
    m_prediction->setStyleSheet("font-size: 13px;");
    m_prediction->setWordWrap(
        true);  // its parts line is long: unwrapped, it set the window's width
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

    m_candidates = new CandidatesView(this);
    m_pin = new QPushButton("Pin this plan", this);
    m_pin->setObjectName("pinPlan");
    m_clearPins = new QPushButton("Clear", this);
    auto* cg = new QGroupBox("Candidates side by side", this);
    auto* cgl = new QVBoxLayout(cg);
    auto* cb = new QHBoxLayout;
    for (QPushButton* b : {m_pin, m_clearPins}) {
        b->setSizePolicy(QSizePolicy::Fixed, QSizePolicy::Fixed);
        cb->addWidget(b);
    }
    m_pinHint = new QLabel(
        "pin up to three plans to compare their memory per GPU and step time "
        "(compute + comm + bubble + offload) here",
        this);
    m_pinHint->setStyleSheet("color: gray;");
    m_pinHint->setWordWrap(true);
    cb->addWidget(m_pinHint, 1);
    cb->addStretch(0);
    cgl->addLayout(cb);
    cgl->addWidget(m_candidates, 1);

    auto* right = new QVBoxLayout;
    right->addWidget(m_valid_label);
    right->addWidget(eg, 1);
    right->addWidget(gg);
    right->addWidget(pg, 3);
    right->addWidget(cg, 0);
    m_candidates->hide();  // shown with the first pin: until then the prediction gets the room

    auto* top = new QHBoxLayout(this);
    // the controls scroll rather than squeeze: a squeezed form clipped its wrapped labels
    auto* lw = new QWidget(this);
    lw->setLayout(left);
    auto* scroll = new QScrollArea(this);
    scroll->setWidget(lw);
    scroll->setWidgetResizable(true);
    scroll->setFrameShape(QFrame::NoFrame);
    scroll->setHorizontalScrollBarPolicy(Qt::ScrollBarAlwaysOff);
    scroll->setFixedWidth(400);
    top->addWidget(scroll);
    top->addLayout(right, 1);

    // wiring: each control is one undoable edit
    auto intEdit = [this](QSpinBox* s, const QString& text,
                          std::function<void(tessera::RunConfig&, int)> f) {
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
    intEdit(m_micro, "Set micro-batch",
            [](tessera::RunConfig& c, int v) { c.train.micro_batch = v; });
    intEdit(m_accum, "Set micro-batches",
            [](tessera::RunConfig& c, int v) { c.train.grad_accum = v; });
    connect(m_zero, &QComboBox::currentIndexChanged, this, [this](int z) {
        if (!m_updating)
            editParallel("Set ZeRO", [z](tessera::RunConfig& c) { c.parallel.zero = z; });
    });
    connect(m_precision, &QComboBox::currentTextChanged, this, [this](const QString& p) {
        if (!m_updating)
            m_doc->edit("Set precision",
                        [p](tessera::RunConfig& c) { c.runtime.precision = p.toStdString(); });
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
        if (!m_updating)
            editParallel("Offload activations",
                         [on](tessera::RunConfig& c) { c.parallel.offload_activations = on; });
    });
    connect(m_offloadOpt, &QCheckBox::toggled, this, [this](bool on) {
        if (!m_updating)
            editParallel("Offload optimizer",
                         [on](tessera::RunConfig& c) { c.parallel.offload_optimizer = on; });
    });
    connect(m_device, &QComboBox::currentTextChanged, this, [this] {
        if (!m_updating) refresh();
    });
    connect(m_gpus, &QSpinBox::valueChanged, this, [this] {
        if (m_updating) return;
        m_gpusFollowWorld = false;
        refresh();
    });
    connect(m_perNode, &QSpinBox::valueChanged, this, [this] {
        if (!m_updating) refresh();
    });
    connect(m_addStage, &QPushButton::clicked, this, [this] { m_pp->setValue(m_pp->value() + 1); });
    connect(m_removeStage, &QPushButton::clicked, this,
            [this] { m_pp->setValue(std::max(1, m_pp->value() - 1)); });
    connect(m_balance, &QPushButton::clicked, this, &PlanPage::balanceStages);
    connect(m_suggest, &QPushButton::clicked, this, &PlanPage::suggestPlans);
    connect(m_globalBatch, &QSpinBox::valueChanged, this, [this] {
        if (!m_updating) m_globalBatchFollows = false;
    });
    connect(m_applyPolicy, &QPushButton::clicked, this, &PlanPage::applyPolicy);
    connect(m_applyImbalance, &QPushButton::clicked, this, &PlanPage::applyImbalanceFix);
    connect(m_pin, &QPushButton::clicked, this, &PlanPage::pinCurrentPlan);
    connect(m_clearPins, &QPushButton::clicked, this, &PlanPage::clearPins);
    connect(m_suggestList, &QListWidget::itemClicked, this,
            [this](QListWidgetItem* it) { applySuggestion(m_suggestList->row(it)); });
    connect(m_editor, &PartitionEditor::dragStarted, this,
            [this](int serial) { m_dragMergeId = m_dragMergeBase + serial; });
    connect(m_editor, &PartitionEditor::stagesEdited, this, [this](const std::vector<int>& st) {
        m_doc->edit(
            "Move stage boundary", [st](tessera::RunConfig& c) { c.parallel.stages = st; },
            m_dragMergeId);
    });
}

void PlanPage::rebuildRecompute(int pp) {
    if ((int)m_recompute.size() != pp) {
        for (auto* c : m_recompute) delete c;
        m_recompute.clear();
        for (int s = 0; s < pp; ++s) {
            auto* c = new QComboBox(m_recomputeBox);
            c->addItems({"none", "selective", "full"});
            c->setObjectName(QString("recompute%1").arg(s));
            c->setToolTip(
                QString("stage %1: none keeps every activation; selective recomputes attention "
                        "scores and GELU; full reruns the block forward")
                    .arg(s));
            // two per row at most, each wide enough for "selective" (a row of eight was cut to
            // "se")
            c->setSizeAdjustPolicy(QComboBox::AdjustToContents);
            m_recomputeLayout->addWidget(c, s / 2, s % 2);
            m_recompute.push_back(c);
            connect(c, &QComboBox::currentTextChanged, this, [this, s](const QString& mode) {
                if (m_updating) return;
                editParallel(
                    QString("Recompute stage %1").arg(s), [s, mode](tessera::RunConfig& c) {
                        auto& r = c.parallel.recompute;
                        std::vector<std::string> v(c.parallel.pp, r.empty() ? "none" : r[0]);
                        if ((int)r.size() == c.parallel.pp) v = r;
                        v[s] = mode.toStdString();
                        bool same = std::all_of(v.begin(), v.end(),
                                                [&](const auto& x) { return x == v[0]; });
                        r = same ? std::vector<std::string>{v[0]} : v;
                    });
            });
        }
    }
}

void PlanPage::editParallel(const QString& text,
                            const std::function<void(tessera::RunConfig&)>& change) {
    m_doc->edit(text, change);
}

// ----------------------------------------------------------------------------
// state -> widgets

QString PlanPage::rankNoun() const {
    return m_device->currentText() == "cpu" ? "rank" : "GPU";  // CPU ranks: ranks on hosts
}

int PlanPage::gpuCount() const {
    const auto& hosts = m_doc->config().cluster.hosts;
    if (hosts.empty()) return m_gpus->value();
    int slots = 0;  // a cluster's GPUs are its hosts' slots
    for (const auto& h : hosts) slots += h.slots;
    return slots;
}

void PlanPage::setDeviceName(const QString& name) {
    m_device->setCurrentText(name);
}

void PlanPage::setDarkTheme(bool dark) {
    m_chart->setDarkTheme(dark);
}

void PlanPage::setGpuCount(int gpus) {
    m_gpusFollowWorld = false;
    m_gpus->setValue(gpus);
    refresh();
}

void PlanPage::refresh() {
    // nothing to plan without a project (the window says so): no issues or prediction of the
    // empty default config
    setEnabled(m_doc->isOpen());
    if (!m_doc->isOpen()) {
        for (QLabel* l : m_issues) l->hide();
        m_valid = false;
        m_hasEstimate = false;
        m_valid_label->setText(tr("No project is open: open one (File › Open) to plan it."));
        m_prediction->clear();
        m_over->hide();
        m_chart->clear(tr("no project"));
        return;
    }
    const tessera::RunConfig& cfg = m_doc->config();
    const auto& p = cfg.parallel;
    int world = std::max(1, p.dp * p.tp * p.pp);
    const bool cluster = !cfg.cluster.hosts.empty();
    m_updating = true;
    if (cluster)
        m_gpus->setValue(gpuCount());
    else if (m_gpusFollowWorld)
        m_gpus->setValue(world);
    for (QSpinBox* s : {m_gpus, m_perNode}) {  // the Hosts page sets them for a cluster
        s->setEnabled(!cluster);
        s->setToolTip(cluster ? "the cluster's hosts and their slots (Hosts page)" : QString());
    }
    if (m_device->property("initialised").isNull()) {
        m_device->setCurrentText(QString::fromStdString(tessera::device_default_name(cfg)));
        m_device->setProperty("initialised", true);
    }
    // CPU ranks are ranks on hosts, not GPUs on nodes
    const QString noun = rankNoun();
    const bool cpuRanks = noun == "rank";
    m_pinHint->setText(QString("pin up to three plans to compare their memory per %1 and step time "
                               "(compute + comm + bubble + offload) here")
                           .arg(noun));
    m_gpusLabel->setText(cpuRanks ? "Ranks available" : "GPUs available");
    m_perNodeLabel->setText(cpuRanks ? "Ranks per host" : "GPUs per node");
    m_grid->setCpuRanks(cpuRanks);
    m_gridBox->setTitle(QString("%1 (colour = stage, shade = TP rank; rank order tp, dp, pp)")
                            .arg(cpuRanks ? "Ranks" : "GPUs"));
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
        std::string mode = p.recompute.empty()           ? "none"
                           : p.recompute.size() == 1     ? p.recompute[0]
                           : s < (int)p.recompute.size() ? p.recompute[s]
                                                         : "none";
        m_recompute[s]->setCurrentText(QString::fromStdString(mode));
    }
    const int64_t gb = int64_t(cfg.train.micro_batch) * cfg.train.grad_accum * std::max(1, p.dp);
    if (m_globalBatchFollows) m_globalBatch->setValue((int)std::min<int64_t>(gb, 1 << 24));
    m_removeStage->setEnabled(p.pp > 1);
    m_addStage->setEnabled(cfg.model.preset != "mlp");  // an MLP is not pipelined
    m_updating = false;

    // issues next to their controls
    // a cluster may have spare slots (hosts past the world stay unused): only too few is an issue
    auto issues = tessera::plan_validate(cfg, cluster ? std::min(world, gpuCount()) : gpuCount());
    for (auto it = m_issues.begin(); it != m_issues.end(); ++it) {
        QString t =
            QString::fromStdString(tessera::plan_issues_for_key(issues, it.key().toStdString()));
        it.value()->setText(t);
        it.value()->setVisible(!t.isEmpty());
    }
    m_valid = issues.empty();

    m_editor->setConfig(cfg);

    // prediction
    m_hasEstimate = false;
    QString estimateError;
    try {
        m_estimate = tessera::estimate_plan(
            cfg, tessera::device_spec(m_device->currentText().toStdString()));
        m_hasEstimate = true;
    } catch (const std::exception& e) {
        estimateError = QString::fromUtf8(e.what());
    }
    std::vector<bool> over;
    if (m_hasEstimate) {
        const auto& e = m_estimate;
        int64_t cap = tessera::plan_rank_capacity(e);
        double comm = 0;
        for (const auto& r : e.ranks)
            comm += r.comm_dp_bytes + r.comm_tp_bytes + r.comm_pp_bytes + r.comm_embedding_bytes;
        m_prediction->setText(
            QString("<b>step %1 s</b> &nbsp;|&nbsp; <b>%2</b> &nbsp;|&nbsp; MFU %3% &nbsp;|&nbsp; "
                    "bubble %4% &nbsp;|&nbsp; comm %5 per step (all %6s)")
                .arg(e.step_s, 0, 'f', e.step_s < 1 ? 3 : 2)
                .arg(tokens_str(e.tokens_per_s))
                .arg(100 * e.mfu, 0, 'f', 1)
                .arg(100 * e.bubble_fraction, 0, 'f', 1)
                .arg(bytes_str(comm))
                .arg(tessera::device_rank_noun(e.device)) +
            step_parts_text(e));
        QStringList lines;
        for (const auto& r : e.ranks) {
            bool o = r.device_peak_bytes > cap;
            over.push_back(o);
            if (!o || lines.size() >= 4) continue;
            int dom = 0;
            for (int c = 1; c < (int)tessera::MemCategory::host; ++c)
                if (r.at_peak_bytes[c] > r.at_peak_bytes[dom]) dom = c;
            lines << QString("%1 %2 (%3) is over capacity by %4; %5 dominates (%6)")
                         .arg(tessera::device_rank_noun(e.device))
                         .arg(r.rank)
                         .arg(QString::fromStdString(tessera::mesh_coord_str(r.coord)))
                         .arg(bytes_str(double(r.device_peak_bytes - cap)))
                         .arg(QString::fromUtf8(
                             tessera::mem_category_name(tessera::MemCategory(dom)).data()))
                         .arg(bytes_str(double(r.at_peak_bytes[dom])));
        }
        int nOver = (int)std::count(over.begin(), over.end(), true);
        if (nOver > (int)lines.size())
            lines << QString("… %1 %2s over capacity in all")
                         .arg(nOver)
                         .arg(tessera::device_rank_noun(e.device));
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
        hostLabels << QString::fromStdString(h.port == 22 ? h.host
                                                          : h.host + ":" + std::to_string(h.port));
        hostSlots.push_back(h.slots);
    }
    m_grid->setMesh({p.dp, p.tp, p.pp}, std::max(gpuCount(), 1), m_perNode->value(), over);
    m_grid->setHosts(hostLabels, hostSlots);

    bool fits = m_hasEstimate && m_estimate.fits;
    if (!m_valid)
        m_valid_label->setText(
            QString("<span style='color:#c62828'>✗ plan is invalid</span>: %1 issue%2, "
                    "shown next to the controls")
                .arg(issues.size())
                .arg(issues.size() == 1 ? "" : "s"));
    else if (!fits)
        m_valid_label->setText(
            "<span style='color:#c62828'>✗ plan is valid but does not fit</span>: " +
            QString::fromStdString(m_hasEstimate ? m_estimate.reason : "").toHtmlEscaped());
    else
        m_valid_label->setText(
            QString("<span style='color:#2e7d32'>✓ plan is valid</span> — %1 on %2 × %3")
                .arg(QString::fromStdString(tessera::plan_summary(cfg)).toHtmlEscaped())
                .arg(world)
                .arg(m_device->currentText()));
    m_valid = m_valid && fits;
    dropStaleSuggestions();
    // the answers cost tens of estimates: worked out off the GUI thread, the newest plan's only
    // (a burst of edits runs one job and then the last edit's)
    updateAnswers();
}

// ----------------------------------------------------------------------------
// answers (engine/plan/plan_advice.h)

void PlanPage::dropStaleSuggestions() {
    const QString key = QString("%1 x %2").arg(gpuCount()).arg(m_device->currentText());
    if (m_suggestions.empty() || key == m_suggestKey) return;
    m_suggestList->clear();
    m_suggestions.clear();
    m_suggestMsg->setText(QString("the %1s changed to %2: suggest again").arg(rankNoun()).arg(key));
}

// The answers beside the controls, worked out off the GUI thread (a large plan's take a second):
// each part's result or the text of why it could not be had.
struct PlanPage::Answers {
    std::optional<tessera::FitLimits> fits;
    std::string fits_error;
    bool plain = false;  // fits without recompute or offload: no policy to advise
    std::optional<tessera::PolicyAdvice> policy;
    std::string policy_error;
    bool pipeline = false;
    std::optional<tessera::StageImbalance> imbalance;
    std::string imbalance_error;
};

PlanPage::Answers PlanPage::computeAnswers(const tessera::RunConfig& cfg,
                                           const tessera::DeviceSpec& dev, bool fits) {
    Answers a;
    try {
        a.fits = tessera::plan_fit_limits(cfg, dev);
    } catch (const std::exception& e) {
        a.fits_error = e.what();
    }
    const auto& par = cfg.parallel;
    a.plain =
        fits &&
        (par.recompute.empty() || (par.recompute.size() == 1 && par.recompute[0] == "none")) &&
        !par.offload_activations && !par.offload_optimizer;
    if (!a.plain) {
        try {
            a.policy = tessera::plan_policy_advice(cfg, dev);
        } catch (const std::exception& e) {
            a.policy_error = e.what();
        }
    }
    a.pipeline = par.pp > 1;
    if (a.pipeline) {
        try {
            a.imbalance = tessera::plan_stage_imbalance(cfg, dev);
        } catch (const std::exception& e) {
            a.imbalance_error = e.what();
        }
    }
    return a;
}

void PlanPage::updateAnswers() {
    if (!m_hasEstimate) {
        m_answersJob->cancel();
        clearAnswers();
        m_fitsLabel->setText("no prediction for this plan");
        m_policyLabel->setText("");
        return;
    }
    // the answers shown stay, greyed, until this plan's arrive
    for (QLabel* l : {m_fitsLabel, m_policyLabel}) l->setEnabled(false);
    const tessera::RunConfig cfg = m_doc->config();
    const tessera::DeviceSpec dev = m_estimate.device;
    const bool fits = m_estimate.fits;
    m_answersJob->request(
        [this, cfg, dev, fits]() -> LatestJob::Apply {
            Answers a = computeAnswers(cfg, dev, fits);
            return [this, a, cfg] { showAnswers(a, cfg); };
        },
        [this](const QString& error) {
            clearAnswers();
            m_fitsLabel->setText("cannot search: " + error.toHtmlEscaped());
        });
}

bool PlanPage::answersPending() const {
    return m_answersJob->busy();
}

void PlanPage::clearAnswers() {
    m_policy = {};
    m_imbalance = {};
    m_applyPolicy->hide();
    m_applyImbalance->hide();
    m_imbalanceLabel->hide();
    m_editor->setOutlier(-1, {}, {}, false);
    for (QLabel* l : {m_fitsLabel, m_policyLabel}) l->setEnabled(true);
}

void PlanPage::showAnswers(const Answers& a, const tessera::RunConfig& cfg) {
    clearAnswers();
    const QString dev_name = QString::fromStdString(m_estimate.device.name);
    if (a.fits) {
        const tessera::FitLimits& f = *a.fits;
        QString t = f.micro_batch == 0
                        ? QString("not even micro-batch 1 fits this plan on the %1").arg(dev_name)
                        : QString("micro-batch up to <b>%1</b>%2")
                              .arg(f.micro_batch)
                              .arg(f.micro_batch_capped ? "+" : "");
        if (f.micro_batch > 0 && cfg.model.preset != "mlp")
            t += QString("<br>sequence up to <b>%1</b>%2<br>(at micro-batch %3)")
                     .arg(f.seq_len)
                     .arg(f.seq_len_capped ? "+" : "")
                     .arg(cfg.train.micro_batch);
        m_fitsLabel->setText(t);
    } else {
        m_fitsLabel->setText(QString("cannot search: ") +
                             QString::fromStdString(a.fits_error).toHtmlEscaped());
    }
    if (a.plain) {
        m_policyLabel->setText("fits without recompute or offload");
    } else if (a.policy) {
        m_policy = *a.policy;
        // short beside the controls; the whole sentence in the tooltip
        if (!m_policy.found)
            m_policyLabel->setText(
                "<span style='color:#c62828'>nothing fits, even with full recompute and "
                "both offloads</span>");
        else if (m_policy.policy.label == "none")
            m_policyLabel->setText("fits without recompute or offload");
        else
            m_policyLabel->setText(
                QString("<b>%1</b> fits: %2%3% step time (%4 vs %5 s)")
                    .arg(QString::fromStdString(m_policy.policy.label).toHtmlEscaped())
                    .arg(m_policy.slowdown >= 1.0005 ? "+" : "")
                    .arg(100 * (m_policy.slowdown - 1), 0, 'f', 0)
                    .arg(m_policy.step_s, 0, 'f', 3)
                    .arg(m_policy.plain_step_s, 0, 'f', 3));
        m_policyLabel->setToolTip(QString::fromStdString(m_policy.text));
        const bool same = m_policy.text.find("the current plan") != std::string::npos;
        m_applyPolicy->setVisible(m_policy.found && !same);
        m_applyPolicy->setText(
            m_policy.policy.label == "none"
                ? QString("Apply: no recompute, no offload")
                : QString("Apply: %1").arg(QString::fromStdString(m_policy.policy.label)));
    } else {
        m_policyLabel->setText(QString("no advice: ") + QString::fromStdString(a.policy_error));
    }
    if (a.pipeline && a.imbalance) {
        m_imbalance = *a.imbalance;
        if (m_imbalance.stage >= 0) {
            m_imbalanceLabel->setText(QString::fromStdString(m_imbalance.text));
            // a fix to apply in amber; an outlier with no move that helps in grey
            m_imbalanceLabel->setStyleSheet(m_imbalance.found ? "color: #b26a00;" : "color: gray;");
            m_imbalanceLabel->show();
            m_applyImbalance->setVisible(m_imbalance.found);
            // at that stage too: its lane in the partition editor, "memory +38% (embedding)"
            const double over =
                m_imbalance.others > 0 ? m_imbalance.value / m_imbalance.others - 1 : 0;
            m_editor->setOutlier(m_imbalance.stage,
                                 QString("%1 +%2% (%3)")
                                     .arg(QString::fromStdString(m_imbalance.metric))
                                     .arg(100 * over, 0, 'f', 0)
                                     .arg(QString::fromStdString(m_imbalance.cause)),
                                 QString::fromStdString(m_imbalance.text), m_imbalance.found);
            m_applyImbalance->setText(QString("Move %1 block%2 to stage %3")
                                          .arg(m_imbalance.move_blocks)
                                          .arg(m_imbalance.move_blocks == 1 ? "" : "s")
                                          .arg(m_imbalance.to_stage));
        }
    } else if (a.pipeline) {
        m_imbalanceLabel->setText(QString("stage balance not assessed: ") +
                                  QString::fromStdString(a.imbalance_error));
        m_imbalanceLabel->show();
    }
}

void PlanPage::applyPolicy() {
    if (!m_policy.found) return;
    const tessera::MemoryPolicy pol = m_policy.policy;
    m_doc->edit(QString("Apply memory policy: %1").arg(QString::fromStdString(pol.label)),
                [pol](tessera::RunConfig& c) { tessera::plan_policy_apply(c, pol); });
}

void PlanPage::applyImbalanceFix() {
    if (!m_imbalance.found) return;
    const std::vector<int> st = m_imbalance.stages;
    m_doc->edit(QString("Move %1 blocks from stage %2 to stage %3")
                    .arg(m_imbalance.move_blocks)
                    .arg(m_imbalance.stage)
                    .arg(m_imbalance.to_stage),
                [st](tessera::RunConfig& c) { c.parallel.stages = st; });
}

void PlanPage::pinCurrentPlan() {
    if (!m_hasEstimate) return;
    std::vector<CandidatesView::Candidate> c = m_candidates->candidates();
    if ((int)c.size() >= CandidatesView::kMaxCandidates) c.erase(c.begin());
    c.push_back({QString::fromStdString(tessera::plan_summary(m_doc->config())), m_estimate,
                 tessera::plan_step_breakdown(m_estimate)});
    m_candidates->setCandidates(std::move(c));
    m_candidates->show();
    m_pinHint->hide();
}

void PlanPage::clearPins() {
    m_candidates->setCandidates({});
    m_candidates->hide();
    m_pinHint->show();
}

void PlanPage::setGlobalBatch(int samples) {
    m_globalBatchFollows = false;
    m_globalBatch->setValue(samples);
}

QString PlanPage::fitsText() const {
    return m_fitsLabel->text();
}
QString PlanPage::policyText() const {
    return m_policyLabel->text();
}
QString PlanPage::imbalanceText() const {
    return m_imbalanceLabel->isVisibleTo(this) ? m_imbalanceLabel->text() : QString();
}

// ----------------------------------------------------------------------------
// actions

void PlanPage::balanceStages() {
    const tessera::RunConfig& cfg = m_doc->config();
    try {
        auto st = tessera::balance_stages(
            cfg, tessera::device_spec(m_device->currentText().toStdString()));
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
    if (m_search) {  // pressed while searching
        stopSearch();
        m_suggestMsg->setText("stopping the search…");
        return;
    }
    m_suggestList->clear();
    m_suggestions.clear();
    m_suggestKey = QString("%1 x %2").arg(gpuCount()).arg(m_device->currentText());
    tessera::DeviceSpec dev;
    try {
        dev = tessera::device_spec(m_device->currentText().toStdString());
    } catch (const std::exception& e) {
        m_suggestMsg->setText(QString("no suggestions: ") + e.what());
        return;
    }
    auto search = std::make_shared<tessera::PlanSearchControl>();
    m_search = search;
    m_suggest->setText("Stop");
    m_suggestMsg->setText("searching…");
    m_searchProgress.start();
    const tessera::RunConfig cfg = m_doc->config();
    const int gpus = gpuCount();
    const int64_t batch = m_globalBatch->value();
    m_searchJob->request(
        [this, cfg, dev, gpus, batch, search]() -> LatestJob::Apply {
            // stopped, it throws PlanSearchStopped into a request stopSearch cancelled
            std::vector<tessera::RankedPlan> plans =
                tessera::plan_rank_for_batch(cfg, dev, gpus, batch, 5, search.get());
            return [this, plans = std::move(plans)]() mutable {
                searchEnded();
                showSuggestions(std::move(plans));
            };
        },
        [this](const QString& error) {
            searchEnded();
            m_suggestMsg->setText("no suggestions: " + error);
        });
}

void PlanPage::stopSearch() {
    if (m_search) m_search->stop = true;
    m_searchJob->cancel();  // its result, or its PlanSearchStopped, is dropped
}

QString PlanPage::suggestionMessage() const {
    return m_suggestMsg->text();
}

bool PlanPage::searching() const {
    return m_searchJob->busy();
}

void PlanPage::searchEnded() {
    m_search.reset();
    m_searchProgress.stop();
    m_suggest->setText("Suggest plans");
}

void PlanPage::showSuggestions(std::vector<tessera::RankedPlan> plans) {
    m_suggestions = std::move(plans);
    m_suggestMsg->setText(m_suggestions.empty() ? QString("nothing fits %1 × %2 at global batch %3")
                                                      .arg(gpuCount())
                                                      .arg(m_device->currentText())
                                                      .arg(m_globalBatch->value())
                                                : QString("%1 %2s, global batch %3; fastest first")
                                                      .arg(gpuCount())
                                                      .arg(rankNoun())
                                                      .arg(m_globalBatch->value()));
    for (const auto& r : m_suggestions) {
        const auto& s = r.plan;
        QString text = QString("%1 · %2 headroom\n%3\n%4")
                           .arg(tokens_str(s.tokens_per_s))
                           .arg(bytes_str(double(s.headroom_bytes)))
                           .arg(QString::fromStdString(s.summary))
                           .arg(QString::fromStdString(s.reason));
        if (!r.loses_because.empty())
            text += QString("\nslower than the one above: %1")
                        .arg(QString::fromStdString(r.loses_because));
        auto* it = new QListWidgetItem(text);
        it->setToolTip(QString::fromStdString(s.reason));
        QFont bold = it->font();
        if (m_suggestList->count() == 0) bold.setBold(true);  // the fastest
        it->setFont(bold);
        m_suggestList->addItem(it);
    }
}

void PlanPage::applySuggestion(int row) {
    if (row < 0 || row >= (int)m_suggestions.size()) return;
    tessera::RunConfig next = m_suggestions[row].plan.config;
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
        .arg(m_estimate.step_s, 0, 'f', 4)
        .arg(tokens_str(m_estimate.tokens_per_s))
        .arg(100 * m_estimate.mfu, 0, 'f', 2)
        .arg(100 * m_estimate.bubble_fraction, 0, 'f', 2);
}

QString PlanPage::issueText(const QString& key) const {
    auto it = m_issues.find(key);
    return it == m_issues.end() ? QString() : it.value()->text();
}

QString PlanPage::validityText() const {
    return m_valid_label->text();
}
QString PlanPage::balanceMessage() const {
    return m_balanceMsg->text();
}
QString PlanPage::overCapacityText() const {
    return m_over->text();
}

}  // namespace tessera::studio
