// The Monitor page: live run charts from runs.db, Launch / Stop, console. See monitor_page.h.
#include "ui/monitor/monitor_page.h"

#include <QCheckBox>
#include <QComboBox>
#include <QCoreApplication>
#include <QDateTime>
#include <QDir>
#include <QFileInfo>
#include <QHBoxLayout>
#include <QLabel>
#include <QPlainTextEdit>
#include <QPushButton>
#include <QSlider>
#include <QSplitter>
#include <QTabWidget>
#include <QVBoxLayout>
#include <algorithm>
#include <cmath>

#include "engine/config/config.h"
#include "engine/core/error.h"
#include "engine/io/checkpoint.h"
#include "engine/plan/estimator.h"
#include "engine/telemetry/metric_names.h"
#include "ui/common/plot_theme.h"
#include "ui/common/project_document.h"
#include "ui/common/qcustomplot_qt.h"
#include "ui/common/stored_config.h"
#include "ui/common/tessera_binary.h"
#include "ui/monitor/monitor_device.h"
#include "ui/monitor/system_charts.h"

namespace tessera::studio {

namespace {
constexpr double kGiB = 1024.0 * 1024.0 * 1024.0;
constexpr size_t kConsoleKeep = 20000;

QCustomPlot* make_plot(QWidget* parent, const QString& name, const QString& ylabel) {
    auto* p = new QCustomPlot(parent);
    p->setObjectName(name);
    p->setMinimumHeight(140);
    p->yAxis->setLabel(ylabel);
    p->setNoAntialiasingOnDrag(true);
    p->setPlottingHint(QCP::phFastPolylines, true);
    return p;
}

QCPGraph* make_graph(QCustomPlot* p, const QString& name, const QColor& c, double width) {
    QCPGraph* g = p->addGraph();
    g->setName(name);
    g->setPen(QPen(c, width));
    g->setAdaptiveSampling(true);
    g->setLineStyle(QCPGraph::lsLine);
    return g;
}

// A line through one point draws nothing (the first logged step of a run, a two-step smoke
// run): such a graph shows its point as a dot until it has a second one. Graphs with markers of
// their own keep them.
void mark_lone_point(QCPGraph* g) {
    const bool lone = g->dataCount() == 1, marked = g->property("lonePoint").toBool();
    if (lone == marked || (lone && g->scatterStyle().shape() != QCPScatterStyle::ssNone)) return;
    g->setProperty("lonePoint", lone);
    g->setScatterStyle(lone ? QCPScatterStyle(QCPScatterStyle::ssDisc, g->pen().color(), 6)
                            : QCPScatterStyle());
}

QString fmt_duration(double s) {
    if (!(s >= 0) || !std::isfinite(s)) return "–";
    int64_t t = (int64_t)std::llround(s);
    if (t >= 3600) return QString("%1h%2m").arg(t / 3600).arg((t % 3600) / 60, 2, 10, QChar('0'));
    return QString("%1:%2").arg(t / 60).arg(t % 60, 2, 10, QChar('0'));
}
}  // namespace

MonitorPage::MonitorPage(ProjectDocument* doc, QWidget* parent)
    : QWidget(parent), m_doc(doc), m_ctl(std::make_unique<tessera::RunController>()) {
    setObjectName("monitorPage");
    m_bin = studio_tessera_binary();

    // ---- top bar: run, launch/stop, x axis, log-y, smoothing ----
    m_runCombo = new QComboBox(this);
    m_runCombo->setObjectName("monitorRunCombo");
    m_runCombo->setMinimumWidth(220);
    m_launchBtn = new QPushButton("Launch", this);
    m_launchBtn->setObjectName("monitorLaunch");
    m_continueBtn = new QPushButton("Continue", this);
    m_continueBtn->setObjectName("monitorContinue");
    m_continueBtn->setEnabled(false);
    m_stopBtn = new QPushButton("Stop", this);
    m_stopBtn->setObjectName("monitorStop");
    m_stopBtn->setEnabled(false);
    m_xCombo = new QComboBox(this);
    m_xCombo->addItems({"step", "wall time (s)", "tokens"});
    m_logCheck = new QCheckBox("log y", this);
    m_smoothSlider = new QSlider(Qt::Horizontal, this);
    m_smoothSlider->setObjectName("monitorSmoothing");
    m_smoothSlider->setRange(0, 99);
    m_smoothSlider->setValue(int(m_beta * 100));
    m_smoothSlider->setMaximumWidth(140);
    m_smoothLabel = new QLabel(this);
    m_status = new QLabel(this);
    m_status->setObjectName("monitorStatus");
    m_status->setTextInteractionFlags(Qt::TextSelectableByMouse);

    auto* bar = new QHBoxLayout;
    bar->addWidget(new QLabel("Run", this));
    bar->addWidget(m_runCombo);
    bar->addWidget(m_launchBtn);
    bar->addWidget(m_continueBtn);
    bar->addWidget(m_stopBtn);
    bar->addSpacing(16);
    bar->addWidget(new QLabel("x", this));
    bar->addWidget(m_xCombo);
    bar->addWidget(m_logCheck);
    bar->addWidget(new QLabel("smoothing", this));
    bar->addWidget(m_smoothSlider);
    bar->addWidget(m_smoothLabel);
    bar->addStretch(1);

    // ---- charts ----
    m_lossPlot = make_plot(this, "monitorLossPlot", "loss");
    m_trainRaw = make_graph(m_lossPlot, "train (raw)", QColor(0x4e, 0x79, 0xa7, 90), 1);
    m_trainSmooth = make_graph(m_lossPlot, "train (smoothed)", QColor(0x4e, 0x79, 0xa7), 2);
    m_val = make_graph(m_lossPlot, "val", QColor(0xf2, 0x8e, 0x2b), 2);
    m_val->setScatterStyle(QCPScatterStyle(QCPScatterStyle::ssCircle, 5));
    m_alertGraph = m_lossPlot->addGraph();
    m_alertGraph->setName("alert (spike, NaN/Inf)");
    m_alertGraph->setLineStyle(QCPGraph::lsNone);
    m_alertGraph->setPen(QPen(QColor(0xd6, 0x27, 0x28), 1.5));
    m_alertGraph->setScatterStyle(
        QCPScatterStyle(QCPScatterStyle::ssTriangle, QColor(0xd6, 0x27, 0x28), 9));
    m_alertGraph->removeFromLegend();
    m_lossPlot->legend->setVisible(true);
    m_lossPlot->legend->setFont(QFont(font().family(), 8));
    m_speedPlot = make_plot(this, "monitorSpeedPlot", "tokens/s");
    m_speed = make_graph(m_speedPlot, "tokens/s", QColor(0x59, 0xa1, 0x4f), 1);
    m_predSpeed = m_speedPlot->addGraph();
    m_predSpeed->setName("predicted");
    m_predSpeed->setPen(QPen(QColor(0xe1, 0x57, 0x59), 1.5, Qt::DashLine));
    m_predSpeed->removeFromLegend();
    // GPU runs also report MFU and NVML utilisation (percent, right axis)
    m_speedPlot->yAxis2->setVisible(true);
    m_speedPlot->yAxis2->setLabel("%");
    m_speedPlot->yAxis2->setRange(0, 100);
    m_mfuGraph = m_speedPlot->addGraph(m_speedPlot->xAxis, m_speedPlot->yAxis2);
    m_mfuGraph->setName("MFU %");
    m_mfuGraph->setPen(QPen(QColor(0xb0, 0x7a, 0xa1), 1.5));
    m_utilGraph = m_speedPlot->addGraph(m_speedPlot->xAxis, m_speedPlot->yAxis2);
    m_utilGraph->setName("GPU util %");
    m_utilGraph->setPen(QPen(QColor(0x9c, 0x75, 0x5f), 1, Qt::DashLine));
    m_speedPlot->legend->setVisible(true);
    m_speedPlot->legend->setFont(QFont(font().family(), 8));
    // the key bottom right: tokens/s runs along the top, where the alerts' labels go (the loss
    // chart keeps its key top right: bottom left, in a short chart, it hid the curve's start)
    m_speedPlot->axisRect()->insetLayout()->setInsetAlignment(0, Qt::AlignBottom | Qt::AlignRight);
    m_memPlot = make_plot(this, "monitorMemoryPlot", "GiB");
    m_memPlot->xAxis->setLabel("rank · node, stage, TP, DP");
    m_memPlot->legend->setVisible(true);
    m_memPlot->legend->setFont(QFont(font().family(), 8));
    // the key in its own column right of the axes, one entry a row: inside the axis rect (or in
    // a row under it that squeezes the axes) it covered the bars of the first or last ranks
    m_memPlot->plotLayout()->addElement(0, 1, m_memPlot->legend);
    m_memPlot->plotLayout()->setColumnStretchFactor(1, 0.001);
    m_memPlot->legend->setFillOrder(QCPLegend::foRowsFirst);
    m_memPlot->legend->setIconSize(16, 9);
    m_memPlot->legend->setRowSpacing(0);
    m_memPlot->legend->setBorderPen(Qt::NoPen);
    m_deviceLabel = new QLabel(this);  // which device the prediction is for, and why
    m_deviceLabel->setObjectName("monitorDevice");
    m_deviceLabel->setWordWrap(true);
    m_deviceLabel->setTextInteractionFlags(Qt::TextSelectableByMouse);
    auto* memBox = new QWidget(this);
    auto* ml = new QVBoxLayout(memBox);
    ml->setContentsMargins(0, 0, 0, 0);
    ml->addWidget(m_deviceLabel);
    ml->addWidget(m_memPlot, 1);

    // ---- console ----
    m_rankFilter = new QComboBox(this);
    m_rankFilter->setObjectName("monitorRankFilter");
    m_rankFilter->addItem("all ranks");
    m_rankFilter->addItem("launcher");
    m_console = new QPlainTextEdit(this);
    m_console->setObjectName("monitorConsole");
    m_console->setReadOnly(true);
    m_console->setMaximumBlockCount((int)kConsoleKeep);
    m_console->setFont(QFontDatabase::systemFont(QFontDatabase::FixedFont));
    auto* consoleBox = new QWidget(this);
    auto* cl = new QVBoxLayout(consoleBox);
    cl->setContentsMargins(0, 0, 0, 0);
    auto* ch = new QHBoxLayout;
    ch->addWidget(new QLabel("Console", consoleBox));
    ch->addStretch(1);
    ch->addWidget(new QLabel("show", consoleBox));
    ch->addWidget(m_rankFilter);
    cl->addLayout(ch);
    cl->addWidget(m_console);

    m_system = new SystemCharts(this);
    m_bottomTabs = new QTabWidget(this);
    m_bottomTabs->setObjectName("monitorBottomTabs");
    m_bottomTabs->addTab(consoleBox, "Console");
    m_bottomTabs->addTab(m_system, "System (GPU, host)");
    m_alertLabel = new QLabel(this);
    m_alertLabel->setObjectName("monitorAlerts");
    m_alertLabel->setWordWrap(true);
    m_alertLabel->setTextInteractionFlags(Qt::TextSelectableByMouse);
    m_alertLabel->setStyleSheet("color: #d62728;");
    m_alertLabel->hide();

    auto* lower = new QSplitter(Qt::Horizontal, this);
    lower->addWidget(m_speedPlot);
    lower->addWidget(memBox);
    auto* split = new QSplitter(Qt::Vertical, this);
    split->addWidget(m_lossPlot);
    split->addWidget(lower);
    split->addWidget(m_bottomTabs);
    split->setStretchFactor(0, 3);
    split->setStretchFactor(1, 2);
    split->setStretchFactor(2, 2);

    auto* lay = new QVBoxLayout(this);
    lay->addLayout(bar);
    lay->addWidget(m_alertLabel);
    lay->addWidget(split, 1);
    lay->addWidget(m_status);

    // ---- wiring ----
    connect(m_launchBtn, &QPushButton::clicked, this, &MonitorPage::launch);
    connect(m_continueBtn, &QPushButton::clicked, this, &MonitorPage::continueRun);
    connect(m_stopBtn, &QPushButton::clicked, this, &MonitorPage::stop);
    connect(m_xCombo, &QComboBox::currentIndexChanged, this, [this](int i) { setXAxis(i); });
    connect(m_logCheck, &QCheckBox::toggled, this, [this](bool on) { setLogY(on); });
    connect(m_smoothSlider, &QSlider::valueChanged, this,
            [this](int v) { setSmoothing(v / 100.0); });
    connect(m_runCombo, &QComboBox::activated, this, [this](int i) {
        if (i >= 0 && i < (int)m_runIds.size()) selectRun(m_runIds[(size_t)i]);
    });
    connect(m_rankFilter, &QComboBox::currentIndexChanged, this,
            [this](int) { refilterConsole(); });
    m_pollTimer.setInterval(250);
    connect(&m_pollTimer, &QTimer::timeout, this, &MonitorPage::pollNow);
    m_replotTimer.setSingleShot(true);
    m_replotTimer.setInterval(40);
    connect(&m_replotTimer, &QTimer::timeout, this, &MonitorPage::replotNow);

    // the controller's callbacks run on its reader thread: hop to the GUI thread
    m_ctl->set_line_callback([this](const tessera::ConsoleLine& l) {
        QMetaObject::invokeMethod(
            this, [this, l] { appendConsole(l); }, Qt::QueuedConnection);
    });
    m_ctl->set_state_callback([this](tessera::RunState s) {
        QMetaObject::invokeMethod(
            this, [this, s] { onControllerState(s); }, Qt::QueuedConnection);
    });

    if (m_doc) {
        connect(m_doc, &ProjectDocument::opened, this, [this](const QString&) {
            m_store.reset();
            m_runId = 0;
            resetRunData();
            m_ctl->attach(m_doc->projectDir().toStdString(), m_doc->dbPath().toStdString());
            onControllerState(m_ctl->state());
            pollNow();
        });
        connect(m_doc, &ProjectDocument::configChanged, this,
                [this] { refreshRunButtons(m_ctl->state()); });
        if (m_doc->isOpen()) {
            m_ctl->attach(m_doc->projectDir().toStdString(), m_doc->dbPath().toStdString());
        }
    }
    setSmoothing(m_beta);
    setDarkTheme(false);
    onControllerState(m_ctl->state());
    m_pollTimer.start();
    pollNow();
}

MonitorPage::~MonitorPage() {
    m_ctl.reset();  // stops a run this page started and joins its reader before widgets go
}

// ---- runs.db ---------------------------------------------------------------------------------

void MonitorPage::openStore() {
    if (m_store || !m_doc || !m_doc->isOpen()) return;
    const QString db = m_doc->dbPath();
    if (db.isEmpty() || !QFileInfo::exists(db)) return;
    try {
        m_store.emplace(tessera::RunStore::open(db.toStdString(), true));
    } catch (const std::exception& e) {
        m_status->setText(QString("runs.db: %1").arg(e.what()));
    }
}

void MonitorPage::refreshRuns() {
    std::vector<tessera::RunRow> runs = m_store->runs_list();
    std::vector<int64_t> ids;
    for (auto& r : runs) ids.push_back(r.id);
    if (ids != m_runIds) {
        m_runIds = ids;
        QSignalBlocker block(m_runCombo);
        m_runCombo->clear();
        for (auto& r : runs)
            m_runCombo->addItem(
                QString("#%1 %2 — %3")
                    .arg(r.id)
                    .arg(QString::fromStdString(r.name), QString::fromStdString(r.status)));
    }
    // follow the newest run: at first, and after Launch once its row appears
    int64_t newest = ids.empty() ? 0 : ids.back();
    if (newest && (m_runId == 0 || (m_followNewRun && newest > m_maxRunIdAtLaunch))) {
        m_followNewRun = false;
        selectRun(newest);
    }
    for (auto& r : runs) {
        if (r.id != m_runId) continue;
        if (r.status != m_run.status || r.last_step != m_run.last_step) {
            m_run.status = r.status;
            m_run.message = r.message;
            m_run.last_step = r.last_step;
            m_run.end_time = r.end_time;
            int idx = int(std::find(ids.begin(), ids.end(), r.id) - ids.begin());
            m_runCombo->setItemText(
                idx, QString("#%1 %2 — %3")
                         .arg(r.id)
                         .arg(QString::fromStdString(r.name), QString::fromStdString(r.status)));
        }
    }
}

void MonitorPage::pollNow() {
    openStore();
    if (!m_store) {
        updateStatus();
        return;
    }
    try {
        refreshRuns();
        if (m_runId) ingest(m_store->metrics(m_runId, "", m_lastRowid));
        // a live run's ranks record their devices as they start: predict for them once they have
        if (m_runId && !m_deviceSeen && m_run.status == run_status::running &&
            !m_store->devices(m_runId).empty())
            loadPrediction();
    } catch (const std::exception& e) {
        m_status->setText(QString("runs.db: %1").arg(e.what()));
        return;
    }
    updateStatus();
}

bool MonitorPage::selectRun(int64_t run_id) {
    openStore();
    if (!m_store) return false;
    std::optional<tessera::RunRow> r = m_store->run_get(run_id);
    if (!r) return false;
    m_runId = run_id;
    m_run = *r;
    resetRunData();
    loadPrediction();
    int idx = int(std::find(m_runIds.begin(), m_runIds.end(), run_id) - m_runIds.begin());
    if (idx < m_runCombo->count()) {
        QSignalBlocker block(m_runCombo);
        m_runCombo->setCurrentIndex(idx);
    }
    ingest(m_store->metrics(m_runId, "", 0));
    return true;
}

void MonitorPage::resetRunData() {
    m_lastRowid = 0;
    m_trainLoss = m_valLoss = m_tokPerS = m_stepMs = m_mfu = m_gpuUtil = Series{};
    m_smooth.clear();
    m_ema = EmaState{m_beta};
    m_mem.clear();
    m_nvmlUsed.clear();
    m_engineDevice.clear();
    m_predTotal.clear();
    m_predDevice.clear();
    m_deviceRecorded = m_deviceSeen = false;
    m_deviceLabel->clear();
    m_predTokPerS = 0;
    m_nodeOf.clear();
    m_lossRows.clear();
    m_speedRows.clear();
    m_lossAlerts.clear();
    m_speedAlerts.clear();
    m_system->clear();
    m_tokensPerStep = 0;
    m_totalSteps = 0;
    m_epochOrder = false;
    m_epoch = -1;
    m_fullRebuild = m_memDirty = true;
    scheduleReplot();
}

// The run's own config (runs.config_text) gives tokens per step, the step count and the
// estimator's per-rank memory prediction, for the device the run recorded (monitor_device.h).
void MonitorPage::loadPrediction() {
    m_predTotal.clear();
    m_predDevice.clear();
    m_deviceRecorded = m_deviceSeen = false;
    m_deviceLabel->clear();
    try {
        if (!m_store) throw tessera::InputError("no runs.db open");
        tessera::RunConfig cfg = stored_run_config(*m_store, m_run.config_text,
                                                   QString("run #%1").arg(m_runId).toStdString());
        m_totalSteps = cfg.train.steps;
        m_epochOrder = cfg.data.order == "epoch";
        m_mesh = tessera::MeshShape{cfg.parallel.dp, cfg.parallel.tp, cfg.parallel.pp};
        m_tokensPerStep = (int64_t)cfg.train.micro_batch * cfg.train.grad_accum * cfg.model.seq_len;
        std::vector<tessera::DeviceRecord> devices;
        if (m_store) devices = m_store->devices(m_runId);
        m_deviceSeen = !devices.empty();
        m_system->setDevices(devices);
        std::map<std::string, int> nodes;  // hosts numbered in the order of their first rank
        for (const auto& d : devices) {
            auto it = nodes.try_emplace(d.host, (int)nodes.size()).first;
            m_nodeOf[d.rank] = it->second;
        }
        MonitorDevice md = monitor_prediction_device(cfg, devices);
        m_predDevice = md.spec.name;
        m_deviceRecorded = md.recorded;
        m_deviceLabel->setText(QString::fromStdString(md.text));
        tessera::PlanEstimate est = tessera::estimate_plan(cfg, md.spec);
        if (est.tokens_per_step > 0) m_tokensPerStep = est.tokens_per_step;
        for (auto& rk : est.ranks) m_predTotal.push_back((double)rk.total_peak_bytes);
        m_predTokPerS = est.tokens_per_s;
    } catch (const std::exception& e) {
        // an unparsable or unestimable config: charts without the band, and the reason
        m_predTotal.clear();
        m_deviceLabel->setText(m_deviceLabel->text() +
                               (m_deviceLabel->text().isEmpty() ? "" : " · ") +
                               QString("no prediction: %1").arg(QString::fromUtf8(e.what())));
    }
    m_memDirty = m_dataDirty = true;
    scheduleReplot();
}

QString MonitorPage::deviceText() const {
    return m_deviceLabel->text();
}

void MonitorPage::ingest(const std::vector<tessera::MetricRow>& rows) {
    if (rows.empty()) return;
    auto add = [](Series& s, const tessera::MetricRow& r) {
        if (s.rank < 0) s.rank = r.rank;
        if (r.rank != s.rank) return false;
        s.step.push_back((double)r.step);
        s.wall.push_back(r.wall_time);
        s.value.push_back(r.value);
        return true;
    };
    for (const tessera::MetricRow& r : rows) {
        m_lastRowid = std::max(m_lastRowid, r.rowid);
        const std::string& n = r.name;
        if (n == metric::train_loss) {
            m_lossRows.push_back({r.step, r.rank, r.value, r.wall_time});
            if (add(m_trainLoss, r)) m_smooth.push_back(m_ema.push(r.value));
        } else if (n == metric::val_loss) {
            add(m_valLoss, r);
        } else if (n == metric::perf_tok_per_s) {
            if (add(m_tokPerS, r)) m_speedRows.push_back({r.step, r.rank, r.value, r.wall_time});
        } else if (n == metric::train_epoch) {
            m_epoch = r.value;
        } else if (n == metric::perf_step_ms) {
            add(m_stepMs, r);
        } else if (n == metric::perf_mfu) {
            add(m_mfu, r);
        } else if (n == metric::gpu_util_percent) {
            add(m_gpuUtil, r);
            m_system->add(r);
        } else if (n == metric::gpu_memory_used_bytes) {
            m_system->add(r);
            if (std::isfinite(r.value)) m_nvmlUsed[r.rank] = std::max(m_nvmlUsed[r.rank], r.value);
            m_memDirty = true;
        } else if (n == metric::mem_device_bytes) {
            if (std::isfinite(r.value))
                m_engineDevice[r.rank] = std::max(m_engineDevice[r.rank], r.value);
            m_memDirty = true;
        } else if (std::optional<MemCategory> c = metric::mem_category_of(n)) {
            auto& arr = m_mem.try_emplace(r.rank).first->second;
            if (std::isfinite(r.value)) arr[(size_t)*c] = std::max(arr[(size_t)*c], r.value);
            m_memDirty = true;
        } else {
            m_system->add(r);  // the other system metrics (power, temperature, clock, host)
        }
    }
    m_dataDirty = true;
    scheduleReplot();
}

// ---- plotting ----------------------------------------------------------------------------------

void MonitorPage::scheduleReplot() {
    if (!m_replotTimer.isActive()) m_replotTimer.start();
}

double MonitorPage::keyOf(const Series& s, size_t i) const {
    switch (m_xMode) {
        case XWallTime:
            return s.wall[i] - (m_run.start_time > 0 ? m_run.start_time : s.wall.front());
        case XTokens:
            return s.step[i] * (double)m_tokensPerStep;
        default:
            return s.step[i];
    }
}

// Hands the graph the points of `s` it has not seen (values: the series' own or the smoothed).
void MonitorPage::appendGraph(QCPGraph* g, Series& s, const std::vector<double>* values) {
    const std::vector<double>& v = values ? *values : s.value;
    size_t n = std::min(s.step.size(), v.size());
    if (s.plotted >= n) return;
    QVector<double> keys, vals;
    keys.reserve(int(n - s.plotted));
    vals.reserve(int(n - s.plotted));
    for (size_t i = s.plotted; i < n; ++i) {
        keys.push_back(keyOf(s, i));
        vals.push_back(v[i]);
    }
    g->addData(keys, vals, true);
    s.plotted = n;
    mark_lone_point(g);
}

void MonitorPage::rebuildAll() {
    m_fullRebuild = true;
    scheduleReplot();
}

void MonitorPage::replotNow() {
    m_replotTimer.stop();
    if (m_fullRebuild) {
        for (QCPGraph* g : {m_trainRaw, m_trainSmooth, m_val, m_speed, m_mfuGraph, m_utilGraph,
                            m_alertGraph, m_predSpeed})
            g->data()->clear();
        m_trainLoss.plotted = m_valLoss.plotted = m_tokPerS.plotted = 0;
        m_mfu.plotted = m_gpuUtil.plotted = 0;
    }
    if (m_fullRebuild || m_dataDirty) {
        // the raw and smoothed graphs share the series' plotted counter: feed both from one copy
        size_t before = m_trainLoss.plotted;
        appendGraph(m_trainRaw, m_trainLoss, nullptr);
        m_trainLoss.plotted = before;
        appendGraph(m_trainSmooth, m_trainLoss, &m_smooth);
        appendGraph(m_val, m_valLoss, nullptr);
        appendGraph(m_speed, m_tokPerS, nullptr);
        std::vector<double> mfu_pct(m_mfu.value.size());
        for (size_t i = 0; i < mfu_pct.size(); ++i) mfu_pct[i] = 100.0 * m_mfu.value[i];
        appendGraph(m_mfuGraph, m_mfu, &mfu_pct);
        appendGraph(m_utilGraph, m_gpuUtil, nullptr);
        // the percent axis and its legend entries only for runs that report them (GPU runs)
        const bool pct = !m_mfu.value.empty() || !m_gpuUtil.value.empty();
        m_speedPlot->yAxis2->setVisible(pct);
        for (auto [g, any] : {std::pair{m_mfuGraph, !m_mfu.value.empty()},
                              std::pair{m_utilGraph, !m_gpuUtil.value.empty()}})
            any ? (void)g->addToLegend() : (void)g->removeFromLegend();
        m_speedPlot->legend->setVisible(pct);
        const QString xl = m_xMode == XWallTime ? "wall time (s)"
                           : m_xMode == XTokens ? "tokens"
                                                : "step";
        m_lossPlot->xAxis->setLabel(xl);
        m_speedPlot->xAxis->setLabel(xl);
        m_lossPlot->rescaleAxes();
        m_speedPlot->rescaleAxes();
        m_speedPlot->yAxis->setRangeLower(0);
        if (pct) m_speedPlot->yAxis2->setRange(0, 100);  // MFU and utilisation on one fixed scale
        rebuildAlerts();
        m_system->setXAxis(m_xMode, m_run.start_time, (double)m_tokensPerStep);
    }
    m_system->replot();
    if (m_memDirty) rebuildMemory();
    const bool mem = m_memDirty;
    m_fullRebuild = m_dataDirty = m_memDirty = false;
    m_lossPlot->replot(QCustomPlot::rpQueuedRefresh);
    m_speedPlot->replot(QCustomPlot::rpQueuedRefresh);
    if (mem) m_memPlot->replot(QCustomPlot::rpQueuedRefresh);
}

// Per-rank memory: bars stacked by category (the run's peaks) in the left half of each rank's slot,
// the prediction as a band beside them in the right half (a translucent rectangle ±5 % around the
// predicted total, with the total as its centre line: drawn over the bar it hid the top
// categories), and two ticks across each bar: the engine's own device total (mem/device_bytes,
// dashed) and what the driver measured used on the GPU (gpu/memory_used_bytes, NVML, solid).
// Items have no legend entries: an empty plottable drawn like each stands in for it in the legend.
namespace {
constexpr double kBarX = -0.19, kBarW = 0.34;     // the stacked bar: centre offset and width
constexpr double kBandX0 = 0.02, kBandX1 = 0.36;  // the prediction band, right of the bar
}  // namespace

void MonitorPage::rebuildMemory() {
    m_memPlot->clearPlottables();
    m_memPlot->clearItems();
    m_bands.clear();
    int ranks =
        std::max<int>((int)m_predTotal.size(), m_mem.empty() ? 0 : m_mem.rbegin()->first + 1);
    if (ranks == 0) return;
    QCPBars* below = nullptr;
    double ymax = 0;
    std::vector<double> stacked((size_t)ranks, 0.0);
    for (int c = 0; c < tessera::kMemCategoryCount; ++c) {
        QVector<double> keys, vals;
        bool any = false;
        for (int r = 0; r < ranks; ++r) {
            double b = 0;
            auto it = m_mem.find(r);
            if (it != m_mem.end()) b = it->second[(size_t)c];
            keys.push_back(r + kBarX);
            vals.push_back(b / kGiB);
            stacked[(size_t)r] += b / kGiB;
            any = any || b > 0;
        }
        if (!any) continue;
        auto* bars = new QCPBars(m_memPlot->xAxis, m_memPlot->yAxis);
        bars->setName(
            QString::fromUtf8(tessera::mem_category_name((tessera::MemCategory)c).data()));
        bars->setWidth(kBarW);
        bars->setPen(Qt::NoPen);
        bars->setBrush(mem_category_color(c));
        bars->setData(keys, vals, true);
        if (below) bars->moveAbove(below);
        below = bars;
    }
    for (double s : stacked) ymax = std::max(ymax, s);
    const QColor band_color(0xe1, 0x57, 0x59);
    if (!m_predTotal.empty()) {
        auto* key = new QCPBars(m_memPlot->xAxis, m_memPlot->yAxis);
        key->setName("predicted ±5 %");  // for the device named above the chart
        key->setPen(QPen(band_color, 1, Qt::DashLine));
        key->setBrush(QColor(0xe1, 0x57, 0x59, 60));
    }
    for (int r = 0; r < (int)m_predTotal.size(); ++r) {
        double p = m_predTotal[(size_t)r] / kGiB;
        auto* band = new QCPItemRect(m_memPlot);
        band->setObjectName(QString("predictionBand%1").arg(r));
        band->topLeft->setCoords(r + kBandX0, p * 1.05);
        band->bottomRight->setCoords(r + kBandX1, p * 0.95);
        band->setPen(QPen(band_color, 1, Qt::DashLine));
        band->setBrush(QColor(0xe1, 0x57, 0x59, 60));
        auto* mid = new QCPItemLine(m_memPlot);
        mid->start->setCoords(r + kBandX0, p);
        mid->end->setCoords(r + kBandX1, p);
        mid->setPen(QPen(band_color, 2));
        m_bands.push_back(band);
        ymax = std::max(ymax, p * 1.05);
    }
    // the engine's own device total per rank (its accounting without the host category), and what
    // the driver measured used on each GPU (NVML: the engine's tensors plus the CUDA context,
    // library workspaces and anything else on the device), side by side over the bars
    const QColor ink = palette().color(QPalette::WindowText);
    auto ticks = [&](const std::map<int, double>& per_rank, const QString& name, const QPen& pen,
                     const QString& id) {
        if (per_rank.empty()) return;
        QCPGraph* key = m_memPlot->addGraph();
        key->setName(name);
        key->setPen(pen);
        for (const auto& [r, bytes] : per_rank) {
            auto* tick = new QCPItemLine(m_memPlot);
            tick->setObjectName(QString("%1%2").arg(id).arg(r));
            tick->start->setCoords(r + kBarX - kBarW / 2 - 0.03, bytes / kGiB);
            tick->end->setCoords(r + kBarX + kBarW / 2 + 0.03, bytes / kGiB);
            tick->setPen(pen);
            ymax = std::max(ymax, bytes / kGiB);
        }
    };
    ticks(m_engineDevice, "engine accounting", QPen(ink, 2, Qt::DashLine), "engineDevice");
    ticks(m_nvmlUsed, "measured (driver)", QPen(ink, 2), "nvmlUsed");
    m_memPlot->xAxis->setRange(-0.7, ranks - 0.3);
    m_memPlot->yAxis->setRange(0, ymax > 0 ? ymax * 1.15 : 1);
    // each rank labelled with its place in the plan: rank, stage, TP rank, DP rank
    QSharedPointer<QCPAxisTickerText> t(new QCPAxisTickerText);
    for (int r = 0; r < ranks; ++r) {
        QString label = QString("r%1").arg(r);
        if (r < m_mesh.world()) {
            tessera::MeshCoord c = tessera::mesh_coord(m_mesh, r);
            auto node = m_nodeOf.find(r);  // the host the rank recorded (node 0 without a record)
            label += QString("\nN%1 S%2 T%3 D%4")
                         .arg(node == m_nodeOf.end() ? 0 : node->second)
                         .arg(c.pp)
                         .arg(c.tp)
                         .arg(c.dp);
        }
        t->addTick(r, label);
    }
    m_memPlot->xAxis->setTicker(t);
}

// ---- alerts ----------------------------------------------------------------------------------

double MonitorPage::keyAt(double step, double wall) const {
    switch (m_xMode) {
        case XWallTime: {
            double t0 = m_run.start_time > 0
                            ? m_run.start_time
                            : (m_trainLoss.wall.empty() ? wall : m_trainLoss.wall.front());
            return wall - t0;
        }
        case XTokens:
            return step * (double)m_tokensPerStep;
        default:
            return step;
    }
}

// The engine's rules (run_alerts.h) over every rank's rows; each alert a vertical line at its step
// with a short label (the rank that saw it first), spikes also a triangle on the point.
void MonitorPage::rebuildAlerts() {
    for (QCPAbstractItem* it : m_alertItems) it->parentPlot()->removeItem(it);
    m_alertItems.clear();
    m_alertGraph->data()->clear();
    m_predSpeed->data()->clear();
    m_lossAlerts = tessera::alerts_loss(m_lossRows);
    m_speedAlerts = tessera::alerts_throughput(m_speedRows, m_predTokPerS);
    const QColor red(0xd6, 0x27, 0x28);
    auto mark = [&](QCustomPlot* p, double key, const QString& text, const QString& name) {
        auto* line = new QCPItemStraightLine(p);
        line->setObjectName(name);
        line->point1->setCoords(key, 0);
        line->point2->setCoords(key, 1);
        line->setPen(QPen(red, 1, Qt::DashLine));
        auto* label = new QCPItemText(p);
        label->setObjectName(name + "Label");
        label->position->setTypeX(QCPItemPosition::ptPlotCoords);
        label->position->setTypeY(QCPItemPosition::ptAxisRectRatio);
        label->position->setCoords(key, 0.02);
        // right of the line, or left of it in the chart's right half (never cut at the edge)
        const QCPRange xr = p->xAxis->range();
        label->setPositionAlignment(Qt::AlignTop |
                                    (key > xr.center() ? Qt::AlignRight : Qt::AlignLeft));
        label->setPadding(QMargins(3, 0, 3, 0));
        label->setColor(red);
        label->setFont(QFont(font().family(), 8));
        label->setText(text);
        m_alertItems.push_back(line);
        m_alertItems.push_back(label);
    };
    int i = 0;
    for (const tessera::LossAlert& a : m_lossAlerts) {
        double wall = 0;
        for (const auto& r : m_lossRows)
            if (r.step == a.step && r.rank == a.rank) wall = r.wall_time;
        const double key = keyAt((double)a.step, wall);
        const bool bad = a.kind == tessera::LossAlert::Kind::non_finite;
        QString v = std::isnan(a.value) ? "NaN" : a.value > 0 ? "+Inf" : "-Inf";
        mark(m_lossPlot, key,
             bad ? QString("%1 · r%2").arg(v).arg(a.rank) : QString("spike · r%1").arg(a.rank),
             QString("lossAlert%1").arg(i++));
        if (!bad) m_alertGraph->addData(key, a.value);
        // a NaN has no point for rescaleAxes to include: widen the axis to show its mark
        const QCPRange xr = m_lossPlot->xAxis->range();
        if (key > xr.upper)
            m_lossPlot->xAxis->setRangeUpper(key + 0.02 * std::max(1.0, key - xr.lower));
        if (key < xr.lower) m_lossPlot->xAxis->setRangeLower(key);
    }
    i = 0;
    for (const tessera::ThroughputAlert& a : m_speedAlerts) {
        double wall = 0;
        for (const auto& r : m_speedRows)
            if (r.step == a.step) wall = r.wall_time;
        mark(m_speedPlot, keyAt((double)a.step, wall),
             QString("below prediction from step %1").arg(a.step),
             QString("speedAlert%1").arg(i++));
    }
    (m_lossAlerts.empty() ? (void)m_alertGraph->removeFromLegend()
                          : (void)m_alertGraph->addToLegend());
    // the prediction as a dashed level across the chart (its own y range included)
    if (m_predTokPerS > 0 && !m_tokPerS.step.empty()) {
        const double k0 = keyOf(m_tokPerS, 0), k1 = keyOf(m_tokPerS, m_tokPerS.step.size() - 1);
        m_predSpeed->setData(QVector<double>{k0, k1},
                             QVector<double>{m_predTokPerS, m_predTokPerS});
        m_predSpeed->addToLegend();
        m_speedPlot->legend->setVisible(true);
        m_speedPlot->yAxis->setRangeUpper(
            std::max(m_speedPlot->yAxis->range().upper, m_predTokPerS * 1.1));
    } else {
        m_predSpeed->removeFromLegend();
    }
    QStringList lines = alertLines();
    m_alertLabel->setText(lines.join("\n"));
    m_alertLabel->setVisible(!lines.isEmpty());
}

QStringList MonitorPage::alertLines() const {
    QStringList out;
    for (const auto& a : m_lossAlerts) out << QString::fromStdString(tessera::alert_describe(a));
    for (const auto& a : m_speedAlerts) out << QString::fromStdString(tessera::alert_describe(a));
    return out;
}

void MonitorPage::showSystemTab() {
    m_bottomTabs->setCurrentWidget(m_system);
}

void MonitorPage::setSmoothing(double beta) {
    beta = std::clamp(beta, 0.0, 0.99);
    m_beta = beta;
    {
        QSignalBlocker block(m_smoothSlider);
        m_smoothSlider->setValue(int(std::lround(beta * 100)));
    }
    m_smoothLabel->setText(QString::number(beta, 'f', 2));
    // recomputed on the full-resolution series, then the graph gets it anew
    m_smooth = monitor_ema_debiased(m_trainLoss.value, beta);
    m_ema = EmaState{beta};
    for (double x : m_trainLoss.value) m_ema.push(x);
    m_trainSmooth->data()->clear();
    rebuildAll();
}

void MonitorPage::setXAxis(int mode) {
    m_xMode = std::clamp(mode, 0, 2);
    if (m_xCombo->currentIndex() != m_xMode) m_xCombo->setCurrentIndex(m_xMode);
    rebuildAll();
}

void MonitorPage::setLogY(bool on) {
    m_logY = on;
    if (m_logCheck->isChecked() != on) m_logCheck->setChecked(on);
    m_lossPlot->yAxis->setScaleType(on ? QCPAxis::stLogarithmic : QCPAxis::stLinear);
    if (on)
        m_lossPlot->yAxis->setTicker(QSharedPointer<QCPAxisTickerLog>(new QCPAxisTickerLog));
    else
        m_lossPlot->yAxis->setTicker(QSharedPointer<QCPAxisTicker>(new QCPAxisTicker));
    rebuildAll();
}

void MonitorPage::loadSynthetic(int n_train, int n_val, int n_speed) {
    resetRunData();
    m_run = tessera::RunRow{};
    m_run.start_time = 1.0e9;
    auto fill = [](Series& s, int n, double (*f)(int)) {
        for (int i = 0; i < n; ++i) {
            s.step.push_back(i + 1);
            s.wall.push_back(1.0e9 + 0.01 * i);
            s.value.push_back(f(i));
        }
        s.rank = 0;
    };
    fill(m_trainLoss, n_train,
         [](int i) { return 4.0 * std::exp(-i * 1e-5) + 0.3 * std::sin(i * 0.37); });
    fill(m_valLoss, n_val, [](int i) { return 4.0 * std::exp(-i * 1e-5 * 10) + 0.1; });
    fill(m_tokPerS, n_speed, [](int i) { return 1.0e5 + 2.0e4 * std::sin(i * 0.011); });
    setSmoothing(m_beta);
    replotNow();
}

// ---- status, launch, console -------------------------------------------------------------------

QString MonitorPage::statusText() const {
    return m_status->text();
}

void MonitorPage::updateStatus() {
    QString s = QString("%1").arg(tessera::run_state_name(m_ctl->state()));
    if (m_runId) {
        s += QString(" · run #%1 %2").arg(m_runId).arg(QString::fromStdString(m_run.status));
        int64_t step = m_trainLoss.step.empty() ? 0 : (int64_t)m_trainLoss.step.back();
        s += QString(" · step %1").arg(step);
        if (m_totalSteps > 0) s += QString("/%1").arg(m_totalSteps);
        // train/epoch counts passes only in epoch order (in random order windows repeat)
        if (m_epochOrder && m_epoch >= 0) s += QString(" · epoch %1").arg(m_epoch, 0, 'f', 2);
        if (!m_tokPerS.value.empty())
            s += QString(" · %1 tok/s").arg(m_tokPerS.value.back(), 0, 'f', 0);
        if (m_run.status == run_status::running && m_totalSteps > step &&
            m_trainLoss.step.size() >= 2) {
            const auto& st = m_trainLoss.step;
            const auto& w = m_trainLoss.wall;
            size_t a = st.size() > 50 ? st.size() - 50 : 0, b = st.size() - 1;
            double per_step = (w[b] - w[a]) / std::max(1.0, st[b] - st[a]);
            s += QString(" · ETA %1").arg(fmt_duration(per_step * double(m_totalSteps - step)));
        }
        if (!m_run.message.empty()) s += " · " + QString::fromStdString(m_run.message);
    } else if (!m_store) {
        s += " · no runs.db yet";
    }
    const std::string msg = m_ctl->message();
    RunState st = m_ctl->state();
    if (st == RunState::failed && !msg.empty()) s += " · " + QString::fromStdString(msg);
    m_status->setText(s);
}

std::optional<int64_t> MonitorPage::resumableStep() const {
    if (!m_doc || !m_doc->isOpen() || m_doc->config().checkpoint.dir.empty()) return std::nullopt;
    const tessera::RunConfig& cfg = m_doc->config();
    auto latest = tessera::checkpoint_latest(tessera::config_resolve_path(cfg, cfg.checkpoint.dir));
    return latest ? tessera::checkpoint_dir_step(*latest) : std::nullopt;
}

void MonitorPage::onControllerState(tessera::RunState s) {
    refreshRunButtons(s);
    if (s == RunState::finished || s == RunState::failed) {
        const std::string m = m_ctl->message();
        appendConsole(tessera::ConsoleLine{"", -1, -1, -1, true, "studio: run " + m});
        pollNow();
        refreshRunButtons(s);  // the run may have saved a checkpoint to continue from
    }
    updateStatus();
}

void MonitorPage::refreshRunButtons(tessera::RunState s) {
    const bool active =
        s == RunState::running || s == RunState::starting || s == RunState::stopping;
    const bool open = m_doc && m_doc->isOpen();
    m_launchBtn->setEnabled(!active && open);
    const std::optional<int64_t> step = active ? std::nullopt : resumableStep();
    m_continueBtn->setEnabled(step.has_value());
    m_continueBtn->setText(step ? QString("Continue from step %1").arg(*step) : "Continue");
    if (open && !m_doc->config().checkpoint.dir.empty()) {
        const QString dir = QString::fromStdString(m_doc->config().checkpoint.dir);
        m_launchBtn->setToolTip(QString("A new run from step 0. Checkpoints already in %1 move "
                                        "to %1/earlier/, kept as they are.")
                                    .arg(dir));
        m_continueBtn->setToolTip(
            step ? QString("Continue the newest checkpoint in %1 (step %2): `tessera train "
                           "--resume`")
                       .arg(dir)
                       .arg(*step)
                 : QString("No checkpoint in %1 to continue from yet").arg(dir));
    } else {
        m_launchBtn->setToolTip("A new run from step 0");
        m_continueBtn->setToolTip("This project saves no checkpoints (checkpoint.dir)");
    }
    m_stopBtn->setEnabled(s == RunState::running);
}

void MonitorPage::launch() {
    startRun({});
}

void MonitorPage::continueRun() {
    if (!resumableStep()) return;
    startRun({"--resume"});
}

void MonitorPage::startRun(const std::vector<std::string>& extra_args) {
    if (!m_doc || !m_doc->isOpen()) return;
    m_lines.clear();
    m_console->clear();
    if (m_doc->isModified())
        appendConsole(
            {"", -1, -1, -1, true, "studio: unsaved edits are not part of this run (save first)"});
    m_maxRunIdAtLaunch = m_runIds.empty() ? 0 : m_runIds.back();
    m_followNewRun = true;
    try {
        m_ctl->start(m_bin.toStdString(), m_doc->yamlPath().toStdString(),
                     m_doc->dbPath().toStdString(), extra_args);
    } catch (const std::exception& e) {
        m_followNewRun = false;
        appendConsole({"", -1, -1, -1, true, std::string("studio: ") + e.what()});
    }
    onControllerState(m_ctl->state());
}

void MonitorPage::stop() {
    m_ctl->stop();
}

bool MonitorPage::lineVisible(const tessera::ConsoleLine& l) const {
    int i = m_rankFilter->currentIndex();
    if (i <= 0) return true;
    if (i == 1) return l.coord.empty();
    return QString::fromStdString(l.coord) == m_rankFilter->currentText();
}

void MonitorPage::appendConsole(const tessera::ConsoleLine& l) {
    m_lines.push_back(l);
    if (m_lines.size() > kConsoleKeep) m_lines.pop_front();
    if (!l.coord.empty()) {
        QString c = QString::fromStdString(l.coord);
        if (!m_coords.contains(c)) {
            m_coords.append(c);
            m_rankFilter->addItem(c);
        }
    }
    if (!lineVisible(l)) return;
    QString t = l.coord.empty() ? QString::fromStdString(l.text)
                                : QString("[%1] %2").arg(QString::fromStdString(l.coord),
                                                         QString::fromStdString(l.text));
    m_console->appendPlainText(t);
}

void MonitorPage::refilterConsole() {
    m_console->clear();
    QStringList out;
    for (const auto& l : m_lines) {
        if (!lineVisible(l)) continue;
        out << (l.coord.empty() ? QString::fromStdString(l.text)
                                : QString("[%1] %2").arg(QString::fromStdString(l.coord),
                                                         QString::fromStdString(l.text)));
    }
    m_console->setPlainText(out.join('\n'));
}

// ---- theme -------------------------------------------------------------------------------------

void MonitorPage::styleAxes(QCustomPlot* p) {
    plot_apply_theme(p, m_dark);
}

void MonitorPage::setDarkTheme(bool dark) {
    m_dark = dark;
    for (QCustomPlot* p : {m_lossPlot, m_speedPlot, m_memPlot}) {
        styleAxes(p);
        p->replot(QCustomPlot::rpQueuedReplot);
    }
    m_system->setDarkTheme(dark);
}

}  // namespace tessera::studio
