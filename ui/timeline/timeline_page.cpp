// TimelinePage: run/step pickers, bubble summary, measured and ideal Gantt charts.
#include "ui/timeline/timeline_page.h"

#include <QComboBox>
#include <QFileInfo>
#include <QHBoxLayout>
#include <QLabel>
#include <QPushButton>
#include <QSpinBox>
#include <QVBoxLayout>
#include <algorithm>

#include "engine/config/config.h"
#include "engine/core/error.h"
#include "engine/plan/estimator.h"
#include "engine/telemetry/metric_names.h"
#include "engine/telemetry/pipeline_spans.h"
#include "ui/common/project_document.h"
#include "ui/common/stored_config.h"
#include "ui/monitor/monitor_device.h"
#include "ui/timeline/gantt_view.h"
#include "ui/timeline/timeline_data.h"

namespace tessera::studio {

namespace {
QString percent(double f) {
    return f < 0 ? QStringLiteral("–") : QString::number(100 * f, 'f', 1) + " %";
}

// "1f1b, pp 2, 4 micro-batches, blocks 3 + 1"
QString plan_description(const tessera::RunConfig& cfg) {
    QString d = QString("%1, pp %2, %3 micro-batches")
                    .arg(QString::fromStdString(cfg.parallel.schedule))
                    .arg(cfg.parallel.pp)
                    .arg(cfg.train.grad_accum);
    if (cfg.parallel.pp > 1) {
        try {
            QStringList blocks;
            for (int b : tessera::plan_blocks_per_chunk(cfg)) blocks << QString::number(b);
            d += QObject::tr(", blocks %1").arg(blocks.join(" + "));
        } catch (const std::exception&) {
        }
    }
    return d;
}

QWidget* legend_widget(QWidget* parent) {
    auto* w = new QWidget(parent);
    auto* lay = new QHBoxLayout(w);
    lay->setContentsMargins(0, 0, 0, 0);
    for (const char* k : {"forward", "backward", "backward_input", "backward_weight", "recv",
                          "optimizer", "forward_backward"}) {
        auto* swatch = new QLabel(w);
        swatch->setFixedSize(12, 12);
        swatch->setStyleSheet(
            QString("background:%1; border:1px solid #555;").arg(GanttView::kindColor(k).name()));
        lay->addWidget(swatch);
        lay->addWidget(new QLabel(QString(k).replace('_', ' '), w));
        lay->addSpacing(8);
    }
    auto* crit = new QLabel(w);  // the simulated chart's marks
    crit->setFixedSize(12, 12);
    crit->setStyleSheet("border:3px solid palette(text);");
    lay->addWidget(crit);
    lay->addWidget(new QLabel("critical path", w));
    lay->addSpacing(8);
    auto* bubble = new QLabel(w);
    bubble->setFixedSize(12, 12);
    bubble->setStyleSheet("background: rgba(225, 87, 89, 110); border:1px solid #e15759;");
    lay->addWidget(bubble);
    lay->addWidget(new QLabel("bubble", w));
    lay->addStretch(1);
    return w;
}
}  // namespace

TimelinePage::TimelinePage(ProjectDocument* doc, QWidget* parent)
    : QWidget(parent),
      m_doc(doc),
      m_runBox(new QComboBox(this)),
      m_stepBox(new QSpinBox(this)),
      m_summary(new QLabel(this)),
      m_status(new QLabel(this)),
      m_simPlanBox(new QComboBox(this)),
      m_measured(new GanttView(this)),
      m_ideal(new GanttView(this)) {
    setObjectName("timelinePage");
    m_runBox->setObjectName("timelineRun");
    m_stepBox->setObjectName("timelineStep");
    m_runBox->setMinimumContentsLength(24);
    m_runBox->setSizeAdjustPolicy(QComboBox::AdjustToMinimumContentsLengthWithIcon);
    m_measured->setObjectName("measuredGantt");
    m_ideal->setObjectName("idealGantt");
    m_summary->setObjectName("bubbleSummary");
    m_summary->setTextFormat(Qt::RichText);
    m_summary->setWordWrap(true);
    m_status->setWordWrap(true);

    // what the lower chart simulates: the run's own plan, or the project's as it is now (edited
    // on the Plan page) from the run's per-layer times
    m_simPlanBox->setObjectName("timelineSimPlan");
    m_simPlanBox->addItem(tr("the run's plan"));
    m_simPlanBox->addItem(tr("the project's plan"));
    m_simPlanBox->setToolTip(
        tr("The simulated schedule below: the selected run's plan, or the project's plan as "
           "edited since (another partition, pp, schedule or micro-batch count) from the run's "
           "measured per-layer times"));
    auto* reload = new QPushButton(tr("Reload"), this);
    auto* top = new QHBoxLayout;
    top->addWidget(new QLabel(tr("Run"), this));
    top->addWidget(m_runBox, 1);
    top->addSpacing(12);
    top->addWidget(new QLabel(tr("Step"), this));
    top->addWidget(m_stepBox);
    top->addWidget(reload);
    top->addSpacing(12);
    top->addWidget(new QLabel(tr("Simulate"), this));
    top->addWidget(m_simPlanBox);
    top->addStretch(1);

    auto* lay = new QVBoxLayout(this);
    lay->addLayout(top);
    lay->addWidget(m_summary);
    lay->addWidget(legend_widget(this));
    lay->addWidget(m_measured);
    lay->addSpacing(10);
    lay->addWidget(m_ideal);
    lay->addWidget(m_status);
    lay->addStretch(1);
    auto* hint = new QLabel(
        tr("Wheel: zoom · drag: pan · double-click: whole step · hover a bar for details"), this);
    hint->setStyleSheet("color: gray;");
    lay->addWidget(hint);

    // both charts share one time axis
    connect(m_measured, &GanttView::timeRangeChanged, m_ideal, &GanttView::setTimeRange);
    connect(m_ideal, &GanttView::timeRangeChanged, m_measured, &GanttView::setTimeRange);
    connect(m_runBox, &QComboBox::currentIndexChanged, this, [this] { onRunChanged(); });
    connect(m_stepBox, &QSpinBox::valueChanged, this, [this] { showStep(); });
    connect(m_simPlanBox, &QComboBox::currentIndexChanged, this, [this] {
        if (m_store) showStep();
    });
    connect(reload, &QPushButton::clicked, this, &TimelinePage::refresh);
    if (m_doc) {
        connect(m_doc, &ProjectDocument::opened, this, &TimelinePage::refresh);
        // an edited plan (the Plan page's partition) is simulated again from the same times
        connect(m_doc, &ProjectDocument::configChanged, this, [this] {
            if (m_store)
                showStep();
            else
                refresh();
        });
    }
    refresh();
}

TimelinePage::~TimelinePage() = default;

QString TimelinePage::statusText() const {
    return m_status->text();
}

int64_t TimelinePage::currentRun() const {
    const int i = m_runBox->currentIndex();
    return i >= 0 && i < int(m_runs.size()) ? m_runs[i].id : -1;
}

int64_t TimelinePage::currentStep() const {
    return m_stepBox->value();
}

void TimelinePage::refresh() {
    const int64_t keep = currentRun();
    m_store.reset();
    m_runs.clear();
    m_simPlanBox->setEnabled(m_doc && m_doc->isOpen());  // no project: only the run's plan
    QSignalBlocker block(m_runBox);
    m_runBox->clear();
    const QString db = m_doc ? m_doc->dbPath() : QString();
    if (db.isEmpty() || !QFileInfo::exists(db)) {
        m_status->setText(db.isEmpty() ? tr("No project open.")
                                       : tr("No runs yet: %1 does not exist. Train the project to "
                                            "see its measured timeline.")
                                             .arg(db));
        m_measured->setEmptyText(tr("no run"));
        m_ideal->setEmptyText(tr("no run"));
        m_summary->clear();
        if (m_doc && m_doc->isOpen())
            showPredicted(m_doc->config(), {}, tr("the project, before any run"));
        return;
    }
    try {
        m_store =
            std::make_unique<tessera::RunStore>(tessera::RunStore::open(db.toStdString(), true));
        m_runs = m_store->runs_list();
    } catch (const std::exception& e) {
        m_store.reset();
        m_status->setText(QString::fromUtf8(e.what()));
        Q_EMIT loadFailed(QString::fromUtf8(e.what()));
        return;
    }
    for (const auto& r : m_runs)
        m_runBox->addItem(QString("#%1  %2  (%3, world %4)")
                              .arg(r.id)
                              .arg(QString::fromStdString(r.name))
                              .arg(QString::fromStdString(r.status))
                              .arg(r.world_size));
    int idx = int(m_runs.size()) - 1;
    for (size_t i = 0; i < m_runs.size(); ++i)
        if (m_runs[i].id == keep) idx = int(i);
    m_runBox->setCurrentIndex(idx);
    onRunChanged();
}

bool TimelinePage::selectRun(int64_t id) {
    for (size_t i = 0; i < m_runs.size(); ++i)
        if (m_runs[i].id == id) {
            m_runBox->setCurrentIndex(int(i));
            return true;
        }
    return false;
}

void TimelinePage::setSimulateProject(bool project) {
    m_simPlanBox->setCurrentIndex(project ? 1 : 0);
}

void TimelinePage::setStep(int64_t step) {
    m_stepBox->setValue(int(step));
    showStep();
}

void TimelinePage::onRunChanged() {
    const int i = m_runBox->currentIndex();
    QSignalBlocker block(m_stepBox);
    if (i < 0 || i >= int(m_runs.size())) {
        m_stepBox->setRange(0, 0);
    } else {
        const int64_t last = std::max<int64_t>(1, m_runs[i].last_step);
        m_stepBox->setRange(1, int(last));
        m_stepBox->setValue(int(last));
    }
    showStep();
}

void TimelinePage::showStep() {
    m_measuredBubble = m_predictedBubble = m_loggedRankIdle = m_simulatedBubble = -1;
    m_simulatedFromMeasured = m_simulatedFromLayers = m_simulatesProject = false;
    const int i = m_runBox->currentIndex();
    if (!m_store || i < 0 || i >= int(m_runs.size())) {
        m_measured->setEmptyText(tr("no run"));
        m_ideal->setEmptyText(tr("no run"));
        m_summary->clear();
        return;
    }
    const tessera::RunRow& run = m_runs[i];
    const int64_t step = m_stepBox->value();  // metrics use 1-based steps, spans 0-based
    std::vector<tessera::SpanRecord> spans;
    try {
        spans = m_store->spans(run.id, step - 1);
        double sum = 0;  // each rank logs its own idle share: show the mean
        int n = 0;
        for (const auto& m : m_store->metrics(run.id, tessera::metric::pipeline_rank_idle))
            if (m.step == step) sum += m.value, ++n;
        if (n > 0) m_loggedRankIdle = sum / n;
    } catch (const std::exception& e) {
        m_status->setText(QString::fromUtf8(e.what()));
        return;
    }
    GanttData measured = timeline_measured_bars(spans);
    m_measuredBubble = tessera::pipeline_bubble_measured(spans);
    const double window_ms = timeline_pipeline_window_ms(spans);
    m_measured->setData(measured, tr("Measured — run #%1, step %2 (%3 ms)")
                                      .arg(run.id)
                                      .arg(step)
                                      .arg(measured.length_ms, 0, 'f', 2));
    if (spans.empty()) m_measured->setEmptyText(tr("no spans recorded for step %1").arg(step));

    QString plan = tr("unknown plan");
    try {
        tessera::RunConfig cfg =
            stored_run_config(*m_store, run.config_text, run.name + " (runs.db)");
        m_predictedBubble = timeline_predicted_bubble(cfg);
        plan = plan_description(cfg);
        // The plan simulated with the measured per-layer times of the logged step nearest this
        // one: the project's plan where it differs from the run's and the times carry over to
        // it (timeline_layer_times_mismatch), else the run's. Without layer times (a run stored
        // before they were recorded), the run's plan with this step's per-stage times; without
        // spans, with the estimator's predicted times for the device the run recorded.
        std::vector<tessera::LayerTimeRecord> layer_times;
        const std::optional<int64_t> layer_step = m_store->layer_time_step(run.id, step - 1);
        if (layer_step) layer_times = m_store->layer_times(run.id, *layer_step);
        bool use_project = false;
        QString not_project;
        if (m_doc && m_doc->isOpen() && m_simPlanBox->currentIndex() == 1) {
            const tessera::RunConfig& project = m_doc->config();
            if (!(project.parallel == cfg.parallel) ||
                project.train.grad_accum != cfg.train.grad_accum) {
                const QString why = timeline_layer_times_mismatch(cfg, project);
                if (layer_times.empty())
                    not_project = tr("the project's plan is not simulated: run #%1 recorded no "
                                     "per-layer times")
                                      .arg(run.id);
                else if (!why.isEmpty())
                    not_project = tr("the project's plan is not simulated: %1").arg(why);
                else
                    use_project = true;
            }
        }
        const tessera::RunConfig& sim_cfg = use_project ? m_doc->config() : cfg;
        std::optional<tessera::ScheduleTimes> lt;
        if (!layer_times.empty()) lt = timeline_layer_schedule_times(sim_cfg, layer_times);
        m_simulatesProject = use_project && lt;
        if (lt) {
            tessera::ScheduleSim sim;
            GanttData g = timeline_simulated_bars(sim_cfg, *lt, &sim);
            m_simulatedBubble = sim.bubble_fraction;
            m_simulatedFromMeasured = m_simulatedFromLayers = true;
            m_ideal->setData(
                g, tr("Simulated — %1 (%2), from the measured per-layer times of run #%3, step %4 "
                      "(free p2p): %5 ms, bubble %6")
                       .arg(m_simulatesProject ? tr("the project's plan")
                                               : tr("run #%1's plan").arg(run.id),
                            plan_description(sim_cfg))
                       .arg(run.id)
                       .arg(*layer_step + 1)
                       .arg(g.length_ms, 0, 'f', 2)
                       .arg(percent(sim.bubble_fraction)));
        } else if (std::optional<tessera::ScheduleTimes> t = timeline_measured_times(cfg, spans)) {
            tessera::ScheduleSim sim;
            GanttData g = timeline_simulated_bars(cfg, *t, &sim);
            m_simulatedBubble = sim.bubble_fraction;
            m_simulatedFromMeasured = true;
            m_ideal->setData(
                g, tr("Simulated — %1, from the measured per-stage times of step %2 (free p2p): "
                      "%3 ms, bubble %4")
                       .arg(plan)
                       .arg(step)
                       .arg(g.length_ms, 0, 'f', 2)
                       .arg(percent(sim.bubble_fraction)));
        } else {
            std::vector<tessera::DeviceRecord> devices = m_store->devices(run.id);
            showPredicted(cfg, devices, tr("run #%1 (no spans for step %2)").arg(run.id).arg(step));
        }
        QStringList status;
        if ((lt ? sim_cfg : cfg).parallel.pp <= 1)
            status << tr(
                "This plan has no pipeline (pp = 1): the schedule is one stage without "
                "bubble.");
        if (!not_project.isEmpty()) status << not_project + ".";
        m_status->setText(status.join(' '));
    } catch (const std::exception& e) {
        m_ideal->setEmptyText(tr("no simulated schedule: %1").arg(QString::fromUtf8(e.what())));
        m_status->setText(QString::fromUtf8(e.what()));
    }
    // one time axis for both, wide enough for the longer: setting the simulated view's data
    // reset the linked axis to its own length, which cut the measured step's end off
    if (!m_measured->data().bars.isEmpty())
        m_measured->setTimeRange(
            0, std::max({m_measured->data().length_ms, m_ideal->data().length_ms, 1e-3}));
    m_summary->setText(
        tr("<b>Bubble</b> &nbsp; measured: <b>%1</b> (every rank's spans; the ranks' mean logged "
           "idle: %2) "
           "&nbsp;·&nbsp; simulated: <b>%3</b> &nbsp;·&nbsp; ideal f = 1, b = 2: <b>%4</b> (%5)")
            .arg(percent(m_measuredBubble), percent(m_loggedRankIdle), percent(m_simulatedBubble),
                 percent(m_predictedBubble), plan));
}

// The plan simulated with the estimator's predicted per-stage times (timeline_predicted_times) for
// the recorded device, or the default device without a record.
void TimelinePage::showPredicted(const tessera::RunConfig& cfg,
                                 const std::vector<tessera::DeviceRecord>& devices,
                                 const QString& what) {
    try {
        MonitorDevice md = monitor_prediction_device(cfg, devices);
        tessera::ScheduleTimes t = timeline_predicted_times(cfg, md.spec);
        tessera::ScheduleSim sim;
        GanttData g = timeline_simulated_bars(cfg, t, &sim);
        m_simulatedBubble = sim.bubble_fraction;
        m_simulatedFromMeasured = false;
        m_ideal->setData(
            g,
            tr("Simulated — %1, predicted times for %2 (pp %3, %4 micro-batches): %5 ms, bubble %6")
                .arg(what, QString::fromStdString(md.spec.name))
                .arg(cfg.parallel.pp)
                .arg(cfg.train.grad_accum)
                .arg(g.length_ms, 0, 'f', 2)
                .arg(percent(sim.bubble_fraction)));
        if (m_measured->data().bars.isEmpty()) m_ideal->resetZoom();
    } catch (const std::exception& e) {
        m_ideal->setEmptyText(tr("no simulated schedule: %1").arg(QString::fromUtf8(e.what())));
    }
}

}  // namespace tessera::studio
