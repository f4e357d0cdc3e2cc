// ComparePage: run table, overlaid curves with hover values, config diff, CSV/PNG/PDF export.
#include "ui/compare/compare_page.h"

#include <QCheckBox>
#include <QComboBox>
#include <QDoubleSpinBox>
#include <QFileDialog>
#include <QFileInfo>
#include <QHBoxLayout>
#include <QHeaderView>
#include <QLabel>
#include <QLineEdit>
#include <QPushButton>
#include <QSet>
#include <QSortFilterProxyModel>
#include <QSplitter>
#include <QTabWidget>
#include <QTableView>
#include <QTableWidget>
#include <QTimer>
#include <QVBoxLayout>
#include <algorithm>
#include <cmath>
#include <fstream>
#include <span>
#include <utility>

#include "engine/config/config.h"
#include "ui/common/plot_theme.h"
#include "ui/common/project_document.h"
#include "ui/common/qcustomplot_qt.h"
#include "ui/common/stored_config.h"
#include "ui/common/vocabulary.h"
#include "ui/compare/config_diff.h"
#include "ui/compare/curve_math.h"
#include "ui/compare/parallel_coords.h"
#include "ui/compare/run_table_model.h"
#include "ui/monitor/monitor_series.h"

namespace tessera::studio {

namespace {
const QColor kRunColors[] = {QColor(0x4e, 0x79, 0xa7), QColor(0xe1, 0x57, 0x59),
                             QColor(0x59, 0xa1, 0x4f), QColor(0xf2, 0x8e, 0x2b),
                             QColor(0xb0, 0x7a, 0xa1), QColor(0x76, 0xb7, 0xb2),
                             QColor(0xed, 0xc9, 0x48), QColor(0x9c, 0x75, 0x5f)};
const QStringList kHoverMetrics = {vocab(metric::train_loss), vocab(metric::val_loss),
                                   vocab(metric::perf_tok_per_s), vocab(metric::train_lr)};

// The index of the last x at or before xq; -1 if none.
int index_at(const std::vector<double>& x, double xq) {
    auto it = std::upper_bound(x.begin(), x.end(), xq + 1e-9);
    return int(it - x.begin()) - 1;
}

QColor faint(QColor c, int alpha) {
    c.setAlpha(alpha);
    return c;
}

// columns 0: every point; otherwise downsampled to that many pixel columns, over the points in
// `view` and one beyond each edge where a view is given (after a zoom or pan), else over all
QCPGraph* add_line(QCustomPlot* plot, const QString& object, const QString& name, const Curve& c,
                   const QPen& pen, int columns, const QCPRange* view) {
    QCPGraph* g = plot->addGraph();
    g->setObjectName(object);
    g->setName(name);
    g->setPen(pen);
    std::span<const double> x(c.x), y(c.y);
    if (view && columns > 0) {  // c.x ascending
        auto lo = std::lower_bound(x.begin(), x.end(), view->lower) - x.begin();
        auto hi = std::upper_bound(x.begin(), x.end(), view->upper) - x.begin();
        lo = std::max<ptrdiff_t>(lo - 1, 0);
        hi = std::min<ptrdiff_t>(hi + 1, (ptrdiff_t)x.size());
        x = x.subspan(lo, hi - lo), y = y.subspan(lo, hi - lo);
    }
    const Curve d = columns > 0 ? curve_downsample_minmax(x, y, columns) : c;
    g->setData(QVector<double>(d.x.begin(), d.x.end()), QVector<double>(d.y.begin(), d.y.end()),
               true);
    if (d.size() < 20) g->setScatterStyle(QCPScatterStyle(QCPScatterStyle::ssCircle, 5));
    return g;
}

std::vector<double> smooth(const std::vector<double>& y, double beta) {
    return beta > 0 ? monitor_ema_debiased(y, beta) : y;
}
}  // namespace

ComparePage::ComparePage(ProjectDocument* doc, QWidget* parent)
    : QWidget(parent),
      m_doc(doc),
      m_model(new RunTableModel(this)),
      m_proxy(new RunFilterProxy(this)),
      m_view(new QTableView(this)),
      m_metricBox(new QComboBox(this)),
      m_xBox(new QComboBox(this)),
      m_groupBox(new QComboBox(this)),
      m_smoothBox(new QDoubleSpinBox(this)),
      m_plot(new QCustomPlot(this)),
      m_hover(new QTableWidget(this)),
      m_diff(new ConfigDiffView(this)),
      m_parallel(new ParallelCoordsView(this)),
      m_status(new QLabel(this)),
      m_filter(new QLineEdit(this)),
      m_showArchived(new QCheckBox(tr("Show archived"), this)),
      m_tagsEdit(new QLineEdit(this)),
      m_noteEdit(new QLineEdit(this)),
      m_archiveButton(new QPushButton(tr("Archive"), this)) {
    setObjectName("comparePage");
    m_status->setObjectName("compareStatus");
    m_proxy->setSourceModel(m_model);
    m_proxy->setSortRole(RunTableModel::kSortRole);
    m_view->setObjectName("runTable");
    m_view->setModel(m_proxy);
    m_view->setSortingEnabled(true);
    m_view->sortByColumn(RunTableModel::Name, Qt::DescendingOrder);  // the newest run on top
    m_view->setSelectionBehavior(QAbstractItemView::SelectRows);
    m_view->setSelectionMode(QAbstractItemView::ExtendedSelection);
    m_view->verticalHeader()->hide();
    m_view->verticalHeader()->setDefaultSectionSize(fontMetrics().height() + 6);  // many rows
    m_view->setAlternatingRowColors(true);
    m_view->horizontalHeader()->setSectionResizeMode(QHeaderView::ResizeToContents);
    // columns fit the rows in view, not the first 1,000 (Qt's default): with 1,000 runs every
    // layout (a reset, a moved column) measured every cell of every column
    m_view->horizontalHeader()->setResizeContentsPrecision(0);
    m_view->horizontalHeader()->setStretchLastSection(true);
    m_view->setMinimumHeight(120);
    m_filter->setObjectName("runFilter");
    m_filter->setPlaceholderText(
        tr("Filter runs: name, tag, note, config value (tag:NAME for one tag)"));
    m_filter->setClearButtonEnabled(true);
    m_showArchived->setObjectName("showArchived");
    m_tagsEdit->setObjectName("runTags");
    m_tagsEdit->setPlaceholderText(tr("tags, comma-separated"));
    m_noteEdit->setObjectName("runNote");
    m_noteEdit->setPlaceholderText(tr("note"));
    m_archiveButton->setObjectName("archiveRuns");
    m_archiveButton->setToolTip(
        tr("Hide the selected runs from the table (Show archived brings them back)"));

    m_metricBox->setObjectName("compareMetric");
    m_metricBox->setEditable(false);
    m_metricBox->addItems(kHoverMetrics);
    m_xBox->setObjectName("compareX");
    m_xBox->addItems({tr("by step"), tr("by tokens"), tr("by wall time")});
    m_groupBox->setObjectName("compareGroup");
    m_groupBox->setToolTip(
        tr("One line per value of this config key (the mean of its runs) with a "
           "min–max band"));
    m_groupBox->setSizeAdjustPolicy(QComboBox::AdjustToContents);
    m_smoothBox->setObjectName("compareSmoothing");
    m_smoothBox->setRange(0, 0.999);
    m_smoothBox->setDecimals(3);
    m_smoothBox->setSingleStep(0.05);
    m_smoothBox->setToolTip(tr("EMA smoothing (debiased); the raw curve stays, faint"));

    m_plot->setObjectName("compareChart");
    m_plot->setMinimumSize(360, 220);
    m_plot->legend->setVisible(true);
    m_plot->legend->setFont(QFont(font().family(), 8));
    m_plot->axisRect()->insetLayout()->setInsetAlignment(0, Qt::AlignTop | Qt::AlignRight);
    m_plot->setInteractions(QCP::iRangeDrag | QCP::iRangeZoom);
    m_plot->setNoAntialiasingOnDrag(true);
    m_plot->setPlottingHint(QCP::phFastPolylines, true);  // as the Monitor page

    m_hover->setObjectName("hoverTable");
    QStringList hh{tr("Run"), tr("Step"), tr("Tokens")};
    hh << kHoverMetrics;
    m_hover->setColumnCount(hh.size());
    m_hover->setHorizontalHeaderLabels(hh);
    m_hover->verticalHeader()->hide();
    m_hover->setEditTriggers(QAbstractItemView::NoEditTriggers);
    m_hover->horizontalHeader()->setSectionResizeMode(QHeaderView::Stretch);
    m_hover->setMaximumHeight(110);

    auto* reload = new QPushButton(tr("Reload"), this);
    auto* csv = new QPushButton(tr("Export CSV…"), this);
    auto* png = new QPushButton(tr("Export chart…"), this);
    csv->setToolTip(tr("The selected runs' metrics: run,step,rank,name,value,wall_time"));
    png->setToolTip(tr("The chart as PNG or PDF"));
    auto* top = new QHBoxLayout;
    top->addWidget(new QLabel(tr("Metric"), this));
    top->addWidget(m_metricBox);
    top->addWidget(new QLabel(tr("x"), this));
    top->addWidget(m_xBox);
    top->addWidget(new QLabel(tr("Group by"), this));
    top->addWidget(m_groupBox);
    top->addWidget(new QLabel(tr("Smoothing"), this));
    top->addWidget(m_smoothBox);
    top->addStretch(1);
    top->addWidget(reload);
    top->addWidget(csv);
    top->addWidget(png);

    // the run table gets the page's full height on the left (a table of many runs needs rows);
    // the chart over the config diff on the right
    auto* chartBox = new QWidget(this);
    auto* chartLay = new QVBoxLayout(chartBox);
    chartLay->setContentsMargins(0, 0, 0, 0);
    chartLay->addWidget(m_plot, 1);
    chartLay->addWidget(m_hover);
    auto* right = new QSplitter(Qt::Vertical, this);
    right->addWidget(chartBox);
    auto* tabs = new QTabWidget(this);
    tabs->setObjectName("compareTabs");
    tabs->addTab(m_diff, tr("Config diff"));
    tabs->addTab(m_parallel, tr("Parallel coordinates"));
    right->addWidget(tabs);
    right->setStretchFactor(0, 3);
    right->setStretchFactor(1, 2);
    auto* saveNote = new QPushButton(tr("Save"), this);
    saveNote->setToolTip(tr("Write these tags and this note to every selected run (runs.db)"));
    auto* left = new QWidget(this);
    auto* leftLay = new QVBoxLayout(left);
    leftLay->setContentsMargins(0, 0, 0, 0);
    auto* filterRow = new QHBoxLayout;
    filterRow->addWidget(m_filter, 1);
    filterRow->addWidget(m_showArchived);
    auto* noteRow = new QHBoxLayout;
    noteRow->addWidget(new QLabel(tr("Tags"), this));
    noteRow->addWidget(m_tagsEdit, 1);
    noteRow->addWidget(new QLabel(tr("Note"), this));
    noteRow->addWidget(m_noteEdit, 1);
    noteRow->addWidget(saveNote);
    noteRow->addWidget(m_archiveButton);
    leftLay->addLayout(filterRow);
    leftLay->addWidget(m_view, 1);
    leftLay->addLayout(noteRow);
    auto* split = new QSplitter(Qt::Horizontal, this);
    split->setObjectName("compareSplit");
    split->addWidget(left);
    split->addWidget(right);
    split->setStretchFactor(0, 1);
    split->setStretchFactor(1, 1);
    split->setSizes({560, 640});

    auto* lay = new QVBoxLayout(this);
    lay->addLayout(top);
    lay->addWidget(split, 1);
    lay->addWidget(m_status);

    connect(m_view->selectionModel(), &QItemSelectionModel::selectionChanged, this,
            [this] { selectionChanged(); });
    connect(m_metricBox, &QComboBox::currentTextChanged, this, [this] { replot(); });
    connect(m_xBox, &QComboBox::currentIndexChanged, this, [this] { replot(); });
    connect(m_groupBox, &QComboBox::currentIndexChanged, this, [this] { replot(); });
    connect(m_smoothBox, &QDoubleSpinBox::valueChanged, this, [this] { replot(); });
    connect(reload, &QPushButton::clicked, this, &ComparePage::refresh);
    connect(m_filter, &QLineEdit::textChanged, this, &ComparePage::setFilterText);
    connect(m_showArchived, &QCheckBox::toggled, this, &ComparePage::setShowArchived);
    connect(m_parallel, &ParallelCoordsView::brushChanged, this,
            [this](const std::optional<QSet<int64_t>>& runs) { m_proxy->setAllowedRuns(runs); });
    // "8 of 1,020 runs shown" while the filter, the brushes or archiving hide some
    for (auto sig : {&QAbstractItemModel::rowsInserted, &QAbstractItemModel::rowsRemoved})
        connect(m_proxy, sig, this, [this] { showCount(); });
    connect(m_proxy, &QAbstractItemModel::modelReset, this, [this] { showCount(); });
    connect(m_proxy, &QAbstractItemModel::layoutChanged, this, [this] { showCount(); });
    connect(saveNote, &QPushButton::clicked, this, &ComparePage::saveAnnotationClicked);
    connect(m_noteEdit, &QLineEdit::returnPressed, this, &ComparePage::saveAnnotationClicked);
    connect(m_tagsEdit, &QLineEdit::returnPressed, this, &ComparePage::saveAnnotationClicked);
    connect(m_archiveButton, &QPushButton::clicked, this, &ComparePage::archiveClicked);
    connect(csv, &QPushButton::clicked, this, &ComparePage::exportCsvClicked);
    connect(png, &QPushButton::clicked, this, &ComparePage::exportChartClicked);
    connect(m_plot, &QCustomPlot::mouseMove, this,
            [this](QMouseEvent* e) { hoverAt(m_plot->xAxis->pixelToCoord(e->position().x())); });
    connect(m_plot->xAxis, qOverload<const QCPRange&>(&QCPAxis::rangeChanged), this, [this] {
        if (m_viewPending || !m_downsample || m_plot->graphCount() == 0) return;
        m_viewPending = true;
        QTimer::singleShot(0, this, &ComparePage::redownsampleView);
    });
    if (m_doc) connect(m_doc, &ProjectDocument::opened, this, &ComparePage::refresh);
    refresh();
}

ComparePage::~ComparePage() = default;

// ------------------------------------------------------------------------------------------------
// data

void ComparePage::refresh() {
    const QVector<int64_t> keep = selectedRunIds();
    m_store.reset();
    m_cache.clear();
    m_loaded.clear();
    std::vector<RunSummary> rows;
    const QString db = m_doc ? m_doc->dbPath() : QString();
    if (db.isEmpty() || !QFileInfo::exists(db)) {
        m_status->setText(db.isEmpty() ? tr("No project open.")
                                       : tr("No runs yet: %1 does not exist.").arg(db));
    } else {
        try {
            m_store = std::make_unique<tessera::RunStore>(
                tessera::RunStore::open(db.toStdString(), true));
            QMap<int64_t, tessera::RunAnnotation> notes;
            for (auto& a : m_store->annotations()) notes.insert(a.run_id, std::move(a));
            const std::vector<tessera::RunRow> list = m_store->runs_list();
            rows = compare_summarize_runs(*m_store, list);
            QSet<QString> names;
            for (size_t i = 0; i < list.size(); ++i) {
                const tessera::RunRow& r = list[i];
                if (auto it = notes.find(r.id); it != notes.end()) {
                    for (const auto& t : it->tags) rows[i].tags << QString::fromStdString(t);
                    rows[i].note = QString::fromStdString(it->note);
                    rows[i].archived = it->archived;
                }
                for (const auto& name : rows[i].metric_names)  // every logged metric can be plotted
                    names.insert(QString::fromStdString(name));
            }
            for (int i = 0; i < m_metricBox->count(); ++i) names.remove(m_metricBox->itemText(i));
            QStringList fresh(names.begin(), names.end());
            fresh.sort();
            m_metricBox->addItems(fresh);
            m_loaded =
                tr("%1 run%2 in %3").arg(rows.size()).arg(rows.size() == 1 ? "" : "s").arg(db);
            m_status->setText(m_loaded);
        } catch (const std::exception& e) {
            m_store.reset();
            rows.clear();
            m_status->setText(QString::fromUtf8(e.what()));
            Q_EMIT loadFailed(QString::fromUtf8(e.what()));
        }
    }
    m_model->setRuns(std::move(rows));
    m_parallel->setRuns(*m_model);
    // the differing config keys right after Name, Status and Tags, where the eye starts
    for (int k = 0; k < m_model->configKeys().size(); ++k) {
        QHeaderView* h = m_view->horizontalHeader();
        h->moveSection(h->visualIndex(RunTableModel::ColumnCount + k), RunTableModel::Tags + 1 + k);
    }
    fillGroupKeys();
    m_deferPlot = true;
    setSelectedRuns(keep.isEmpty() ? newestRuns(kDefaultSelection) : keep);
    if (const QModelIndexList sel = m_view->selectionModel()->selectedRows(); !sel.isEmpty())
        m_view->scrollTo(sel.front());
    selectionChanged();
    m_deferPlot = false;
}

const ComparePage::Series& ComparePage::series(int64_t run, const QString& metric) {
    auto& per_run = m_cache[run];
    auto it = per_run.find(metric);
    if (it != per_run.end()) return *it;
    Series s;
    if (m_store) {
        const tessera::MetricSeries rows = m_store->metric_series(run, metric.toStdString());
        // per-rank metrics: take the lowest rank that logged it
        const int rank =
            rows.rank.empty() ? 0 : *std::min_element(rows.rank.begin(), rows.rank.end());
        const RunSummary* sum = summary(run);
        const double t0 = sum ? sum->start_time : 0;
        s.step.reserve(rows.size());
        s.value.reserve(rows.size());
        s.wall.reserve(rows.size());
        for (size_t i = 0; i < rows.size(); ++i)
            if (rows.rank[i] == rank) {
                s.step.push_back(double(rows.step[i]));
                s.value.push_back(rows.value[i]);
                s.wall.push_back(rows.wall_time[i] - t0);
            }
    }
    return *per_run.insert(metric, std::move(s));
}

const RunSummary* ComparePage::summary(int64_t run) const {
    for (const auto& r : m_model->runs())
        if (r.id == run) return &r;
    return nullptr;
}

double ComparePage::tokensPerStep(int64_t run) const {
    const RunSummary* r = summary(run);
    return r ? r->tokens_per_step() : 0;
}

std::vector<double> ComparePage::xValues(int64_t run, const Series& s) const {
    switch (xAxis()) {
        case XAxis::Step:
            return s.step;
        case XAxis::Tokens: {
            std::vector<double> x(s.step);
            const double scale = tokensPerStep(run);
            for (double& v : x) v *= scale;
            return x;
        }
        case XAxis::WallTime: {
            std::vector<double> x(s.wall);
            for (double& v : x) v /= 60.0;
            // wall times of a restarted run can step back: keep x ascending for the chart
            for (size_t i = 1; i < x.size(); ++i) x[i] = std::max(x[i], x[i - 1]);
            return x;
        }
    }
    return s.step;
}

void ComparePage::fillGroupKeys() {
    const QString current = m_groupBox->currentData().toString();
    QSignalBlocker block(m_groupBox);
    m_groupBox->clear();
    m_groupBox->addItem(tr("(each run)"), QString());
    m_groupBox->addItem(tr("tags"), QString(RunSummary::kGroupByTags));
    m_groupBox->addItem(tr("plan (dp × tp × pp, ZeRO)"), QString(RunSummary::kGroupByPlan));
    // the keys that differ among the runs first: they are what one groups by
    QStringList keys = m_model->configKeys();
    for (const char* k :
         {"parallel.dp", "parallel.tp", "parallel.pp", "parallel.zero", "train.micro_batch"})
        if (!keys.contains(k)) keys << k;
    if (!m_model->runs().empty())
        for (const ConfigEntry& e : m_model->runs().front().config)
            if (!keys.contains(e.key)) keys << e.key;
    for (const QString& k : keys) m_groupBox->addItem(k, k);
    m_groupBox->setCurrentIndex(std::max(0, m_groupBox->findData(current)));
}

QVector<int64_t> ComparePage::newestRuns(int n) const {
    QVector<int64_t> ids;
    for (const RunSummary& r : m_model->runs())
        if (!r.archived || m_proxy->showArchived()) ids << r.id;
    std::sort(ids.begin(), ids.end(), std::greater<>());
    if (ids.size() > n) ids.resize(n);
    return ids;
}

QVector<int64_t> ComparePage::selectedRunIds() const {
    QVector<int64_t> ids;
    if (!m_view->selectionModel()) return ids;
    for (const QModelIndex& i : m_view->selectionModel()->selectedRows())
        ids << i.data(RunTableModel::kRunIdRole).toLongLong();
    std::sort(ids.begin(), ids.end());  // colours and legend stay put when the table is re-sorted
    return ids;
}

void ComparePage::setSelectedRuns(const QVector<int64_t>& ids) {
    QItemSelection sel;
    for (int r = 0; r < m_proxy->rowCount(); ++r) {
        const QModelIndex i = m_proxy->index(r, 0);
        if (ids.contains(i.data(RunTableModel::kRunIdRole).toLongLong()))
            sel.select(i, m_proxy->index(r, m_proxy->columnCount() - 1));
    }
    m_view->selectionModel()->select(sel, QItemSelectionModel::ClearAndSelect);
}

void ComparePage::setMetric(const QString& name) {
    if (m_metricBox->findText(name) < 0) m_metricBox->addItem(name);
    m_metricBox->setCurrentText(name);
}

void ComparePage::setXByTokens(bool tokens) {
    setXAxis(tokens ? XAxis::Tokens : XAxis::Step);
}
void ComparePage::setXAxis(XAxis x) {
    m_xBox->setCurrentIndex(int(x));
}
ComparePage::XAxis ComparePage::xAxis() const {
    return XAxis(std::clamp(m_xBox->currentIndex(), 0, 2));
}

void ComparePage::setGroupKey(const QString& key) {
    int i = m_groupBox->findData(key);
    if (i < 0 && !key.isEmpty()) {
        m_groupBox->addItem(key, key);
        i = m_groupBox->count() - 1;
    }
    m_groupBox->setCurrentIndex(std::max(0, i));
}
QString ComparePage::groupKey() const {
    return m_groupBox->currentData().toString();
}
void ComparePage::setSmoothing(double beta) {
    m_smoothBox->setValue(beta);
}
int ComparePage::displayColumns() const {
    return std::max(200, m_plot->axisRect()->width());
}
void ComparePage::setDisplayDownsampling(bool on) {
    m_downsample = on;
    replot();
}

void ComparePage::selectionChanged() {
    if (m_deferPlot) {
        if (!std::exchange(m_plotPending, true))
            QTimer::singleShot(0, this, [this] {
                if (m_plotPending) replot();  // a replot since (a new selection) made it moot
            });
    } else {
        replot();
    }
    updateDiff();
    showAnnotation();
}

QSortFilterProxyModel* ComparePage::proxyModel() const {
    return m_proxy;
}

void ComparePage::showCount() {
    if (m_loaded.isEmpty()) return;  // an error or "no runs yet" stays
    const int shown = m_proxy->rowCount(), all = m_model->rowCount();
    m_status->setText(shown == all ? m_loaded : tr("%1 of %2").arg(shown).arg(m_loaded));
}

// ------------------------------------------------------------------------------------------------
// annotations and filter

void ComparePage::setFilterText(const QString& text) {
    if (m_filter->text() != text) m_filter->setText(text);  // comes back here through textChanged
    m_proxy->setFilterWords(text);
}

void ComparePage::setShowArchived(bool show) {
    if (m_showArchived->isChecked() != show) m_showArchived->setChecked(show);
    m_proxy->setShowArchived(show);
}

void ComparePage::showAnnotation() {
    const QVector<int64_t> ids = selectedRunIds();
    const RunSummary* r = ids.isEmpty() ? nullptr : summary(ids.front());
    m_tagsEdit->setText(r ? r->tags.join(", ") : QString());
    m_noteEdit->setText(r ? r->note : QString());
    m_archiveButton->setText(r && r->archived ? tr("Unarchive") : tr("Archive"));
    for (QWidget* w : {static_cast<QWidget*>(m_tagsEdit), static_cast<QWidget*>(m_noteEdit),
                       static_cast<QWidget*>(m_archiveButton)})
        w->setEnabled(r != nullptr);
}

bool ComparePage::annotate(const QVector<int64_t>& ids, const std::optional<QStringList>& tags,
                           const std::optional<QString>& note, std::optional<bool> archived,
                           QString* error) {
    auto fail = [&](const QString& msg) {
        if (error) *error = msg;
        m_status->setText(msg);
        Q_EMIT annotateFailed(msg);
        return false;
    };
    const QString db = m_doc ? m_doc->dbPath() : QString();
    if (db.isEmpty() || !QFileInfo::exists(db)) return fail(tr("no runs.db to annotate"));
    try {
        // the page's one read-write connection, for this edit only
        tessera::RunStore rw = tessera::RunStore::open(db.toStdString(), false);
        for (int64_t id : ids) {
            const RunSummary* r = summary(id);
            tessera::RunAnnotation a{
                id, {}, r ? r->note.toStdString() : std::string(), r && r->archived};
            for (const QString& t : tags ? *tags : (r ? r->tags : QStringList()))
                if (!t.trimmed().isEmpty()) a.tags.push_back(t.trimmed().toStdString());
            if (note) a.note = note->toStdString();
            if (archived) a.archived = *archived;
            rw.run_annotate(a);
        }
    } catch (const std::exception& e) {
        return fail(QString::fromUtf8(e.what()));
    }
    refresh();
    return true;
}

void ComparePage::saveAnnotationClicked() {
    annotate(selectedRunIds(), m_tagsEdit->text().split(',', Qt::SkipEmptyParts),
             m_noteEdit->text(), std::nullopt, nullptr);
}

void ComparePage::archiveClicked() {
    const QVector<int64_t> ids = selectedRunIds();
    const RunSummary* r = ids.isEmpty() ? nullptr : summary(ids.front());
    annotate(ids, std::nullopt, std::nullopt, !(r && r->archived), nullptr);
}

// ------------------------------------------------------------------------------------------------
// chart, hover table, diff

void ComparePage::replot() {
    m_plotPending = false;
    m_plot->clearGraphs();
    m_plot->clearItems();
    const QString metric = m_metricBox->currentText();
    const QVector<int64_t> ids = selectedRunIds();
    const double beta = m_smoothBox->value();
    if (groupKey().isEmpty())
        plotRuns(ids, metric, beta);
    else
        plotGroups(ids, metric, beta);
    const XAxis xa = xAxis();
    m_plot->xAxis->setLabel(xa == XAxis::Tokens     ? tr("tokens")
                            : xa == XAxis::WallTime ? tr("wall time (min)")
                                                    : tr("step"));
    m_plot->yAxis->setLabel(metric);
    if (ids.isEmpty()) {
        auto* t = new QCPItemText(m_plot);
        t->position->setType(QCPItemPosition::ptAxisRectRatio);
        t->position->setCoords(0.5, 0.5);
        t->setText(m_model->rowCount() ? tr("select runs in the table") : tr("no runs"));
        m_plot->legend->setVisible(false);
    } else {
        m_plot->legend->setVisible(true);
        m_plot->rescaleAxes();
        m_plot->xAxis->scaleRange(1.05, m_plot->xAxis->range().center());
        m_plot->yAxis->scaleRange(1.1, m_plot->yAxis->range().center());
    }
    m_viewRange = m_plot->xAxis->range();
    m_plot->replot();
    m_hover->setRowCount(0);
    if (!ids.isEmpty()) hoverAt(m_plot->xAxis->range().upper);
}

// After a zoom or pan (the next turn of the event loop, once per burst of range changes): the
// curves built again with each one downsampled over its points in view, at the chart's width, so
// a zoomed-in curve shows its own detail rather than the whole run's pixel buckets. Nothing of the
// curves is kept between builds: a build reads them from the series cache.
void ComparePage::redownsampleView() {
    m_viewPending = false;
    const QCPRange r = m_plot->xAxis->range(), yr = m_plot->yAxis->range();
    if (!m_downsample || m_plot->graphCount() == 0 || r == m_viewRange) return;
    m_viewRange = r;
    m_plot->clearGraphs();
    const QString metric = m_metricBox->currentText();
    const QVector<int64_t> ids = selectedRunIds();
    m_buildView = &r;
    if (groupKey().isEmpty())
        plotRuns(ids, metric, m_smoothBox->value());
    else
        plotGroups(ids, metric, m_smoothBox->value());
    m_buildView = nullptr;
    m_plot->xAxis->setRange(r);
    m_plot->yAxis->setRange(yr);
    m_plot->replot(QCustomPlot::rpQueuedReplot);
}

// Two-pixel lines for a few curves; one pixel past kThinLinesFrom, where thick lines would cover
// each other (and drawing 20 anti-aliased two-pixel lines took 16 ms a redraw, one-pixel ones 5.5
// ms).
int ComparePage::lineWidth(qsizetype curves) {
    return curves >= kThinLinesFrom ? 1 : 2;
}

// One line per run: the raw curve (faint under smoothing) and its EMA.
void ComparePage::plotRuns(const QVector<int64_t>& ids, const QString& metric, double beta) {
    const int columns = m_downsample ? displayColumns() : 0;
    int k = 0;
    for (int64_t id : ids) {
        const Series& s = series(id, metric);
        const QColor color = kRunColors[k++ % 8];
        const RunSummary* r = summary(id);
        const QString name = r ? QString("#%1 %2").arg(r->id).arg(r->name) : QString("#%1").arg(id);
        Curve c{xValues(id, s), s.value};
        if (beta > 0) {
            add_line(m_plot, "raw", name, c, QPen(faint(color, 60), 1), columns, m_buildView)
                ->removeFromLegend();
            c.y = smooth(s.value, beta);
        }
        add_line(m_plot, "run", name, c, QPen(color, lineWidth(ids.size())), columns, m_buildView);
    }
}

// One line per value of the group key: the mean of its runs' (smoothed) curves over a band from
// their min to their max; under smoothing, the raw mean faint.
void ComparePage::plotGroups(const QVector<int64_t>& ids, const QString& metric, double beta) {
    const int columns = m_downsample ? displayColumns() : 0;
    const QString key = groupKey();
    QMap<QString, QVector<int64_t>> groups;  // value -> runs, in value order
    for (int64_t id : ids) {
        const RunSummary* r = summary(id);
        const QString v = r ? r->groupValue(key) : QString();
        groups[v.isEmpty() ? tr("(unknown)") : v] << id;
    }
    int k = 0;
    for (auto it = groups.cbegin(); it != groups.cend(); ++it) {
        const QColor color = kRunColors[k++ % 8];
        std::vector<Curve> raw, shown;
        for (int64_t id : it.value()) {
            const Series& s = series(id, metric);
            raw.push_back({xValues(id, s), s.value});
            shown.push_back({raw.back().x, smooth(s.value, beta)});
        }
        const QString label = QString("%1 = %2 (%3 run%4)")
                                  .arg(key.section('.', -1), it.key())
                                  .arg(it.value().size())
                                  .arg(it.value().size() == 1 ? "" : "s");
        const CurveBand band = curve_group_band(shown);
        QCPGraph* lo =
            add_line(m_plot, "bandLow", label, {band.x, band.lo}, Qt::NoPen, columns, m_buildView);
        QCPGraph* hi =
            add_line(m_plot, "bandHigh", label, {band.x, band.hi}, Qt::NoPen, columns, m_buildView);
        for (QCPGraph* g : {lo, hi}) {
            g->removeFromLegend();
            g->setScatterStyle(QCPScatterStyle());
        }
        hi->setBrush(faint(color, 50));
        hi->setChannelFillGraph(lo);
        if (beta > 0) {
            const CurveBand rawBand = curve_group_band(raw);
            add_line(m_plot, "raw", label, {rawBand.x, rawBand.mean}, QPen(faint(color, 70), 1),
                     columns, m_buildView)
                ->removeFromLegend();
        }
        add_line(m_plot, "mean", label, {band.x, band.mean}, QPen(color, lineWidth(groups.size())),
                 columns, m_buildView);
    }
}

void ComparePage::hoverAt(double x) {
    const QVector<int64_t> ids = selectedRunIds();
    m_hover->setRowCount(ids.size());
    for (int r = 0; r < ids.size(); ++r) {
        const int64_t id = ids[r];
        const double tps = tokensPerStep(id);
        const RunSummary* sum = summary(id);
        auto set = [&](int c, const QString& text) {
            auto* item = new QTableWidgetItem(text);
            if (c > 0) item->setTextAlignment(Qt::AlignRight | Qt::AlignVCenter);
            if (c == 0) item->setForeground(kRunColors[r % 8]);
            m_hover->setItem(r, c, item);
        };
        set(0, sum ? QString("#%1 %2").arg(sum->id).arg(sum->name) : QString("#%1").arg(id));
        const Series& loss = series(id, vocab(metric::train_loss));
        const int at = index_at(xValues(id, loss), x);
        const double step = at >= 0 ? loss.step[at] : 0;
        set(1, QString::number(int64_t(step)));
        set(2, QString::number(int64_t(step * tps)));
        for (int m = 0; m < kHoverMetrics.size(); ++m) {
            const Series& s = series(id, kHoverMetrics[m]);
            const int i = index_at(s.step, step);
            const int prec = kHoverMetrics[m] == vocab(metric::perf_tok_per_s) ? 0 : 4;
            set(3 + m, i >= 0 && at >= 0 ? (kHoverMetrics[m] == vocab(metric::train_lr)
                                                ? QString::number(s.value[i], 'e', 2)
                                                : QString::number(s.value[i], 'f', prec))
                                         : QStringLiteral("–"));
        }
    }
    // the cursor line
    for (int i = m_plot->itemCount() - 1; i >= 0; --i)
        if (m_plot->item(i)->objectName() == "cursor") m_plot->removeItem(i);
    if (!ids.isEmpty()) {
        auto* line = new QCPItemStraightLine(m_plot);
        line->setObjectName("cursor");
        line->setPen(QPen(QColor(128, 128, 128), 1, Qt::DashLine));
        line->point1->setCoords(x, 0);
        line->point2->setCoords(x, 1);
        m_plot->replot(QCustomPlot::rpQueuedReplot);
    }
}

void ComparePage::updateDiff() {
    QStringList names;
    std::vector<tessera::RunConfig> configs;
    if (m_store) {
        for (int64_t id : selectedRunIds()) {
            auto run = m_store->run_get(id);
            if (!run) continue;
            try {
                configs.push_back(
                    stored_run_config(*m_store, run->config_text, run->name + " (runs.db)"));
                names << QString("#%1 %2").arg(id).arg(QString::fromStdString(run->name));
            } catch (const std::exception& e) {
                m_status->setText(tr("run #%1: %2").arg(id).arg(QString::fromUtf8(e.what())));
            }
        }
    }
    m_diff->setRuns(names, configs);
}

// ------------------------------------------------------------------------------------------------
// export

bool ComparePage::exportCsv(const QString& path, QString* error) {
    auto fail = [&](const QString& msg) {
        if (error) *error = msg;
        Q_EMIT exportFailed(msg);
        return false;
    };
    const QVector<int64_t> ids = selectedRunIds();
    if (!m_store) return fail(tr("no runs.db open"));
    if (ids.isEmpty()) return fail(tr("select at least one run to export"));
    std::ofstream out(path.toStdString(), std::ios::binary);
    if (!out) return fail(tr("cannot write %1").arg(path));
    try {
        m_store->export_csv(out, std::vector<int64_t>(ids.begin(), ids.end()));
    } catch (const std::exception& e) {
        return fail(QString::fromUtf8(e.what()));
    }
    out.close();
    if (!out) return fail(tr("writing %1 failed").arg(path));
    m_status->setText(tr("exported %1 runs to %2").arg(ids.size()).arg(path));
    return true;
}

bool ComparePage::exportChart(const QString& path, QString* error) {
    const QString suffix = QFileInfo(path).suffix().toLower();
    bool ok = false;
    if (suffix == "pdf")
        ok = m_plot->savePdf(path, 800, 500);
    else if (suffix == "png")
        ok = m_plot->savePng(path, 1000, 600, 1.0);
    else {
        const QString msg =
            tr("%1: expected a .png or .pdf file name, found '.%2'").arg(path, suffix);
        if (error) *error = msg;
        Q_EMIT exportFailed(msg);
        return false;
    }
    if (!ok) {
        const QString msg = tr("cannot write %1").arg(path);
        if (error) *error = msg;
        Q_EMIT exportFailed(msg);
    } else {
        m_status->setText(tr("chart saved to %1").arg(path));
    }
    return ok;
}

void ComparePage::exportCsvClicked() {
    const QString path =
        QFileDialog::getSaveFileName(this, tr("Export runs to CSV"), "runs.csv", tr("CSV (*.csv)"));
    QString err;
    if (!path.isEmpty() && !exportCsv(path, &err)) m_status->setText(err);
}

void ComparePage::exportChartClicked() {
    const QString path = QFileDialog::getSaveFileName(this, tr("Export chart"), "compare.png",
                                                      tr("PNG image (*.png);;PDF (*.pdf)"));
    QString err;
    if (!path.isEmpty() && !exportChart(path, &err)) m_status->setText(err);
}

void ComparePage::setDarkTheme(bool dark) {
    plot_apply_theme(m_plot, dark);
    m_plot->replot();
}

}  // namespace tessera::studio
